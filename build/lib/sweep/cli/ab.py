"""`specsweep ab`: an interleaved A/B of two configurations (A B A B ..., N rounds) on a space's workloads,
printed as a before/after table with a verdict on every speed.

A configuration is `baseline` (speculation off), `STUDY:TRIAL` (a measured trial's parameters) or parameters
as `name=value,name=value` over the space's fixed ones (e.g. `spec-type=ngram-mod,spec-ngram-mod-n-min=32`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml

from sweep.analysis import Relaunch, ab_rows, study_warnings
from sweep.cli.shared import add_study_options
from sweep.core.errors import UserError
from sweep.engines import Engine
from sweep.outputs.console import ab_text
from sweep.run.confirm import Confirmation
from sweep.run.preflight import build_engine, validate
from sweep.run.study import open_study
from sweep.run.study import to_stderr as progress
from sweep.run.trial import TrialRunner
from sweep.space import ConfirmSettings, Space, load_space
from sweep.storage import Phase, StudyPaths, latest_confirmation, study_looks, trial_views


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("ab", help="interleaved A/B of two configurations", description=__doc__)
    parser.add_argument(
        "--space", type=Path, required=True, help="engine, server and workloads (a space file)"
    )
    parser.add_argument("--a", required=True, help="configuration A (the reference)")
    parser.add_argument("--b", required=True, help="configuration B")
    parser.add_argument("--rounds", type=int, default=3, help="launches of each, interleaved (default: 3)")
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=ConfirmSettings.max_launches,
        help=f"more rounds while the verdict is open, up to this (default: {ConfirmSettings.max_launches})",
    )
    add_study_options(parser)
    parser.set_defaults(handler=main)


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


def main(args: argparse.Namespace) -> int:
    if args.rounds < 2:
        raise UserError(
            f"--rounds {args.rounds} gives no launch-to-launch noise", "use --rounds 2 or more (3 by default)"
        )
    space = load_space(args.space)
    engine = build_engine(space)
    validate(space, engine)
    a = configuration(args.a, space, engine, args.storage, args.runs)
    b = configuration(args.b, space, engine, args.storage, args.runs)
    for params in (a, b):
        engine.check_params(params)
    name = args.study or f"ab-{args.space.stem}"
    keys = tuple(space.workload_keys)
    paths = StudyPaths.for_study(name, args.runs, args.storage)
    progress(f"A/B {name}: {args.rounds} rounds of A and B, interleaved; logs in {paths.run_dir}/confirm/")
    plan = [Relaunch("A", a, keys), Relaunch("B", b, keys)]
    confirmation = Confirmation(TrialRunner(space, engine, paths), progress, name, reference="A")
    study = confirmation.run(plan, args.rounds, args.max_rounds)
    views = latest_confirmation(trial_views(study, Phase.CONFIRM))
    warnings = study_warnings([], views, list(keys))
    print(
        ab_text(
            name,
            a,
            b,
            ab_rows(views, list(keys), warnings, space.confirm.min_gain, study_looks(study)),
            warnings.messages,
        )
    )
    return 0
