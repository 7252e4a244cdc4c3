"""`specsweep run`: run (or resume) a study from a space file, then confirm its best configurations."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from sweep.cli.shared import add_study_options, progress, publish
from sweep.confirm import confirm_search
from sweep.preflight import build_engine, validate
from sweep.space import Space, load_space
from sweep.store import StudyPaths
from sweep.study import Sweep


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("run", help="run or resume a study", description=__doc__)
    parser.add_argument("--space", type=Path, required=True, help="search space YAML (see search_spaces/)")
    add_study_options(parser)
    parser.add_argument(
        "--trials", type=int, help="total trials the study should have (default: the space's)"
    )
    parser.add_argument(
        "--no-confirm", action="store_true", help="skip the confirmation (verdicts then say unconfirmed)"
    )
    parser.add_argument(
        "--budget",
        type=duration,
        help="wall time for the search and its confirmation, e.g. 8h or 1h30m: trials are planned from the "
        "measured trial time (no trial count unless --trials is given too)",
    )
    parser.add_argument(
        "--until-confident",
        action="store_true",
        help="stop the search when no untried configuration can beat the best by more than the study's noise",
    )
    parser.set_defaults(handler=main)


DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")
UNBOUNDED_TRIALS = 100000  # with a time budget and no --trials: the clock (or confidence) ends the search


def duration(text: str) -> float:
    """`8h`, `90m`, `1h30m`, `45s` or plain seconds, in seconds."""
    found = DURATION.fullmatch(text.strip())
    if text.strip().replace(".", "", 1).isdigit():
        seconds = float(text)
    elif found and any(found.groups()):
        hours, minutes, secs = (float(g or 0) for g in found.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    else:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration (e.g. 8h, 90m, 1h30m)")
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive duration (e.g. 8h)")
    return seconds


def budget(space: Space, trials: int | None) -> str:
    """The night's plan in launches: the search, then the confirmation's most."""
    each = f"{space.confirm.launches}-{space.confirm.max_launches}"
    confirm = f"{space.confirm_configurations} configurations x {each}" if space.confirm.launches else "no"
    return f"plan: {trials or space.trials} search trials, then at most {confirm} confirmation launches"


def sweep_space(
    space: Space,
    study: str,
    storage: str | None,
    runs: Path,
    trials: int | None,
    confirm: bool = True,
    until_confident: bool = False,
    budget_s: float | None = None,
) -> StudyPaths:
    engine = build_engine(space)
    validate(space, engine)
    paths = StudyPaths.for_study(study, runs, storage)
    progress(f"study {study}: {paths.shown_url}; server logs and measurements in {paths.run_dir}/trials/")
    if budget_s is not None:
        trials = trials or UNBOUNDED_TRIALS
        progress(f"budget: {budget_s / 3600:.1f} h for the search and its confirmation")
    else:
        progress(budget(space, trials) if confirm else budget(space, trials).split(", then")[0])
    sweep = Sweep(space, engine, paths, progress, until_confident, budget_s)
    result = sweep.run(trials)
    if confirm and space.confirm.launches:
        confirm_search(sweep, result, space.confirm.top, space.confirm.launches, space.confirm.max_launches)
    publish(result, study, runs)
    return paths


def main(args: argparse.Namespace) -> int:
    space = load_space(args.space)
    sweep_space(
        space,
        args.study or args.space.stem,
        args.storage,
        args.runs,
        args.trials,
        not args.no_confirm,
        args.until_confident,
        args.budget,
    )
    return 0
