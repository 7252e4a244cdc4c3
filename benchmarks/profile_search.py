"""A new workload on a profiled machine: how many launches reach 98% of the grid's best, with a cost profile and
without one (today's model search, and TPE).

    .venv/bin/python benchmarks/profile_search.py [--seeds 5] [--perturbed] [--launches 42]

The simulator's performance model is the truth (`search_vs_grid.Truth`: the same space of 209 launchable NEXTN
configurations over five workloads, launches drawn with the profile's launch drift and request noise). The
cost profile is measured as `specsweep profile` measures it, on that truth: per method up to 6 shapes spread
over depth, budget and width, each at forced lengths a quarter and three quarters of its reach, the baseline
before and after, every launch with its own drift and noise. With the profile the driver runs as `specsweep run
--profile` does: the baseline, each method's deepest chain and widest tree, then the model's picks until it is
confident. Without, it runs today's order for `--launches`. Printed per profile and workload: the launches after
which the fastest measured configuration is, and stays, at 98% of the grid's best true t/s or more ("-": never
within the launches), and for the profiled search where it stopped and the true share of the better of the
pair the confirmation launches again.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import statistics
import sys
import tempfile
import warnings
from pathlib import Path

import optuna
import yaml
from replay import confirmed_pair, drive, ranked
from search_vs_grid import PROFILE_FILES, SPACE, Truth, perturbed_profiles

from sweep.costs import CostProfile, ProfileKey, StepTime
from sweep.engines import ServerSetup, SGLangEngine
from sweep.profiling import forced_lengths, spread_shapes
from sweep.results import TrialRecord
from sweep.search import Candidate, Candidates, ModelSearch, acceptance_launches, candidates
from sweep.sim.profile import PROFILES, Profile
from sweep.space import SearchKind, Space, parse_space

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
optuna.logging.set_verbosity(optuna.logging.ERROR)
SHARE = 0.98


def measure_profile(truth: Truth, space: Space, pool: list[Candidate], rng: random.Random) -> CostProfile:
    """What `specsweep profile --shapes 6` would measure on the truth: forced launches' step times against the
    baseline's, each launch with its own drift and every workload with its requests' noise."""
    p = truth.profile

    def drawn(seconds: float) -> float:
        return seconds * math.exp(rng.gauss(0, p.launch_drift) + rng.gauss(0, p.request_noise))

    baseline = truth.engine.derive(space.launch_params(truth.engine.baseline_params()))
    steps = []
    for c in spread_shapes(pool, 6):
        assert c.shape is not None
        if not truth.starts(c.params):
            continue  # a forced launch that does not start measures no step
        for length in forced_lengths(c.shape, (0.25, 0.75)):
            for w in space.workloads:
                step_s = drawn(truth.model(c.params, w.key).mean_step_seconds(w.streams))
                base_s = statistics.geometric_mean(
                    drawn(truth.model(baseline, w.key).mean_step_seconds(w.streams)) for _ in range(2)
                )
                steps.append(
                    StepTime(
                        w.key,
                        w.streams,
                        float(w.context_tokens or 300),
                        c.shape,
                        length,
                        length,
                        length / step_s,
                        1 / base_s,
                    )
                )
    key = ProfileKey("sglang", "", "", "")
    return CostProfile(key, tuple(steps), 2 + len(steps) // len(space.workloads))


def profiled_search(
    truth: Truth, space: Space, pool: list[Candidate], costs: CostProfile, seed: int, cap: int
) -> list[TrialRecord]:
    """`specsweep run --profile`: the baseline, the acceptance launches, then the model until it is confident."""
    rng = random.Random(seed)
    engine = truth.engine
    records = [truth.launch(0, engine.derive(space.launch_params(engine.baseline_params())), rng)]
    for c in acceptance_launches(pool):
        records.append(truth.launch(len(records), c.params, rng))
    search = ModelSearch(space, Candidates(pool, len(pool), 0, 0, 0), costs)
    while len(records) < cap and search.unconfident(records):
        proposal = search.propose(records)
        if proposal is None:
            break
        records.append(truth.launch(len(records), proposal.candidate.params, rng))
    return records


def reached(records: list[TrialRecord], key: str, truth: Truth, best: float) -> int | None:
    """The launches after which the fastest measured stays at SHARE of the best or more (None: never)."""
    at = None
    for n in range(1, len(records) + 1):
        measured = ranked(records[:n], key)
        good = bool(measured) and truth.tps(measured[0].params, key) >= SHARE * best
        at = (at or n) if good else None
    return at


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--launches", type=int, default=42, help="launches of the searches without a profile")
    parser.add_argument("--perturbed", action="store_true", help="the profiles the search was not tuned on")
    args = parser.parse_args()
    space = parse_space(yaml.safe_load(SPACE.replace("{python}", sys.executable)), Path("."))
    engine = SGLangEngine(ServerSetup([sys.executable, "-m", "sweep.sim"], "/models/m"))
    engine.prepare()
    pool = candidates(space, engine)
    methods = len(acceptance_launches(pool.items))
    print(
        f"grid: {len(pool.items)} launchable configurations; each workload tuned on its own as a new one: with a "
        f"profile 1 baseline + {methods} acceptance launches, then the model's picks until confident (at most "
        f"{args.launches}); without, {args.launches} launches"
    )
    written = tempfile.TemporaryDirectory()
    names = (
        perturbed_profiles(Path(written.name))
        if args.perturbed
        else [str(PROFILES / f) for f in PROFILE_FILES]
    )
    reach: dict[str, list[float]] = {"profile": [], "model": [], "tpe": []}
    stops: list[int] = []
    pairs: list[float] = []
    for name in names:
        truth = Truth(Profile.load(Path(name)), engine, space)
        baseline = engine.derive(space.launch_params(engine.baseline_params()))
        print(f"\n{Path(name).stem}\n")
        print(
            "| workload | grid best t/s | with a profile: stopped after / its confirmed pair / reached 98% at "
            "| model: reached at | tpe: reached at |"
        )
        print("|---|---|---|---|---|")
        costs = [
            measure_profile(truth, space, pool.items, random.Random(1000 + s)) for s in range(args.seeds)
        ]
        for w in space.workloads:
            alone = dataclasses.replace(space, workloads=(w,))
            key = w.key
            best = max(truth.tps(baseline, key), *(truth.tps(c.params, key) for c in pool.items))
            cells: list[list[str]] = [[], [], []]
            for seed in range(args.seeds):
                runs = {
                    "profile": profiled_search(truth, alone, pool.items, costs[seed], seed, args.launches),
                    "model": drive(
                        SearchKind.MODEL, alone, engine, pool.items, args.launches, seed, truth.launch
                    ),
                    "tpe": drive(
                        SearchKind.TPE, alone, engine, pool.items, args.launches, seed, truth.launch
                    ),
                }
                favoured = ModelSearch(alone, pool, costs[seed]).favourites(runs["profile"])
                for i, (kind, records) in enumerate(runs.items()):
                    at = reached(records, key, truth, best)
                    reach[kind].append(at if at is not None else math.inf)
                    cell = str(at) if at is not None else "-"
                    if kind == "profile":
                        pair = max(truth.tps(r.params, key) for r in confirmed_pair(records, key, favoured))
                        stops.append(len(records))
                        pairs.append(pair / best)
                        cell = f"{len(records)} / {pair / best:.1%} / {cell}"
                    cells[i].append(cell)
            print(f"| {key} | {best:.1f} | " + " | ".join("; ".join(c) for c in cells) + " |")
    print()
    for kind, values in reach.items():
        finite = [v for v in values if math.isfinite(v)]
        print(
            f"{kind}: the fastest measured reached 98% of the grid's best in {len(finite)}/{len(values)} runs; "
            f"launches to reach it: median {statistics.median(finite):.0f}, worst {max(finite):.0f}"
        )
    print(
        f"with a profile: search launches before it stopped: median {statistics.median(stops):.0f}, most "
        f"{max(stops)}; the confirmed pair's true share of the grid's best: worst {min(pairs):.1%}, at 98% or "
        f"more in {sum(p >= SHARE for p in pairs)}/{len(pairs)} runs"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
