"""A new workload on a profiled machine: how many launches it takes and how near the grid's best its confirmed
configuration is, with a cost profile; without one, how many launches today's model search and TPE need to reach
98% of the grid's best.

    .venv/bin/python benchmarks/profile_search.py [--seeds 5] [--perturbed] [--top 2] [--no-baselines]

The simulator's performance model is the truth (`search_vs_grid.Truth`: the same space of 209 launchable NEXTN
configurations over five workloads, launches drawn with the profile's launch drift and request noise). The
cost profile is measured as `specsweep profile` measures it, on that truth: per method up to 6 shapes spread
over depth, budget and width, each at forced lengths a quarter and three quarters of its reach, the baseline
before and after, every launch with its own drift and noise, and which shapes started. With the profile the
driver runs as `specsweep run --profile` does: the baseline, each method's acceptance launch (a shallower chain
where the deepest does not start), then the confirmation of the model's `--top` picks per workload
(`ModelSearch.picks`: and one of another width where the step times cannot rank it) and its one-for-all pick, 3 launches each with the baseline's. Printed per profile and
workload: with a profile, search + confirmation launches and the true share of the best configuration the
confirmation launched; without, the launches after which the fastest measured configuration is, and stays, at
98% of the grid's best true t/s or more ("-": never within `--launches`).
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
from typing import Any

import optuna
import yaml
from replay import drive, ranked
from search_vs_grid import PROFILE_FILES, SPACE, Truth, perturbed_profiles

from sweep.core.stats import MIN_GAIN
from sweep.engines import ServerSetup, SGLangEngine
from sweep.records import TrialRecord
from sweep.run.profiling import forced_lengths, spread_shapes
from sweep.search import Candidate, Candidates, ModelSearch, acceptance_launches, candidates
from sweep.search.costs import CostProfile, ProfileKey, ShapeStart, StepTime
from sweep.sim.profile import PROFILES, Profile
from sweep.space import ConfirmSettings, SearchKind, Space, parse_space

warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
optuna.logging.set_verbosity(optuna.logging.ERROR)
SHARE = 0.98


def measure_profile(truth: Truth, space: Space, pool: list[Candidate], rng: random.Random) -> CostProfile:
    """What `specsweep profile --shapes 6` would measure on the truth: forced launches' step times against the
    baseline's, each launch with its own drift and every workload with its requests' noise, and which shapes'
    servers started."""
    p = truth.profile

    def drawn(seconds: float) -> float:
        return seconds * math.exp(rng.gauss(0, p.launch_drift) + rng.gauss(0, p.request_noise))

    baseline = truth.engine.derive(space.launch_params(truth.engine.baseline_params()))
    steps, starts = [], []
    for c in spread_shapes(pool, 6):
        assert c.shape is not None
        starts.append(ShapeStart(c.params, c.shape, truth.starts(c.params)))
        if not starts[-1].started:
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
    return CostProfile(key, tuple(steps), 2 + len(steps) // len(space.workloads), tuple(starts))


def profiled_search(
    truth: Truth, space: Space, pool: list[Candidate], costs: CostProfile, seed: int, cap: int
) -> list[TrialRecord]:
    """`specsweep run --profile`: the baseline, each method's acceptance (a shallower chain where the deepest
    does not start), then the model's picks among what the profile gives no step times for, until confident."""
    rng = random.Random(seed)
    engine = truth.engine
    records = [truth.launch(0, engine.derive(space.launch_params(engine.baseline_params())), rng)]
    search = ModelSearch(space, Candidates(pool, len(pool), 0, 0, 0), costs)
    while len(records) < cap and search.unconfident(records):
        proposal = search.propose(records)
        if proposal is None:
            break
        records.append(truth.launch(len(records), proposal.candidate.params, rng))
    return records


