"""`specsweep confirm`: launch a study's best configurations again, interleaved with the baseline, and give the
verdicts from those launches (`run` does this at its end unless --no-confirm)."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from sweep.cli.shared import add_study_options
from sweep.core.errors import UserError
from sweep.outputs.publish import publish
from sweep.run.confirm import confirm_search
from sweep.run.preflight import build_engine, validate
from sweep.run.study import open_study, stored_space
from sweep.run.study import to_stderr as progress
from sweep.run.trial import TrialRunner
from sweep.storage import StudyPaths


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "confirm", help="confirm a study's winners against the baseline", description=__doc__
    )
    add_study_options(parser, study_required=True)
    parser.add_argument("--space", type=Path, help="the space file (default: the one kept in the study)")
    parser.add_argument("--top", type=int, help="candidates per workload (default: the space's, 2)")
    parser.add_argument(
        "--launches", type=int, help="launches of each configuration (default: the space's, 3)"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    study = open_study(args.study, args.storage, args.runs)
    space = stored_space(study, args.space)
    top = space.confirm.top if args.top is None else args.top
    launches = space.confirm.launches if args.launches is None else args.launches
    if top < 1 or launches < 2:
        raise UserError(
            f"--top {top} --launches {launches}", "confirm at least 1 candidate with 2 or more launches"
        )
    engine = build_engine(space)
    validate(space, engine)
    paths = StudyPaths.for_study(args.study, args.runs, args.storage)
    settings = dataclasses.replace(space.confirm, top=top, launches=launches)
    confirm_search(TrialRunner(space, engine, paths), study, settings, progress)
    publish(study, args.study, args.runs, space)
    return 0
