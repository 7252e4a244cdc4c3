"""The streaming client against scripted HTTP replies (an injected httpx transport): the paths a real
llama-server does not take with our settings (a cache hit) or takes only at scale (context overflow)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from statistics import median
from typing import Any

import httpx
import pytest

from sweep.engines import LlamaCppEngine, ServerSetup
from sweep.engines.values import RequestSettings
from sweep.probes.client import measure_request
from sweep.probes.runner import probe
from sweep.probes.settings import ProbeSettings
from sweep.probes.workloads import Arrivals, Workload

ENGINE = LlamaCppEngine(ServerSetup(launcher=["llama-server"], model="m.gguf"))


def sse(timings: dict[str, Any], tokens: int = 5) -> bytes:
    chunks = [{"choices": [{"delta": {"content": f"t{i} "}}]} for i in range(tokens)]
    chunks.append({"choices": [], "usage": {"completion_tokens": tokens}, "timings": timings})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def timings(cache_n: int = 0, **extra: float) -> dict[str, Any]:
    return {
        "cache_n": cache_n,
        "prompt_n": 40,
        "predicted_n": 5,
        "predicted_per_second": 50.0,
        "prompt_per_second": 400.0,
        **extra,
    }


def measure(handler: Any) -> Any:
    async def go() -> Any:
        async with httpx.AsyncClient(base_url="http://s", transport=httpx.MockTransport(handler)) as client:
            return await measure_request(
                client, ENGINE, "hi", RequestSettings(), workload="w", repeat=0, stream=0, nonce="n"
            )

    return asyncio.run(go())


def test_request_body_turns_the_prompt_cache_off_and_fixes_sampling() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, content=sse(timings(draft_n=10, draft_n_accepted=8)))

    row = measure(handler)
    body = seen[0]
    assert (body["cache_prompt"], body["temperature"], body["stream"], body["seed"]) == (
        False,
        0.0,
        True,
        1234,
    )
    assert row.status == "ok" and row.cached_tokens == 0
    assert (row.draft_tokens, row.accepted_tokens, row.acceptance_rate) == (10, 8, 0.8)
    assert row.server_decode_tps == 50.0 and row.decode_tps == 50.0
    assert row.ttft_s is not None and row.client_decode_tps is not None


def test_cached_tokens_make_the_measurement_invalid() -> None:
    row = measure(lambda request: httpx.Response(200, content=sse(timings(cache_n=39))))
    assert row.status == "invalid"
    assert "39 prompt tokens came from the prefix cache" in row.reason


def test_context_overflow_is_recorded_as_does_not_fit() -> None:
    error = {
        "error": {
            "code": 400,
            "type": "exceed_context_size_error",
            "message": "request (9000 tokens) exceeds the available context size (4096 tokens), try increasing it",
        }
    }
    row = measure(lambda request: httpx.Response(400, json=error))
    assert row.status == "does_not_fit" and "9000 tokens" in row.reason


def test_stream_without_report_is_an_error() -> None:
    row = measure(lambda request: httpx.Response(200, content=b'data: {"choices": []}\n\ndata: [DONE]\n\n'))
    assert row.status == "error" and "without the server's report" in row.reason


class FakeServer:
    """A scripted llama-server: a tokenizer whose first token is the text's first character (so hex nonces
    collide often), and chat replies whose cached-token count a test chooses per request."""

    def __init__(self, cached: Any = lambda content, attempt: 0) -> None:
        self.contents: list[str] = []
        self.cached = cached
        self.seen: dict[str, int] = {}

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(501, text="This server does not support metrics endpoint.")
        body = json.loads(request.content)
        if request.url.path == "/tokenize":
            return httpx.Response(200, json={"tokens": [ord(c) for c in body["content"]]})
        content = body["messages"][0]["content"]
        self.contents.append(content)
        task = content.split("\n", 1)[1]
        self.seen[task] = self.seen.get(task, 0) + 1
        return httpx.Response(200, content=sse(timings(cache_n=self.cached(task, self.seen[task]))))

    def run(self, workloads: list[Workload], repeats: int = 3) -> Any:
        settings = ProbeSettings(repeats=repeats, warmup=False)
        return asyncio.run(
            probe("http://s", ENGINE, workloads, settings, transport=httpx.MockTransport(self))
        )


def prompts(n: int) -> tuple[str, ...]:
    return tuple(f"prompt {i}" for i in range(n))


def test_every_prompt_is_unique_and_no_two_in_a_batch_share_a_first_token() -> None:
    server = FakeServer()
    workloads = [Workload("code", prompts(3)), Workload("tool", prompts(12), streams=4)]
    result = server.run(workloads)
    assert len(server.contents) == 15 and len(set(server.contents)) == 15
    for batch in range(3):  # the 4-stream batches: first characters (first tokens here) all different
        firsts = [c[0] for c in server.contents[3 + 4 * batch : 3 + 4 * (batch + 1)]]
        assert len(set(firsts)) == 4
    assert all(c.split("\n", 1)[0].isalnum() for c in server.contents)  # the nonce is the very first text
    assert result.summaries["code"].decode_tps is not None and result.summaries["code"].requests == 3
    four = result.summaries["tool/4streams"]
    assert four.aggregate_tps is not None and four.sum_stream_tps is not None
    assert four.sum_stream_tps.median == 4 * 50.0  # the field reports' aggregate: per-stream rates added
    # The same prompts and nonces in every trial, so outputs compare across configurations.
    again = FakeServer()
    again.run(workloads)
    assert again.contents == server.contents


def test_a_batch_with_an_invalid_request_is_measured_again_whole() -> None:
    server = FakeServer(cached=lambda task, seen: 7 if task == "prompt 1" and seen == 1 else 0)
    summary = server.run([Workload("tool", prompts(4), streams=2)], repeats=2).summaries["tool/2streams"]
    assert summary.status == "ok" and summary.remeasured == 1 and summary.requests == 4
    assert server.seen["prompt 0"] == 2  # its batch partner was measured again too, not kept as a survivor
    assert "1 batches measured again" in summary.reason


def test_a_batch_that_stays_invalid_gives_the_workload_no_numbers() -> None:
    server = FakeServer(cached=lambda task, seen: 7 if task == "prompt 1" else 0)
    summary = server.run([Workload("tool", prompts(4), streams=2)], repeats=2).summaries["tool/2streams"]
    assert summary.status == "invalid" and summary.decode_tps is None and summary.aggregate_tps is None
    assert "7 prompt tokens came from the prefix cache (in every one of 3 attempts" in summary.reason


def test_workloads_sharing_prompts_take_different_ones() -> None:
    from sweep.space import parse_space

    space = parse_space(
        {
            "engine": "llamacpp",
            "workloads": [{"class": "tool", "context": [None, 2048], "streams": [1, 2]}],
            "probe": {"repeats": 3},
        },
        Path("."),
    )
    used = [w.prompt_index(r, s) for w in space.workloads for r in range(3) for s in range(w.streams)]
    assert len(used) == 18 and len(set(used)) == 18


def test_a_failed_cache_flush_fails_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    from sweep.engines import sglang

    monkeypatch.setattr(sglang, "FLUSH_ATTEMPTS", 2)
    engine = sglang.SGLangEngine(ServerSetup(launcher=["sglang"], model="m"))

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/tokenize":
            return httpx.Response(
                200, json={"tokens": [ord(c) for c in json.loads(request.content)["prompt"]]}
            )
        if request.url.path == "/flush_cache":
            return httpx.Response(400, text="Cache not flushed: there are running or waiting requests.\n")
        raise AssertionError(f"nothing is measured after a failed flush ({request.url.path})")

    settings = ProbeSettings(repeats=1, warmup=False)
    result = asyncio.run(
        probe(
            "http://s", engine, [Workload("code", ("p",))], settings, transport=httpx.MockTransport(handler)
        )
    )
    summary = result.summaries["code"]
    assert summary.status == "error" and summary.remeasured == 2
    assert "cache was not flushed: /flush_cache answered HTTP 400 (Cache not flushed" in summary.reason


def test_a_batchs_decode_window_is_on_the_servers_clock_where_it_stamps_every_request() -> None:
    """The real SGLang 0.5.17's four answers of one batch (H200): their window from the server's stamps alone,
    whatever the client's clock says; the client's where a request lacks a stamp. Never the two added."""
    from sweep.engines import SGLangEngine
    from sweep.probes.windows import window_rate
    from sweep.records import RequestMeasurement

    recorded = Path(__file__).parent / "recordings" / "sglang-0.5.17-h200" / "eagle-acc3-generate_batch4.json"
    metas = json.loads(recorded.read_text())
    engine = SGLangEngine(ServerSetup(launcher=["sglang"], model="/m"))
    rows = []
    for stream, meta in enumerate(metas):
        report = engine.read_final({"meta_info": meta})
        assert report is not None
        rows.append(
            RequestMeasurement(
                "w",
                0,
                stream,
                "n",
                "ok",
                completion_tokens=report.completion_tokens,
                ttft_s=0.01,
                decode_s=0.02,
                sent_s=100.0 * stream,  # a client clock far off the server's
                server_ttft_s=report.ttft_s,
                server_e2e_s=report.e2e_s,
                server_received_s=report.received_s,
            )
        )
    first = min(m["prefill_finished_time"] for m in metas)
    last = max(m["request_finished_ts"] for m in metas)
    tokens = sum(m["completion_tokens"] - 1 for m in metas)
    assert window_rate(rows) == pytest.approx(tokens / (last - first), rel=1e-3)
    unstamped = [*rows[:3], dataclasses.replace(rows[3], server_received_s=None)]
    assert window_rate(unstamped) == pytest.approx(tokens / (300.03 - 0.01))  # the client's clock throughout


def test_the_batch_is_how_many_requests_decoded_at_once() -> None:
    from sweep.probes.windows import decode_batch
    from sweep.records import RequestMeasurement

    def row(first: float, decode: float) -> RequestMeasurement:
        return RequestMeasurement("w", 0, 0, "n", "ok", ttft_s=first, decode_s=decode)

    assert decode_batch([row(0.1, 1.0), row(0.1, 1.0)]) == pytest.approx(2.0)
    assert decode_batch([row(0.0, 1.0), row(1.0, 1.0)]) == pytest.approx(1.0)  # one after the other
    # The second decodes through the first's second half: each sees 1.5 on average over its own decode.
    assert decode_batch([row(0.0, 1.0), row(0.5, 1.0)]) == pytest.approx(1.5)
    assert decode_batch([row(0.0, 1.0), RequestMeasurement("w", 0, 1, "m", "error")]) is None


def test_an_open_loop_sends_each_request_on_its_arrival_clock() -> None:
    """Requests go out at the workload's offsets (prepared before the clock starts), each says when it was
    sent, and the repeat's offered rate and goodput come from those times."""
    server = FakeServer()
    workload = Workload("tool", prompts(16), rate=20.0, arrivals=Arrivals.CONSTANT, requests=8)
    result = server.run([workload], repeats=2)
    summary = result.summaries["tool/20rps"]
    assert summary.status == "ok" and summary.requests == 16 and len(set(server.contents)) == 16
    assert (summary.rate, summary.arrivals) == (20.0, "constant")
    offered, goodput = [], []
    for repeat in range(2):
        rows = [r for r in result.requests if r.repeat == repeat]
        sent = [r.sent_s for r in rows]
        # Each goes out at its arrival time, never before it (a busy machine may send it late), in order.
        offsets = workload.send_offsets(repeat)
        assert all(s >= o - 1e-3 for s, o in zip(sent, offsets, strict=True)) and sent == sorted(sent)
        offered.append((len(rows) - 1) / (sent[-1] - sent[0]))
        # No limit set: every answered request counts, over the time from the first sent to the last answered.
        goodput.append(len(rows) / (max(r.sent_s + r.wall_s for r in rows) - sent[0]))
    assert summary.offered_rps is not None and summary.offered_rps.median == pytest.approx(median(offered))
    assert summary.goodput_rps is not None and summary.goodput_rps.median == pytest.approx(median(goodput))
    assert summary.batch is not None and summary.batch.median < 2  # answered at once: they never overlap


