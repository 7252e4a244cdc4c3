"""`specsweep replay --study S`: a finished study's n-gram acceptance replayed on its baseline's own tokens,
for every drafter configuration the engine's release can be replayed for; nothing is launched."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sweep.outputs.replay import replay_json, replay_lines
from sweep.run.replay import replay_study
from sweep.run.study import DEFAULT_RUNS


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "replay", help="n-gram acceptance replayed on the baseline's tokens", description=__doc__
    )
    parser.add_argument("--study", required=True, help="the study's name")
    parser.add_argument("--storage", help="Optuna storage URL (default: the study's SQLite)")
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="folder of study folders (default: runs)"
    )
    parser.add_argument("--top", type=int, help="configurations per workload, best first (default: all)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    found = replay_study(args.study, args.storage, args.runs)
    print(json.dumps(replay_json(found), indent=1) if args.json else "\n".join(replay_lines(found, args.top)))
    return 0
