"""The capacity one search launch finds (`objective: capacity`: both ends of the range, then bisection steps)
against a fine grid of rates, on a simulator profile the tests do not use, and what each took.

For the baseline and NEXTN chains of 2 and 4 steps, on real HTTP against `specsweep sim` servers: the grid
measures every one of `--grid` rates (log-spaced over the range) on a launch of its own, three repeats of the
search's run (constant arrivals, the same requests a run: a run's length moves the capacity, as queues past it
grow with the run; the three give the truth's percentiles three times the requests), and its capacity is the
highest rate at which the latency limit held; the search is one launch of the capacity objective (its
runs near the limit run again). Prints, per configuration: both capacities, the search's over the grid's,
the runs and launches each took and their wall time. The GPU's knee is lowered to 8 tokens and the verify
cost past it raised tenfold, so that the limit binds inside the range (speculation pays alone, not when the
requests overlap).

    .venv/bin/python benchmarks/capacity.py [--grid 16] [--steps 5] [--requests 5] [--recommend]

With `--recommend`, a capacity study of the NEXTN chains as `specsweep run` makes it (the search, then its
confirmation) follows, and what the report says to run is scored against the grid's capacities.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from sweep.records import TrialRecord
from sweep.run.preflight import build_engine, validate
from sweep.run.trial import TrialRunner
from sweep.sim.profile import PROFILES
from sweep.space import Space, parse_space
from sweep.storage import StudyPaths

HELD_OUT = PROFILES / "report004-3090-24gb.yaml"  # not the tests' default profile
SCALE = "0.05"  # the modelled GPU's time on the wall clock: the rates below are wall-clock rates
RANGE = (2.0, 200.0)
LIMIT = {"tpot_p90_s": 0.00175}  # 35 ms of the modelled GPU per output token
CONFIGS: dict[str, dict[str, Any]] = {
    "baseline": {"speculative-algorithm": "none"},
    "NEXTN 2 steps": {"speculative-algorithm": "NEXTN", "speculative-num-steps": 2},
    "NEXTN 4 steps": {"speculative-algorithm": "NEXTN", "speculative-num-steps": 4},
}


def space(
    root: Path, profile: Path, workload: dict[str, Any], capacity_steps: int | None, repeats: int = 1
) -> Space:
    data = space_data(profile, workload, capacity_steps, repeats)
    return parse_space(yaml.safe_load(yaml.safe_dump(data)), root)


def space_data(
    profile: Path, workload: dict[str, Any], capacity_steps: int | None, repeats: int = 1
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "engine": "sglang",
        "server": {
            "launcher": [
                sys.executable,
                "-m",
                "sweep.sim",
                "--sim-time-scale",
                SCALE,
                "--sim-profile",
                str(profile),
            ],
            "model": "/models/q",
        },
        # The profile's hybrid model runs 3 requests at once by default (9 mamba slots): room for 16.
        "fixed": {"kv-cache-dtype": "fp8_e4m3", "max-mamba-cache-size": 48},
        "workloads": [workload],
        "latency_limits": LIMIT,
        "probe": {"repeats": repeats, "max_tokens": 64},
    }
    if capacity_steps is not None:
        data["objective"] = {"capacity": {"steps": capacity_steps}}
    return data


def recommended(root: Path, profile: Path, workload: dict[str, Any], steps: int) -> dict[str, Any]:
    """A capacity study of the speculative configurations (the baseline launched by the sweep itself) with its
    confirmation, as `specsweep run` makes it; `specsweep report --json`'s recommendation for the workload."""
    data = space_data(profile, workload, steps)
    data["params"] = {
        "speculative-algorithm": {"choices": ["NEXTN"]},
        "speculative-num-steps": {"choices": [2, 4]},
    }
    data |= {"trials": 3, "confirm": {"launches": 3, "top": 2}}
    (root / "study.yaml").write_text(yaml.safe_dump(data))
    runs = ["--study", "cap", "--runs", str(root / "runs")]
    subprocess.run(
        [sys.executable, "-m", "sweep", "run", "--space", str(root / "study.yaml"), *runs],
        capture_output=True,
        check=True,
    )
    report = subprocess.run(
        [sys.executable, "-m", "sweep", "report", *runs, "--json"], capture_output=True, text=True, check=True
    )
    found: dict[str, Any] = json.loads(report.stdout)["recommendations"][0]
    return found


def config_name(params: dict[str, Any]) -> str:
    """The `CONFIGS` name of a recommendation's parameters."""
    steps = params.get("speculative-num-steps")
    if params.get("speculative-algorithm") in (None, "none") or not steps:
        return "baseline"
    return f"NEXTN {steps} steps"