def test_goodput_counts_the_requests_within_every_limit() -> None:
    from sweep.probes.windows import decode_batch, goodput
    from sweep.records import RequestMeasurement

    def row(sent: float, ttft: float, gaps: tuple[float, ...]) -> RequestMeasurement:
        decode = sum(gaps)
        timing = {"sent_s": sent, "ttft_s": ttft, "decode_s": decode, "wall_s": ttft + decode}
        return RequestMeasurement("w", 0, 0, "n", "ok", itl_s=gaps, completion_tokens=len(gaps) + 1, **timing)

    rows = [row(0.0, 0.2, (0.1,) * 8), row(1.0, 0.9, (0.1,) * 8), row(3.0, 0.3, (0.1,) * 7 + (0.6,))]
    span = 3.0 + 0.3 + 1.3  # the first sent to the last answered
    assert goodput(rows, {}) == pytest.approx(3 / span)
    assert goodput(rows, {"ttft_p90_s": 0.5}) == pytest.approx(2 / span)
    assert goodput(rows, {"ttft_p90_s": 0.5, "itl_p99_s": 0.3}) == pytest.approx(1 / span)
    assert goodput(rows, {"tpot_p50_s": 0.1}) == pytest.approx(2 / span)  # the third: 1.3 s / 8 tokens
    # Windows line up through when each was sent: one after the other decodes alone.
    assert decode_batch(rows) == pytest.approx(1.0)


