"""The engine contract: one suite every engine passes (as Optuna's storages pass one storage suite). llama.cpp
runs it against the real llama-server with Gemma 3 270M; SGLang and vLLM against the simulator's front ends,
which speak their command lines, logs, APIs and metrics.

What every engine must do: turn parameters into an argv list bound to 127.0.0.1; turn speculation off for the
baseline; refuse what it cannot launch before a launch; come up, say that speculation is on and whether the
model has a chat template, and report a request's tokens with the prompt cache off, in both prompt forms (chat
through the template, text to continue) with why the answer ended; count drafts in its metrics; read its own
log; name why a server that died at start died; and read its final chunks in old and new spellings.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from sweep.core.errors import LaunchError
from sweep.engines import ENGINES, Engine, ServerSetup
from sweep.engines.llamacpp import LlamaCppEngine
from sweep.engines.llamacpp_bundle import gemma_model, llama_server_binary
from sweep.engines.sglang import SGLangEngine
from sweep.engines.values import DraftCounters, PromptForm, RequestSettings
from sweep.engines.vllm import VLLMEngine
from sweep.launch.server import ServerProcess, free_port
from sweep.probes.client import measure_request, probe_client
from sweep.records import RequestMeasurement

SIM = [sys.executable, "-m", "sweep.sim"]


@dataclass(frozen=True)
class Case:
    """One engine, set up the way the suite launches it, and what its own spelling of things is."""

    name: str
    engine: Callable[[], Engine]
    fixed: dict[str, Any]  # launch parameters every test shares (context, threads, memory)
    speculative: dict[str, Any]  # on top of fixed: turns speculation on
    dies_at_start: dict[str, Any]  # parameters that pass no check here and make the server exit at start
    reason: str  # words the exit reason for them must hold
    # (final chunk, (completion tokens, cached tokens, drafted, accepted)) in old and new spellings;
    # a None expectation: the chunk is not the final one.
    finals: list[tuple[dict[str, Any], tuple[int, int | None, int, int] | None]] = field(default_factory=list)
    chat_template: bool = True  # what the engine must find about the suite's model
    # Speculation that drafts at every step (a forced acceptance length acts on the drafts there are): the model
    # drafting for itself accepts nearly all, so a forced length shows.
    always_drafts: Callable[[], dict[str, Any]] | None = None


CASES = [
    Case(
        "llamacpp",
        lambda: LlamaCppEngine(ServerSetup([str(llama_server_binary())], str(gemma_model()))),
        {"ctx-size": 2048, "parallel": 1, "threads": 2},
        {"spec-type": "ngram-simple", "spec-ngram-simple-size-n": 3, "spec-ngram-simple-size-m": 16},
        {"cache-type-v": "q4_0", "flash-attn": "off"},
        "quantized V cache",
        [
            (
                {
                    "usage": {"completion_tokens": 16},
                    "timings": {"prompt_n": 9, "cache_n": 0, "predicted_n": 16},
                },
                (16, 0, 0, 0),
            ),
            (
                {
                    "usage": {"completion_tokens": 16},
                    "timings": {
                        "prompt_n": 9,
                        "cache_n": 2,
                        "predicted_n": 16,
                        "draft_n": 8,
                        "draft_n_accepted": 5,
                    },
                },
                (16, 2, 8, 5),
            ),
            ({"choices": [{"delta": {"content": "x"}}]}, None),
        ],
        chat_template=False,  # Gemma 3 270M is a base model: its GGUF has no tokenizer.chat_template
        always_drafts=lambda: {
            "spec-type": "draft-simple",
            "spec-draft-model": str(gemma_model()),
            "spec-draft-n-max": 4,
            "spec-draft-p-min": 0.0,
        },
    ),
    Case(
        "sglang",
        lambda: SGLangEngine(ServerSetup([*SIM, "--sim-time-scale", "0.01"], "/models/Qwen3.8-27B-int4")),
        {"kv-cache-dtype": "fp8_e4m3", "mem-fraction-static": 0.92},
        {"speculative-algorithm": "NEXTN", "speculative-num-steps": 3},
        {"speculative-algorithm": "BOGUS"},
        "Unknown speculative algorithm",
        [
            (
                {
                    "text": "x",
                    "meta_info": {
                        "finish_reason": {"type": "length"},
                        "completion_tokens": 16,
                        "cached_tokens": 0,
                        "spec_verify_ct": 5,
                        "spec_num_correct_drafts": 11,
                        "spec_num_proposed_drafts": 15,
                    },
                },
                (16, 0, 15, 11),
            ),
            (  # before 0.5.2x: spec_accept_token_num / spec_draft_token_num
                {
                    "text": "x",
                    "meta_info": {
                        "finish_reason": {"type": "length"},
                        "completion_tokens": 16,
                        "cached_tokens": 3,
                        "spec_verify_ct": 5,
                        "spec_accept_token_num": 10,
                        "spec_draft_token_num": 15,
                    },
                },
                (16, 3, 15, 10),
            ),
            ({"text": "x", "meta_info": {"finish_reason": None}}, None),
        ],
    ),
    Case(
        "vllm",
        lambda: VLLMEngine(
            ServerSetup([*SIM, "vllm"], "/models/Qwen3.8-27B-int4", extra_args=["--sim-time-scale", "0.01"])
        ),
        {"max-model-len": 65536, "kv-cache-dtype": "fp8"},
        {"speculative-config.method": "mtp", "speculative-config.num_speculative_tokens": 3},
        {"gpu-memory-utilization": 0.3},
        "No available memory for the cache blocks",
        [
            (
                {
                    "choices": [],
                    "usage": {
                        "prompt_tokens": 9,
                        "completion_tokens": 16,
                        "prompt_tokens_details": {"cached_tokens": 0},
                    },
                },
                (16, 0, 0, 0),
            ),
            (  # without --enable-prompt-tokens-details the cached count is not reported at all
                {
                    "choices": [],
                    "usage": {"prompt_tokens": 9, "completion_tokens": 16, "prompt_tokens_details": None},
                },
                (16, None, 0, 0),
            ),
            ({"choices": [{"index": 0, "text": "x"}], "usage": None}, None),
        ],
    ),
]
IDS = [c.name for c in CASES]


def test_every_registered_engine_is_in_the_suite() -> None:
    assert sorted(ENGINES) == sorted(IDS)


def prepared(case: Case) -> Engine:
    engine = case.engine()
    engine.prepare()
    return engine


@pytest.mark.server
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_argv_is_a_list_bound_to_loopback_and_the_baseline_drafts_nothing(case: Case) -> None:
    engine = prepared(case)
    speculative = engine.plan({**case.fixed, **case.speculative})
    baseline = engine.plan({**case.fixed, **case.speculative, **engine.baseline_params()})
    assert speculative.launchable and baseline.launchable, (speculative.invalid, baseline.invalid)
    command = engine.command(speculative, 18123)
    argv = command.argv
    assert all(isinstance(a, str) for a in argv) and command.health_path.startswith("/")
    assert argv[argv.index("--host") + 1] == "127.0.0.1" and argv[argv.index("--port") + 1] == "18123"
    # The plan says once what the trial's phases ask of the parameters.
    assert speculative.speculative and not baseline.speculative
    assert speculative.draft_in_pool == engine.draft_shares_pool and not baseline.draft_in_pool
    shape = speculative.shape
    assert shape is not None and shape.depth > 0 and baseline.shape is None
    assert shape == engine.spec_shape(speculative.params)
    assert speculative.kv_dtype == engine.kv_cache_dtype(speculative.params)
    assert len(engine.command(baseline, 18123).argv) < len(argv)  # no speculative flag survives


@pytest.mark.server
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_forced_acceptance_length_is_the_engines_own_switch_or_refused(case: Case) -> None:
    """A cost profile's launch forces the acceptance length through the engine's benchmarking switch (a flag
    or an environment variable, added to the trial's command and nothing else), or is refused before a launch
    where the engine has none; a configuration without speculation launches as it is."""
    engine = prepared(case)
    speculative = {**case.fixed, **case.speculative}
    baseline = engine.plan({**speculative, **engine.baseline_params()}, synthetic_length=2.5)
    assert baseline.launchable and baseline.synthetic is None
    forced = engine.plan(speculative, synthetic_length=2.5)
    if forced.synthetic is None:
        assert forced.invalid == f"{engine.name} has no switch that forces an acceptance length"
        return
    assert forced.launchable and forced.synthetic.length == 2.5
    assert forced.shape is not None  # a length past the chain is measured by no engine: refused
    too_long = engine.plan(speculative, synthetic_length=forced.shape.depth + 1.5)
    assert "is outside 1.." in too_long.invalid
    switch = forced.synthetic
    assert switch.argv or switch.env or switch.params
    plain, command = engine.command(engine.plan(speculative), 18123), engine.command(forced, 18123)
    assert command.argv == engine.argv({**forced.params, **switch.params}, 18123) + list(switch.argv)
    assert command.env == {**plain.env, **switch.env}
    assert (command.argv == plain.argv + list(switch.argv)) == (not switch.params)


@pytest.mark.server
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_what_cannot_launch_is_refused_before_a_launch(case: Case) -> None:
    engine = prepared(case)
    assert "no-such-parameter" in engine.plan({**case.fixed, "no-such-parameter": 1}).invalid
    assert "port" in engine.plan({**case.fixed, "port": 1}).invalid  # specsweep sets it


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_final_chunks_in_old_and_new_spellings(case: Case) -> None:
    engine = case.engine()
    for chunk, expected in case.finals:
        report = engine.read_final(chunk)
        if expected is None:
            assert report is None, chunk
            continue
        assert report is not None, chunk
        assert (
            report.completion_tokens,
            report.cached_tokens,
            report.draft_tokens,
            report.accepted_tokens,
        ) == (expected)


@pytest.mark.server
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_server_that_dies_at_start_says_why(case: Case, tmp_path: Path) -> None:
    engine = prepared(case)
    port = free_port()
    argv = engine.argv({**case.fixed, **case.dies_at_start}, port)
    server = ServerProcess(argv, tmp_path / "server.log", engine.env(), exit_reason=engine.exit_reason)
    with server, pytest.raises(LaunchError, match=case.reason):
        server.wait_ready(f"http://127.0.0.1:{port}{engine.health_path()}", timeout_s=120)


@pytest.mark.server
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_live_server_reports_uncached_tokens_drafts_and_its_own_facts(case: Case, tmp_path: Path) -> None:
    engine = prepared(case)
    params = engine.plan({**case.fixed, **case.speculative}).params
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    server = ServerProcess(
        engine.argv(params, port), tmp_path / "server.log", engine.env(), engine.exit_reason
    )
    with server:
        server.wait_ready(base_url + engine.health_path(), timeout_s=120)
        assert server.await_line(engine.ready_marker)  # readiness, from the log as from any log
        facts = engine.launch_facts(server.log_text())
        assert (facts.engine, facts.model) == (case.name, engine.setup.model)
        assert facts.context_length or facts.kv_pool_tokens  # the log says how much context the server has
        with httpx.Client(base_url=base_url, timeout=30) as client:
            engine.inspect_running(client, facts, params, server.log_text())
        assert facts.speculation_requested and facts.speculation_active
        assert facts.chat_template is case.chat_template and facts.chat_template_source
        rows, counted = asyncio.run(_twice(engine, base_url, PromptForm.COMPLETION))
        chat, _ = asyncio.run(_twice(engine, base_url, PromptForm.CHAT))
        # A workload's stop sequence ends the answer where its task does: a piece of what it said, from the middle.
        said = rows[0].text
        stop = next(said[i : i + 4] for i in range(len(said) // 2, len(said)) if said[i : i + 4].strip())
        stopped, _ = asyncio.run(_twice(engine, base_url, PromptForm.COMPLETION, stop=(stop,)))
        # The output check's near-tie probe: each form's answer continued from its middle, one token, the top five.
        ranked = [
            asyncio.run(_ranked(engine, base_url, form, answer.text[: len(answer.text) // 2]))
            for form, answer in ((PromptForm.CHAT, chat[0]), (PromptForm.COMPLETION, rows[0]))
        ]
    # The same prompt twice, the cache flushed between: neither reuses a prefix, both are valid.
    assert [r.status for r in rows] == ["ok", "ok"], [r.reason for r in rows]
    assert [r.cached_tokens for r in rows] == [0, 0]
    assert all(r.completion_tokens == 24 and r.text and r.finish == "length" for r in rows)
    # Through the chat template (llama-server's ChatML fallback where the model has none): valid too.
    assert [r.status for r in chat] == ["ok", "ok"], [r.reason for r in chat]
    assert all(r.completion_tokens == 24 and r.text and r.finish == "length" for r in chat)
    assert [(r.status, r.finish) for r in stopped] == [("ok", "stop")] * 2, [r.reason for r in stopped]
    assert all(r.text == said[: said.find(stop)] for r in stopped), (stop, said, stopped[0].text)
    for choices in ranked:
        assert len(choices) == 5 and all(isinstance(t, str) and lp <= 0 for t, lp in choices), choices
        assert [lp for _, lp in choices] == sorted((lp for _, lp in choices), reverse=True)
    # Acceptance is known: from each request's report, or from the server's counters over the requests.
    before, after = counted
    if before is None:
        assert engine.drafts_per_request and all(r.acceptance_length for r in rows)
    else:
        assert after is not None
        assert (
            after.steps > before.steps
            and 0 <= after.accepted - before.accepted <= after.drafted - before.drafted
        )


@pytest.mark.server
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_a_forced_acceptance_length_is_what_the_live_server_accepts(case: Case, tmp_path: Path) -> None:
    """Launched with the engine's switch at a mean of 2.5 tokens a verify step, the server accepts about that
    where its drafts would accept nearly all."""
    engine = prepared(case)
    drafting = case.always_drafts() if case.always_drafts else case.speculative
    plan = engine.plan({**case.fixed, **drafting}, synthetic_length=2.5)
    port = free_port()
    command = engine.command(plan, port)
    server = ServerProcess(command.argv, tmp_path / "server.log", command.env, engine.exit_reason)
    with server:
        server.wait_ready(f"http://127.0.0.1:{port}{command.health_path}", timeout_s=120)
        rows, (before, after) = asyncio.run(
            _twice(engine, f"http://127.0.0.1:{port}", PromptForm.COMPLETION, max_tokens=96)
        )
    assert [r.status for r in rows] == ["ok", "ok"], [r.reason for r in rows]
    if before is None:
        lengths = [r.acceptance_length for r in rows if r.acceptance_length]
        assert len(lengths) == 2 and sum(lengths) / 2 == pytest.approx(2.5, abs=0.5)
    else:
        assert after is not None and after.steps > before.steps
        assert after.acceptance_length_since(before) == pytest.approx(2.5, abs=0.5)


CONTENT = "Copy this list exactly: alpha, beta, gamma, delta, alpha, beta, gamma, delta, alpha, beta."


async def _ranked(
    engine: Engine, base_url: str, form: PromptForm, answered: str
) -> tuple[tuple[str, float], ...]:
    async with probe_client(base_url, 60) as client:
        return await engine.top_tokens(client, CONTENT, form, answered, (), 5)


async def _twice(
    engine: Engine, base_url: str, form: PromptForm, max_tokens: int = 24, stop: tuple[str, ...] = ()
) -> tuple[list[RequestMeasurement], tuple[DraftCounters | None, DraftCounters | None]]:
    content = CONTENT
    settings = RequestSettings(max_tokens=max_tokens, ignore_eos=True, stop=stop)
    rows = []
    async with probe_client(base_url, 60) as client:
        before = await engine.draft_counters(client)
        for repeat in range(2):
            assert await engine.flush(client) == ""
            rows.append(
                await measure_request(
                    client,
                    engine,
                    content,
                    settings,
                    workload="contract",
                    repeat=repeat,
                    stream=0,
                    nonce="n",
                    form=form,
                    template_tokens=await engine.template_tokens(client) if form is PromptForm.CHAT else 0,
                )
            )
        await asyncio.sleep(0.2)  # counters are added when a request's slot is released
        after = await engine.draft_counters(client)
    return rows, (before, after)


def test_a_study_from_before_the_engine_was_stored_is_read_by_its_command_lines() -> None:
    from sweep.engines import engine_of_argvs

    assert engine_of_argvs(
        [["python", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "1"]]
    ) == ("sglang")
    assert engine_of_argvs([["vllm", "serve", "/m", "--port", "1"]]) == "vllm"
    assert engine_of_argvs([["llama-server", "-m", "/m.gguf", "--port", "1"]]) == "llamacpp"
    assert engine_of_argvs([]) == "llamacpp"
