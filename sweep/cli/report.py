"""`specsweep report`: per workload, the best parameters, their decode t/s and gain over speculation off."""

from __future__ import annotations

import argparse

import optuna

from sweep.analysis import overall_recommendation, recommendations, trial_views
from sweep.cli.run import add_study_options
from sweep.errors import UserError
from sweep.outputs.console import report_text
from sweep.outputs.json_ import report_json
from sweep.study import StudyPaths, make_storage


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("report", help="best settings per workload", description=__doc__)
    add_study_options(parser, study_required=True)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.set_defaults(handler=main)


def load(study: str, storage: str | None, runs: object) -> optuna.Study:
    paths = StudyPaths.for_study(study, runs, storage)  # type: ignore[arg-type]
    if storage is None and not (paths.run_dir / "study.db").is_file():
        raise UserError(
            f"no study '{study}' in {paths.run_dir}",
            "run `specsweep run --space FILE` first, or pass --storage",
        )
    try:
        return optuna.load_study(study_name=study, storage=make_storage(paths.storage_url))
    except KeyError:
        raise UserError(f"no study '{study}' in {paths.storage_url}", "check --study and --storage") from None


def main(args: argparse.Namespace) -> int:
    study = load(args.study, args.storage, args.runs)
    views = trial_views(study)
    recs, overall = recommendations(views), overall_recommendation(views)
    text = report_json if args.json else report_text
    print(text(args.study, views, recs, overall))
    return 0
