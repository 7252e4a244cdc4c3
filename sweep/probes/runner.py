"""Probe a running server with every workload: repeats, concurrent streams or open-loop arrivals, context
filling, summaries.

A repeat sends its requests at their offsets from its start (`Workload.send_offsets`): all at once for closed-loop
streams, on the arrival clock for an open loop. Every request is prepared (context filled, nonce checked) before
the repeat's clock starts, so a late send is the event loop's, not the preparation's; each request records when
it was sent (`sent_s`), and the repeat's windows (decode window, batch overlap, goodput) line up through it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import math
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field

import httpx

from sweep.answers.fidelity import TIE_CHOICES, TIE_CONTEXT, TIE_PROBES, TIE_STEPS, TieProbe, part_at
from sweep.answers.health import OutputHealth, judge
from sweep.core.errors import ProbeError
from sweep.core.stats import percentile
from sweep.engines.base import Engine
from sweep.engines.endpoints import Turn
from sweep.engines.values import DraftCounters, PromptForm, RequestSettings
from sweep.probes.client import measure_request, new_nonce, probe_client, prompt_nonce, unique_content
from sweep.probes.filler import fill_to
from sweep.probes.workloads import CAPACITY_RECHECKS, NEAR_LIMIT, Workload, served_form
from sweep.records import (
    Capacity,
    CapacityStep,
    HostLoad,
    RequestMeasurement,
    Spread,
    WorkloadSummary,
)

DEFAULT_REPEATS = 3
COUNTER_SETTLE_S = 0.05  # llama-server adds a request's draft counters when its slot is released
COUNTER_RETRIES = 10
BATCH_ATTEMPTS = 3  # a batch with an invalid request is measured again, this many times in all
NONCE_TRIES = 20

Progress = Callable[[str], None]
# Starts watching the host when called; the function it returns stops and says what the rest of the machine did.
HostWatch = Callable[[], Callable[[], HostLoad | None]]


STALL_TIMEOUT_S = 180.0  # no byte from the server for this long (prefill of a long prompt included): stalled
REQUEST_BASE_S = 120.0  # a request's deadline: this, plus REQUEST_PER_TOKEN_S per max_tokens
REQUEST_PER_TOKEN_S = 1.0
TRIAL_TIMEOUT_S = 7200.0  # a whole trial (launch, every workload) ends here whatever happens


# Other configurations' answers, by workload key and then by prompt id (`RequestMeasurement.prompt_id`).
Others = Mapping[str, Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True)
class ProbeSettings:
    """How workloads are sent. Every wait is bounded: a silent stream, a request and a whole trial."""

    repeats: int = DEFAULT_REPEATS
    request: RequestSettings = field(default_factory=RequestSettings)
    warmup: bool = True
    attempts: int = BATCH_ATTEMPTS
    stall_timeout_s: float = STALL_TIMEOUT_S
    request_timeout_s: float | None = None  # None: REQUEST_BASE_S + REQUEST_PER_TOKEN_S x max_tokens
    trial_timeout_s: float = TRIAL_TIMEOUT_S
    # The space's latency limits (`ttft_p90_s: 2.0`): an open-loop request that meets each (its own time, its
    # own inter-token percentile) counts towards the goodput.
    latency_limits: Mapping[str, float] = field(default_factory=dict)

    @property
    def request_deadline_s(self) -> float:
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return REQUEST_BASE_S + REQUEST_PER_TOKEN_S * self.request.max_tokens

    def timeouts(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=10.0, read=self.stall_timeout_s, write=60.0, pool=self.request_deadline_s
        )


@dataclass
class ProbeResult:
    summaries: dict[str, WorkloadSummary]
    requests: list[RequestMeasurement]


@dataclass(frozen=True)
class Served:
    """What the running server takes: whether it has a chat template (None: unknown) and where that was read,
    how many tokens its template puts before every user message, and whether its replies' draft counts are the
    drafts it made (`LaunchFacts.drafts_counted`)."""

    chat_template: bool | None = None
    source: str = ""
    template_tokens: int = 0
    drafts_counted: bool = True

    def form(self, workload: Workload) -> tuple[PromptForm, str]:
        """The form the workload's requests take here, and why."""
        return served_form(workload.form, self.chat_template, self.source)


