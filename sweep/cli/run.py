"""`specsweep run`: run (or resume) a study from a space file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sweep.analysis import overall_recommendation, recommendations, trial_views
from sweep.outputs.console import report_text
from sweep.outputs.dashboard import build
from sweep.space import Space, load_space
from sweep.study import StudyPaths, Sweep, build_engine, validate

DEFAULT_RUNS = Path("runs")


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("run", help="run or resume a study", description=__doc__)
    parser.add_argument("--space", type=Path, required=True, help="search space YAML (see search_spaces/)")
    add_study_options(parser)
    parser.add_argument(
        "--trials", type=int, help="total trials the study should have (default: the space's)"
    )
    parser.set_defaults(handler=main)


def add_study_options(parser: argparse.ArgumentParser, study_required: bool = False) -> None:
    parser.add_argument(
        "--study", required=study_required, help="study name (default: the space file's name)"
    )
    parser.add_argument("--storage", help="Optuna storage URL (default: sqlite:///runs/<study>/study.db)")
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="folder of study folders (default: runs)"
    )


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def sweep_space(space: Space, study: str, storage: str | None, runs: Path, trials: int | None) -> StudyPaths:
    engine = build_engine(space)
    validate(space, engine)
    paths = StudyPaths.for_study(study, runs, storage)
    progress(f"study {study}: {paths.storage_url}; server logs and measurements in {paths.run_dir}/trials/")
    result = Sweep(space, engine, paths, progress).run(trials)
    views = trial_views(result)
    print(report_text(study, views, recommendations(views), overall_recommendation(views)))
    # The morning view: dashboards/ beside runs/ (as in a clone: runs/ and dashboards/ at the top).
    page = runs.parent / "dashboards" / f"{study}.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(build(result, study), encoding="utf-8")
    progress(f"dashboard: {page}")
    return paths


def main(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    sweep_space(space, args.study or args.space.stem, args.storage, args.runs, args.trials)
    return 0
