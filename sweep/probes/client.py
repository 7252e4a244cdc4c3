"""One measured request: streamed, so time to first token and decode rate are seen from the client too."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import itertools
import json
import time
import uuid

import httpx

from sweep.core.clock import CLOCK_PATH
from sweep.engines.base import Engine
from sweep.engines.endpoints import Turn
from sweep.engines.values import PromptForm, RequestSettings, ServerReport
from sweep.records import RequestMeasurement, RequestStatus


def probe_client(
    base_url: str, timeout: httpx.Timeout | float, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The client every measured request goes through. No keep-alive: llama-server closes a connection idle
    for 5 s (and some after a streamed answer), and a request sent on a pooled connection the server is
    closing fails with "Server disconnected without sending a response". Loopback connects cost well under a
    millisecond."""
    return httpx.AsyncClient(
        base_url=base_url,
        timeout=timeout,
        transport=transport,
        limits=httpx.Limits(max_keepalive_connections=0),
    )


async def server_clock(client: httpx.AsyncClient) -> tuple[float, float] | None:
    """A simulated server's own count of its decode time as modelled and how late it ran (wall seconds), summed
    over its requests; None from a server that does not count it (a real one answers 404) or cannot answer."""
    try:
        response = await client.get(CLOCK_PATH)
        data = response.json() if response.status_code == 200 else None
        return (float(data["modelled_s"]), float(data["late_s"])) if isinstance(data, dict) else None
    except (httpx.HTTPError, ValueError, KeyError, TypeError):
        return None


def clock_lag(before: tuple[float, float] | None, after: tuple[float, float] | None) -> float | None:
    """The share of the decode time modelled between two counts that the server ran behind its clock."""
    if before is None or after is None or after[0] <= before[0]:
        return None
    return (after[1] - before[1]) / (after[0] - before[0])


def new_nonce() -> str:
    return uuid.uuid4().hex[:12]


def prompt_nonce(workload: str, index: int, attempt: int) -> str:
    """The same nonce for the same prompt in every trial (so outputs compare across configurations under
    greedy decoding), different for every request one server sees (index and attempt are unique per server)."""
    return hashlib.sha256(f"{workload}/{index}/{attempt}".encode()).hexdigest()[:12]


def unique_content(nonce: str, prompt: str) -> str:
    """The nonce is the very first text, so no two requests in a batch share a first token (the runner checks
    this with the server's tokenizer): a prefix cache has nothing to serve, even between concurrent requests."""
    return f"{nonce}\n{prompt}"


async def measure_request(
    client: httpx.AsyncClient,
    engine: Engine,
    content: str,
    settings: RequestSettings,
    *,
    workload: str,
    repeat: int,
    stream: int,
    nonce: str,
    form: PromptForm = PromptForm.CHAT,
    template_tokens: int = 0,
    deadline_s: float | None = None,
    epoch: float | None = None,
    history: tuple[Turn, ...] = (),
) -> RequestMeasurement:
    """Send one streamed request in `form` (after a conversation's earlier turns, `history`) and measure it. HTTP errors become a status, never an exception; a
    server that stops sending (the client's read timeout) or a request past `deadline_s` is "stalled". Up to
    `template_tokens` cached tokens (the chat template's header, the same in every request) keep it cold.
    `epoch`: the repeat's start (`time.perf_counter`), from which the request's `sent_s` is counted."""
    row = functools.partial(
        RequestMeasurement,
        workload=workload,
        repeat=repeat,
        stream=stream,
        nonce=nonce,
        max_tokens=settings.max_tokens,
    )
    started = time.perf_counter()
    try:
        async with asyncio.timeout(deadline_s):
            return await _measure(
                client, engine, content, form, settings, row, template_tokens, epoch, history
            )
    except TimeoutError:
        return row(
            status="stalled",
            reason=f"the request was not finished after its deadline of {deadline_s:.0f} s (probe.request_timeout_s)",
            wall_s=time.perf_counter() - started,
        )
    except httpx.ReadTimeout as exc:
        stall = exc.request.extensions.get("timeout", {}).get("read")
        after = f" after {stall:.0f} s" if isinstance(stall, int | float) else ""
        return row(
            status="stalled",
            reason=f"the server stopped producing tokens{after} (probe.stall_timeout_s)",
            wall_s=time.perf_counter() - started,
        )


