"""`specsweep doctor MODEL [--engine E] [--log SERVER_LOG] [--kv-dtype D]`: the memory truth behind a
configuration, from the model's own files (config.json, safetensors headers, GGUF metadata) and, given a server
log, the pool it should have had and the graph memory it cannot use."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sweep.doctor import KV_DTYPE_BYTES, diagnose
from sweep.engines import ENGINES
from sweep.errors import UserError


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "doctor", help="the memory truth from the model's files and a log", description=__doc__
    )
    parser.add_argument(
        "model", type=Path, help="the model folder (config.json, *.safetensors) or a .gguf file"
    )
    parser.add_argument(
        "--engine", choices=sorted(ENGINES), default="sglang", help="which engine (default: sglang)"
    )
    parser.add_argument("--log", type=Path, help="a server log of a launch of this model")
    parser.add_argument(
        "--kv-dtype",
        default="auto",
        choices=sorted(KV_DTYPE_BYTES),
        help="the KV cache dtype (default: auto, 16-bit)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    parser.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    engine = ENGINES[args.engine]
    facts = None
    if args.log is not None:
        if not args.log.is_file():
            raise UserError(f"log file {args.log} does not exist", "pass the path of a server log with --log")
        facts = engine.facts_from_log(args.log.read_text(encoding="utf-8", errors="replace"))
    if not args.model.exists():
        raise UserError(f"model {args.model} does not exist", "pass the model's folder or .gguf file")
    found = diagnose(args.model, args.kv_dtype, facts, engine.draft_layers_read)
    print(json.dumps(found.to_dict(), indent=2) if args.json else "\n".join(found.lines()))
    return 0
