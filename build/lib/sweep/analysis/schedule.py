"""The best draft depth per concurrency: what to put in an engine's depth schedule.

A space that measures one workload at several stream counts (`streams: [1, 2, 4, 8]`) gives, for every launched
configuration, a speed at each concurrency. The schedule keeps the speculative method of the best configuration
the engine's schedule can run (`Engine.schedule_runs`: SGLang's adaptive speculation runs chains only) at the
lowest concurrency and picks, per stream count, the depth of that method whose measured decode t/s is highest
there, or 0 (speculation off) where the baseline is fastest. Speeds are the search's measurements (one launch each); `specsweep confirm`
checks the picks one by one, and the exported schedule can be launched and measured as a whole.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sweep.analysis.evidence import headline_median
from sweep.probes.workloads import Workload
from sweep.records import SpecShape
from sweep.storage import TrialView, complete_views


@dataclass(frozen=True)
class ScheduleStep:
    streams: int  # the concurrency this depth was measured best at (1 under open-loop arrivals)
    workload: str  # the workload key measured at this concurrency
    depth: int  # 0: speculation off
    trial: int
    tps: float  # decode t/s per stream of that trial there
    baseline_tps: float | None
    # The batch those streams decoded in, as measured (requests held back by the client, prefill or the
    # server's limits make it smaller than `streams`; the streams where it was not measured).
    batch: float = 1.0
    # The lowest batch size this depth applies to (up to the next step's): halfway, on a log scale, from the
    # batch measured below it, since a batch shrinks as its requests finish and a batch of 10 is nearer 16
    # than 4. Keyed by the measured batch, not the streams: 16 streams that decoded 9 at a time run in the
    # server's batch of 9, where a bound at 8 would give them the depth picked for 4.
    from_batch: int = 1
    rate: float | None = None  # under open-loop arrivals: the requests per second this depth was measured at


@dataclass(frozen=True)
class DepthSchedule:
    family: str  # the workload without its stream count (or rate)
    method: str
    params: dict[str, object]  # the lowest concurrency's best runnable launch: what the schedule extends
    steps: tuple[ScheduleStep, ...]
    under_load: bool = (
        False  # measured under open-loop arrivals at several rates, not at several stream counts
    )

    def depth_at(self, batch: int) -> int:
        """The depth for a batch size: the step with the largest lower bound not above it."""
        chosen = self.steps[0].depth
        for step in self.steps:
            if step.from_batch <= batch:
                chosen = step.depth
        return chosen


ScheduleRuns = Callable[[SpecShape], bool]  # whether the engine's schedule can run a measured shape


def _runnable(views: list[TrialView], runs: ScheduleRuns, method: str | None) -> list[TrialView]:
    return [
        v
        for v in complete_views(views)
        if v.record and v.record.shape and runs(v.record.shape) and method in (None, v.record.shape.method)
    ]


def depth_schedules(
    views: list[TrialView], workloads: Sequence[Workload], runs: ScheduleRuns
) -> list[DepthSchedule]:
    """One schedule per workload family measured at two or more stream counts, and one per family measured
    under open-loop arrivals at two or more rates (keyed by the batch the arrivals decoded in), where a
    configuration the engine's schedule can run (`runs`) was measured."""
    families: dict[tuple[str, bool], list[Workload]] = {}
    for workload in workloads:
        if workload.capacity is None:  # a capacity search runs at rates of its own choosing
            families.setdefault((workload.family, workload.open_loop), []).append(workload)
    baseline = next((v for v in complete_views(views) if v.role == "baseline"), None)
    out = []
    for (family, under_load), members in families.items():
        members = sorted(members, key=lambda w: (w.rate or 0.0, w.streams))
        if len(members) < 2:
            continue
        lowest = members[0].key
        ranked = [(headline_median(v, lowest) or 0.0, v) for v in _runnable(views, runs, None)]
        if not ranked:
            continue
        _, first = max(ranked, key=lambda pair: pair[0])
        assert first.record is not None and first.record.shape is not None
        method = first.record.shape.method
        steps = []
        for workload in members:
            base = headline_median(baseline, workload.key) if baseline else None
            best_tps, best = max(
                ((headline_median(v, workload.key) or 0.0, v) for v in _runnable(views, runs, method)),
                key=lambda p: p[0],
            )
            assert best.record is not None and best.record.shape is not None
            if base is not None and base >= best_tps and baseline is not None:
                batch = measured_batch(baseline, workload)
                steps.append(
                    ScheduleStep(
                        workload.streams,
                        workload.key,
                        0,
                        baseline.number,
                        base,
                        base,
                        batch,
                        rate=workload.rate,
                    )
                )
            else:
                depth, batch = best.record.shape.depth, measured_batch(best, workload)
                steps.append(
                    ScheduleStep(
                        workload.streams,
                        workload.key,
                        depth,
                        best.number,
                        best_tps,
                        base,
                        batch,
                        rate=workload.rate,
                    )
                )
        out.append(DepthSchedule(family, method, dict(first.record.params), _bounded(steps), under_load))
    return out


def measured_batch(view: TrialView, workload: Workload) -> float:
    """The batch the workload's requests decoded in on this trial (its streams where it was not measured)."""
    summary = view.record.workloads.get(workload.key) if view.record else None
    if summary is None or summary.batch is None or workload.per_repeat == 1:
        return float(workload.streams)
    return max(1.0, summary.batch.median)


def _bounded(steps: list[ScheduleStep]) -> tuple[ScheduleStep, ...]:
    """Each step's lowest batch: halfway on a log scale from the batch below, above the step before's."""
    out: list[ScheduleStep] = []
    for step in steps:
        if not out:
            out.append(dataclasses.replace(step, from_batch=1))
            continue
        halfway = math.ceil(math.sqrt(out[-1].batch * step.batch))
        out.append(dataclasses.replace(step, from_batch=max(halfway, out[-1].from_batch + 1)))
    return tuple(out)
