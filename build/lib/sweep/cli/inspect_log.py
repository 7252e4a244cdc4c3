"""`specsweep inspect-log`: the whole story of a server log: whether the server became ready, why it stopped
if it did not, the launch facts (KV pool, memory, limits, graphs), every cap and reset, and the sizing verdicts
the numbers allow (memory left at a graph capture against what it needed)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from sweep.core.errors import UserError
from sweep.engines import ENGINES, Engine, ServerSetup
from sweep.records import LaunchFacts


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser("inspect-log", help="the story of a server log", description=__doc__)
    parser.add_argument("--engine", required=True, choices=sorted(ENGINES), help="which engine wrote the log")
    parser.add_argument("file", type=Path, help="a server log")
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    parser.set_defaults(handler=main)


def story(engine: Engine, log: str, facts: LaunchFacts) -> list[str]:
    """Readiness, the reason it stopped, the caps and resets, and the graph memory against what was left."""
    ready = bool(engine.ready_marker) and engine.ready_marker in log
    lines = [f"ready: {'yes' if ready else 'no, the server never said it serves requests'}"]
    if not ready:
        lines.append(f"stopped: {engine.exit_reason(log, -1).replace(' with code -1', '')}")
    lines += [f"cap or reset: {line}" for line in facts.limit_changes]
    if facts.state_slots is not None:
        lines.append(
            f"mamba state slots: {facts.state_slots} (each request of a hybrid model holds some; "
            "speculation adds one per draft token): they cap the requests run at once"
        )
    if oom := facts.capture_oom:
        short = oom.needed_gb - oom.free_gb
        lines.append(
            f"sizing: a CUDA-graph capture needed {oom.needed_gb:.2f} GB with {oom.free_gb:.2f} GB left after "
            f"the KV pool ({short:.2f} GB short): capture fewer or smaller graphs, or give the pool less"
        )
    return lines


def main(args: argparse.Namespace) -> int:
    if not args.file.is_file():
        raise UserError(f"log file {args.file} does not exist", "pass the path of a server log")
    text = args.file.read_text(encoding="utf-8", errors="replace")
    engine = ENGINES[args.engine](ServerSetup(launcher=[], model=""))
    facts = engine.facts_from_log(text)
    told = story(engine, text, facts)
    if args.json:
        print(json.dumps({**facts.to_dict(), "story": told}, indent=2))
        return 0
    print("\n".join(told))
    shown: dict[str, Any] = {k: v for k, v in facts.to_dict().items() if v not in (None, "", [], {}, False)}
    for key, value in shown.items():
        if isinstance(value, list):
            print(f"{key}:")
            print("\n".join(f"  - {item}" for item in value))
        else:
            print(f"{key}: {value}")
    return 0
