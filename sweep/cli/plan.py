"""`specsweep plan`: a dry run. What the space holds after the engine's rules, the launches a run will make, and
how long they take (measured in the study if it exists, else assumed and said so). Nothing is launched."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli.shared import add_space_option, add_study_options, duration
from sweep.outputs.plan import plan_lines
from sweep.run.study import plan_night
from sweep.space import load_space


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "plan", help="dry run: configurations, launches, wall time", description=__doc__
    )
    add_space_option(parser)
    add_study_options(parser)
    parser.add_argument("--trials", type=int, help="the search's trials (default: the space's)")
    parser.add_argument("--budget", type=duration, help="a night to fit, e.g. 8h: how many trials it holds")
    parser.add_argument(
        "--profile", type=Path, help="the cost profile `run --profile` will read (`specsweep profile`)"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    name = args.study or args.space.stem
    plan = plan_night(space, name, args.storage, args.runs, args.trials, args.budget, args.profile)
    print("\n".join(plan_lines(space, plan)))
    return 0
