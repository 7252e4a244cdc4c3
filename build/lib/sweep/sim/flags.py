"""The SGLang command line the simulator accepts: the release its profile names, flag for flag.

The parser is rebuilt from the release's committed table (`sweep/releases/tables/`, read from its own source),
so a flag the release lacks fails with `unrecognized arguments`, a shortened one that two flags share (`--tp`,
`--cuda-graph-max-bs`) is ambiguous, a value outside its choices is refused, as on the real server.
"""

from __future__ import annotations

import argparse

from sweep.releases.sglang import PINNED, load_table, release_parser


def build_parser(version: str) -> argparse.ArgumentParser:
    """`sglang serve`'s own parser for `version` (every flag, alias, type, choice and default of the release's
    table), plus the simulator's flags."""
    parser = release_parser(version)
    add_sim_flags(parser)
    return parser


def add_sim_flags(parser: argparse.ArgumentParser) -> None:
    """The simulator's own flags, the same behind every engine's front end."""
    sim = parser.add_argument_group("specsweep simulator (not the engine's flags)")
    sim.add_argument(
        "--sim-profile", help="Performance-model profile (YAML); default: the report-000 profile."
    )
    sim.add_argument(
        "--sim-time-scale",
        type=float,
        default=1.0,
        help="Multiply every simulated delay (0.01: 100x faster).",
    )
    sim.add_argument(
        "--sim-startup-scale",
        type=float,
        default=None,
        help="Multiply the start-up delays (load, graph capture, warm-up) by this instead (default: the time "
        "scale): a server measured by the client's clock decodes in real time and still starts in seconds.",
    )
    sim.add_argument(
        "--sim-seed",
        type=int,
        default=None,
        help="Seed of the simulated noise and acceptance (default: a new seed per launch, as a real server "
        "drifts from launch to launch; set it only for a deterministic run).",
    )
    sim.add_argument(
        "--sim-seed-file",
        help="A file holding the next seed: each launch takes it and writes the one after, so launches differ "
        "and a whole run repeats exactly (tests).",
    )
    sim.add_argument(
        "--sim-speed-factor",
        type=float,
        default=1.0,
        help="Make this launch truly this many times faster (1.05: +5%%), for testing verdicts against a known truth.",
    )
    sim.add_argument(
        "--sim-fault",
        action="append",
        default=[],
        metavar="NAME[=N]",
        help="Have this fault (repeatable; see sweep/sim/faults.py): exit-at-start, never-healthy, odd-bytes, "
        "ignore-term, daemonise, escape-group, crash-mid-stream=N, crash-after=N, http-error=CODE, "
        "malformed-sse, cut-sse, stall=N.",
    )


def startup_scale(args: argparse.Namespace) -> float:
    """How much of the modelled start-up time a launch really waits."""
    return float(args.sim_time_scale if args.sim_startup_scale is None else args.sim_startup_scale)


def normalize(args: argparse.Namespace) -> argparse.Namespace:
    """Fold the per-phase CUDA-graph switches into the two the model reads; a setting an older release has no
    flag for takes the pinned release's default (0.5.17 has no --speculative-draft-kv-cache-dtype: the draft
    keeps the target's KV dtype, as the default does)."""
    for flag in load_table(PINNED).values():
        if not hasattr(args, flag.dest):
            setattr(args, flag.dest, flag.default)
    if getattr(args, "cuda_graph_backend_decode", None) == "disabled" or getattr(
        args, "disable_decode_cuda_graph", False
    ):
        args.disable_cuda_graph = True
    if getattr(args, "cuda_graph_backend_prefill", None) == "disabled" or getattr(
        args, "disable_prefill_cuda_graph", False
    ):
        args.cuda_graph_max_bs_prefill = 0
    return args
