"""Do concurrent streams add up? A `specsweep run` on simulated servers with each workload class sent as
`--streams` requests at once, with and without speculation: each batch's aggregate t/s (every request's decode
tokens over the batch's decode window) against the sum of the requests' own decode rates, as a ratio. A real
server steps its batch together, so the two differ only by how unevenly the requests finish (acceptance differs
prompt to prompt); the closer to 1, the more a multi-stream number means what it says.

    .venv/bin/python benchmarks/streams.py [--streams 8] [--max-tokens 128] [--time-scale 0.05]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from search_vs_grid import report_json, sweep_on_sim

CLASSES = ("code", "tool", "prose")


def space(streams: int, max_tokens: int, time_scale: float) -> str:
    """The baseline and NEXTN at 3 steps (tried first), every class at `streams` streams."""
    workloads = ", ".join(f"{{class: {c}, streams: [{streams}]}}" for c in CLASSES)
    return (
        "engine: sglang\n"
        f'server: {{launcher: ["{sys.executable}", -m, sweep.sim, --sim-time-scale, "{time_scale}"], model: /m}}\n'
        "fixed: {kv-cache-dtype: fp8_e4m3}\n"
        "params:\n  speculative-algorithm: {choices: [NEXTN]}\n  speculative-num-steps: {choices: [3]}\n"
        "enqueue: [{speculative-algorithm: NEXTN, speculative-num-steps: 3}]\n"
        f"workloads: [{workloads}]\n"
        f"probe: {{repeats: 3, max_tokens: {max_tokens}}}\n"
        "trials: 2\nseed: 1\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--time-scale", type=float, default=0.05, help="wall seconds per modelled second")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        runs, wall = sweep_on_sim(
            space(args.streams, args.max_tokens, args.time_scale), Path(tmp), "--no-confirm"
        )
        report = report_json(runs)
    print(f"{args.streams} streams, {args.max_tokens} tokens each, 3 batches a workload ({wall:.0f} s)")
    print("| trial | workload | aggregate t/s | sum of streams' t/s | aggregate / sum |")
    print("|---|---|---|---|---|")
    ratios = []
    for trial in report["trials"]:
        spec = trial["record"]["params"].get("speculative-algorithm", "none")
        for name, workload in sorted(trial["record"]["workloads"].items()):
            aggregate, total = workload["aggregate_tps"]["median"], workload["sum_stream_tps"]["median"]
            ratios.append(aggregate / total)
            print(
                f"| {trial['number']} ({spec}) | {name} | {aggregate:.0f} | {total:.0f} | {ratios[-1]:.3f} |"
            )
    print(f"aggregate / sum: mean {statistics.fmean(ratios):.3f}, lowest {min(ratios):.3f}")


if __name__ == "__main__":
    main()
