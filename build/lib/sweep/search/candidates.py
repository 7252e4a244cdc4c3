"""The candidates: the space's grid after the engine's rules, derived (values the server would force anyway),
valid, feasible under its constraints, and unique after derivation, so no two launches differ only in a value
the server ignores."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sweep.engines import Engine
from sweep.records import SpecShape
from sweep.space import Space

GRID_LIMIT = 20000  # combinations ranked at most (a larger space is ranked on its first GRID_LIMIT)


@dataclass(frozen=True)
class Candidate:
    swept: dict[str, Any]  # what the space suggests (enqueued as the trial's parameters)
    params: dict[str, Any]  # what the server is launched with, after the engine's derivation
    shape: SpecShape | None


@dataclass(frozen=True)
class Candidates:
    """The space's launchable configurations, and how many grid points the engine's rules removed."""

    items: list[Candidate]
    grid: int
    infeasible: int
    invalid: int
    duplicates: int
    truncated: bool = False


def launch_key(params: Mapping[str, Any]) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def candidates(space: Space, engine: Engine, limit: int = GRID_LIMIT) -> Candidates:
    grid = space.grid(limit + 1)
    items: dict[str, Candidate] = {}
    infeasible = invalid = duplicates = 0
    for swept in grid[:limit]:
        plan = engine.plan(space.launch_params(swept))
        if plan.invalid:
            invalid += 1
            continue
        if not plan.launchable:
            infeasible += 1
            continue
        params = plan.params
        key = launch_key(params)
        if key in items:
            duplicates += 1
            continue
        items[key] = Candidate(swept, params, plan.shape)
    return Candidates(
        list(items.values()), min(len(grid), limit), infeasible, invalid, duplicates, len(grid) > limit
    )
