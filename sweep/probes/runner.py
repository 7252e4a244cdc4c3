"""Probe a running server with every workload: repeats, concurrent streams, context filling, summaries."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx

from sweep.engines.base import DraftCounters, Engine, RequestSettings
from sweep.probes.client import measure_request, new_nonce, unique_content
from sweep.probes.filler import fill_to
from sweep.probes.workloads import Workload
from sweep.results import RequestMeasurement, Spread, WorkloadSummary

DEFAULT_REPEATS = 3
COUNTER_SETTLE_S = 0.05  # llama-server adds a request's draft counters when its slot is released
COUNTER_RETRIES = 10

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ProbeSettings:
    repeats: int = DEFAULT_REPEATS
    request: RequestSettings = field(default_factory=RequestSettings)
    warmup: bool = True
    timeout_s: float = 1800.0


@dataclass
class ProbeResult:
    summaries: dict[str, WorkloadSummary]
    requests: list[RequestMeasurement]


async def probe(
    base_url: str,
    engine: Engine,
    workloads: Sequence[Workload],
    settings: ProbeSettings,
    progress: Progress = lambda _: None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> ProbeResult:
    """Run every workload in order against the server at `base_url`."""
    result = ProbeResult({}, [])
    # No keep-alive: llama-server closes a connection idle for 5 s, and a request sent on a pooled connection
    # the server is closing fails with "Server disconnected without sending a response". Loopback connects
    # cost well under a millisecond.
    limits = httpx.Limits(max_keepalive_connections=0)
    async with httpx.AsyncClient(
        base_url=base_url, timeout=settings.timeout_s, transport=transport, limits=limits
    ) as client:
        if settings.warmup:
            # The first request after start pays one-off costs; its numbers are not kept.
            warm = dataclasses.replace(settings.request, max_tokens=8)
            await measure_request(
                client, engine, unique_content(new_nonce(), "Say hello."), warm,
                workload="warmup", repeat=0, stream=0, nonce="warmup",
            )  # fmt: skip
        for workload in workloads:
            rows: list[RequestMeasurement] = []
            aggregates: list[float] = []
            for repeat in range(settings.repeats):
                progress(f"{workload.key} {repeat + 1}/{settings.repeats}")
                batch, aggregate = await _batch(client, engine, workload, repeat, settings.request)
                rows += batch
                if aggregate is not None:
                    aggregates.append(aggregate)
            result.requests += rows
            result.summaries[workload.key] = summarize(
                workload.key, rows, aggregates if workload.streams > 1 else []
            )
    return result


async def _batch(
    client: httpx.AsyncClient, engine: Engine, workload: Workload, repeat: int, settings: RequestSettings
) -> tuple[list[RequestMeasurement], float | None]:
    """One repeat: `workload.streams` requests at once, each a different prompt with its own nonce."""
    contents, nonces = [], []
    for stream in range(workload.streams):
        index = repeat * workload.streams + stream
        task = workload.prompt(index)
        if workload.context_tokens:
            task, _ = await fill_to(
                workload.context_tokens, task, index, lambda t: engine.count_tokens(client, t)
            )
        nonce = new_nonce()
        contents.append(unique_content(nonce, task))
        nonces.append(nonce)
    await engine.flush(client)  # no prefix cached from earlier requests (the template's included)
    before = await engine.draft_counters(client)
    started = time.perf_counter()
    rows = list(
        await asyncio.gather(
            *(
                measure_request(
                    client,
                    engine,
                    content,
                    settings,
                    workload=workload.key,
                    repeat=repeat,
                    stream=stream,
                    nonce=nonce,
                )
                for stream, (content, nonce) in enumerate(zip(contents, nonces, strict=True))
            )
        )
    )
    wall = time.perf_counter() - started
    rows = await _with_acceptance_length(client, engine, rows, before)
    ok = [r for r in rows if r.status == "ok"]
    tokens = sum(r.completion_tokens for r in ok)
    if ok and all(r.server_e2e_s for r in ok):
        wall = max(r.server_e2e_s or 0.0 for r in ok)  # the server's clock, where it reports one
    return rows, (tokens / wall if wall > 0 and tokens else None)


async def _with_acceptance_length(
    client: httpx.AsyncClient, engine: Engine, rows: list[RequestMeasurement], before: DraftCounters | None
) -> list[RequestMeasurement]:
    """Acceptance length over the batch from the server's counters (where the server's reply lacks it)."""
    drafted = sum(r.draft_tokens for r in rows)
    if before is None or drafted == 0 or all(r.acceptance_length is not None for r in rows):
        return rows
    length = None
    for _ in range(COUNTER_RETRIES):
        after = await engine.draft_counters(client)
        if after is not None and after.drafted - before.drafted >= drafted:
            length = after.acceptance_length_since(before)
            break
        await asyncio.sleep(COUNTER_SETTLE_S)
    return [
        r if r.acceptance_length is not None else dataclasses.replace(r, acceptance_length=length)
        for r in rows
    ]


def summarize(key: str, rows: list[RequestMeasurement], aggregates: list[float]) -> WorkloadSummary:
    ok = [r for r in rows if r.status == "ok"]
    if not ok:
        worst = next((r for r in rows if r.status == "does_not_fit"), None) or next(
            (r for r in rows if r.status == "invalid"), rows[0] if rows else None
        )
        return WorkloadSummary(
            key,
            status=worst.status if worst else "error",
            reason=worst.reason if worst else "no request was measured",
            requests=len(rows),
        )
    dropped = [r for r in rows if r.status != "ok"]
    drafted = sum(r.draft_tokens for r in ok)
    return WorkloadSummary(
        key,
        status="ok",
        reason=f"{len(dropped)} of {len(rows)} requests not counted: {dropped[0].reason}" if dropped else "",
        decode_tps=Spread.of([r.decode_tps for r in ok if r.decode_tps is not None]),
        aggregate_tps=Spread.of(aggregates),
        ttft_s=Spread.of([r.ttft_s for r in ok if r.ttft_s is not None]),
        prefill_tps=Spread.of([r.server_prefill_tps for r in ok if r.server_prefill_tps is not None]),
        acceptance_rate=Spread.of([r.acceptance_rate for r in ok if r.acceptance_rate is not None]),
        acceptance_length=Spread.of([r.acceptance_length for r in ok if r.acceptance_length is not None]),
        draft_tokens=drafted,
        accepted_tokens=sum(r.accepted_tokens for r in ok),
        prompt_tokens=Spread.of([float(r.prompt_tokens) for r in ok]),
        requests=len(rows),
    )
