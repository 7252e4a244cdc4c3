"""`specsweep dashboard`: the study as one self-contained HTML page (opens offline from disk)."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.analysis import study_verdicts
from sweep.cli.shared import add_study_options
from sweep.core.files import write_atomic
from sweep.outputs.publish import DEFAULT_DIR, dashboard_page
from sweep.run.study import open_study, read_study


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("dashboard", help="write the study's HTML dashboard", description=__doc__)
    add_study_options(parser, study_required=True)
    parser.add_argument("-o", "--output", type=Path, help="HTML file (default: dashboards/<study>.html)")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    study = open_study(args.study, args.storage, args.runs)
    out = args.output or DEFAULT_DIR / f"{args.study}.html"
    found = read_study(study)
    write_atomic(out, dashboard_page(study, args.study, found, study_verdicts(found)))
    print(out)
    return 0
