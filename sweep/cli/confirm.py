"""`specsweep confirm`: launch a study's best configurations again, interleaved with the baseline, and give the
verdicts from those launches (`run` does this at its end unless --no-confirm)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli.shared import add_study_options
from sweep.outputs.publish import publish
from sweep.run.study import confirm_study


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
    study, space = confirm_study(args.study, args.storage, args.runs, args.space, args.top, args.launches)
    publish(study, args.study, args.runs, space)
    return 0
