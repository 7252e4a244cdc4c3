"""`specsweep demo`: the embedded default, a real sweep of llama-server + Gemma 3 270M on the CPU."""

from __future__ import annotations

import argparse
from pathlib import Path

from sweep.cli.run import DEFAULT_RUNS, progress, sweep_space
from sweep.space import load_space

DEMO_SPACE = "demo-llamacpp.yaml"


def shipped_space(name: str) -> Path:
    """A space from search_spaces/ (next to the package in a clone)."""
    return Path(__file__).resolve().parents[2] / "search_spaces" / name


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "demo", help="sweep the embedded llama-server + Gemma 3 270M", description=__doc__
    )
    parser.add_argument("--study", default="demo", help="study name (default: demo)")
    parser.add_argument(
        "--runs", type=Path, default=DEFAULT_RUNS, help="folder of study folders (default: runs)"
    )
    parser.add_argument("--trials", type=int, help="total trials (default: the demo space's)")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    space_file = shipped_space(DEMO_SPACE)
    paths = sweep_space(load_space(space_file), args.study, None, args.runs, args.trials)
    progress(f"\nresults: {paths.run_dir} (study.db, trials/<n>/server.log, requests.jsonl, record.json)")
    progress(f"again: specsweep report --study {args.study}   (re-running the demo resumes the study)")
    return 0