async def probe(
    base_url: str,
    engine: Engine,
    workloads: Sequence[Workload],
    settings: ProbeSettings,
    progress: Progress = lambda _: None,
    transport: httpx.AsyncBaseTransport | None = None,
    watch: HostWatch | None = None,
    deadline: float | None = None,
    served: Served | None = None,
    others: Others | None = None,
) -> ProbeResult:
    """Run every workload in order against the server at `base_url`, until the monotonic `deadline`, each in
    the form the server takes (`served`: the engine's reading of its chat template); where `others` holds
    other configurations' answers to a workload's prompts, ask where they part from these (`_tie_probes`)."""
    result = ProbeResult({}, [])
    served = served or Served()
    async with probe_client(base_url, settings.timeouts(), transport) as client:
        if served.chat_template and any(served.form(w)[0] is PromptForm.CHAT for w in workloads):
            served = dataclasses.replace(served, template_tokens=await engine.template_tokens(client))
        if settings.warmup:
            # The first request after start pays one-off costs; its numbers are not kept.
            warm = dataclasses.replace(settings.request, max_tokens=8)
            warmed = await measure_request(
                client,
                engine,
                unique_content(new_nonce(), "Say hello."),
                warm,
                workload="warmup",
                repeat=0,
                stream=0,
                nonce="warmup",
                form=served.form(workloads[0])[0] if workloads else PromptForm.CHAT,
                template_tokens=served.template_tokens,
                deadline_s=settings.request_deadline_s,
            )
            if warmed.status == "stalled":
                raise ProbeError(f"warm-up request: {warmed.reason}")
        for workload in workloads:
            if deadline is not None and time.monotonic() > deadline:
                raise ProbeError(
                    f"the trial passed its deadline of {settings.trial_timeout_s:.0f} s before {workload.key} "
                    "(probe.trial_timeout_s)"
                )
            stop_watching = watch() if watch else None
            form, why = served.form(workload)
            sending = Sending(
                workload, form, settings, served.template_tokens, (others or {}).get(workload.key, {})
            )
            if workload.capacity is not None:
                batches, found = await _capacity_search(client, engine, sending, progress)
            else:
                batches, found = [], None
                for repeat in range(settings.repeats):
                    progress(f"{workload.key} {repeat + 1}/{settings.repeats}")
                    batches.append(await _measured_batch(client, engine, sending, repeat))
            if not served.drafts_counted:
                batches = [_drafts_uncounted(b) for b in batches]
            # Every request goes to requests.jsonl, discarded attempts too (with their status and reason).
            result.requests += [row for batch in batches for row in (*batch.discarded, *batch.rows)]
            summary = dataclasses.replace(
                summarize(workload, batches, found),
                form=form.value,
                form_reason=why,
                template_tokens=sending.template_tokens,
            )
            load = stop_watching() if stop_watching else None
            result.summaries[workload.key] = dataclasses.replace(summary, host=load) if load else summary
    return result


@dataclass(frozen=True)
class Sending:
    """How one workload's requests go out on this server: its prompts' form and the probe's settings."""

    workload: Workload
    form: PromptForm
    settings: ProbeSettings
    template_tokens: int = 0
    # What other configurations answered this workload's prompts (prompt id to texts): where an answer here
    # parts from one of them, the server is asked whether it was a near-tie (`TieProbe`).
    others: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


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


