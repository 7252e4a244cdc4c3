"""Search against the exhaustive grid on the simulator: does `model` (or `tpe`) find each workload's optimum with
10% of the grid's launches?

    .venv/bin/python benchmarks/search_vs_grid.py [--seeds 5] [--fraction 0.1]     # drawn launches, fast
    .venv/bin/python benchmarks/search_vs_grid.py --launch [--seeds 1]              # real sim servers, `specsweep run`
    .venv/bin/python benchmarks/search_vs_grid.py --recommend --perturbed --seeds 1  # + confirmation: what to run

Every configuration's expected decode t/s per workload comes from the simulator's own performance model (the
numbers a sim server converges to), so the grid's optimum is exact. With `--launch`, each search is a real
`specsweep run` against simulated servers (HTTP, probes, the driver's covering trials, duplicates and failed
starts as they happen), and the wall time of the search is set against the grid's (its launches at the search's
measured time per launch). Without it, each search runs the driver's order
(baseline, the covering start-up trials, then its own picks) against launches drawn with the profile's noise
(launch drift, request noise over the probe's repeats), each pick costing one launch; duplicates after the
engine's derivation and infeasible points cost none, as in the sweep. Reported per profile and workload: the
true speed of the configuration the search's measurements call best, as a share of the grid's best.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import optuna
import yaml
from replay import confirmed_pair, drive, ranked

from sweep.engines import ServerSetup, SGLangEngine
from sweep.records import Spread, Stage, TrialRecord, WorkloadSummary
from sweep.search import ModelSearch, candidates, launch_key
from sweep.sim.flags import build_parser, normalize
from sweep.sim.model import StartupFailure, StepModel
from sweep.sim.profile import PROFILES, Profile
from sweep.sim.sglang import plan_memory, resolve
from sweep.space import SearchKind, Space, parse_space
from sweep.storage import search_records

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
optuna.logging.set_verbosity(optuna.logging.ERROR)

SPACE = """
engine: sglang
server: {launcher: ["{python}", -m, sweep.sim], model: /models/m}
fixed: {kv-cache-dtype: fp8_e4m3}
params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {int: [1, 8]}
  speculative-eagle-topk: {choices: [1, 2, 4]}
  speculative-num-draft-tokens: {int: [2, 16], when: {speculative-eagle-topk: [2, 4]}}
workloads:
  - {class: code}
  - {class: tool}
  - {class: prose}
  - {class: code, name: code-long, context: [32768]}
  - {class: prose, name: prose-4, streams: [4]}
