"""A study read back: the launches as evidence (`evidence.py`), warnings about the host and the study
(`study_warnings.py`), the verdict per workload (`verdicts.py`), what the confirmation launches (`relaunch.py`),
and an A/B of two configurations (`ab.py`); imported from here."""

from __future__ import annotations

from sweep.analysis.ab import ABRow, ab_rows
from sweep.analysis.evidence import (
    baseline_health,
    baseline_view,
    headline_median,
    launches,
    ok_summary,
    on_busy_host,
    study_noise,
)
from sweep.analysis.relaunch import Relaunch, confirmation_plan, plan_id
from sweep.analysis.study_warnings import StudyWarnings, study_warnings
from sweep.analysis.verdicts import (
    OverallRecommendation,
    Recommendation,
    Verdicts,
    VetoKind,
    output_check,
    quiet_compare,
    quiet_views,
    study_verdicts,
)

__all__ = [
    "ABRow",
    "OverallRecommendation",
    "Recommendation",
    "Relaunch",
    "StudyWarnings",
    "Verdicts",
    "VetoKind",
    "ab_rows",
    "baseline_health",
    "baseline_view",
    "confirmation_plan",
    "headline_median",
    "launches",
    "ok_summary",
    "on_busy_host",
    "output_check",
    "plan_id",
    "quiet_compare",
    "quiet_views",
    "study_noise",
    "study_verdicts",
    "study_warnings",
]
