"""A study as a Python user runs and reads it: open one, read its launches, run a space's search and its
confirmation. The CLI's commands call these; so do the tests and the benchmarks (`sweep/__init__.py` names them)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import optuna
import yaml

from sweep.analysis import Verdicts, study_verdicts
from sweep.core.errors import UserError, mask_secrets
from sweep.core.stats import MIN_GAIN
from sweep.engines import Engine
from sweep.run.confirm import confirm_search, load_confirm_study
from sweep.run.driver import Sweep
from sweep.run.plan import StudyPlan, machine_hardware, plan_study
from sweep.run.preflight import build_engine, validate
from sweep.run.trial import TrialRunner
from sweep.search import ModelSearch
from sweep.search.costs import CostProfile, check_space
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
    study_looks,
    trial_views,
)

DEFAULT_RUNS = Path("runs")  # the folder of study folders
UNBOUNDED_TRIALS = 100000  # with a time budget and no trial count: the clock (or confidence) ends the search
Progress = Callable[[str], None]


def to_stderr(message: str) -> None:
    """The default progress: one line a step on standard error, secrets masked."""
    print(mask_secrets(message), file=sys.stderr, flush=True)


@dataclasses.dataclass(frozen=True)
class StudyRun:
    """What `run_study` leaves: where the study lives, the study itself, and the search's model (None where the
    search ran without one)."""

    paths: StudyPaths
    study: optuna.Study
    model: ModelSearch | None


def find_study(name: str, storage: str | None = None, runs: Path = DEFAULT_RUNS) -> optuna.Study | None:
    """A stored study by name (in `runs/<name>/study.db`, or in the Optuna storage URL given), or None where
    there is none yet."""
    paths = StudyPaths.for_study(name, runs, storage)
    if not storage and not (paths.run_dir / "study.db").is_file():
        return None  # no SQLite file made: asking Optuna would create one
    try:
        return optuna.load_study(study_name=name, storage=make_storage(paths.storage_url))
    except KeyError:
        return None


def open_study(name: str, storage: str | None = None, runs: Path = DEFAULT_RUNS) -> optuna.Study:
    """A stored study by name: in `runs/<name>/study.db`, or in the Optuna storage URL given."""
    study = find_study(name, storage, runs)
    if study is not None:
        return study
    paths = StudyPaths.for_study(name, runs, storage)
    if not storage and not (paths.run_dir / "study.db").is_file():
        raise UserError(
            f"no study '{name}' in {paths.run_dir}",
            "run `specsweep run --space FILE` first, or pass --storage",
        )
    raise UserError(f"no study '{name}' in {paths.shown_url}", "check --study and --storage")


def cost_profile(profile: Path | None, space: Space, engine: Engine) -> CostProfile | None:
    """The cost profile file given, checked against the space and engine it is to price (refused in one line
    where it was measured for another set-up); None without one."""
    if profile is None:
        return None
    costs = CostProfile.load(profile)
    check_space(costs, profile, space, engine)
    return costs


def read_study(study: optuna.Study) -> Study:
    """The study's search and confirmation launches, read once for every output."""
    confirm = load_confirm_study(study._storage, study.study_name)
    return Study(
        trial_views(study),
        trial_views(confirm, Phase.CONFIRM) if confirm is not None else [],
        float(study.user_attrs.get(MIN_GAIN_ATTR, MIN_GAIN)),
        dict(study.user_attrs.get(LIMITS_ATTR, {})),
        study_looks(confirm),
    )


def stored_space(study: optuna.Study, given: Path | None = None) -> Space:
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


def launch_plan(space: Space, trials: int | None, predicted: bool = False) -> str:
    """The night's plan in launches: the search, then the confirmation's most (`predicted`: with a cost
    profile)."""
    each = f"{space.confirm.launches}-{space.confirm.max_launches}"
    configurations = space.confirm_configurations(predicted, most=True)
    confirm = f"{configurations} configurations x {each}" if space.confirm.launches else "no"
    most = "at most " if predicted else ""  # a cost profile's search stops once each acceptance is measured
    return f"plan: {most}{trials or space.trials} search trials, then at most {confirm} confirmation launches"


