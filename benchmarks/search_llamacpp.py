"""On the real llama-server (Gemma 3 270M, CPU): an exhaustive grid of 16 n-gram configurations against 8-launch
searches (`model` and `tpe`), each a real `specsweep run`.

    .venv/bin/python benchmarks/search_llamacpp.py [--seeds 1]

The grid is measured first (every configuration once: the model search exhausts a space this small). A search's
pick for a workload is the configuration its own measurements call fastest; it is scored by the grid's
measurement of that configuration against the grid's best (the same launch conditions, so the score says
whether the search found the right configuration, not whether its launch was lucky). Run alone: on 2 cores
anything else running moves the numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna

from sweep.results import TrialRecord
from sweep.search import launch_key
from sweep.study import search_records

SPACE = """
engine: llamacpp
server: {binary: embedded, model: embedded, startup_timeout: 120}
fixed: {ctx-size: 4096, parallel: 1, threads: 2}
params:
  spec-type: {choices: [ngram-simple, ngram-map-k, ngram-mod]}
  spec-ngram-simple-size-n: {choices: [3, 6, 12], when: {spec-type: ngram-simple}}
  spec-ngram-simple-size-m: {choices: [16, 48], when: {spec-type: ngram-simple}}
  spec-ngram-map-k-size-n: {choices: [3, 6, 12], when: {spec-type: ngram-map-k}}
  spec-ngram-map-k-size-m: {choices: [16, 48], when: {spec-type: ngram-map-k}}
  spec-ngram-mod-n-min: {choices: [8, 16, 32, 48], when: {spec-type: ngram-mod}}
workloads: [{class: code}, {class: tool}, {class: prose}]
probe: {repeats: 2, max_tokens: 64}
confirm: {launches: 0}
"""
KEYS = ("code", "tool", "prose")


def sweep(folder: Path, trials: int, search: str, seed: int) -> tuple[list[TrialRecord], float]:
    (folder / "space.yaml").write_text(SPACE + f"trials: {trials}\nsearch: {search}\nseed: {seed}\n")
    argv = [
        sys.executable,
        "-m",
        "sweep",
        "run",
        "--space",
        str(folder / "space.yaml"),
        "--study",
        "b",
        "--runs",
        str(folder / "runs"),
        "--no-confirm",
    ]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    study = optuna.load_study(study_name="b", storage=f"sqlite:///{folder / 'runs' / 'b' / 'study.db'}")
    return [r for r in search_records(study) if not r.failed and r.workloads], wall


def tps(record: TrialRecord, key: str) -> float:
    summary = record.workloads.get(key)
    return summary.decode_tps.median if summary and summary.decode_tps else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--launches", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "grid").mkdir()
        grid, grid_wall = sweep(Path(tmp) / "grid", 17, "model", 0)
        by_key = {launch_key(r.params): r for r in grid}
        best = {k: max(grid, key=lambda r, k=k: tps(r, k)) for k in KEYS}
        print(f"grid: {len(grid)} launches (baseline included), {grid_wall:.0f} s")
        for key in KEYS:
            print(f"  {key}: best {tps(best[key], key):.1f} t/s ({json.dumps(best[key].params)})")
        print(
            "\n| search | seed | launches | wall (share of grid) | "
            + " | ".join(f"{k} found" for k in KEYS)
            + " |"
        )
        print("|---|---|---|---|" + "---|" * len(KEYS))
        worst: dict[str, float] = {}
        picked: list[str] = []
        for search in ("model", "tpe"):
            for seed in range(args.seeds):
                folder = Path(tmp) / f"{search}-{seed}"
                folder.mkdir()
                found, wall = sweep(folder, args.launches, search, seed + 1)
                cells, picks = [], []
                for key in KEYS:
                    pick = max(found, key=lambda r, k=key: tps(r, k))
                    in_grid = by_key.get(launch_key(pick.params))
                    share = tps(in_grid, key) / tps(best[key], key) if in_grid else float("nan")
                    worst[search] = min(worst.get(search, 1.0), share)
                    cells.append(f"{share:.1%}")
                    swept = {k: v for k, v in pick.params.items() if k.startswith("spec-")}
                    picks.append(f"{key}: {' '.join(str(v) for v in swept.values())}")
                print(
                    f"| {search} | {seed} | {len(found)} | {wall:.0f} s ({wall / grid_wall:.0%}) | "
                    + " | ".join(cells)
                    + " |"
                )
                picked.append(f"{search} seed {seed} picks: " + "; ".join(picks))
        print("\n" + "\n".join(picked))
        print("\nworst share of the grid's best: " + ", ".join(f"{k} {v:.1%}" for k, v in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
