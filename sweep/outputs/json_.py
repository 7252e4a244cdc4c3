"""The report as JSON, for scripts."""

from __future__ import annotations

import json

from sweep.analysis import OverallRecommendation, Recommendation, TrialView


def report_json(
    study_name: str,
    views: list[TrialView],
    recs: list[Recommendation],
    overall: OverallRecommendation | None = None,
) -> str:
    return json.dumps(
        {
            "study": study_name,
            "trials": [
                {"number": v.number, "state": v.state, "role": v.role, "failure": v.failure,
                 "record": v.record.to_dict() if v.record else None}
                for v in views
            ],
            "recommendations": [r.to_dict() for r in recs],
            "overall": overall.to_dict() if overall else None,
        },
        indent=2,
        ensure_ascii=False,
    )  # fmt: skip
