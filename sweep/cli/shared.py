"""What several commands parse alike: the space to sweep, the study's options and durations."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from sweep.run.study import DEFAULT_RUNS

DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s)?")


def add_space_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--space",
        type=Path,
        required=True,
        help="search space YAML, or a shipped example by name (`specsweep spaces` lists them)",
    )


def add_study_options(parser: argparse.ArgumentParser, study_required: bool = False) -> None:
    parser.add_argument(
        "--study", required=study_required, help="study name (default: the space file's name)"
    )
    parser.add_argument("--storage", help="Optuna storage URL (default: sqlite:///runs/<study>/study.db)")
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="folder of study folders (default: runs)"
    )


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