def capacity_search(
    workload: Workload, limits: dict[str, float], answer: Callable[[httpx.Request], Awaitable[None]]
) -> Any:
    """A capacity search against a server whose every answer waits on `answer`."""

    async def server(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(501, text="This server does not support metrics endpoint.")
        if request.url.path == "/tokenize":
            body = json.loads(request.content)
            return httpx.Response(200, json={"tokens": [ord(c) for c in body["content"]]})
        await answer(request)
        return httpx.Response(200, content=sse(timings()))

    settings = ProbeSettings(repeats=1, warmup=False, latency_limits=limits)
    return asyncio.run(probe("http://s", ENGINE, [workload], settings, transport=httpx.MockTransport(server)))


def test_a_capacity_search_bisects_to_the_highest_rate_within_the_limits() -> None:
    """A server whose answer takes 40 ms per request in flight: alone it answers in 40 ms, three at once in
    120 ms. Held to a 100 ms time to first token, requests every 100 ms never overlap and hold it; every 32 ms
    three overlap and do not. The search runs both ends of its range, then bisects on a log scale. (Times wide
    enough that a busy machine's late wake-ups, tens of milliseconds, do not cross the limit.)"""
    in_flight, tasks = 0, []

    async def answer(request: httpx.Request) -> None:
        nonlocal in_flight
        tasks.append(json.loads(request.content)["messages"][0]["content"].split("\n", 1)[1])
        in_flight += 1
        try:
            await asyncio.sleep(0.04 * in_flight)
        finally:
            in_flight -= 1

    workload = Workload(
        "tool", prompts(30), arrivals=Arrivals.CONSTANT, requests=6, capacity=(1.0, 100.0), capacity_steps=3
    )
    result = capacity_search(workload, {"ttft_p90_s": 0.1}, answer)
    summary = result.summaries["tool/capacity"]
    assert summary.status == "ok" and summary.capacity_rps is not None and summary.unit == "req/s"
    steps = [(round(s.rate, 1), s.held) for s in summary.capacity_steps]
    assert len(steps) == 5 and steps[:4] == [(1.0, True), (100.0, False), (10.0, True), (31.6, False)]
    assert 10.0 <= summary.capacity_rps.median < 31.6 and summary.headline == summary.capacity_rps
    assert summary.capacity_steps[1].over["ttft_p90_s"] > 0
    # Every rate the same prompts (runs differ by their rate alone), each request its own nonce; the rows say
    # the rate they ran at.
    sent = sum(s.requests for s in summary.capacity_steps)
    assert summary.requests == sent >= 30 and len({r.nonce for r in result.requests}) == sent
    # 1 req/s, then 100 req/s (after a run near the limit at 1 req/s was repeated with the next prompts)
    first = summary.capacity_steps[0].requests
    assert set(tasks[:6]) == set(tasks[first : first + 6]) == set(prompts(6))
    assert {r.workload for r in result.requests} >= {"tool/1rps", "tool/100rps", "tool/10rps"}


# A limit of 1 s and answers of 0.9 s (near it) or 0.1 s: a busy machine's scheduling adds tens of milliseconds,
# which a 0.1 s limit and 0.09 s answers could not absorb.
@pytest.mark.parametrize(("answer_s", "judged_on"), [(0.9, [12, 12]), (0.1, [6, 6])])
def test_a_capacity_run_near_a_limit_is_run_again_and_judged_on_both(
    answer_s: float, judged_on: list[int]
) -> None:
    """Six requests' p90 within 15% of a limit is a coin toss: the run is repeated at the same rate (new
    prompts) and judged on all twelve; a run far from every limit is not."""

    async def answer(_request: httpx.Request) -> None:
        await asyncio.sleep(answer_s)

    workload = Workload(
        "tool", prompts(60), arrivals=Arrivals.CONSTANT, requests=6, capacity=(10.0, 20.0), capacity_steps=1
    )
    result = capacity_search(workload, {"ttft_p90_s": 1.0}, answer)
    summary = result.summaries["tool/capacity"]
    assert [s.rate for s in summary.capacity_steps] == [10.0, 20.0]  # the top held: the search ends there
    assert [s.requests for s in summary.capacity_steps] == judged_on
    assert summary.requests == len({r.nonce for r in result.requests}) == sum(judged_on)
