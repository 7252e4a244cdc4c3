"""`specsweep export`: the recommended flags of a study, as a command line, a compose block, JSON or YAML."""

from __future__ import annotations

import argparse
import sys

from sweep.analysis import output_check, overall_recommendation, recommendations, study_engine
from sweep.cli.shared import add_study_options, load, results
from sweep.engines import engine_class
from sweep.errors import UserError
from sweep.outputs.export import FORMATS, Export, render, with_port


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "export", help="recommended flags as a command line, compose, JSON or YAML", description=__doc__
    )
    add_study_options(parser, study_required=True)
    parser.add_argument("--workload", help="the workload to export for (default: one configuration for all)")
    parser.add_argument("--format", choices=FORMATS, default="cli", help="output format (default: cli)")
    parser.add_argument("--port", type=int, help="port in the exported command (default: the engine's own)")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    study = load(args.study, args.storage, args.runs)
    found = results(study)
    views = found.search
    if args.workload:
        recs = {r.workload: r for r in recommendations(found)}
        if args.workload not in recs:
            raise UserError(
                f"study '{args.study}' has no measured workload '{args.workload}'",
                f"choose one of: {', '.join(recs) or '(none)'}",
            )
        rec = recs[args.workload]
        trial, params = rec.recommended_trial, rec.recommended_params
        notes = [f"{rec.verdict} ({rec.why_verdict}); {rec.why}"]
        keys = [args.workload]
    else:
        overall = overall_recommendation(found)
        if overall is None:
            raise UserError(
                f"study '{args.study}' has no completed baseline to compare with",
                "run the study until its baseline completes",
            )
        trial, params = overall.trial, overall.params
        notes = [overall.why + ("" if overall.confirmed else "; unconfirmed: run `specsweep confirm` first")]
        keys = found.keys
    for key in keys:
        if (check := output_check(found, f"trial {trial}", key)) is not None and check.changed:
            notes.append(f"{key}: CHANGES THE MODEL'S OUTPUT: {check.describe()}")
    record = next(v.record for v in views if v.number == trial)
    assert record is not None
    engine = study_engine(study, views)
    port = args.port or engine_class(engine).default_port
    export = Export(
        engine, args.study, trial, args.workload, params, with_port(record.argv, port), tuple(notes)
    )
    if args.format == "cli":  # the command alone on stdout (to paste or run); what to know on stderr
        for note in notes:
            print(f"# {note}", file=sys.stderr)
    print(render(export, args.format))
    return 0