probe: {repeats: 3}
confirm: {launches: 0}
trials: 24
"""
PROFILE_FILES = ("qwen3.8-27b-int4-32gb.yaml", "report004-3090-24gb.yaml", "small-draft-24gb.yaml")
# Profiles the search was not tuned on (`--perturbed`): each a shipped profile with its optima moved.
PERTURBED: dict[str, tuple[str, dict[str, dict[str, float]]]] = {
    # A compute-bound GPU: verification costs from the fourth token on, so chains stay shallow.
    "knee4": (
        "small-draft-24gb.yaml",
        {
            "speed": {"verify_knee_tokens": 4, "per_verify_token_ms": 1.5},
            "acceptance": {"code": 0.8, "tool": 0.85, "prose": 0.6},
        },
    ),
    # Trees that hardly pay (tree gain 0.1) and a draft that guesses prose well: deep chains everywhere.
    "notree": ("qwen3.8-27b-int4-32gb.yaml", {"acceptance": {"tree_gain": 0.1, "prose": 0.75}}),
    # Launches 5% apart (2.5x the field reports'), requests 4%.
    "noisy": ("qwen3.8-27b-int4-32gb.yaml", {"": {"launch_drift": 0.05, "request_noise": 0.04}}),
    # Drafting three times as slow and a weaker draft: gains of 5% at best on tool, losses on prose.
    "costly": (
        "small-draft-24gb.yaml",
        {"speed": {"per_draft_ms": 9.0}, "acceptance": {"tool": 0.5, "prose": 0.3, "code": 0.75}},
    ),
}
LAUNCHES_RECOMMEND = 8  # search launches of a `--recommend` sweep (the confirmation's come on top)
CLASS_OF = {
    "code": "code",
    "tool": "tool",
    "prose": "prose",
    "code-long@32k": "code",
    "prose-4/4streams": "prose",
}


class Truth:
    """Expected decode t/s and acceptance length of a configuration on each workload, from the sim's model."""

    def __init__(self, profile: Profile, engine: SGLangEngine, space: Space) -> None:
        self.profile, self.engine, self.space = profile, engine, space
        self.parser = build_parser(profile.sglang_version)

    def model(self, params: dict[str, Any], workload: str) -> StepModel:
        argv = self.engine.argv(params, 1)[len(self.engine.setup.launcher) :]
        known, _ = self.parser.parse_known_args(argv)
        args = normalize(known)
        w = next(w for w in self.space.workloads if w.key == workload)
        resolved = resolve(args, self.profile)
        plan_memory(resolved, args, self.profile)  # raises StartupFailure where the server would not start
        return StepModel(self.profile, resolved, CLASS_OF[workload], w.context_tokens or 300)

    def starts(self, params: dict[str, Any]) -> bool:
        try:
            self.model(params, self.space.workloads[0].key)
        except StartupFailure:
            return False
        return True

    def tps(self, params: dict[str, Any], workload: str) -> float:
        if not self.starts(params):
            return 0.0
        streams = next(w.streams for w in self.space.workloads if w.key == workload)
        return self.model(params, workload).expected_tps(streams)

    def launch(self, number: int, params: dict[str, Any], rng: random.Random) -> TrialRecord:
        """One launch: every workload's median over the probe's requests, with this launch's drift."""
        drift = math.exp(rng.gauss(0, self.profile.launch_drift))
        record = TrialRecord(number, params, shape=self.engine.spec_shape(params))
        if not self.starts(params):
            record.failure, record.stage = "the server exits at start", Stage.LAUNCH
            return record
        repeats = self.space.probe.repeats
        for w in self.space.workloads:
            model, true = self.model(params, w.key), self.tps(params, w.key)
            values = tuple(
                true * drift * math.exp(rng.gauss(0, self.profile.request_noise)) for _ in range(repeats)
            )
            length = model.expected_accept_length()
            record.workloads[w.key] = WorkloadSummary(
                w.key,
                "ok",
                decode_tps=Spread(statistics.median(values), min(values), max(values), repeats, values),
                acceptance_length=Spread(length, length, length, 1, (length,))
                if params.get("speculative-algorithm") != "none"
                else None,
            )
        return record


def sweep_on_sim(text: str, folder: Path, *options: str) -> tuple[list[str], float]:
    """`specsweep run` of a space's text on simulated servers in `folder`: its study options (for other commands
    on it) and its wall time."""
    (folder / "space.yaml").write_text(text)
    runs = ["--study", "b", "--runs", str(folder / "runs")]
    argv = [sys.executable, "-m", "sweep", "run", "--space", str(folder / "space.yaml"), *runs, *options]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-2000:])
    return runs, time.monotonic() - started


def run_launched(kind: SearchKind, profile: str, launches: int, seed: int) -> tuple[list[TrialRecord], float]:
    """A real sweep on simulated servers: the records it measured and its wall time."""
    with tempfile.TemporaryDirectory() as tmp:
        text = SPACE.replace(
            'launcher: ["{python}", -m, sweep.sim]',
            f'launcher: ["{{python}}", -m, sweep.sim, --sim-time-scale, "0.05", --sim-profile, "{PROFILES / profile}"]',
        )
        text = text.replace("trials: 24", f"trials: {launches}\nsearch: {kind.value}\nseed: {seed}")
        _, wall = sweep_on_sim(text, Path(tmp), "--no-confirm")
        study = optuna.load_study(
            study_name="b", storage=f"sqlite:///{Path(tmp) / 'runs' / 'b' / 'study.db'}"
        )
        return search_records(study), wall


# `--recommend`: one sweep per class (tool included) with its confirmation, scored by what the report says to run.
RECOMMEND_SPACE_CHANGES = {
    "workloads:\n  - {class: code}\n  - {class: tool}\n  - {class: prose}\n"
    "  - {class: code, name: code-long, context: [32768]}\n  - {class: prose, name: prose-4, streams: [4]}\n": (
        "workloads:\n  - {class: code}\n  - {class: tool}\n  - {class: prose}\n"
    ),
    "confirm: {launches: 0}": "confirm: {launches: 3, top: 1}",
}


