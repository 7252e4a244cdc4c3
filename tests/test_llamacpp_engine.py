"""llama.cpp engine: argv from parameters, checks of names and values, facts and reasons read from logs."""

from __future__ import annotations

import pytest

from sweep.core.errors import UserError
from sweep.engines import LlamaCppEngine, ServerSetup
from sweep.engines.llamacpp import facts_from_log
from sweep.engines.llamacpp_bundle import gemma_model
from sweep.model.doctor import diagnose
from sweep.outputs.export import served


@pytest.fixture
def engine() -> LlamaCppEngine:
    return LlamaCppEngine(
        ServerSetup(launcher=["/opt/llama-server"], model="/m/target.gguf", extra_args=["--seed", "1"])
    )


def test_argv_maps_parameters_to_llama_server_flags(engine: LlamaCppEngine) -> None:
    argv = engine.argv(
        {
            "spec-type": ["ngram-mod", "draft-simple"],
            "spec-draft-model": "/m/d.gguf",
            "spec-draft-n-max": 8,
            "ctx-size": 4096,
            "parallel": 2,
            "cache-type-k": "q8_0",
            "threads": 2,
        },
        port=18123,
    )
    assert argv[:3] == ["/opt/llama-server", "-m", "/m/target.gguf"]
    pairs = dict(zip(argv[3::2], argv[4::2], strict=False))
    assert pairs["--spec-type"] == "ngram-mod,draft-simple"
    assert pairs["-md"] == "/m/d.gguf"
    assert pairs["--spec-draft-n-max"] == "8"
    assert (pairs["-c"], pairs["-np"], pairs["-ctk"], pairs["-t"]) == ("4096", "2", "q8_0", "2")
    # -lv 4: where llama-server put the model (devices, buffers, offload, KV caches) is logged from there up.
    assert argv[-10:] == [
        "--seed",
        "1",
        "-lv",
        "4",
        "--metrics",
        "--no-webui",
        "--host",
        "127.0.0.1",
        "--port",
        "18123",
    ]
    given = LlamaCppEngine(ServerSetup(["/opt/llama-server"], "/m/target.gguf", ["-lv", "4"]))
    assert given.argv({}, port=1).count("-lv") == 1  # the user's verbosity stands
    # -lv 4 is specsweep's, to read the log: a served command leaves it out, unless the user asked for it.
    assert engine.measuring_argv() == ["-lv", "4"] and given.measuring_argv() == []
    assert served(argv, engine.measuring_argv()) == [a for a in argv if a not in ("-lv", "4")]
    assert served(given.argv({}, port=1), given.measuring_argv()) == given.argv({}, port=1)
    twice = ["srv", "--decode-log-interval", "1", "--x", "--decode-log-interval", "1", "--port", "9"]
    assert served(twice, ["--decode-log-interval", "1"]) == twice[:4] + twice[6:]  # the user's copy stays


def test_unknown_speculative_type_is_named(engine: LlamaCppEngine) -> None:
    with pytest.raises(UserError, match="unknown speculative type 'draft'") as err:
        engine.check_value("spec-type", "ngram-mod,draft")
    assert "draft-simple" in err.value.fix