async def _measure(
    client: httpx.AsyncClient,
    engine: Engine,
    content: str,
    form: PromptForm,
    settings: RequestSettings,
    row: functools.partial[RequestMeasurement],
    template_tokens: int,
    epoch: float | None = None,
    history: tuple[Turn, ...] = (),
) -> RequestMeasurement:
    first = last = None
    arrivals: list[float] = []
    text = finish = ""
    ids: tuple[int, ...] = ()
    report: ServerReport | None = None
    started = time.perf_counter()
    try:
        path, body = await engine.request(client, content, form, settings, history)
        started = time.perf_counter()  # the clock starts when the request is sent, not while it is built
        if epoch is not None:
            row = functools.partial(row, sent_s=round(started - epoch, 6))
        async with client.stream("POST", path, json=body) as resp:
            if resp.status_code != 200:
                status, reason = engine.classify_error(
                    resp.status_code, (await resp.aread()).decode(errors="replace")
                )
                return row(status=status, reason=reason, wall_s=time.perf_counter() - started)
            async for line in resp.aiter_lines():
                data = line.removeprefix("data:").strip() if line.startswith("data:") else ""
                if not data or data == "[DONE]":
                    continue
                chunk = json.loads(data)
                if "error" in chunk:
                    status, reason = engine.classify_error(400, data)
                    return row(status=status, reason=reason)
                if engine.has_token(chunk):
                    last = time.perf_counter()
                    first = first or last
                    arrivals.append(last)
                text = engine.text_so_far(chunk, text)
                ids = engine.output_ids_so_far(chunk, ids)
                finish = engine.finish_reason(chunk) or finish
                report = engine.read_final(chunk) or report
    except httpx.ReadTimeout:
        raise  # a stall: measure_request says so
    except (httpx.HTTPError, json.JSONDecodeError) as exc:
        return row(status="error", reason=f"{exc.__class__.__name__}: {exc}")
    wall = time.perf_counter() - started
    if report is None:
        return row(status="error", reason="the stream ended without the server's report")
    gaps = tuple(round(b - a, 6) for a, b in itertools.pairwise(arrivals))
    measured = _measurement(row, report, started, first, last, wall, (text, finish), gaps, template_tokens)
    return with_output_ids(measured, ids)


def with_output_ids(row: RequestMeasurement, ids: tuple[int, ...]) -> RequestMeasurement:
    """The answer's token ids kept where they are the whole answer: as many as the server counted, or one
    fewer where it stopped at the end of text (the end-of-text token is counted, not sent)."""
    if not ids:
        return dataclasses.replace(row, ids_missing="the server's stream carries no token ids")
    counted = row.completion_tokens
    if len(ids) == counted or (row.finish == "stop" and len(ids) == counted - 1):
        return dataclasses.replace(row, output_ids=ids)
    return dataclasses.replace(
        row, ids_missing=f"the stream carried {len(ids)} token ids where the server counted {counted}"
    )


def _measurement(
    row: functools.partial[RequestMeasurement],
    report: ServerReport,
    started: float,
    first: float | None,
    last: float | None,
    wall: float,
    said: tuple[str, str],
    gaps: tuple[float, ...],
    template_tokens: int = 0,
) -> RequestMeasurement:
    """The measured request from the server's report and the client's clock; `said`: the text and why it ended."""
    text, finish = said
    client_tps = None
    if first is not None and last is not None and last > first and report.completion_tokens > 1:
        client_tps = (report.completion_tokens - 1) / (last - first)
    status: RequestStatus
    if report.cached_tokens is None:
        status, reason = (
            "invalid",
            "the server did not report its cached-token count, so a cache hit cannot be ruled out",
        )
    elif report.cached_tokens > template_tokens:
        header = f" (more than the chat template's {template_tokens})" if template_tokens else ""
        status, reason = "invalid", f"{report.cached_tokens} prompt tokens came from the prefix cache{header}"
    else:
        status, reason = "ok", ""
    return row(
        status=status,
        reason=reason,
        prompt_tokens=report.prompt_tokens,
        completion_tokens=report.completion_tokens,
        cached_tokens=report.cached_tokens,
        ttft_s=None if first is None else first - started,
        decode_s=None if first is None or last is None else last - first,
        itl_s=gaps,
        text=text,
        finish=finish,
        client_decode_tps=client_tps,
        server_decode_tps=report.decode_tps,
        server_prefill_tps=report.prefill_tps,
        server_ttft_s=report.ttft_s,
        server_e2e_s=report.e2e_s,
        server_received_s=report.received_s,
        draft_tokens=report.draft_tokens,
        accepted_tokens=report.accepted_tokens,
        acceptance_rate=report.accepted_tokens / report.draft_tokens if report.draft_tokens else None,
        acceptance_length=report.acceptance_length,
        position_acceptance=report.position_acceptance,
        wall_s=wall,
    )
