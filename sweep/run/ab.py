"""An interleaved A/B of two configurations on a space's workloads (A B A B ..., N rounds, more while a verdict
is open), each given as `baseline`, `STUDY:TRIAL` or `name=value,...` (what `specsweep ab` runs)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml

from sweep.analysis import ABRow, Relaunch, ab_rows, study_warnings
from sweep.core.errors import UserError
from sweep.engines import Engine
from sweep.run.confirm import Confirmation
from sweep.run.preflight import build_engine, validate
from sweep.run.study import DEFAULT_RUNS, Progress, open_study, to_stderr
from sweep.run.trial import TrialRunner
from sweep.space import ConfirmSettings, Space
from sweep.storage import Phase, StudyPaths, latest_confirmation, study_looks, trial_views


@dataclasses.dataclass(frozen=True)
class ABResult:
    """What an A/B measured: the two configurations' parameters, a row per workload, and the warnings."""

    name: str
    a: dict[str, Any]
    b: dict[str, Any]
    rows: list[ABRow]
    warnings: list[str]


def configuration(spec: str, space: Space, engine: Engine, storage: str | None, runs: Path) -> dict[str, Any]:
    """Launch parameters from `baseline`, `STUDY:TRIAL` or `name=value,...`."""
    if spec == "baseline":
        return engine.derive(space.launch_params(engine.baseline_params()))
    if "=" not in spec:
        name, _, number = spec.rpartition(":")
        if not name or not number.isdigit():
            raise UserError(
                f"configuration '{spec}' is not baseline, STUDY:TRIAL or name=value,...",
                "e.g. --a baseline --b demo:3",
            )
        views = {v.number: v for v in trial_views(open_study(name, storage, runs))}
        view = views.get(int(number))
        if view is None or view.record is None:
            raise UserError(
                f"study '{name}' has no measured trial {number}", f"trials: {', '.join(map(str, views))}"
            )
        return dict(view.record.params)
    params: dict[str, Any] = {}
    for item in spec.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise UserError(
                f"'{item}' in '{spec}' is not name=value", "e.g. spec-type=ngram-mod,spec-ngram-mod-n-min=32"
            )
        params[key.strip()] = yaml.safe_load(value)
    return engine.derive(space.launch_params(params))


def run_ab(
    space: Space,
    a_spec: str,
    b_spec: str,
    name: str,
    rounds: int = 3,
    max_rounds: int = ConfirmSettings.max_launches,
    storage: str | None = None,
    runs: Path = DEFAULT_RUNS,
    progress: Progress = to_stderr,
) -> ABResult:
    """A and B launched in interleaved rounds on the space's workloads, with a verdict on every speed."""
    if rounds < 2:
        raise UserError(
            f"--rounds {rounds} gives no launch-to-launch noise", "use --rounds 2 or more (3 by default)"
        )
    engine = build_engine(space)
    validate(space, engine)
    a = configuration(a_spec, space, engine, storage, runs)
    b = configuration(b_spec, space, engine, storage, runs)
    for params in (a, b):
        engine.check_params(params)
    keys = tuple(space.workload_keys)
    paths = StudyPaths.for_study(name, runs, storage)
    progress(f"A/B {name}: {rounds} rounds of A and B, interleaved; logs in {paths.run_dir}/confirm/")
    plan = [Relaunch("A", a, keys), Relaunch("B", b, keys)]
    confirmation = Confirmation(TrialRunner(space, engine, paths), progress, name, reference="A")
    study = confirmation.run(plan, rounds, max_rounds)
    views = latest_confirmation(trial_views(study, Phase.CONFIRM))
    warnings = study_warnings([], views, list(keys))
    rows = ab_rows(views, list(keys), warnings, space.confirm.min_gain, study_looks(study))
    return ABResult(name, a, b, rows, list(warnings.messages))
