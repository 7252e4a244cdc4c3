"""Helpers the commands share: the study options, progress lines, durations, running a space, and reading a
study back."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from pathlib import Path

import optuna
import yaml

from sweep.analysis import Verdicts, study_verdicts
from sweep.core.errors import UserError, mask_secrets
from sweep.core.files import write_atomic
from sweep.core.stats import MIN_GAIN
from sweep.outputs.console import report_text
from sweep.outputs.dashboard.page import build
from sweep.run.confirm import confirm_search, load_confirm_study
from sweep.run.driver import Sweep
from sweep.run.preflight import build_engine, validate
from sweep.search import ModelSearch
from sweep.search.costs import CostProfile, check_space
from sweep.search.surface import PredictedSurface
from sweep.space import Space, load_space, parse_space
from sweep.storage import (
    LIMITS_ATTR,
    MIN_GAIN_ATTR,
    SPACE_PATH_ATTR,
    SPACE_TEXT_ATTR,
    Phase,
    Study,
    StudyPaths,
    make_storage,
    search_records,
    study_looks,
    trial_views,
)

DEFAULT_RUNS = Path("runs")
DEFAULT_DIR = Path("dashboards")  # where HTML pages go


def add_study_options(parser: argparse.ArgumentParser, study_required: bool = False) -> None:
    parser.add_argument(
        "--study", required=study_required, help="study name (default: the space file's name)"
    )
    parser.add_argument("--storage", help="Optuna storage URL (default: sqlite:///runs/<study>/study.db)")
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="folder of study folders (default: runs)"
    )


def progress(message: str) -> None:
    print(mask_secrets(message), file=sys.stderr, flush=True)


def load(study: str, storage: str | None, runs: Path) -> optuna.Study:
    paths = StudyPaths.for_study(study, runs, storage)
    if storage is None and not (paths.run_dir / "study.db").is_file():
        raise UserError(
            f"no study '{study}' in {paths.run_dir}",
            "run `specsweep run --space FILE` first, or pass --storage",
        )
    try:
        return optuna.load_study(study_name=study, storage=make_storage(paths.storage_url))
    except KeyError:
        raise UserError(f"no study '{study}' in {paths.shown_url}", "check --study and --storage") from None


def results(study: optuna.Study) -> Study:
    """The study's search and confirmation launches, read once for every output of a command."""
    confirm = load_confirm_study(study._storage, study.study_name)
    return Study(
        trial_views(study),
        trial_views(confirm, Phase.CONFIRM) if confirm is not None else [],
        float(study.user_attrs.get(MIN_GAIN_ATTR, MIN_GAIN)),
        dict(study.user_attrs.get(LIMITS_ATTR, {})),
        study_looks(confirm),
    )


def surface_of(
    study: optuna.Study, space: Space | None = None, model: ModelSearch | None = None
) -> PredictedSurface:
    """The model's surface for the dashboard, from the model the command already fitted, or over the space it
    holds or the one the study keeps (none for a study that does not hold its space file, or whose space no
    longer loads, e.g. a prompt file that moved)."""
    try:
        if model is None:
            space = space or stored_space(study, None)
            model = ModelSearch.of(space, build_engine(space), CostProfile.of_study(study))
        return model.predicted(search_records(study))
    except UserError:
        return PredictedSurface()


def page(
    study: optuna.Study,
    name: str,
    found: Study,
    verdicts: Verdicts,
    space: Space | None = None,
    model: ModelSearch | None = None,
) -> str:
    """The dashboard of a study from the verdicts (and the search's model) the command computed."""
    return build(study, name, found, verdicts, surface_of(study, space, model), CostProfile.of_study(study))


def publish(
    study: optuna.Study, name: str, runs: Path, space: Space, model: ModelSearch | None = None
) -> None:
    """The report on stdout and the dashboard beside runs/ (as in a clone: runs/ and dashboards/ at the top),
    both from one reading of the study's verdicts."""
    found = results(study)
    verdicts = study_verdicts(found)
    print(report_text(name, found, verdicts))
    path = runs.parent / "dashboards" / f"{name}.html"
    write_atomic(path, page(study, name, found, verdicts, space, model))
    progress(f"dashboard: {path}")


