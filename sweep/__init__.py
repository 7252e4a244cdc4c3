"""specsweep from Python: load a space, run a study, read what to run.

    from pathlib import Path

    import sweep

    space = sweep.load_space(Path("vllm-ngram"))     # a space file, or a shipped example by its name
    ran = sweep.run_study(space, "night", budget_s=8 * 3600)
    for rec in sweep.study_verdicts_of("night").recommendations:
        print(rec.workload, rec.verdict_text, rec.gain, rec.recommended_params)

The names load on first use, so `import sweep` costs nothing until one is asked for (the simulator, a part of
this package, starts without them)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sweep.analysis import Recommendation, Verdicts
    from sweep.outputs.publish import publish
    from sweep.run.study import StudyRun, open_study, read_study, run_study, stored_space, study_verdicts_of
    from sweep.space import Space, load_space
    from sweep.storage import Study

# Each public name, and the module it lives in.
_HOMES = {
    "Space": "sweep.space",
    "load_space": "sweep.space",
    "run_study": "sweep.run.study",
    "StudyRun": "sweep.run.study",
    "open_study": "sweep.run.study",
    "read_study": "sweep.run.study",
    "stored_space": "sweep.run.study",
    "study_verdicts_of": "sweep.run.study",
    "Study": "sweep.storage",
    "Verdicts": "sweep.analysis",
    "Recommendation": "sweep.analysis",
    "publish": "sweep.outputs.publish",
}
__all__ = [
    "Recommendation",
    "Space",
    "Study",
    "StudyRun",
    "Verdicts",
    "load_space",
    "open_study",
    "publish",
    "read_study",
    "run_study",
    "stored_space",
    "study_verdicts_of",
]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'sweep' has no attribute '{name}'")
    return getattr(importlib.import_module(_HOMES[name]), name)
