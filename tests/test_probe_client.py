"""The streaming client against scripted HTTP replies (an injected httpx transport): the paths a real
llama-server does not take with our settings (a cache hit) or takes only at scale (context overflow)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from sweep.engines import LlamaCppEngine, ServerSetup
from sweep.engines.base import RequestSettings
from sweep.probes.client import measure_request, unique_content
from sweep.probes.runner import ProbeSettings, probe
from sweep.probes.workloads import Workload

ENGINE = LlamaCppEngine(ServerSetup(launcher=["llama-server"], model="m.gguf"))


def sse(timings: dict[str, Any], tokens: int = 5) -> bytes:
    chunks = [{"choices": [{"delta": {"content": f"t{i} "}}]} for i in range(tokens)]
    chunks.append({"choices": [], "usage": {"completion_tokens": tokens}, "timings": timings})
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def timings(cache_n: int = 0, **extra: float) -> dict[str, Any]:
    return {"cache_n": cache_n, "prompt_n": 40, "predicted_n": 5, "predicted_per_second": 50.0,
            "prompt_per_second": 400.0, **extra}  # fmt: skip


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
    error = {"error": {"code": 400, "type": "exceed_context_size_error",
                       "message": "request (9000 tokens) exceeds the available context size (4096 tokens), try increasing it"}}  # fmt: skip
    row = measure(lambda request: httpx.Response(400, json=error))
    assert row.status == "does_not_fit" and "9000 tokens" in row.reason


def test_stream_without_report_is_an_error() -> None:
    row = measure(lambda request: httpx.Response(200, content=b'data: {"choices": []}\n\ndata: [DONE]\n\n'))
    assert row.status == "error" and "without the server's report" in row.reason


def test_every_prompt_is_unique() -> None:
    prompts: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(501, text="This server does not support metrics endpoint.")
        prompts.append(json.loads(request.content)["messages"][0]["content"])
        return httpx.Response(200, content=sse(timings()))

    workloads = [Workload("code", ("same prompt",)), Workload("tool", ("same prompt",), streams=2)]
    settings = ProbeSettings(repeats=3, warmup=False)
    result = asyncio.run(
        probe("http://s", ENGINE, workloads, settings, transport=httpx.MockTransport(handler))
    )
    assert len(prompts) == 9 and len(set(prompts)) == 9
    assert result.summaries["code"].decode_tps is not None and result.summaries["code"].requests == 3
    assert result.summaries["tool/2streams"].aggregate_tps is not None
    assert unique_content("abc", "x").startswith("[request abc]")


@pytest.mark.parametrize("status", ["does_not_fit", "invalid"])
def test_summary_of_a_workload_with_no_valid_request_keeps_the_reason(status: str) -> None:
    from sweep.probes.runner import summarize
    from sweep.results import RequestMeasurement

    rows = [RequestMeasurement("w", i, 0, f"n{i}", status=status, reason="why") for i in range(3)]  # type: ignore[arg-type]
    summary = summarize("w", rows, [])
    assert (summary.status, summary.reason, summary.decode_tps) == (status, "why", None)
