"""`specsweep inspect-log`: the launch facts in any server log (KV pool, memory, limits, graphs)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sweep.engines import ENGINES
from sweep.errors import UserError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("inspect-log", help="facts read from a server log", description=__doc__)
    parser.add_argument("--engine", required=True, choices=sorted(ENGINES), help="which engine wrote the log")
    parser.add_argument("file", type=Path, help="a server log")
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise UserError(f"log file {args.file} does not exist", "pass the path of a server log")
    facts = (
        ENGINES[args.engine].facts_from_log(args.file.read_text(encoding="utf-8", errors="replace")).to_dict()
    )
    shown = {k: v for k, v in facts.items() if v not in (None, "", [], {}, False)}
    if args.json:
        print(json.dumps(facts, indent=2))
        return 0
    for key, value in shown.items():
        if isinstance(value, list):
            print(f"{key}:")
            print("\n".join(f"  - {item}" for item in value))
        else:
            print(f"{key}: {value}")
    return 0