async def _capacity_search(
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
        batches.append(await _measured_batch(client, engine, dataclasses.replace(sending, workload=at), 0))
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


async def _measured_batch(client: httpx.AsyncClient, engine: Engine, sending: Sending, repeat: int) -> Batch:
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
    gauge = await engine.acceptance_gauge(client) if any(r.draft_tokens for r in rows) else None
    ties = await _tie_probes(client, engine, sending, rows, contents, histories)
    if not all(r.status == "ok" for r in rows) or workload.per_repeat == 1:
        return Batch(rows, acceptance_gauge=gauge, ties=ties)
    return Batch(
        rows,
        _window_rate(rows),
        sum(r.decode_tps or 0.0 for r in rows),
        _decode_batch(rows),
        acceptance_gauge=gauge,
        offered_rps=_offered_rate(rows) if workload.open_loop else None,
        goodput_rps=_goodput(rows, probe_settings.latency_limits) if workload.open_loop else None,
        ties=ties,
    )


async def _tie_probes(
    client: httpx.AsyncClient,
    engine: Engine,
    sending: Sending,
    rows: list[RequestMeasurement],
    contents: list[str],
    histories: list[tuple[Turn, ...]],
) -> tuple[TieProbe, ...]:
    """For each answer here that another configuration's answer to the same prompt parts from, the server's
    likeliest next tokens at the point where they part (after the batch's clock; `sweep/answers/fidelity.py`), at most
    TIE_PROBES a batch: a configuration that changes every answer needs no more evidence, and a CPU server
    prefills each probe's prompt again."""
    probes: list[TieProbe] = []
    for row, content, history in zip(rows, contents, histories, strict=True):
        if row.status != "ok":
            continue
        for other in dict.fromkeys(sending.others.get(row.prompt_id, ())):
            if len(probes) < TIE_PROBES and (at := part_at(row.text, other)) is not None:
                ask = functools.partial(engine.top_tokens, client, content, sending.form, history=history)
                probes.append(await _walk(ask, row.prompt_id, at, row.text, other))
    return tuple(probes)


async def _walk(
    ask: Callable[..., Awaitable[tuple[tuple[str, float], ...]]], prompt: str, at: int, text: str, other: str
) -> TieProbe:
    """The probe at `at`, walked on past each token both answers share (the server's first choice), up to
    TIE_STEPS: the choices where the two answers' tokens part."""
    shared = ""
    for step in range(TIE_STEPS):
        choices = await ask(text[: at + len(shared)], choices=TIE_CHOICES)
        top = choices[0][0] if choices else ""
        mine, theirs = text[at + len(shared) :], other[at + len(shared) :]
        if step == TIE_STEPS - 1 or not (top and mine.startswith(top) and theirs.startswith(top)):
            break
        shared += top
    return TieProbe(prompt, at, shared, mine[:TIE_CONTEXT], theirs[:TIE_CONTEXT], choices)


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


def _offered_rate(rows: list[RequestMeasurement]) -> float | None:
    """Requests per second as they were sent: the gaps between the first send and the last."""
    span = max(r.sent_s for r in rows) - min(r.sent_s for r in rows)
    return (len(rows) - 1) / span if span > 0 else None


def _goodput(rows: list[RequestMeasurement], limits: Mapping[str, float]) -> float | None:
    """Requests that met every latency limit, per second from the first sent to the last answered (every
    request counts where the space sets no limit: the served request rate)."""
    span = max(r.sent_s + r.wall_s for r in rows) - min(r.sent_s for r in rows)
    good = [r for r in rows if all(_request_value(r, name) <= limit for name, limit in limits.items())]
    return len(good) / span if span > 0 else None


def _request_value(row: RequestMeasurement, limit: str) -> float:
    """One request's own value of a latency limit's measure (`itl_p90_s`: its own 90th percentile gap); a
    measure it lacks (no token came) is infinitely late."""
    part, _, quantile = limit.removesuffix("_s").partition("_")
    value = REQUEST_MEASURES[part](row, int(quantile.removeprefix("p")))
    return math.inf if value is None else value


def _server_first(server: float | None, client: float | None) -> float | None:
    return server if server is not None else client


# A latency limit's measure on one request (the percentile matters only to the gaps between its tokens): the
# server's own times where it reports them (SGLang: they hold its queue, not the client machine's scheduling,
# so a busy client does not fail a limit the server held), else the client's; token gaps only the client sees.
REQUEST_MEASURES: dict[str, Callable[[RequestMeasurement, int], float | None]] = {
    "ttft": lambda row, _q: _server_first(row.server_ttft_s, row.ttft_s),
    "tpot": lambda row, _q: _server_first(row.server_tpot_s, row.tpot_s),
    "itl": lambda row, q: percentile(list(row.itl_s), q) if row.itl_s else None,
    "e2e": lambda row, _q: _server_first(row.server_e2e_s, row.wall_s),
}


def _window_rate(rows: list[RequestMeasurement]) -> float | None:
    """Decode tokens of every request (the first token of each comes from prefill) over the decode window:
    from the first stream's first token to the last stream's last token, on one clock: the server's where it
    stamps every request's arrival (SGLang), the client's otherwise (each request's times from when it was
    sent). Never the two mixed: a simulator's modelled seconds and a client's wall seconds do not add."""
    windows = _server_windows(rows) or _client_windows(rows)
    tokens = sum(max(0, r.completion_tokens - 1) for r in rows)
    if not windows or not tokens:
        return None
    first, last = min(start for start, _ in windows), max(end for _, end in windows)
    return tokens / (last - first) if last > first else None


def _server_windows(rows: list[RequestMeasurement]) -> list[tuple[float, float]] | None:
    """Each request's first and last token on the server's clock; None unless the server stamped every one."""
    windows = []
    for r in rows:
        if r.server_received_s is None or r.server_ttft_s is None or r.server_e2e_s is None:
            return None
        windows.append((r.server_received_s + r.server_ttft_s, r.server_received_s + r.server_e2e_s))
    return windows


def _client_windows(rows: list[RequestMeasurement]) -> list[tuple[float, float]]:
    """Each request's first and last token as the client saw them, from its repeat's start."""
    return [
        (r.sent_s + r.ttft_s, r.sent_s + r.ttft_s + r.decode_s)
        for r in rows
        if r.ttft_s is not None and r.decode_s is not None
    ]


def _decode_batch(rows: list[RequestMeasurement]) -> float | None:
    """How many requests decoded at once, on average over each request's decode time: the overlap of every
    pair of decode windows (a window with itself included) over the windows' total length, each on the
    client's clock from when it was sent."""
    windows = _client_windows(rows)
    total = sum(end - start for start, end in windows)
    if len(windows) < len(rows) or total <= 0:
        return None
    overlap = sum(max(0.0, min(e1, e2) - max(s1, s2)) for s1, e1 in windows for s2, e2 in windows)
    return overlap / total


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


def _drafts_uncounted(batch: Batch) -> Batch:
    """The batch without the replies' draft counts (and the acceptance rate read from them), where the server
    counts drafts it did not make; the acceptance length (tokens over verify steps) stands."""

    def uncounted(row: RequestMeasurement) -> RequestMeasurement:
        return dataclasses.replace(row, draft_tokens=0, acceptance_rate=None)

    return dataclasses.replace(
        batch,
        rows=[uncounted(r) for r in batch.rows],
        discarded=[uncounted(r) for r in batch.discarded],
    )


def summarize(workload: Workload, batches: list[Batch], capacity: Capacity | None = None) -> WorkloadSummary:
    """The workload's numbers, only when every batch was fully valid (else its first problem, no numbers)."""
    rows = [r for b in batches for r in b.rows]
    remeasured = sum(b.attempts - 1 for b in batches)
    bad = [b for b in batches if not b.ok]
    if not rows or bad:
        failed = [r for b in bad for r in b.rows if r.status != "ok"]
        worst = next((r for r in failed if r.status == "does_not_fit"), None) or next(
            (r for r in failed if r.status == "invalid"), failed[0] if failed else None
        )
        reason = worst.reason if worst else "no request was measured"
        if worst and worst.status != "does_not_fit" and bad[0].attempts > 1:
            reason += f" (in every one of {bad[0].attempts} attempts at the batch)"
        return WorkloadSummary(
            workload.key,
            name=workload.name,
            context_tokens=workload.context_tokens,
            streams=workload.streams,
            rate=workload.rate,
            arrivals=workload.arrivals.value if workload.open_loop else "",
            status=worst.status if worst else "error",
            reason=reason,
            requests=len(rows),
            remeasured=remeasured,
        )
    drafted = sum(r.draft_tokens for r in rows)
    gaps = [g for r in rows for g in r.itl_s]
    return WorkloadSummary(
        workload.key,
        name=workload.name,
        context_tokens=workload.context_tokens,
        streams=workload.streams,
        rate=workload.rate,
        arrivals=workload.arrivals.value if workload.open_loop else "",
        offered_rps=Spread.of([b.offered_rps for b in batches if b.offered_rps is not None]),
        goodput_rps=Spread.of([b.goodput_rps for b in batches if b.goodput_rps is not None]),
        capacity_rps=Spread.of([capacity.rps]) if capacity else None,
        capacity_steps=capacity.steps if capacity else (),
        status="ok",
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
        requests=len(rows),
        remeasured=remeasured,
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
