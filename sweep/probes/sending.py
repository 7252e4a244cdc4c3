"""One batch of a workload sent and measured: its requests prepared (context filled, a nonce the prompt holds
once), sent at their offsets, each answer judged, the server's draft counters read after it, and a batch with an
invalid request measured again."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import time
from dataclasses import dataclass, field

import httpx

from sweep.answers.fidelity import TieProbe
from sweep.answers.health import judge
from sweep.core.errors import ProbeError
from sweep.engines.base import Engine
from sweep.engines.endpoints import Turn
from sweep.engines.values import DraftCounters, PromptForm
from sweep.probes.client import measure_request, prompt_nonce, unique_content
from sweep.probes.filler import fill_to
from sweep.probes.settings import COUNTER_RETRIES, COUNTER_SETTLE_S, NONCE_TRIES, Sending
from sweep.probes.ties import tie_probes
from sweep.probes.windows import decode_batch, goodput, offered_rate, window_rate
from sweep.probes.workloads import Workload
from sweep.records import (
    RequestMeasurement,
)


@dataclass
class Batch:
    """One repeat of a workload: `streams` requests sent at once, and what they add up to."""

    rows: list[RequestMeasurement]
    aggregate_tps: float | None = None  # every request's decode tokens over the batch's decode window
    sum_stream_tps: float | None = None  # the sum of the requests' own decode rates
    batch: float | None = None  # requests decoding at once, as their decode windows overlap
    attempts: int = 1
    discarded: list[RequestMeasurement] = field(default_factory=list)  # earlier attempts' rows, not counted
    # The server's acceptance gauge read after the batch: its last logged decode step's, not the batch's.
    acceptance_gauge: float | None = None
    offered_rps: float | None = None  # open loop: requests over the time from the first sent to the last
    goodput_rps: float | None = None  # open loop: requests within every latency limit per second
    # Where other configurations' answers parted from these (`Sending.others`), as the server ranked it.
    ties: tuple[TieProbe, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.rows) and all(r.status == "ok" for r in self.rows)


async def measured_batch(client: httpx.AsyncClient, engine: Engine, sending: Sending, repeat: int) -> Batch:
    """A batch whose every request is valid, measured again (new nonces) when one was not: survivors of a
    batch are never averaged on their own. A prompt that does not fit is not retried (it never will)."""
    batch, discarded = Batch([]), []
    for attempt in range(sending.settings.attempts):
        discarded += batch.rows
        batch = await _batch(client, engine, sending, repeat, attempt)
        batch.attempts, batch.discarded = attempt + 1, discarded
        if stalled := next((r for r in batch.rows if r.status == "stalled"), None):
            # A server that stops sending is not retried: each attempt would wait as long again.
            raise ProbeError(f"{sending.workload.key}: {stalled.reason}")
        if batch.ok or any(r.status == "does_not_fit" for r in batch.rows):
            break
    return batch


async def _batch(
    client: httpx.AsyncClient, engine: Engine, sending: Sending, repeat: int, attempt: int
) -> Batch:
    """One attempt at a repeat: each request its own prompt, each prompt its own nonce, sent at its offset (at
    once for streams, on the arrival clock for an open loop)."""
    workload, probe_settings = sending.workload, sending.settings
    contents, nonces, indexes = [], [], []
    histories: list[tuple[Turn, ...]] = []
    first_tokens: set[int] = set()
    for stream in range(workload.per_repeat):
        index = workload.prompt_index(repeat, stream)
        task = workload.prompt(index, sending.form)
        if workload.context_tokens:
            task, _ = await fill_to(
                workload.context_tokens,
                task,
                index,
                lambda t: engine.count_tokens(client, t),
                sending.form,
            )
        nonce = await _distinct_nonce(client, engine, workload.key, index, attempt, first_tokens)
        history = workload.history(index, sending.form)
        if history:  # the nonce opens the conversation: its first turn is what a prefix cache would match
            history = (Turn(history[0].role, unique_content(nonce, history[0].content)), *history[1:])
        contents.append(task if history else unique_content(nonce, task))
        histories.append(history)
        nonces.append(nonce)
        indexes.append(index)
    row = functools.partial(RequestMeasurement, workload=workload.key, repeat=repeat)
    if failure := await engine.flush(client):
        # Cached prefixes or speculative state from earlier requests may remain: nothing here would be cold.
        reason = f"the server's cache was not flushed: {failure}"
        return Batch([row(stream=s, nonce=n, status="error", reason=reason) for s, n in enumerate(nonces)])
    # The workload's stop sequences end each answer where its task does, so only the task is measured.
    stop = workload.stop_in(sending.form)
    request = dataclasses.replace(probe_settings.request, stop=stop) if stop else probe_settings.request
    # Each request's limit (a recorded reply is counted by the server) before the repeat's clock starts.
    limits = [await _token_limit(client, engine, workload, index, request.max_tokens) for index in indexes]
    before = await engine.draft_counters(client)
    started = time.perf_counter()

    async def sent_at(offset: float, stream: int, content: str, nonce: str) -> RequestMeasurement:
        await asyncio.sleep(max(0.0, started + offset - time.perf_counter()))
        return await measure_request(
            client,
            engine,
            content,
            dataclasses.replace(request, max_tokens=limits[stream]),
            workload=workload.key,
            repeat=repeat,
            stream=stream,
            nonce=nonce,
            form=sending.form,
            template_tokens=sending.template_tokens,
            deadline_s=probe_settings.request_deadline_s,
            epoch=started,
            history=histories[stream],
        )

    offsets = workload.send_offsets(repeat)
    rows = list(
        await asyncio.gather(
            *(
                sent_at(offset, stream, content, nonce)
                for stream, (offset, content, nonce) in enumerate(zip(offsets, contents, nonces, strict=True))
            )
        )
    )
    rows = [
        _judged(
            dataclasses.replace(r, prompt_id=prompt_id(content, sending.form, history)), workload, content
        )
        for r, content, history in zip(rows, contents, histories, strict=True)
    ]
    rows = await _with_acceptance_length(client, engine, rows, before)
    # After the batch's clock (a tokenization is no load on a measured request).
    rows = [
        await _with_prompt_ids(client, engine, r, content, sending.form, history)
        for r, content, history in zip(rows, contents, histories, strict=True)
    ]
    gauge = await engine.acceptance_gauge(client) if any(r.draft_tokens for r in rows) else None
    ties = await tie_probes(client, engine, sending, rows, contents, histories)
    if not all(r.status == "ok" for r in rows) or workload.per_repeat == 1:
        return Batch(rows, acceptance_gauge=gauge, ties=ties)
    return Batch(
        rows,
        window_rate(rows),
        sum(r.decode_tps or 0.0 for r in rows),
        decode_batch(rows),
        acceptance_gauge=gauge,
        offered_rps=offered_rate(rows) if workload.open_loop else None,
        goodput_rps=goodput(rows, probe_settings.latency_limits) if workload.open_loop else None,
        ties=ties,
    )


async def _token_limit(
    client: httpx.AsyncClient, engine: Engine, workload: Workload, index: int, cap: int
) -> int:
    """A request's max_tokens: the workload's (never more than the probe's), or where it asks, its prompt's
    recorded reply's length in the served model's own tokens, no more than that."""
    limit = min(workload.max_tokens or cap, cap)
    reply = workload.reply(index) if workload.reply_tokens else ""
    return max(1, min(limit, await engine.count_tokens(client, reply))) if reply else limit


def prompt_id(content: str, form: PromptForm, history: tuple[Turn, ...] = ()) -> str:
    """The prompt as sent (after its conversation's turns), digested: the same text in the same form is the
    same request to a greedy server."""
    turns = "".join(f"{t.role}: {t.content}\n" for t in history)
    return hashlib.sha256(f"{form.value}\n{turns}{content}".encode()).hexdigest()[:16]


def _judged(row: RequestMeasurement, workload: Workload, content: str) -> RequestMeasurement:
    """The row with its answer's health (`sweep/answers/health.py`) and, where it ran on, the tokens of its task."""
    if row.status != "ok":
        return row
    found = judge(
        row.text,
        content,
        row.nonce,
        ran_out=row.finish == "length",
        should_stop=workload.stops,
        copies=workload.copies,
    )
    task = None
    if found.task_chars is not None and row.text:
        task = round(row.completion_tokens * found.task_chars / len(row.text))
    return dataclasses.replace(row, health=tuple(found.symptoms), task_tokens=task)


async def _with_prompt_ids(
    client: httpx.AsyncClient,
    engine: Engine,
    row: RequestMeasurement,
    content: str,
    form: PromptForm,
    history: tuple[Turn, ...],
) -> RequestMeasurement:
    """The row with its prompt's token ids where its answer's are kept and the server's tokenization gives as
    many as it counted for the prompt; without either (and why) otherwise."""
    if not row.output_ids:
        return row
    try:
        ids = await engine.prompt_ids(client, content, form, history)
    except httpx.HTTPError as exc:
        ids, why = None, f"the prompt's token ids could not be had ({exc.__class__.__name__})"
    else:
        why = "the engine cannot say how the server tokenized the prompt"
    if ids is not None and len(ids) != row.prompt_tokens:
        why = f"the prompt tokenized to {len(ids)} ids where the server counted {row.prompt_tokens}"
        ids = None
    if ids is None:
        return dataclasses.replace(row, output_ids=(), ids_missing=why)
    return dataclasses.replace(row, prompt_ids=ids)


async def _distinct_nonce(
    client: httpx.AsyncClient, engine: Engine, key: str, index: int, attempt: int, taken: set[int]
) -> str:
    """A nonce whose first token (by the server's tokenizer) no other request of the batch starts with."""
    for variant in range(NONCE_TRIES):
        nonce = prompt_nonce(key, index, attempt * NONCE_TRIES + variant)
        tokens = await engine.tokenize(client, unique_content(nonce, ""))
        if tokens and tokens[0] not in taken:
            taken.add(tokens[0])
            return nonce
    raise ProbeError(f"no nonce with a first token of its own after {NONCE_TRIES} tries ({key})")


async def _with_acceptance_length(
    client: httpx.AsyncClient, engine: Engine, rows: list[RequestMeasurement], before: DraftCounters | None
) -> list[RequestMeasurement]:
    """Acceptance length (and rate) over the batch from the server's counters, where the replies lack it: once
    the counters hold every token the replies say was drafted (all of them, where replies do not say)."""
    drafted = sum(r.draft_tokens for r in rows)
    if before is None or all(r.acceptance_length is not None for r in rows):
        return rows
    if engine.drafts_per_request and drafted == 0:
        return rows  # nothing was drafted: no acceptance to report
    length = rate = None
    positions: tuple[float, ...] = ()
    for _ in range(COUNTER_RETRIES):
        after = await engine.draft_counters(client)
        if after is not None and after.drafted - before.drafted >= max(drafted, 1):
            length = after.acceptance_length_since(before)
            rate = (after.accepted - before.accepted) / (after.drafted - before.drafted)
            positions = after.position_acceptance_since(before)
            break
        await asyncio.sleep(COUNTER_SETTLE_S)
    return [
        r
        if r.acceptance_length is not None
        else dataclasses.replace(
            r,
            acceptance_length=length,
            acceptance_rate=r.acceptance_rate if r.acceptance_rate else rate,
            position_acceptance=positions,
        )
        for r in rows
    ]


def drafts_uncounted(batch: Batch) -> Batch:
    """The batch without the replies' draft counts (and the acceptance rate read from them), where the server
    counts drafts it did not make; the acceptance length (tokens over verify steps) stands."""

    def uncounted(row: RequestMeasurement) -> RequestMeasurement:
        return dataclasses.replace(row, draft_tokens=0, acceptance_rate=None)

    return dataclasses.replace(
        batch,
        rows=[uncounted(r) for r in batch.rows],
        discarded=[uncounted(r) for r in batch.discarded],
    )
