"""On the real llama-server (Gemma 3 270M, CPU): an exhaustive grid of 16 n-gram configurations against 8-launch
searches (`model` and `tpe`), each a real `specsweep run`.

    .venv/bin/python benchmarks/search_llamacpp.py [--seeds 1] [--replays 200] [--grids FILE]

On this CPU one launch of a configuration differs from the next by several per cent, as much as many gaps
between configurations, so a single grid's best is partly luck (its winner is often a lucky launch). The grid
is therefore measured twice, and a configuration's speed is the geometric mean of its two launches (the
"truth"). Reported, per workload, as a share of the truth's best:

- the grid's own ceiling: what one exhaustive grid (one launch each) picks, scored by the truth;
- replays: the driver's order (baseline, covering start-up trials, the search's picks) replayed `--replays`
  times per search against launches drawn from the truth with the launch-to-launch noise the two grids
  measured (cheap, so the search's policy is judged over many draws, not one); "resampled": the same, each
  launch one of the grids' own two launches of the configuration at random (every number as a real server
  measured it: acceptance, drafted tokens, the requests' spread);
- real searches: `--seeds` real `specsweep run` sweeps per search kind, their picks scored by the truth, and
  their wall time against the grid's;
- "confirmed pair": the better (by the truth) of the two the confirmation would launch again (the fastest
  measured and the model's favourite), as `benchmarks/search_vs_grid.py` scores it.

`--grids FILE` keeps both grids' records in FILE (measured once, reused by later runs). Run alone: on 2 cores
anything else running moves the numbers.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
import yaml
from replay import confirmed_pair, drive, measured_tps, pick, quantiles

from sweep.engines import Engine
from sweep.records import Spread, TrialRecord, WorkloadSummary
from sweep.run.preflight import build_engine
from sweep.search import ModelSearch, candidates, launch_key
from sweep.space import SearchKind, parse_space
from sweep.storage import search_records

optuna.logging.set_verbosity(optuna.logging.ERROR)

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
    folder.mkdir(parents=True)
    (folder / "space.yaml").write_text(SPACE + f"trials: {trials}\nsearch: {search}\nseed: {seed}\n")
    argv = [sys.executable, "-m", "sweep", "run", "--space", str(folder / "space.yaml")]
    argv += ["--study", "b", "--runs", str(folder / "runs"), "--no-confirm"]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    study = optuna.load_study(study_name="b", storage=f"sqlite:///{folder / 'runs' / 'b' / 'study.db'}")
    return [r for r in search_records(study) if not r.failed and r.workloads], wall


def measure_grids(cache: Path | None, tmp: Path) -> tuple[list[list[TrialRecord]], float]:
    """Two exhaustive grids (every configuration once each), from `cache` when it holds them."""
    if cache and cache.is_file():
        data = json.loads(cache.read_text())
        return [[TrialRecord.from_dict(r) for r in grid] for grid in data["grids"]], data["wall"]
    grids, walls = [], []
    for n in range(2):
        records, wall = sweep(tmp / f"grid-{n}", 17, "model", n)
        grids.append(records)
        walls.append(wall)
    if cache:
        cache.write_text(
            json.dumps({"grids": [[r.to_dict() for r in g] for g in grids], "wall": statistics.mean(walls)})
        )
    return grids, statistics.mean(walls)


class Truth:
    """Each configuration's speed: the geometric mean of its launches in the grids; and the launch-to-launch
    noise the grids measured, to draw replayed launches from."""

    def __init__(self, grids: list[list[TrialRecord]], repeats: int, engine: Engine) -> None:
        self.repeats = repeats
        self.engine = engine  # the shape is the engine's reading today (the grids may be older)
        by_config: dict[str, list[TrialRecord]] = {}
        for grid in grids:
            for record in grid:
                by_config.setdefault(launch_key(record.params), []).append(record)
        self.records = by_config
        self.tps = {
            config: {
                k: math.exp(statistics.mean(math.log(measured_tps(r, k) or 1e-9) for r in rs)) for k in KEYS
            }
            for config, rs in by_config.items()
        }
        self.noise = {
            k: statistics.mean(
                abs(math.log((measured_tps(rs[0], k) or 1e-9) / (measured_tps(rs[1], k) or 1e-9)))
                / math.sqrt(2)
                for rs in by_config.values()
                if len(rs) > 1
            )
            * math.sqrt(math.pi / 2)  # mean |x| of a normal is sd x sqrt(2/pi)
            for k in KEYS
        }

    def best(self, key: str) -> float:
        return max(t[key] for t in self.tps.values())

    def share(self, record: TrialRecord, key: str) -> float:
        return self.tps[launch_key(record.params)][key] / self.best(key)

    def relaunch(self, number: int, params: dict[str, Any], rng: random.Random) -> TrialRecord:
        """One of the grids' own launches of the configuration, at random: every number a real server measured
        (acceptance, drafted tokens, the requests' spread), not drawn; the shape as the engine reads it today
        (the grids may have recorded an older reading)."""
        measured = rng.choice(self.records[launch_key(params)])
        return dataclasses.replace(
            measured, number=number, params=params, shape=self.engine.spec_shape(params)
        )

    def launch(self, number: int, params: dict[str, Any], rng: random.Random) -> TrialRecord:
        """A drawn launch: the truth, with a launch's noise, over the probe's repeats (acceptance as measured)."""
        config = launch_key(params)
        measured = self.records[config][0]
        record = TrialRecord(number, params, shape=self.engine.spec_shape(params))
        for key in KEYS:
            drift = math.exp(rng.gauss(0, self.noise[key]))
            values = tuple(self.tps[config][key] * drift for _ in range(self.repeats))
            was = measured.workloads[key]
            record.workloads[key] = WorkloadSummary(
                key,
                "ok",
                decode_tps=Spread(values[0], values[0], values[0], self.repeats, values),
                acceptance_length=was.acceptance_length,
            )
        return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=1, help="real sweeps per search kind")
    parser.add_argument("--replays", type=int, default=200, help="replayed searches per search kind")
    parser.add_argument("--launches", type=int, default=8)
    parser.add_argument("--grids", type=Path, help="keep (or reuse) the two grids' records in this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        grids, grid_wall = measure_grids(args.grids, tmp)
        space = parse_space(yaml.safe_load(SPACE + f"trials: {args.launches}\n"), tmp)
        engine = build_engine(space)
        engine.prepare()
        pool = candidates(space, engine)
        truth = Truth(grids, space.probe.repeats, engine)
        print(
            f"grid: {len(pool.items)} configurations + baseline, measured twice; one grid {grid_wall:.0f} s"
        )
        print("launch-to-launch noise: " + ", ".join(f"{k} {truth.noise[k]:.1%}" for k in KEYS))
        for key in KEYS:
            top = max(truth.tps, key=lambda c, k=key: truth.tps[c][k])  # type: ignore[misc]
            swept = {n: v for n, v in json.loads(top).items() if n.startswith("spec-")}
            print(f"  {key}: best {truth.best(key):.1f} t/s {swept}")
        print("\n| who | launches | " + " | ".join(f"{k}: min / p10 / median" for k in KEYS) + " |")
        print("|---|---|" + "---|" * len(KEYS))
        ceiling = {k: [truth.share(pick(g, k), k) for g in grids] for k in KEYS}
        print(
            f"| one grid (ceiling) | {len(grids[0])} | "
            + " | ".join(quantiles(ceiling[k]) for k in KEYS)
            + " |"
        )
        worst: dict[str, float] = {}
        replays = {"replayed": truth.launch, "resampled": truth.relaunch}
        for kind, (how, launch) in itertools.product(SearchKind, replays.items()):
            shares: dict[str, list[float]] = {k: [] for k in KEYS}
            pairs: dict[str, list[float]] = {k: [] for k in KEYS}
            for seed in range(args.replays):
                records = drive(kind, space, engine, pool.items, args.launches, seed, launch)
                favoured = ModelSearch(space, pool).favourites(records) if kind is SearchKind.MODEL else {}
                for key in KEYS:
                    shares[key].append(truth.share(pick(records, key), key))
                    pairs[key].append(
                        max(truth.share(r, key) for r in confirmed_pair(records, key, favoured))
                    )
            for who, values in ((how, shares), (f"{how}, confirmed pair", pairs)):
                print(
                    f"| {kind.value}, {who} x{args.replays} | {args.launches} | "
                    + " | ".join(quantiles(values[k]) for k in KEYS)
                    + " |"
                )
            worst[f"{kind.value} {how} p10"] = min(
                sorted(v)[int(0.1 * (len(v) - 1))] for v in shares.values()
            )
        walls: dict[str, list[float]] = {}
        for kind in SearchKind:
            for seed in range(args.seeds):
                found, wall = sweep(tmp / f"{kind.value}-{seed}", args.launches, kind.value, seed + 1)
                walls.setdefault(kind.value, []).append(wall)
                favoured = ModelSearch(space, pool).favourites(found) if kind is SearchKind.MODEL else {}
                cells = [
                    f"{truth.share(pick(found, k), k):.1%}, pair "
                    f"{max(truth.share(r, k) for r in confirmed_pair(found, k, favoured)):.1%}"
                    for k in KEYS
                ]
                print(f"| {kind.value}, real sweep seed {seed} | {len(found)} | " + " | ".join(cells) + " |")
                worst[f"{kind.value} real"] = min(
                    [worst.get(f"{kind.value} real", 1.0)] + [truth.share(pick(found, k), k) for k in KEYS]
                )
        for kind_name, values in walls.items():
            wall = statistics.median(values)
            print(f"{kind_name}: search wall {wall:.0f} s = {wall / grid_wall:.0%} of one grid's")
        print("\nworst share of the truth's best: " + ", ".join(f"{k} {v:.1%}" for k, v in worst.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