def run_study(
    space: Space,
    name: str,
    storage: str | None = None,
    runs: Path = DEFAULT_RUNS,
    trials: int | None = None,
    confirm: bool = True,
    until_confident: bool = False,
    budget_s: float | None = None,
    profile: Path | None = None,
    progress: Progress = to_stderr,
) -> StudyRun:
    """Run (or resume) the study `name` of `space`: the search, then the confirmation of its best against the
    baseline. Each launch's server log and measurements go under `runs/<name>/trials/`."""
    engine = build_engine(space)
    validate(space, engine)
    costs = cost_profile(profile, space, engine)
    if costs is not None:
        methods = ", ".join(dict.fromkeys(s.shape.method for s in costs.steps))
        progress(
            f"cost profile {profile}: step times of {methods} at {', '.join(costs.covers())} "
            f"({costs.key.engine} {costs.key.engine_version}, {costs.key.hardware}); the search launches the "
            "baseline and each method's acceptance (and what the profile gives no step times for); the "
            "confirmation launches what the model predicts fastest"
        )
    paths = StudyPaths.for_study(name, runs, storage)
    progress(f"study {name}: {paths.shown_url}; server logs and measurements in {paths.run_dir}/trials/")
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
        planned = launch_plan(space, trials, costs is not None)
        progress(planned if confirm else planned.split(", then")[0])
    sweep = Sweep(
        space, engine, paths, progress, until_confident, budget_s, confirm_after=confirm, costs=costs
    )
    result = sweep.run(trials)
    if confirm and space.confirm.launches:
        confirm_search(sweep.trials, result, space.confirm, progress, sweep.time_left, sweep.model)
    return StudyRun(paths, result, sweep.model)


def plan_night(
    space: Space,
    name: str,
    storage: str | None = None,
    runs: Path = DEFAULT_RUNS,
    trials: int | None = None,
    budget_s: float | None = None,
    profile: Path | None = None,
) -> StudyPlan:
    """What `run_study` would do with these arguments, launching nothing: the configurations after the engine's
    rules, the launches, and their wall time (measured in the study `name` where it exists, else assumed from
    this machine's GPU and the model's weights, and said so)."""
    engine = build_engine(space)
    validate(space, engine)
    study = find_study(name, storage, runs)  # none yet: plan with assumed times
    costs = cost_profile(profile, space, engine)
    return plan_study(space, engine, trials, study, budget_s, costs, machine_hardware(engine))


def confirm_study(
    name: str,
    storage: str | None = None,
    runs: Path = DEFAULT_RUNS,
    space_path: Path | None = None,
    top: int | None = None,
    launches: int | None = None,
    progress: Progress = to_stderr,
) -> tuple[optuna.Study, Space]:
    """Launch a stored study's best configurations again, interleaved with the baseline (what `run_study` does
    at its end): `top` candidates a workload, `launches` each (the space's where not given)."""
    study = open_study(name, storage, runs)
    space = stored_space(study, space_path)
    top = space.confirm.top if top is None else top
    launches = space.confirm.launches if launches is None else launches
    if top < 1 or launches < 2:
        raise UserError(
            f"--top {top} --launches {launches}", "confirm at least 1 candidate with 2 or more launches"
        )
    engine = build_engine(space)
    validate(space, engine)
    settings = dataclasses.replace(space.confirm, top=top, launches=launches)
    runner = TrialRunner(space, engine, StudyPaths.for_study(name, runs, storage))
    confirm_search(runner, study, settings, progress)
    return study, space


def study_verdicts_of(name: str, storage: str | None = None, runs: Path = DEFAULT_RUNS) -> Verdicts:
    """A stored study's verdicts: per workload what to run (`Verdicts.recommendations`), its warnings, and one
    server for every workload where there is one."""
    return study_verdicts(read_study(open_study(name, storage, runs)))