def run_recommended(profile: str, launches: int, seed: int) -> tuple[dict[str, Any], float]:
    """A real sweep on simulated servers with its confirmation, and `specsweep report --json` on it: what the
    report recommends (and withholds) per workload, and the wall time of the whole study."""
    with tempfile.TemporaryDirectory() as tmp:
        text = recommend_space().replace(
            'launcher: ["{python}", -m, sweep.sim]',
            f'launcher: ["{{python}}", -m, sweep.sim, --sim-time-scale, "0.05", --sim-profile, "{profile}"]',
        )
        runs, wall = sweep_on_sim(text.replace("trials: 24", f"trials: {launches}\nseed: {seed}"), Path(tmp))
        return report_json(runs), wall


def report_json(runs: list[str]) -> dict[str, Any]:
    """`specsweep report --json` on the study `runs` names (`sweep_on_sim`'s study options)."""
    report = subprocess.run(
        [sys.executable, "-m", "sweep", "report", *runs, "--json"], capture_output=True, text=True, check=True
    )
    found: dict[str, Any] = json.loads(report.stdout)
    return found


def score_recommendations(profiles: list[str], seeds: int, launches: int) -> None:
    """Per profile and workload class: the true speed of what the report says to run, and of the best it
    confirmed, as shares of the grid's best; which veto withheld a gain, and its evidence."""
    space = parse_space(yaml.safe_load(recommend_space().replace("{python}", sys.executable)), Path("."))
    engine = SGLangEngine(ServerSetup([sys.executable, "-m", "sweep.sim"], "/models/m"))
    engine.prepare()
    pool = candidates(space, engine)
    baseline = engine.derive(space.launch_params(engine.baseline_params()))
    print("| profile | workload | grid best t/s | recommended (share of grid best) | best confirmed | veto |")
    print("|---|---|---|---|---|---|")
    for name in profiles:
        truth = Truth(Profile.load(Path(name)), engine, space)
        for seed in range(seeds):
            report, wall = run_recommended(name, launches, seed)
            for rec in report["recommendations"]:
                key = rec["workload"]
                best = max(max(truth.tps(c.params, key) for c in pool.items), truth.tps(baseline, key))
                run = truth.tps(engine.derive(space.launch_params(rec["recommended_params"])), key) / best
                top = truth.tps(engine.derive(space.launch_params(rec["params"])), key) / best
                withheld = rec.get("withheld")
                veto = f"{withheld['veto']}: {withheld['evidence']}" if withheld else rec["why"][:90]
                print(
                    f"| {Path(name).stem} s{seed} | {key} | {best:.1f} | {run:.1%} ({rec['recommended_configuration']}) "
                    f"| {top:.1%} {rec['verdict']} | {veto} |"
                )
            print(f"<!-- {Path(name).stem} seed {seed}: {wall:.0f} s -->")


