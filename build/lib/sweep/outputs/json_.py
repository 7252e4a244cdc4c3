"""The report as JSON, for scripts."""

from __future__ import annotations

import json

from sweep.analysis import Verdicts
from sweep.analysis.controllers import controller_answers
from sweep.storage import Study


def report_json(
    study_name: str,
    study: Study,
    verdicts: Verdicts,
) -> str:
    recs, overall, warnings = verdicts.recommendations, verdicts.overall, verdicts.warnings
    return json.dumps(
        {
            "study": study_name,
            "trials": [
                {
                    "number": v.number,
                    "phase": str(v.phase),
                    "label": v.label,
                    "state": v.state,
                    "role": v.role,
                    "failure": v.failure,
                    "record": v.record.to_dict() if v.record else None,
                }
                for v in study.views
            ],
            "recommendations": [r.to_dict() for r in recs],
            "overall": overall.to_dict() if overall else None,
            "controllers": [a.to_dict() for a in controller_answers(study, verdicts)],
            "warnings": warnings.messages,
            "min_gain": study.min_gain,
        },
        indent=2,
        ensure_ascii=False,
    )
