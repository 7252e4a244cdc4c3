"""`specsweep export`: the recommended flags of a study, as a command line, a compose block, JSON or YAML."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sweep.cli.shared import add_study_options
from sweep.outputs.export import FORMATS, build_export, build_schedules, render
from sweep.run.study import open_study, read_study


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "export", help="recommended flags as a command line, compose, JSON or YAML", description=__doc__
    )
    add_study_options(parser, study_required=True)
    parser.add_argument("--workload", help="the workload to export for (default: one configuration for all)")
    parser.add_argument("--format", choices=FORMATS, default="cli", help="output format (default: cli)")
    parser.add_argument("--port", type=int, help="port in the exported command (default: the engine's own)")
    parser.add_argument(
        "--out",
        type=Path,
        help="with --format schedule: a folder to write the schedule and SGLang's adaptive config file into",
    )
    parser.add_argument(
        "--pin-graphs",
        action="store_true",
        help="add the flags that cap CUDA-graph capture at the batch sizes the server can reach (from the sizing "
        "doctor's verdicts on the exported trial's launch)",
    )
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    study = open_study(args.study, args.storage, args.runs)
    found = read_study(study)
    if args.format == "schedule":
        documents = build_schedules(study, found, args.workload, args.port, args.out)
        print(json.dumps(documents if len(documents) > 1 else documents[0], indent=2))
        return 0
    export = build_export(study, found, args.workload, args.port, args.pin_graphs)
    if args.format == "cli":  # the command alone on stdout (to paste or run); what to know on stderr
        for note in export.notes:
            print(f"# {note}", file=sys.stderr)
        if export.withheld:
            print(export.withheld.comment(), file=sys.stderr)
    print(render(export, args.format))
    return 0
