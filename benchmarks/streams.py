"""Do concurrent streams add up? A `specsweep run` on simulated servers with each workload class sent as
`--streams` requests at once, with and without speculation: each batch's aggregate t/s (every request's decode
tokens over the batch's decode window) against the sum of the requests' own decode rates, as a ratio. A real
server steps its batch together, so the two differ only by how unevenly the requests finish (acceptance differs
prompt to prompt); the closer to 1, the more a multi-stream number means what it says. The last column is that
unevenness alone: the ratio the batch would have if every verify step took the same time, from each request's
verify steps (its tokens over its acceptance length). A closed batch waits for its slowest request, so the
measured ratio can be no better than this; a simulator whose streams step together sits on it.

    .venv/bin/python benchmarks/streams.py [--streams 8] [--max-tokens 128] [--time-scale 0.05]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

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


def step_floor(rows: list[dict[str, Any]]) -> float | None:
    """A batch's aggregate / sum if its requests differed only in how many verify steps they took."""
    steps = [r["completion_tokens"] / r["acceptance_length"] for r in rows if r.get("acceptance_length")]
    tokens = [r["completion_tokens"] - 1 for r in rows]
    if len(steps) < len(rows) or not steps:
        return None
    return (sum(tokens) / max(steps)) / sum(t / s for t, s in zip(tokens, steps, strict=True))


def step_floors(trial_folder: Path) -> dict[str, float]:
    """The median step floor of each workload's batches in one trial's request log."""
    batches: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for line in (trial_folder / "requests.jsonl").read_text().splitlines():
        row = json.loads(line)
        batches.setdefault((row["workload"], row["repeat"]), []).append(row)
    floors: dict[str, list[float]] = {}
    for (workload, _), rows in batches.items():
        if (floor := step_floor(rows)) is not None:
            floors.setdefault(workload, []).append(floor)
    return {workload: statistics.median(values) for workload, values in floors.items()}


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
        floors = {
            trial["number"]: step_floors(Path(tmp) / "runs" / "b" / "trials" / str(trial["number"]))
            for trial in report["trials"]
        }
    print(f"{args.streams} streams, {args.max_tokens} tokens each, 3 batches a workload ({wall:.0f} s)")
    print("| trial | workload | aggregate t/s | sum of streams' t/s | aggregate / sum | step floor |")
    print("|---|---|---|---|---|---|")
    ratios = []
    for trial in report["trials"]:
        spec = trial["record"]["params"].get("speculative-algorithm", "none")
        for name, workload in sorted(trial["record"]["workloads"].items()):
            aggregate, total = workload["aggregate_tps"]["median"], workload["sum_stream_tps"]["median"]
            ratios.append(aggregate / total)
            floor = floors[trial["number"]].get(name)
            shown = f"{floor:.3f}" if floor is not None else "-"
            print(
                f"| {trial['number']} ({spec}) | {name} | {aggregate:.0f} | {total:.0f} | {ratios[-1]:.3f} | {shown} |"
            )
    print(f"aggregate / sum: mean {statistics.fmean(ratios):.3f}, lowest {min(ratios):.3f}")


if __name__ == "__main__":
    main()
