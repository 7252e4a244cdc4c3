"""`specsweep export`: the recommended flags of a study, as a command line, a compose block, JSON or YAML."""

from __future__ import annotations

import argparse

from sweep.analysis import overall_recommendation, recommendations, study_engine
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
        trial, params = recs[args.workload].recommended_trial, recs[args.workload].recommended_params
    else:
        overall = overall_recommendation(found)
        if overall is None:
            raise UserError(
                f"study '{args.study}' has no completed baseline to compare with",
                "run the study until its baseline completes",
            )
        trial, params = overall.trial, overall.params
    record = next(v.record for v in views if v.number == trial)
    assert record is not None
    engine = study_engine(study, views)
    port = args.port or engine_class(engine).default_port
    print(
        render(
            Export(engine, args.study, trial, args.workload, params, with_port(record.argv, port)),
            args.format,
        )
    )
    return 0
