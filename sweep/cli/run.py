"""`specsweep run`: run (or resume) a study from a space file, then confirm its best configurations."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli.shared import add_study_options, progress, publish
from sweep.confirm import confirm_search
from sweep.space import Space, load_space
from sweep.study import StudyPaths, Sweep, build_engine, validate


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("run", help="run or resume a study", description=__doc__)
    parser.add_argument("--space", type=Path, required=True, help="search space YAML (see search_spaces/)")
    add_study_options(parser)
    parser.add_argument(
        "--trials", type=int, help="total trials the study should have (default: the space's)"
    )
    parser.add_argument(
        "--no-confirm", action="store_true", help="skip the confirmation (verdicts then say unconfirmed)"
    )
    parser.set_defaults(handler=main)


def budget(space: Space, trials: int | None) -> str:
    """The night's plan in launches: the search, then the confirmation's most."""
    configs = space.confirm.top * len(space.workloads) + 2  # candidates per workload, one-for-all, baseline
    each = f"{space.confirm.launches}-{space.confirm.max_launches}"
    confirm = f"{configs} configurations x {each}" if space.confirm.launches else "no"
    return f"plan: {trials or space.trials} search trials, then at most {confirm} confirmation launches"


def sweep_space(
    space: Space, study: str, storage: str | None, runs: Path, trials: int | None, confirm: bool = True
) -> StudyPaths:
    engine = build_engine(space)
    validate(space, engine)
    paths = StudyPaths.for_study(study, runs, storage)
    progress(f"study {study}: {paths.shown_url}; server logs and measurements in {paths.run_dir}/trials/")
    progress(budget(space, trials) if confirm else budget(space, trials).split(", then")[0])
    sweep = Sweep(space, engine, paths, progress)
    result = sweep.run(trials)
    if confirm and space.confirm.launches:
        confirm_search(sweep, result, space.confirm.top, space.confirm.launches, space.confirm.max_launches)
    publish(result, study, runs)
    return paths


def main(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    sweep_space(
        space, args.study or args.space.stem, args.storage, args.runs, args.trials, not args.no_confirm
    )
    return 0
