"""`specsweep compare A B ...`: configurations side by side. A is a study (its one-server recommendation) or
STUDY:TRIAL; prints Markdown and writes an HTML file."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.outputs.compare import compare_studies, markdown
from sweep.run.study import DEFAULT_RUNS


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("compare", help="configurations side by side", description=__doc__)
    parser.add_argument("configs", nargs="+", help="STUDY (its recommendation) or STUDY:TRIAL, two or more")
    parser.add_argument(
        "--storage", help="Optuna storage URL shared by the studies (default: each one's SQLite)"
    )
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="folder of study folders (default: runs)"
    )
    parser.add_argument(
        "-o", "--output", type=Path, help="HTML file (default: dashboards/compare-<A>-<B>.html)"
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    columns, out = compare_studies(args.configs, args.storage, args.runs, args.output)
    print(markdown(columns))
    print(f"\n{out}")
    return 0
