"""`specsweep ab`: an interleaved A/B of two configurations (A B A B ..., N rounds) on a space's workloads,
printed as a before/after table with a verdict on every speed.

A configuration is `baseline` (speculation off), `STUDY:TRIAL` (a measured trial's parameters) or parameters
as `name=value,name=value` over the space's fixed ones (e.g. `spec-type=ngram-mod,spec-ngram-mod-n-min=32`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli.shared import add_study_options
from sweep.outputs.console import ab_text
from sweep.run.ab import run_ab
from sweep.space import ConfirmSettings, load_space


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


def main(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    name = args.study or f"ab-{args.space.stem}"
    found = run_ab(space, args.a, args.b, name, args.rounds, args.max_rounds, args.storage, args.runs)
    print(ab_text(found.name, found.a, found.b, found.rows, found.warnings))
    return 0
