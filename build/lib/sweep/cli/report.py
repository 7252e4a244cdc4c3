"""`specsweep report`: per workload, the confirmed verdict on the best configuration and what to run."""

from __future__ import annotations

import argparse

from sweep.analysis import study_verdicts
from sweep.cli.shared import add_study_options
from sweep.outputs.console import report_text
from sweep.outputs.json_ import report_json
from sweep.run.study import open_study, read_study


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("report", help="best settings per workload", description=__doc__)
    add_study_options(parser, study_required=True)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    found = read_study(open_study(args.study, args.storage, args.runs))
    text = report_json if args.json else report_text
    print(text(args.study, found, study_verdicts(found)))
    return 0
