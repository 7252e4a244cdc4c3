"""The driver's order of launches, replayed against drawn measurements: shared by the search benchmarks.

A search is replayed as `specsweep run` would drive it (the baseline, the covering start-up trials, then the
search's own picks); each pick costs one launch, drawn by the caller's `launch`; duplicates after the engine's
derivation and infeasible points cost none, as in the sweep.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from typing import Any

import optuna

from sweep.engines import Engine
from sweep.records import TrialRecord
from sweep.search import Candidate, Candidates, ModelSearch, launch_key
from sweep.space import SearchKind, Space

Launch = Callable[[int, dict[str, Any], random.Random], TrialRecord]


def drive(
    kind: SearchKind,
    space: Space,
    engine: Engine,
    pool: list[Candidate],
    launches: int,
    seed: int,
    launch: Launch,
) -> list[TrialRecord]:
    rng = random.Random(seed)
    records = [launch(0, engine.derive(space.launch_params(engine.baseline_params())), rng)]
    tried = {launch_key(records[0].params)}
    queue = [engine.derive(space.launch_params(p)) for p in space.covering((launches - 1) // 2)]
    search = ModelSearch(space, Candidates(pool, len(pool), 0, 0, 0))
    study = optuna.create_study(
        sampler=optuna.samplers.TPESampler(seed=seed), directions=["maximize"] * len(space.objective_names)
    )
    idle = 0
    while len(records) < launches and idle < 200:
        if queue:
            params = queue.pop(0)
        elif kind is SearchKind.MODEL:
            proposal = search.propose(records)
            if proposal is None:
                break
            params = proposal.candidate.params
        else:
            trial = study.ask()
            params = engine.derive(space.launch_params(space.suggest(trial)))
            violations = engine.constraints(params)
            if any(v > 0 for v in violations.values()) or launch_key(params) in tried:
                idle += 1
                study.tell(trial, [0.0] * len(space.objective_names))
                continue
            idle = 0
            record = launch(len(records), params, rng)
            if record.failed:
                study.tell(trial, state=optuna.trial.TrialState.FAIL)
            else:
                study.tell(trial, [measured_tps(record, k) or 0.0 for k in space.objective_names])
            records.append(record)
            tried.add(launch_key(params))
            continue
        if launch_key(params) in tried:
            continue
        records.append(launch(len(records), params, rng))
        tried.add(launch_key(params))
    return records


def measured_tps(record: TrialRecord, key: str) -> float | None:
    summary = record.workloads.get(key)
    if record.failed or summary is None or summary.decode_tps is None:
        return None
    return summary.decode_tps.median


def pick(records: list[TrialRecord], key: str) -> TrialRecord:
    """What a search's own measurements call fastest on a workload."""
    return max(
        (r for r in records if measured_tps(r, key) is not None), key=lambda r: measured_tps(r, key) or 0.0
    )


def confirmed_pair(records: list[TrialRecord], key: str, favoured: dict[str, int]) -> list[TrialRecord]:
    """The two the confirmation launches again on a workload (interleaved, keeping the faster), as
    `analysis.confirmation_plan` orders them: the fastest measured and the model's favourite
    (`search.favourites`; the next fastest where they are one, or where there is no model)."""
    measured = ranked(records, key)
    liked = [r for r in measured[1:] if r.number == favoured.get(key)]
    return measured[:1] + (liked or measured[1:2])[:1]


def ranked(records: list[TrialRecord], key: str) -> list[TrialRecord]:
    return sorted(
        (r for r in records if measured_tps(r, key) is not None), key=lambda r: -(measured_tps(r, key) or 0.0)
    )


def quantiles(values: list[float]) -> str:
    """min / 10th percentile / median, for a share column."""
    ordered = sorted(values)
    tenth = ordered[int(0.1 * (len(ordered) - 1))]
    return f"{ordered[0]:.1%} / {tenth:.1%} / {statistics.median(ordered):.1%}"
