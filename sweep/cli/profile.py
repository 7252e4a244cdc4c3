"""`specsweep profile`: measure what a speculative step costs on this machine, engine and model, with the
engine's forced acceptance, into a cost profile that `specsweep run --profile` reads: a new workload then needs
its baseline, each method's acceptance and the confirmation."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli.shared import add_study_options
from sweep.core.errors import UserError
from sweep.run.profiling import DEFAULT_SHAPES, profile_space
from sweep.run.study import to_stderr
from sweep.search.costs import DEFAULT_SHARES
from sweep.space import load_space


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "profile", help="measure step costs with forced acceptance", description=__doc__
    )
    parser.add_argument(
        "--space", type=Path, required=True, help="engine, server, workloads and the shapes to profile"
    )
    parser.add_argument(
        "--shapes", type=int, default=DEFAULT_SHAPES, help=f"shapes per method (default: {DEFAULT_SHAPES})"
    )
    parser.add_argument(
        "--shares",
        default=",".join(f"{s:g}" for s in DEFAULT_SHARES),
        help="forced lengths as the share of a draft accepted, comma-separated (default: 0.25,0.75)",
    )
    parser.add_argument("--out", type=Path, help="the profile file (default: RUNS/STUDY/cost-profile.json)")
    add_study_options(parser)
    parser.set_defaults(handler=main)


def shares(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values:
        raise UserError(f"--shares {text!r} is not a list of numbers", "e.g. --shares 0.25,0.75")
    return values


def main(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    name = args.study or f"{args.space.stem}-profile"
    profile, out = profile_space(
        space, name, args.runs, to_stderr, args.shapes, shares(args.shares), args.out
    )
    print(f"cost profile: {out} ({len(profile.steps)} step times at {', '.join(profile.covers())})")
    print(f"use it: specsweep run --space {args.space} --profile {out}")
    return 0
