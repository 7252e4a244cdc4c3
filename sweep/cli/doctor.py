"""`specsweep doctor MODEL [--engine E] [--log LOG [--against LOG]] [--gpu-memory GB] [-- FLAGS]`: the memory
truth behind a configuration, from the model's own files (config.json, safetensors headers, GGUF metadata) and,
given a server log, the pool it should have had, the graph memory it cannot use and the flags that cap it; given
a second log of the same model with other flags, what the two hold differently."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sweep.engines import ENGINES
from sweep.model.geometry import KV_DTYPE_BYTES
from sweep.run.doctor import examine


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
        "--against",
        type=Path,
        help="a second log of the same model with other flags (e.g. pinned against the defaults)",
    )
    parser.add_argument(
        "--tp",
        type=int,
        help="tensor parallel size: GPUs the KV heads are split over (default: the flags', 1)",
    )
    parser.add_argument(
        "--kv-dtype",
        choices=sorted(KV_DTYPE_BYTES),
        help="the KV cache dtype (default: the flags', else auto: 16-bit)",
    )
    parser.add_argument(
        "--gpu-memory",
        type=float,
        metavar="GB",
        help="one GPU's memory: the most the pool can hold there, at the flags' memory share or the engine's",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of lines")
    # After `--`: the engine's flags for the launch (`-- --mem-fraction-static 0.92 --tp-size 2`).
    parser.set_defaults(handler=main, engine_flags=[])


def main(args: argparse.Namespace) -> int:
    found = examine(
        args.model,
        args.engine,
        args.engine_flags,
        args.log,
        args.against,
        args.tp,
        args.kv_dtype,
        args.gpu_memory,
    )
    print(json.dumps(found.to_dict(), indent=2) if args.json else "\n".join(found.lines()))
    return 0
