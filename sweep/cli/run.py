"""`specsweep run`: run (or resume) a study from a space file, then confirm its best configurations."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli.shared import add_space_option, add_study_options, duration
from sweep.outputs.publish import publish
from sweep.run.study import run_study
from sweep.space import load_space


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("run", help="run or resume a study", description=__doc__)
    add_space_option(parser)
    add_study_options(parser)
    parser.add_argument(
        "--trials", type=int, help="total trials the study should have (default: the space's)"
    )
    parser.add_argument(
        "--no-confirm", action="store_true", help="skip the confirmation (verdicts then say unconfirmed)"
    )
    parser.add_argument(
        "--budget",
        type=duration,
        help="wall time for the search and its confirmation, e.g. 8h or 1h30m: trials are planned from the "
        "measured trial time (no trial count unless --trials is given too)",
    )
    parser.add_argument(
        "--until-confident",
        action="store_true",
        help="stop the search when no untried configuration can beat the best by more than the study's noise",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        help="a cost profile of this machine, engine and model (`specsweep profile`): step times known, the "
        "search measures each method's acceptance and stops once the prediction settles (implies "
        "--until-confident)",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    name = args.study or args.space.stem
    ran = run_study(
        space,
        name,
        args.storage,
        args.runs,
        args.trials,
        not args.no_confirm,
        args.until_confident,
        args.budget,
        profile=args.profile,
    )
    publish(ran.study, name, args.runs, space, ran.model)
    return 0
