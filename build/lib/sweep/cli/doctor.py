"""`specsweep doctor MODEL [--engine E] [--log LOG [--against LOG]] [--gpu-memory GB] [-- FLAGS]`: the memory
truth behind a configuration, from the model's own files (config.json, safetensors headers, GGUF metadata) and,
given a server log, the pool it should have had, the graph memory it cannot use and the flags that cap it; given
a second log of the same model with other flags, what the two hold differently."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from sweep.core.errors import UserError
from sweep.engines import ENGINES
from sweep.engines.flags import params_from_flags
from sweep.engines.values import ServerSetup
from sweep.model.doctor import MemoryBudget, diagnose
from sweep.model.geometry import KV_DTYPE_BYTES


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
    engine = ENGINES[args.engine](ServerSetup([], str(args.model)))
    if args.against is not None and args.log is None:
        raise UserError(
            "--against needs --log", "pass the first launch's log with --log and the second's with --against"
        )
    params = params_from_flags(args.engine_flags)
    tp = args.tp if args.tp is not None else engine.tensor_parallel(params)
    if tp < 1:
        raise UserError(f"a tensor parallel size of {tp} is not a GPU count", "pass --tp 1 or more")
    if args.gpu_memory is not None and args.gpu_memory <= 0:
        raise UserError(f"--gpu-memory {args.gpu_memory} is not a memory size", "pass one GPU's memory in GB")
    kv_dtype = args.kv_dtype or engine.kv_cache_dtype(params)
    facts, against = (
        None if path is None else engine.facts_from_log(_read_log(path, option))
        for path, option in ((args.log, "--log"), (args.against, "--against"))
    )
    if not args.model.exists():
        raise UserError(f"model {args.model} does not exist", "pass the model's folder or .gguf file")
    share = engine.memory_share(args.gpu_memory, params) if args.gpu_memory else None
    found = diagnose(
        args.model,
        kv_dtype,
        facts,
        engine.doctor_rules(params, tp),
        # Unsaid, as the log shows; a draft with its own cache (llama-server's) never shares the pool.
        True if params and engine.wants_speculation(params) and engine.draft_shares_pool else None,
        against,
        MemoryBudget(args.gpu_memory, *share) if share else None,
    )
    print(json.dumps(found.to_dict(), indent=2) if args.json else "\n".join(found.lines()))
    return 0


def _read_log(path: Path, option: str) -> str:
    if not path.is_file():
        raise UserError(f"log file {path} does not exist", f"pass the path of a server log with {option}")
    return path.read_text(encoding="utf-8", errors="replace")