def recommend_space() -> str:
    text = SPACE
    for old, new in RECOMMEND_SPACE_CHANGES.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def perturbed_profiles(folder: Path) -> list[str]:
    """The `PERTURBED` profiles written into `folder`, as paths the benchmark loads like the shipped ones."""
    paths = []
    for name, (base, changes) in PERTURBED.items():
        data = yaml.safe_load((PROFILES / base).read_text())
        for section, values in changes.items():
            (data[section] if section else data).update(values)
        data["name"] = f"{data['name']}, perturbed: {name}"
        path = folder / f"{name}.yaml"
        path.write_text(yaml.safe_dump(data))
        paths.append(str(path))
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--fraction", type=float, default=0.10)
    parser.add_argument("--profiles", nargs="*", default=list(PROFILE_FILES))
    parser.add_argument(
        "--perturbed", action="store_true", help="four profiles with the optima moved instead (PERTURBED)"
    )
    parser.add_argument(
        "--launch", action="store_true", help="real `specsweep run` sweeps on simulated servers"
    )
    parser.add_argument(
        "--recommend",
        action="store_true",
        help="real sweeps with their confirmation (code, tool, prose): score what the report says to run",
    )
    args = parser.parse_args()
    if args.recommend:
        written = tempfile.TemporaryDirectory()
        names = (
            perturbed_profiles(Path(written.name))
            if args.perturbed
            else [str(PROFILES / p) for p in args.profiles]
        )
        score_recommendations(names, args.seeds, LAUNCHES_RECOMMEND)
        return 0
    space = parse_space(yaml.safe_load(SPACE.replace("{python}", sys.executable)), Path("."))
    engine = SGLangEngine(ServerSetup([sys.executable, "-m", "sweep.sim"], "/models/m"))
    engine.prepare()
    pool = candidates(space, engine)
    launches = max(2, round(len(pool.items) * args.fraction))
    print(
        f"grid: {pool.grid} points, {len(pool.items)} launchable ({pool.infeasible} infeasible, {pool.duplicates} duplicates); search: {launches} launches ({args.fraction:.0%})"
    )
    worst: dict[str, float] = {}
    written = tempfile.TemporaryDirectory()
    for name in perturbed_profiles(Path(written.name)) if args.perturbed else args.profiles:
        truth = Truth(Profile.load(PROFILES / name), engine, space)
        grid_best = {k: max(truth.tps(c.params, k) for c in pool.items) for k in space.objective_names}
        baseline = engine.derive(space.launch_params(engine.baseline_params()))
        print(f"\n{name}")
        print(
            "| workload | grid best t/s (config) | baseline | "
            + " | ".join(f"{k.value}: pick min / median, confirmed min" for k in SearchKind)
            + " |"
        )
        print("|---|---|---|" + "---|" * len(SearchKind))
        shares: dict[SearchKind, dict[str, list[float]]] = {
            k: {w: [] for w in space.objective_names} for k in SearchKind
        }
        confirmed: dict[SearchKind, dict[str, list[float]]] = {
            k: {w: [] for w in space.objective_names} for k in SearchKind
        }
        used: dict[SearchKind, list[int]] = {k: [] for k in SearchKind}
        walls: dict[SearchKind, list[float]] = {k: [] for k in SearchKind}
        extra = dict.fromkeys(SearchKind, 0)  # configurations the model's doubt adds to the confirmation
        for kind in SearchKind:
            for seed in range(args.seeds):
                if args.launch:
                    records, wall = run_launched(kind, name, launches, seed)
                    walls[kind].append(wall)
                    records = [r for r in records if r.stage != Stage.INFEASIBLE]
                else:
                    records = drive(kind, space, engine, pool.items, launches, seed, truth.launch)
                model = ModelSearch(space, pool) if kind is SearchKind.MODEL else None
                favoured = model.favourites(records) if model else {}
                pairs = {key: [r.params for r in confirmed_pair(records, key, favoured)] for key in grid_best}
                doubts = model.doubts(records, pairs) if model else {}
                for key in space.objective_names:
                    measured = ranked(records, key)
                    best_true = max(grid_best[key], truth.tps(baseline, key))
                    shares[kind][key].append(truth.tps(measured[0].params, key) / best_true)
                    # The confirmation launches two again, interleaved, and keeps the faster; with the model, also
                    # the best of another width where it cannot rank that below them (`ModelSearch.doubts`).
                    again = pairs[key] + [d.candidate.params for d in doubts.get(key, [])]
                    confirmed[kind][key].append(max(truth.tps(p, key) for p in again) / best_true)
                    used[kind].append(len(records))
                extra[kind] += len({launch_key(d.candidate.params) for ds in doubts.values() for d in ds})
        for key in space.objective_names:
            top = max(pool.items, key=lambda c: truth.tps(c.params, key))
            shape = top.shape
            where = f"s{shape.depth} k{shape.width} d{shape.budget + 1}" if shape else "-"
            cells = []
            for kind in SearchKind:
                values, top2 = shares[kind][key], confirmed[kind][key]
                worst[kind.value] = min(worst.get(kind.value, 1.0), min(values))
                worst[f"{kind.value} confirmed"] = min(worst.get(f"{kind.value} confirmed", 1.0), min(top2))
                cells.append(f"{min(values):.1%} / {statistics.median(values):.1%}, {min(top2):.1%}")
            print(
                f"| {key} | {grid_best[key]:.1f} ({where}) | {truth.tps(baseline, key):.1f} | "
                + " | ".join(cells)
                + " |"
            )
        print(
            "launches per search (baseline and start-up included): "
            + ", ".join(f"{k.value} {max(v)}" for k, v in used.items())
            + f"; the model's doubt added {extra[SearchKind.MODEL] / args.seeds:.1f} "
            "configurations a study to its confirmation"
        )
        for kind, values in walls.items():
            if values:
                wall = statistics.median(values)
                grid_wall = (len(pool.items) + 1) * wall / launches  # every configuration once, same pace
                print(
                    f"{kind.value}: search wall time {wall:.0f} s; the grid at the same time per launch "
                    f"{grid_wall:.0f} s ({wall / grid_wall:.0%})"
                )
    print(
        "\nworst share of the grid's best over every profile, workload and seed: "
        + ", ".join(f"{k} {v:.1%}" for k, v in worst.items())
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