def confirmed(search: ModelSearch, records: list[TrialRecord], key: str, top: int) -> list[dict[str, Any]]:
    """What the confirmation launches on the workload besides the baseline (`confirm.predicted_plan`): the
    model's `top` picks and its one-for-all pick where it predicts a gain."""
    picks = search.picks(records, top)
    plan = [c.params for c in picks.per_workload[key]]
    overall = picks.overall
    if overall is not None and overall[0] >= MIN_GAIN and overall[1].params not in plan:
        plan.append(overall[1].params)
    return plan


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
    parser.add_argument("--top", type=int, default=ConfirmSettings().top, help="the space's confirm.top")
    parser.add_argument(
        "--no-baselines", action="store_true", help="leave out the searches without a profile"
    )
    args = parser.parse_args()
    space = parse_space(yaml.safe_load(SPACE.replace("{python}", sys.executable)), Path("."))
    engine = SGLangEngine(ServerSetup([sys.executable, "-m", "sweep.sim"], "/models/m"))
    engine.prepare()
    pool = candidates(space, engine)
    settings = ConfirmSettings(top=args.top)
    methods = len(acceptance_launches(pool.items))
    print(
        f"grid: {len(pool.items)} launchable configurations; each workload tuned on its own as a new one: with a "
        f"profile 1 baseline + {methods} acceptance launch(es) (more where the deepest chain does not start), then "
        f"the confirmation of the model's {settings.top} picks and the baseline, {settings.launches} launches each; "
        f"without, {args.launches} launches of today's model search and of TPE"
    )
    written = tempfile.TemporaryDirectory()
    names = (
        perturbed_profiles(Path(written.name))
        if args.perturbed
        else [str(PROFILES / f) for f in PROFILE_FILES]
    )
    reach: dict[str, list[float]] = {"model": [], "tpe": []}
    searched: list[int] = []
    totals: list[int] = []
    shares: list[float] = []
    for name in names:
        truth = Truth(Profile.load(Path(name)), engine, space)
        baseline = engine.derive(space.launch_params(engine.baseline_params()))
        print(f"\n{Path(name).stem}\n")
        print(
            "| workload | grid best t/s | with a profile: search + confirmation launches / the best confirmed "
            "configuration's true share | model: reached 98% at | tpe: reached 98% at |"
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
                records = profiled_search(truth, alone, pool.items, costs[seed], seed, args.launches)
                plan = confirmed(ModelSearch(alone, pool, costs[seed]), records, key, settings.top)
                # The confirmation keeps the faster of what it launched, the baseline included.
                share = max(truth.tps(p, key) for p in [baseline, *plan]) / best
                total = len(records) + (1 + len(plan)) * settings.launches
                searched.append(len(records))
                totals.append(total)
                shares.append(share)
                cells[0].append(f"{len(records)} + {total - len(records)} / {share:.1%}")
                for i, kind in enumerate(() if args.no_baselines else ("model", "tpe"), start=1):
                    runs = drive(
                        SearchKind(kind), alone, engine, pool.items, args.launches, seed, truth.launch
                    )
                    at = reached(runs, key, truth, best)
                    reach[kind].append(at if at is not None else math.inf)
                    cells[i].append(str(at) if at is not None else "-")
            print(f"| {key} | {best:.1f} | " + " | ".join("; ".join(c) for c in cells) + " |")
    print()
    print(
        f"with a profile: the best confirmed configuration at 98% of the grid's best or more in "
        f"{sum(p >= SHARE for p in shares)}/{len(shares)} runs (worst {min(shares):.1%}); search launches median "
        f"{statistics.median(searched):.0f}, most {max(searched)}; with the confirmation median "
        f"{statistics.median(totals):.0f}, most {max(totals)}"
    )
    for kind, values in reach.items():
        if not values:
            continue
        finite = [v for v in values if math.isfinite(v)]
        print(
            f"{kind} (no profile): the fastest measured reached 98% of the grid's best in {len(finite)}/"
            f"{len(values)} runs; launches to reach it: median {statistics.median(finite):.0f}, worst "
            f"{max(finite):.0f} (then its confirmation: {settings.launches} launches of each configuration it "
            "confirms and of the baseline)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
