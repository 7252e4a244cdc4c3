"""A study's report and dashboard, written from one reading of its verdicts (what `specsweep run` prints and
writes at its end, and `specsweep dashboard` alone)."""

from __future__ import annotations

from pathlib import Path

import optuna

from sweep.analysis import Verdicts, study_verdicts
from sweep.core.errors import UserError
from sweep.core.files import write_atomic
from sweep.outputs.console import report_text
from sweep.outputs.dashboard.page import build
from sweep.run.preflight import build_engine
from sweep.run.study import Progress, read_study, stored_space, to_stderr
from sweep.search import ModelSearch
from sweep.search.costs import CostProfile
from sweep.search.surface import PredictedSurface
from sweep.space import Space
from sweep.storage import Study, search_records

DEFAULT_DIR = Path("dashboards")  # where HTML pages go


def surface_of(
    study: optuna.Study, space: Space | None = None, model: ModelSearch | None = None
) -> PredictedSurface:
    """The model's surface for the dashboard, from the model the caller already fitted, or over the space it
    holds or the one the study keeps (none for a study that does not hold its space file, or whose space no
    longer loads, e.g. a prompt file that moved)."""
    try:
        if model is None:
            space = space or stored_space(study, None)
            model = ModelSearch.of(space, build_engine(space), CostProfile.of_study(study))
        return model.predicted(search_records(study))
    except UserError:
        return PredictedSurface()


def dashboard_page(
    study: optuna.Study,
    name: str,
    found: Study,
    verdicts: Verdicts,
    space: Space | None = None,
    model: ModelSearch | None = None,
) -> str:
    """The dashboard of a study from the verdicts (and the search's model) the caller computed."""
    return build(study, name, found, verdicts, surface_of(study, space, model), CostProfile.of_study(study))


def publish(
    study: optuna.Study,
    name: str,
    runs: Path,
    space: Space,
    model: ModelSearch | None = None,
    show: Progress = print,
    progress: Progress = to_stderr,
) -> Path:
    """The report (to `show`) and the dashboard beside runs/ (as in a clone: runs/ and dashboards/ at the top),
    both from one reading of the study's verdicts; the dashboard's path."""
    found = read_study(study)
    verdicts = study_verdicts(found)
    show(report_text(name, found, verdicts))
    path = runs.parent / DEFAULT_DIR / f"{name}.html"
    write_atomic(path, dashboard_page(study, name, found, verdicts, space, model))
    progress(f"dashboard: {path}")
    return path