def stored_space(study: optuna.Study, given: Path | None) -> Space:
    """The space a study was run with (kept in the study), or the file given instead."""
    if given is not None:
        return load_space(given)
    text = study.user_attrs.get(SPACE_TEXT_ATTR)
    if not text:
        raise UserError(
            f"study '{study.study_name}' does not hold its space file (made by an older specsweep)",
            "pass --space FILE with the space it was run with",
        )
    where = Path(str(study.user_attrs.get(SPACE_PATH_ATTR) or "."))
    return dataclasses.replace(parse_space(yaml.safe_load(text), where.parent, source=where), text=text)


DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")
UNBOUNDED_TRIALS = 100000  # with a time budget and no --trials: the clock (or confidence) ends the search


def duration(text: str) -> float:
    """`8h`, `90m`, `1h30m`, `45s` or plain seconds, in seconds."""
    found = DURATION.fullmatch(text.strip())
    if text.strip().replace(".", "", 1).isdigit():
        seconds = float(text)
    elif found and any(found.groups()):
        hours, minutes, secs = (float(g or 0) for g in found.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    else:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration (e.g. 8h, 90m, 1h30m)")
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive duration (e.g. 8h)")
    return seconds


def budget(space: Space, trials: int | None, predicted: bool = False) -> str:
    """The night's plan in launches: the search, then the confirmation's most (`predicted`: with a cost
    profile)."""
    each = f"{space.confirm.launches}-{space.confirm.max_launches}"
    configurations = space.confirm_configurations(predicted, most=True)
    confirm = f"{configurations} configurations x {each}" if space.confirm.launches else "no"
    most = "at most " if predicted else ""  # a cost profile's search stops once each acceptance is measured
    return f"plan: {most}{trials or space.trials} search trials, then at most {confirm} confirmation launches"


def sweep_space(
    space: Space,
    study: str,
    storage: str | None,
    runs: Path,
    trials: int | None,
    confirm: bool = True,
    until_confident: bool = False,
    budget_s: float | None = None,
    profile: Path | None = None,
) -> StudyPaths:
    engine = build_engine(space)
    validate(space, engine)
    costs = None
    if profile is not None:
        costs = CostProfile.load(profile)
        check_space(costs, profile, space, engine)
        methods = ", ".join(dict.fromkeys(s.shape.method for s in costs.steps))
        progress(
            f"cost profile {profile}: step times of {methods} at {', '.join(costs.covers())} "
            f"({costs.key.engine} {costs.key.engine_version}, {costs.key.hardware}); the search launches the "
            "baseline and each method's acceptance (and what the profile gives no step times for); the "
            "confirmation launches what the model predicts fastest"
        )
    paths = StudyPaths.for_study(study, runs, storage)
    progress(f"study {study}: {paths.shown_url}; server logs and measurements in {paths.run_dir}/trials/")
    if budget_s is not None:
        trials = trials or UNBOUNDED_TRIALS
        spent = (
            f"{budget_s / 3600:.1f} h"
            if budget_s >= 3600
            else f"{budget_s / 60:.0f} min"
            if budget_s >= 60
            else f"{budget_s:.0f} s"
        )
        progress(
            f"budget: {spent} for the search and its confirmation (at most {trials} search trials)"
            if trials < UNBOUNDED_TRIALS
            else f"budget: {spent} for the search and its confirmation"
        )
    else:
        planned = budget(space, trials, costs is not None)
        progress(planned if confirm else planned.split(", then")[0])
    sweep = Sweep(
        space, engine, paths, progress, until_confident, budget_s, confirm_after=confirm, costs=costs
    )
    result = sweep.run(trials)
    if confirm and space.confirm.launches:
        confirm_search(sweep.trials, result, space.confirm, progress, sweep.time_left, sweep.model)
    publish(result, study, runs, space, sweep.model)
    return paths
