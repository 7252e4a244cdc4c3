"""SGLang log facts on sample logs in each format the reference lists (0.5.23, older releases, failures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sweep.engines import ServerSetup, SGLangEngine, sglang_log

LOGS = Path(__file__).parent / "logs"


def test_new_format_with_draft_pool_caps_and_graphs() -> None:
    facts = sglang_log.facts_from_log((LOGS / "sglang-0.5.23-nextn-hybrid.log").read_text())
    assert facts.kv_pool_tokens == 44913 and facts.draft_kv_pool_tokens == 44913
    assert facts.kv_cache_gb == pytest.approx(1.38)
    assert (facts.weight_gb, facts.free_after_pool_gb) == (17.70, 7.90)
    assert facts.graph_capture_gb == pytest.approx(0.57) and facts.free_after_graphs_gb == 7.23
    assert [g.graph for g in facts.graph_captures] == ["target verify", "draft decode"]
    assert (facts.max_running_requests, facts.context_length) == (1, 262144)
    assert facts.token_capacity == 44913
    assert [c.split(" ")[0] for c in facts.limit_changes] == [
        "Max",
        "speculative_num_draft_tokens",
        "max_running_requests",
        "KV",
    ]
    assert (
        "capped to 1 by the mamba state cache (max_mamba_cache_size=10, 5 state slots per request)"
        in facts.limit_changes[2]
    )


def test_old_format_without_dtype_and_old_capture_lines() -> None:
    facts = sglang_log.facts_from_log((LOGS / "sglang-0.5.19-old-format.log").read_text())
    assert facts.kv_pool_tokens == 211357 and facts.draft_kv_pool_tokens is None
    assert facts.kv_cache_gb == pytest.approx(6.46)
    assert facts.graph_capture_gb == pytest.approx(1.13) and facts.free_after_graphs_gb == 2.97
    assert (facts.max_running_requests, facts.context_length, facts.weight_gb) == (3, 153600, 10.20)


@pytest.mark.parametrize(
    ("line", "tokens", "gb", "draft"),
    [
        (
            "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 500000, KV size: 32.10 GB",
            500000,
            32.10,
            None,
        ),
        (
            "Full KV Cache is allocated. dtype: torch.bfloat16, #tokens: 90000, K size: 1.00 GB, V size: 1.00 GB\n"
            "SWA KV Cache is allocated. dtype: torch.bfloat16, #tokens: 30000, K size: 0.30 GB, V size: 0.30 GB",
            90000,
            2.0,
            None,
        ),
        (
            "Post-capture KV sizing: KV cache allocated. dtype: torch.bfloat16, #tokens: 120000, KV size: 5.50 GB, avail mem=1.50 GB",
            120000,
            5.50,
            None,
        ),
    ],
)
def test_mla_swa_and_post_capture_pools(line: str, tokens: int, gb: float, draft: int | None) -> None:
    facts = sglang_log.facts_from_log(line)
    assert (facts.kv_pool_tokens, facts.kv_cache_gb, facts.draft_kv_pool_tokens) == (
        tokens,
        pytest.approx(gb),
        draft,
    )


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (
            (LOGS / "sglang-capture-oom.log").read_text(),
            "CUDA-graph capture ran out of memory: CUDA out of memory. Tried to allocate 1.69 GiB",
        ),
        (
            "Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.5",
            "Not enough memory. Please try to increase --mem-fraction-static",
        ),
        (
            "Traceback...\nAssertionError: Can not alloc mamba cache\n",
            "mamba state allocation failed: Can not alloc mamba cache",
        ),
        (
            "sglang serve: error: unrecognized arguments: --speculative-ngram-branch-length 18",
            "SGLang rejected the arguments: unrecognized arguments: --speculative-ngram-branch-length 18",
        ),
        (
            "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match --cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill",
            "ambiguous option: --cuda-graph-max-bs",
        ),
        (
            "ValueError: Unknown speculative algorithm name: MEDUSA",
            "Unknown speculative algorithm name: MEDUSA",
        ),
        (
            'speculative_hook.py", line 1160, in _handle_eagle_family\n    assert (\nAssertionError',
            "without --speculative-num-steps",
        ),
        (
            'speculative_hook.py", line 1274, in _handle_eagle_family\n    cfg.speculative_eagle_topk > 1\n'
            "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
            "set speculative-eagle-topk",
        ),
        (
            "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
            "max_mamba_cache_size=2, mamba_ratio=5, resulting max_num_reqs=0. Try: (1) reduce",
            "state cache is too small to serve any requests. max_mamba_cache_size=2",
        ),
    ],
)
def test_exit_reasons(log: str, reason: str) -> None:
    assert reason in SGLangEngine(ServerSetup([], "")).exit_reason(log, 1)


def test_inspect_log_command(capsys: pytest.CaptureFixture[str]) -> None:
    from sweep.cli import main

    assert main(["inspect-log", "--engine", "sglang", str(LOGS / "sglang-0.5.23-nextn-hybrid.log")]) == 0
    out = capsys.readouterr().out
    assert "kv_pool_tokens: 44913" in out and "free_after_pool_gb: 7.9" in out
    assert (
        main(["inspect-log", "--engine", "llamacpp", "--json", str(LOGS / "llamacpp-11434-ngram-mod.log")])
        == 0
    )
    facts = json.loads(capsys.readouterr().out)
    assert (facts["n_slots"], facts["n_ctx_slot"]) == (1, 4096)
    assert main(["inspect-log", "--engine", "sglang", str(LOGS / "missing.log")]) == 2
    assert "log file" in capsys.readouterr().err


def test_inspect_log_tells_the_story_of_a_launch_that_died_at_capture(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A log that ends in a CUDA-graph capture out of memory: never ready, why it stopped, and the memory the
    capture needed against what the pool left."""
    from sweep.cli import main

    assert main(["inspect-log", "--engine", "sglang", str(LOGS / "sglang-capture-oom.log")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "ready: no, the server never said it serves requests"
    assert lines[1].startswith("stopped: CUDA-graph capture ran out of memory")
    assert "needed 1.69 GB with 1.02 GB left after the KV pool (0.67 GB short)" in lines[2]
    assert main(["inspect-log", "--engine", "sglang", str(LOGS / "sglang-0.5.23-nextn-hybrid.log")]) == 0
    story = capsys.readouterr().out.splitlines()
    assert story[0] == "ready: yes"
    assert any("capped to 1 by the mamba state cache" in line for line in story)
    assert any(line.startswith("mamba state slots: 10") for line in story)


def test_typed_facts_survive_the_store_and_records_from_before_them_are_read() -> None:
    from sweep.records import CaptureOom, Finding, GraphCapture, LaunchFacts

    facts = LaunchFacts(
        token_capacity=44913,
        prefill_chunk_tokens=4096,
        graph_captures=[GraphCapture("target verify", 0.42, 7.1, [1, 2, 4])],
        capture_oom=CaptureOom(1.5, 0.25),
        sizing=[Finding("KV pool", False, "cut x5", {"predicted_pool_tokens": 211357.0}, {"--x": 1})],
    )
    assert LaunchFacts.from_dict(json.loads(json.dumps(facts.to_dict()))) == facts
    old = {
        "kv_pool_tokens": 10,
        "extra": {
            "max_total_num_tokens": 44913,
            "chunked_prefill_size": 4096,
            "graph_captures": [{"graph": "cuda", "gb": 0.5, "free_after_gb": 6.0, "sizes": [1, 2]}],
            "max_mamba_cache_size": 12,
            "sizing": [{"what": "KV pool", "ok": True, "detail": "", "numbers": {}, "flags": {}}],
        },
    }
    read = LaunchFacts.from_dict(old)
    assert (read.kv_pool_tokens, read.token_capacity, read.prefill_chunk_tokens, read.state_slots) == (
        10,
        44913,
        4096,
        12,
    )
    assert read.graph_captures == [GraphCapture("cuda", 0.5, 6.0, [1, 2])]
    assert read.sizing == [Finding("KV pool", True)]


RECORDED = Path(__file__).parent / "recordings" / "sglang-0.5.17-h200"


def test_a_real_0_5_17_draft_keeps_its_own_weights_and_pool() -> None:
    """EAGLE on the H200: two `Load weight end` and two `Memory pool end` lines, target's first; free memory is
    what the last pool left (12.41 GB), not the first (37.70 GB)."""
    facts = sglang_log.facts_from_log((RECORDED / "eagle-acc3-nograph.server.log").read_text())
    assert (facts.weight_gb, facts.draft_weight_gb) == (0.13, 0.05)
    assert facts.kv_pool_tokens == facts.draft_kv_pool_tokens == 13255088
    assert facts.kv_cache_gb == pytest.approx(101.12) and facts.draft_kv_cache_gb == pytest.approx(25.28)
    assert facts.free_after_pool_gb == 12.41
    assert facts.graph_captures == [] and facts.unfinished_capture is None  # --disable-cuda-graph


def test_a_real_0_5_17_capture_lists_its_batch_sizes_on_the_begin_line() -> None:
    facts = sglang_log.facts_from_log((RECORDED / "ngram-manual.server.log").read_text())
    (capture,) = facts.graph_captures
    assert (capture.graph, capture.gb, capture.free_after_gb) == ("target verify", 0.06, 11.50)
    assert capture.sizes == [1, 2, 3, 4, 5, 6, 7, 8]
    assert facts.weight_gb == 0.13 and facts.draft_weight_gb is None and facts.free_after_pool_gb == 12.40


def cut_at_capture(tail: str) -> str:
    """The real NGRAM log up to its capture's begin line, then `tail`: a start-up that died capturing."""
    log = (RECORDED / "ngram-manual.server.log").read_text().splitlines()
    begin = next(i for i, line in enumerate(log) if "CUDA graph begin" in line)
    return "\n".join([*log[: begin + 1], tail])


@pytest.mark.parametrize(
    ("tail", "reason"),
    [
        (
            "ModuleNotFoundError: No module named 'deep_gemm'\n[2026-12-04] kill_process_tree called: pid=651",
            "SGLang could not import a module it needs: No module named 'deep_gemm'",
        ),
        (
            "Exception: Capture cuda graph failed: Ninja build failed. Ninja output: nvcc fatal\nPossible solutions:",
            "CUDA-graph capture failed: a JIT kernel did not build: Ninja build failed. Ninja output: nvcc fatal",
        ),
        (
            "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.",
            "CUDA-graph capture ran out of memory: CUDA out of memory. Tried to allocate 2.00 GiB.",
        ),
        ("[2026-12-04] kill_process_tree called: pid=651", "SGLang exited with code 1; last log line:"),
    ],
)
def test_a_capture_that_began_and_never_ended_is_named_with_the_engines_own_reason(
    tail: str, reason: str
) -> None:
    log = cut_at_capture(tail)
    facts = sglang_log.facts_from_log(log)
    assert facts.graph_captures == [] and facts.unfinished_capture is not None
    assert facts.unfinished_capture.graph == "target verify" and facts.unfinished_capture.sizes == [
        *range(1, 9)
    ]
    said = SGLangEngine(ServerSetup(launcher=["sglang"], model="/m")).exit_reason(log, 1)
    assert said.startswith(reason), said
    assert said.endswith("(during the target verify CUDA-graph capture, begun with 11.56 GB free)")
    assert "out of memory" not in said or "out of memory" in tail


LIVE = Path(__file__).parent / "recordings" / "sglang-0.5.17-h100-eagle3"


def test_a_live_eagle3_draft_in_another_dtype_is_named_with_its_fix() -> None:
    """0.5.17 on the H100, a bfloat16 EAGLE3 draft (trained by speculators) of a float16 SmolLM2: the draft decode
    capture dies on torch's dtype error after both models loaded and pooled; the reason says the dtypes differ."""
    log = (LIVE / "eagle3-bf16-draft.server.log").read_text()
    facts = sglang_log.facts_from_log(log)
    assert (facts.weight_gb, facts.draft_weight_gb) == (0.27, 0.13)
    assert facts.kv_pool_tokens == facts.draft_kv_pool_tokens == 2959366
    assert [c.graph for c in facts.graph_captures] == ["target verify"]
    assert facts.unfinished_capture is not None and facts.unfinished_capture.graph == "draft decode"
    said = SGLangEngine(ServerSetup(launcher=["sglang"], model="/m")).exit_reason(log, 1)
    assert said.startswith(
        "the draft and the target ran in different dtypes: expected mat1 and mat2 to have the same dtype, "
        "but got: float != c10::BFloat16 (set `dtype:` under fixed: so both run in one)"
    ), said
    assert said.endswith("(during the draft decode CUDA-graph capture, begun with 12.21 GB free)")


def test_a_live_eagle3_launch_without_deep_gemm_names_the_module() -> None:
    """The same draft at one step: the draft-extend graphs import deep_gemm (`dsa_backend.py`) before any capture
    begins, so no capture is named, only the module."""
    log = (LIVE / "eagle3-no-deep-gemm.server.log").read_text()
    assert sglang_log.facts_from_log(log).unfinished_capture is None
    said = SGLangEngine(ServerSetup(launcher=["sglang"], model="/m")).exit_reason(log, 1)
    assert (
        said
        == "SGLang could not import a module it needs: No module named 'deep_gemm' (install it where the server runs)"
    )


def test_live_adaptive_candidates_above_the_launch_steps_are_named_with_the_fix() -> None:
    """0.5.17 on the H100, the trained EAGLE3 draft at `--speculative-num-steps 3` with adaptive candidates 1,3,7:
    every capture ended, then building the 7-step state asked the logits buffer (sized for 4 draft tokens x 8
    sequences) for 64 rows; the scheduler's traceback is the reason, not the shutdown line printed after it."""
    log = (LIVE / "adaptive-steps-below-candidates.server.log").read_text()
    facts = sglang_log.facts_from_log(log)
    assert facts.unfinished_capture is None and "target verify" in [c.graph for c in facts.graph_captures]
    # Its controller started, so replies would count drafts at the launch's steps, not the ones it ran; a
    # static launch's counts are the drafts.
    assert not facts.drafts_counted
    assert sglang_log.facts_from_log((LIVE / "eagle3-bf16-draft.server.log").read_text()).drafts_counted
    said = SGLangEngine(ServerSetup(launcher=["sglang"], model="/m")).exit_reason(log, -9)
    assert said == (
        "SGLang sized its shared logits buffer for fewer draft tokens than a step asks: shared logits buffer holds"
        " 32 rows but caller needs 64 (with adaptive speculation before 0.5.20, launch at the largest candidate"
        " step, or run 0.5.20 or later)"
    )