def test_unknown_parameter_lists_the_known_ones(engine: LlamaCppEngine) -> None:
    with pytest.raises(UserError, match="no parameter 'draft-max'") as err:
        engine.check_value("draft-max", 4)
    assert "spec-draft-n-max" in err.value.fix


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("cache-type-k", "q3_k", "cannot be 'q3_k'"),
        ("parallel", 0, "out of range"),
        ("spec-draft-p-min", 1.5, "out of range"),
        ("ctx-size", "big", "must be a number"),
        ("spec-draft-n-max", 2.5, "must be a number"),
    ],
)
def test_bad_values_are_rejected(engine: LlamaCppEngine, name: str, value: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        engine.check_value(name, value)


def test_draft_model_types_need_a_draft_model(engine: LlamaCppEngine) -> None:
    with pytest.raises(UserError, match="draft-simple needs a draft model"):
        engine.check_params({"spec-type": "draft-simple"})
    engine.check_params({"spec-type": "draft-simple", "spec-draft-model": "/m/d.gguf"})
    engine.check_params({"spec-type": "ngram-mod"})


def test_speculation_wanted_only_without_none(engine: LlamaCppEngine) -> None:
    assert engine.wants_speculation({"spec-type": "ngram-mod"})
    assert not engine.wants_speculation({"spec-type": "none,ngram-mod"})  # a `none` anywhere makes it {none}
    assert not engine.wants_speculation(engine.baseline_params())


def test_child_environment_has_no_llama_arg_variables(
    engine: LlamaCppEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLAMA_ARG_SPEC_TYPE", "draft-simple")
    monkeypatch.setenv("LLAMA_ARG_DRAFT_MAX", "4")
    env = engine.env()
    assert not [k for k in env if k.startswith("LLAMA_ARG_")]
    assert env["PATH"]


TARGET_KV = "llama_kv_cache: size =  144.00 MiB (  4096 cells,  18 layers,  1/1 seqs), K (f16):   72.00 MiB, V (f16):   72.00 MiB"
DRAFT_KV = "llama_kv_cache: size =   16.00 MiB (  4096 cells,   2 layers,  1/1 seqs), K (f16):    8.00 MiB, V (f16):    8.00 MiB"


def test_facts_take_the_target_kv_line_and_the_slots(engine: LlamaCppEngine) -> None:
    log = "\n".join(
        [
            "0.00.01 I srv    load_model: loading model '/m/t.gguf'",
            f"0.00.50 I {TARGET_KV}",
            f"0.00.60 I {DRAFT_KV}",
            "0.00.70 I srv    load_model: initializing, n_slots = 2, n_ctx_slot = 2048, kv_unified = 'false'",
        ]
    )
    facts = engine.facts_from_log(log)
    assert (facts.kv_cache_mib, facts.kv_cells) == (144.0, 4096)
    assert (facts.n_slots, facts.n_ctx_slot) == (2, 2048)
    assert facts.speculation_problem == ""


def test_without_a_unified_cache_every_slot_has_its_own_stream_of_cells() -> None:
    """`-np 2` on Gemma 3 270M (the real llama-server's log, open-loop test): 2048 cells per stream and two
    streams hold 4096 tokens in 12 MiB, what the GGUF's 3 full layers at 1024 B a layer and token cost; read
    as 2048 tokens the doctor called the pool twice the files' cost."""
    log = "\n".join(
        [
            "0.00.807 I llama_kv_cache_iswa: creating non-SWA KV cache, size = 2048 cells",
            "0.00.813 I llama_kv_cache: size =   12.00 MiB (  2048 cells,   3 layers,  2/2 seqs), K (f16):    6.00 MiB, V (f16):    6.00 MiB",
            "0.00.813 I llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells",
            "0.00.829 I llama_kv_cache: size =   30.00 MiB (  1024 cells,  15 layers,  2/2 seqs), K (f16):   15.00 MiB, V (f16):   15.00 MiB",
            "0.00.867 I srv    load_model: initializing, n_slots = 2, n_ctx_slot = 2048, kv_unified = 'false'",
        ]
    )
    facts = facts_from_log(log)
    assert (facts.kv_cells, facts.kv_pool_tokens) == (4096, 4096)
    assert [c["cells"] for c in facts.kv_caches] == [4096, 2048]
    engine = LlamaCppEngine(ServerSetup(["llama-server"], str(gemma_model())))
    found = diagnose(gemma_model(), "f16", facts, engine.doctor_rules({}))
    checked = [(f.what, f.ok) for f in found.findings if f.what.startswith(("KV cache", "KV pool"))]
    assert checked and all(ok for _, ok in checked), [f.detail for f in found.findings if not f.ok]


def test_facts_keep_the_non_fatal_speculation_failure(engine: LlamaCppEngine) -> None:
    log = "0.01 E srv    load_model: failed to initialize speculative decoding context: draft-simple requires a draft context\n"
    assert engine.facts_from_log(log).speculation_problem == "draft-simple requires a draft context"


@pytest.mark.parametrize(
    ("log", "reason"),
    [
        (
            'error while handling argument "--spec-type": unknown speculative type: draft',
            "bad value for --spec-type",
        ),
        ("error: invalid argument: --np", "does not know the flag --np"),
        (
            "gguf_init_from_file: failed to open GGUF file '/x.gguf' (No such file)",
            "cannot be opened: /x.gguf",
        ),
        (
            "srv         start: couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080",
            "port 8080 on 127.0.0.1 is in use",
        ),
        (
            "E common_speculative_init_result: failed to create MTP context\nE srv  llama_server: exiting due to model loading error",
            "draft-mtp needs a target with MTP heads",
        ),
        ("something odd\nlast words here\n", "exited with code 1; last log line: last words here"),
    ],
)
def test_exit_reason_reads_the_log(engine: LlamaCppEngine, log: str, reason: str) -> None:
    assert reason in engine.exit_reason(log, 1)


def test_final_chunk_without_drafts_counts_zero(engine: LlamaCppEngine) -> None:
    chunk = {
        "usage": {"completion_tokens": 20},
        "timings": {
            "cache_n": 0,
            "prompt_n": 30,
            "predicted_n": 20,
            "predicted_per_second": 48.5,
            "prompt_per_second": 300.0,
        },
    }
    report = engine.read_final(chunk)
    assert report is not None
    assert (report.draft_tokens, report.accepted_tokens, report.cached_tokens, report.prompt_tokens) == (
        0,
        0,
        0,
        30,
    )
    assert engine.read_final({"choices": [{"delta": {"content": "x"}}]}) is None


def test_context_overflow_is_does_not_fit(engine: LlamaCppEngine) -> None:
    body = '{"error":{"code":400,"message":"request (5000 tokens) exceeds the available context size (4096 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}'
    assert engine.classify_error(400, body)[0] == "does_not_fit"
    assert engine.classify_error(500, '{"error":{"message":"boom"}}') == ("error", "HTTP 500: boom")


def test_shape_names_the_draft_length_and_the_flags_that_filter_drafts(engine: LlamaCppEngine) -> None:
    simple = engine.spec_shape({"spec-type": "ngram-simple", "spec-ngram-simple-size-n": 6})
    assert simple is not None
    # The draft length is size-m (default 48); the match length decides which drafts happen, not their size.
    assert (simple.depth, simple.depth_param, simple.draft_model) == (48, "spec-ngram-simple-size-m", False)
    assert simple.variant == "spec-ngram-simple-size-n=6"
    mod = engine.spec_shape({"spec-type": "ngram-mod", "spec-ngram-mod-n-max": 32})
    assert mod is not None and mod.depth == 32
    assert mod.variant == "spec-ngram-mod-n-match=24 spec-ngram-mod-n-min=48"  # the defaults, stated
    assert engine.spec_shape({"spec-type": "none"}) is None


def test_a_draft_models_confidence_floor_is_llama_cpps_own_controller(engine: LlamaCppEngine) -> None:
    """With p-min above 0 each step drafts until the draft model's likeliest token falls below it (up to n-max):
    the configuration is the controller arm of `sweep/analysis/controllers.py`; at 0 and for the lookups it is static."""
    draft = {"spec-type": "draft-simple", "spec-draft-n-max": 8}
    adaptive = engine.spec_shape({**draft, "spec-draft-p-min": 0.75})
    static = engine.spec_shape({**draft, "spec-draft-p-min": 0.0})
    lookup = engine.spec_shape({"spec-type": "ngram-simple", "spec-draft-p-min": 0.75})
    assert adaptive is not None and adaptive.controller == "llama.cpp draft confidence (p-min)"
    assert adaptive.depth == 8 and adaptive.variant.startswith("spec-draft-p-min=0.75")
    assert static is not None and static.controller == ""
    assert lookup is not None and lookup.controller == ""