def measure(the_space: Space, root: Path, params: dict[str, Any]) -> tuple[TrialRecord, float]:
    engine = build_engine(the_space)
    validate(the_space, engine)
    runner = TrialRunner(the_space, engine, StudyPaths.for_study("bench", root / "runs", None))
    started = time.monotonic()
    record = runner.run(
        TrialRecord(0, {**dict(the_space.fixed), **params}), lambda _m: None, trial_dir=root / "t"
    )
    if record.failed:
        raise SystemExit(f"launch failed: {record.failure}")
    return record, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", type=int, default=16, help="rates in the grid (log-spaced over the range)")
    parser.add_argument("--steps", type=int, default=5, help="bisection steps after both ends")
    parser.add_argument("--requests", type=int, default=5, help="requests per run of the search")
    parser.add_argument(
        "--recommend",
        action="store_true",
        help="then a capacity study with its confirmation: score what the report says to run against the grid",
    )
    args = parser.parse_args()
    low, high = RANGE
    rates = [low * (high / low) ** (i / (args.grid - 1)) for i in range(args.grid)]
    base = {"class": "prose", "requests": args.requests, "arrivals": "constant"}
    print(
        f"profile {HELD_OUT.name}, the knee at 8 tokens, verify past it x10; limit {LIMIT}; range {low:g}-{high:g} req/s (wall)"
    )
    print(
        f"{'configuration':<15} {'grid':>8} {'search':>8} {'bracket':>13} {'ratio':>6} {'grid runs':>10} "
        f"{'search runs':>12} {'grid s':>7} {'search s':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        profile = root / "held-out.yaml"
        text = re.sub(r"verify_knee_tokens: \d+", "verify_knee_tokens: 8", HELD_OUT.read_text())
        profile.write_text(re.sub(r"per_verify_token_ms: [\d.]+", "per_verify_token_ms: 4.0", text))
        grids: dict[str, float] = {}
        for name, params in CONFIGS.items():
            held, grid_s = [], 0.0
            for rate in rates:
                at = space(root, profile, {**base, "rate": [rate]}, None, repeats=3)
                record, took = measure(at, root, params)
                grid_s += took
                (summary,) = record.workloads.values()
                held.append(
                    rate
                    if summary.status == "ok" and all(v <= 0 for v in summary.over_limits(LIMIT).values())
                    else 0.0
                )
            # The highest rate held with every lower one held too, and the grid's next rate (where it failed).
            grid = max((r for i, r in enumerate(held) if r and all(held[: i + 1])), default=0.0)
            grids[name] = grid
            grid_next = next((r for r in rates if r > grid), grid)
            record, search_s = measure(
                space(root, profile, {**base, "rate": [low, high]}, args.steps), root, params
            )
            found = record.workloads["prose/capacity"]
            value = found.capacity_rps.median if found.capacity_rps else 0.0
            # The search's bracket: what held, and the lowest rate above it that did not (the truth lies between;
            # it agrees with the grid when the two brackets overlap).
            over = min(
                (st.rate for st in found.capacity_steps if not st.held and st.rate > value), default=value
            )
            agrees = "" if value < grid_next and grid < over else " (no overlap)"
            runs = sum(st.requests for st in found.capacity_steps) // args.requests
            ratio = f"{value / grid:.2f}" if grid else "-"
            print(
                f"{name:<15} {grid:>8.3g} {value:>8.3g} {f'{value:.3g}-{over:.3g}':>13} {ratio:>6} "
                f"{len(rates):>4} in {len(rates):>2} {runs:>6} in 1 {grid_s:>7.1f} "
                f"{search_s:>9.1f}{agrees}"
            )
        if args.recommend:
            rec = recommended(root, profile, {**base, "rate": [low, high]}, args.steps)
            name = config_name(rec["recommended_params"])
            best = max(grids, key=lambda n: grids[n])
            withheld = rec.get("withheld")
            print(
                f"recommendation: {name} ({rec['recommended_configuration']}), {grids[name]:.3g} req/s on the grid "
                f"= {grids[name] / grids[best]:.2f} of the best ({best}, {grids[best]:.3g}); confirmed "
                f"{config_name(rec['params'])} {rec['verdict']} {rec['gain']:+.0%}"
                + (
                    f"; withheld: {withheld['veto']}: {withheld['evidence']}"
                    if withheld
                    else f"; {rec['why']}"
                )
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
