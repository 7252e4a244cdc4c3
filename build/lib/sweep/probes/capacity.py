"""The capacity search: the highest offered rate whose requests still meet the latency limits, stepped up and
checked again near the limit."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import httpx

from sweep.engines.base import Engine
from sweep.probes.sending import Batch, measured_batch
from sweep.probes.settings import Progress, Sending
from sweep.probes.summary import summarize
from sweep.probes.workloads import CAPACITY_RECHECKS, NEAR_LIMIT
from sweep.records import (
    Capacity,
    CapacityStep,
)


async def capacity_search(
    client: httpx.AsyncClient, engine: Engine, sending: Sending, progress: Progress
) -> tuple[list[Batch], Capacity]:
    """The highest rate in the workload's range at which its latency limits hold: a run at the lowest rate
    (none held: the capacity is 0), one at the highest (held: the capacity is at least that), then bisection on
    a log scale. Each run is `requests` requests at one rate held to the limits by its own percentiles; runs at
    different rates send the same prompts on the same arrival pattern, scaled (each with its own nonce: nothing is
    cached), so they differ by their rate alone. A run near a limit is run again on new prompts and judged on
    both. A run with a request that is not valid ends the search (the workload then has no numbers)."""
    workload, limits = sending.workload, sending.settings.latency_limits
    assert workload.capacity is not None
    low, high = workload.capacity
    batches: list[Batch] = []
    steps: list[CapacityStep] = []

    async def run_at(rate: float, prompts: int) -> Batch:
        at = workload.at_rate(rate, prompts)
        progress(f"{workload.key}: {rate:.3g} req/s ({len(batches) + 1}/{workload.capacity_probes})")
        batches.append(await measured_batch(client, engine, dataclasses.replace(sending, workload=at), 0))
        return batches[-1]

    async def held_at(rate: float) -> bool | None:
        runs = [await run_at(rate, 0)]
        if not runs[0].ok:
            return None
        over = summarize(workload.at_rate(rate, 0), runs).over_limits(limits)
        rechecks = sum(step.requests > workload.requests for step in steps)
        if rechecks < CAPACITY_RECHECKS and _near(over, limits):
            # A coin toss on a few requests: judged again on twice as many, the second half new prompts.
            runs.append(await run_at(rate, 1 + rechecks))
            if not runs[1].ok:
                return None
            over = summarize(workload.at_rate(rate, 0), runs).over_limits(limits)
        held = all(v <= 0 for v in over.values())
        steps.append(CapacityStep(rate, held, over, requests=sum(len(run.rows) for run in runs)))
        return held

    # A run that is not valid (None) ends the search: the workload's summary then gives its reason.
    held = await held_at(low)
    if not held:
        return batches, Capacity(0.0, tuple(steps))
    held = await held_at(high)
    if held is None or held:
        return batches, Capacity(low if held is None else high, tuple(steps))
    for _ in range(workload.capacity_steps):
        middle = math.sqrt(low * high)
        held = await held_at(middle)
        if held is None:
            break
        low, high = (middle, high) if held else (low, middle)
    return batches, Capacity(low, tuple(steps))


def _near(over: Mapping[str, float], limits: Mapping[str, float]) -> bool:
    """Whether a run's percentile came within NEAR_LIMIT of some limit, on either side."""
    return any(abs(over[name]) <= NEAR_LIMIT * limit for name, limit in limits.items())
