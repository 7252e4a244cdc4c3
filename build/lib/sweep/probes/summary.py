"""A workload's batches summed up: speeds, latencies and their percentiles, acceptance, the offered rate and
goodput, the decode window and batch, from the server's own clock where it reports one."""

from __future__ import annotations

import dataclasses
import statistics

from sweep.answers.health import OutputHealth
from sweep.core.stats import percentile
from sweep.probes.sending import Batch
from sweep.probes.windows import REQUEST_MEASURES
from sweep.probes.workloads import Workload
from sweep.records import (
    Capacity,
    RequestMeasurement,
    Spread,
    WorkloadSummary,
)


def summarize(workload: Workload, batches: list[Batch], capacity: Capacity | None = None) -> WorkloadSummary:
    """The workload's numbers, only when every batch was fully valid (else its first problem, no numbers)."""
    rows = [r for b in batches for r in b.rows]
    remeasured = sum(b.attempts - 1 for b in batches)
    bad = [b for b in batches if not b.ok]
    # What was measured, whatever came of it: the workload's identity and its requests.
    measured = WorkloadSummary(
        workload.key,
        "ok",
        name=workload.name,
        context_tokens=workload.context_tokens,
        streams=workload.streams,
        rate=workload.rate,
        arrivals=workload.arrivals.value if workload.open_loop else "",
        requests=len(rows),
        remeasured=remeasured,
    )
    if not rows or bad:
        failed = [r for b in bad for r in b.rows if r.status != "ok"]
        worst = next((r for r in failed if r.status == "does_not_fit"), None) or next(
            (r for r in failed if r.status == "invalid"), failed[0] if failed else None
        )
        reason = worst.reason if worst else "no request was measured"
        if worst and worst.status != "does_not_fit" and bad[0].attempts > 1:
            reason += f" (in every one of {bad[0].attempts} attempts at the batch)"
        return dataclasses.replace(measured, status=worst.status if worst else "error", reason=reason)
    drafted = sum(r.draft_tokens for r in rows)
    gaps = [g for r in rows for g in r.itl_s]
    return dataclasses.replace(
        measured,
        offered_rps=Spread.of([b.offered_rps for b in batches if b.offered_rps is not None]),
        goodput_rps=Spread.of([b.goodput_rps for b in batches if b.goodput_rps is not None]),
        capacity_rps=Spread.of([capacity.rps]) if capacity else None,
        capacity_steps=capacity.steps if capacity else (),
        server_clock=capacity is None and all(r.server_decode_tps is not None for r in rows),
        reason=f"{remeasured} batches measured again after an invalid request" if remeasured else "",
        decode_tps=Spread.of([r.decode_tps for r in rows if r.decode_tps is not None]),
        aggregate_tps=Spread.of([b.aggregate_tps for b in batches if b.aggregate_tps is not None]),
        sum_stream_tps=Spread.of([b.sum_stream_tps for b in batches if b.sum_stream_tps is not None]),
        batch=Spread.of([b.batch for b in batches if b.batch is not None]),
        ttft_s=Spread.of([r.ttft_s for r in rows if r.ttft_s is not None]),
        prefill_tps=Spread.of([r.server_prefill_tps for r in rows if r.server_prefill_tps is not None]),
        acceptance_rate=Spread.of([r.acceptance_rate for r in rows if r.acceptance_rate is not None]),
        acceptance_length=Spread.of([r.acceptance_length for r in rows if r.acceptance_length is not None]),
        position_acceptance=_position_medians(rows),
        acceptance_gauge=Spread.of([b.acceptance_gauge for b in batches if b.acceptance_gauge is not None]),
        draft_tokens=drafted,
        accepted_tokens=sum(r.accepted_tokens for r in rows),
        prompt_tokens=Spread.of([float(r.prompt_tokens) for r in rows]),
        output_health=OutputHealth.of(
            (r.health for r in rows), (r.task_tokens for r in rows if r.task_tokens is not None)
        ),
        latency={
            name: _percentiles(values)
            for name, values in (
                ("ttft_s", _measured(rows, "ttft")),
                # Gaps between chunks: speculation sends accepted tokens back to back, so the median gap can be
                # ~0 while p90 shows the step; time per output token is each request's decode time per token.
                ("itl_s", gaps),
                ("tpot_s", _measured(rows, "tpot")),
                ("e2e_s", _measured(rows, "e2e")),
            )
            if values
        },
        outputs=tuple(r.text for r in rows),
        output_prompts=tuple(r.prompt_id for r in rows),
        ties=tuple(t for b in batches for t in b.ties),
    )


def _measured(rows: list[RequestMeasurement], measure: str) -> list[float]:
    """Each request's value of a latency measure, as the limits judge it."""
    return [v for r in rows if (v := REQUEST_MEASURES[measure](r, 50)) is not None]


def _percentiles(values: list[float]) -> dict[str, float]:
    return {f"p{q}": round(percentile(values, q) or 0.0, 6) for q in (50, 90, 99)}


def _position_medians(rows: list[RequestMeasurement]) -> tuple[float, ...]:
    """Per draft position, the median share accepted over the requests that have it."""
    depth = max((len(r.position_acceptance) for r in rows), default=0)
    return tuple(
        statistics.median(r.position_acceptance[i] for r in rows if len(r.position_acceptance) > i)
        for i in range(depth)
    )
