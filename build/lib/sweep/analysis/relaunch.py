"""What the confirmation launches: the search's best candidates per workload, each kind's best beside them, and
the plan's identity."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sweep.analysis.evidence import baseline_view, headline_median
from sweep.analysis.verdicts import search_overall, within_limits
from sweep.core import stats
from sweep.storage import BASELINE, TrialView, complete_views

# --- what the confirmation launches ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Relaunch:
    """A configuration to launch again: its label, its launch parameters and the workloads to measure."""

    label: str
    params: dict[str, Any]
    workloads: tuple[str, ...]
    # Per workload, why the confirmation launches it where the search did not single it out: the model could
    # not rank it below the picks (`search.Doubt`); the report says so beside the verdict.
    doubts: Mapping[str, str] = field(default_factory=dict)


def confirmation_plan(
    views: list[TrialView],
    top: int,
    min_gain: float = stats.MIN_GAIN,
    limits: dict[str, float] | None = None,
    favoured: Mapping[str, int] | None = None,
) -> list[Relaunch]:
    """The search's `top` best configurations per workload that meet the latency limits, and its one-for-all
    pick, with the baseline. `favoured` (workload: trial number, the surface model's rating) goes second where
    it is not the fastest measured already: of two launches a hair apart, the faster is often the luckier."""
    baseline = baseline_view(views)
    if baseline is None or baseline.record is None or top <= 0:
        return []
    keys = [k for k in baseline.record.workloads if headline_median(baseline, k)]
    chosen: dict[str, tuple[dict[str, Any], set[str]]] = {}
    for key in keys:
        ranked = sorted(
            (
                v
                for v in complete_views(views)
                if v.label != BASELINE
                and headline_median(v, key)
                and within_limits([v], v.label, key, limits or {})
            ),
            key=lambda v: -(headline_median(v, key) or 0.0),
        )
        best: dict[str, TrialView] = {}
        for view in ranked:
            best.setdefault(view.label, view)  # one per configuration (a duplicate trial shares its label)
        order = list(best.values())
        if (number := (favoured or {}).get(key)) is not None:
            liked = [v for v in order[1:] if v.number == number]
            order = order[:1] + liked + [v for v in order[1:] if v not in liked]
        for view in order[:top] + _best_of_each_kind(order):
            assert view.record is not None
            chosen.setdefault(view.label, (view.record.params, set()))[1].add(key)
    # The best worst case, where it gains on every workload; where nothing did in the search's single launches
    # (too noisy to rule one server out), the nearest too, if it is launched again anyway: it is measured on
    # every workload (probes, no extra launch).
    if (overall := search_overall(views, limits)) is not None:
        worst, pick = overall
        if pick.record is not None and (worst >= min_gain or pick.label in chosen):
            chosen.setdefault(pick.label, (pick.record.params, set()))[1].update(keys)
    if not chosen:
        return []
    measured = sorted({k for _, ws in chosen.values() for k in ws}, key=keys.index)
    plan = [Relaunch(BASELINE, baseline.record.params, tuple(measured))]
    plan += [
        Relaunch(label, params, tuple(sorted(ws, key=keys.index))) for label, (params, ws) in chosen.items()
    ]
    return plan


def _best_of_each_kind(ranked: list[TrialView]) -> list[TrialView]:
    """Where the search measured both the engine's own controller and tuned static configurations, the fastest
    of each (`sweep/analysis/controllers.py` answers which to run from their confirmed launches); else none."""
    firsts: dict[bool, TrialView] = {}
    for view in ranked:
        shape = view.record.shape if view.record else None
        if shape is not None:
            firsts.setdefault(bool(shape.controller), view)
    return list(firsts.values()) if len(firsts) == 2 else []


def plan_id(plan: list[Relaunch], launches_each: int) -> str:
    """Names a plan: the same search results give the same plan on every worker."""
    text = json.dumps([[c.label, c.params, c.workloads] for c in plan] + [launches_each], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]
