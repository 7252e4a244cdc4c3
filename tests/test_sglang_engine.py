"""The SGLang engine: argv, release-aware flags, SGLang's rules in the space, and whole studies driven
against the simulator's SGLang front end (success, capture OOM, exit at start, input too long, overrides)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import optuna
import pytest

from sweep.cli import main
from sweep.core.errors import UserError
from sweep.engines import ServerSetup, SGLangEngine
from sweep.releases import sglang_rules
from sweep.sim.profile import PROFILES
from sweep.storage import launched as study_launched

SIM = [sys.executable, "-m", "sweep.sim", "--sim-time-scale", "0.005", "--sim-seed", "1"]


def engine(*profile: str) -> SGLangEngine:
    e = SGLangEngine(ServerSetup(launcher=[*SIM, *profile], model="/models/q"))
    e.prepare()
    return e


@pytest.mark.server
def test_argv_and_what_specsweep_always_adds() -> None:
    argv = engine().argv(
        {
            "speculative-algorithm": "NEXTN",
            "speculative-num-steps": 3,
            "disable-radix-cache": True,
            "cuda-graph-max-bs-decode": 16,
            "enable-mixed-chunk": False,
        },
        port=31000,
    )
    assert argv[: len(SIM) + 2] == [*SIM, "--model-path", "/models/q"]
    assert "--disable-radix-cache" in argv and "--enable-mixed-chunk" not in argv
    assert argv[argv.index("--cuda-graph-max-bs-decode") + 1] == "16"
    assert argv[-8:] == [
        "--enable-metrics",
        "--enable-cache-report",
        "--decode-log-interval",
        "1",
        "--host",
        "127.0.0.1",
        "--port",
        "31000",
    ]
    assert "--speculative-algorithm" not in engine().argv({"speculative-algorithm": "none"}, port=1)


@pytest.mark.server
def test_flags_by_release(tmp_path: Path) -> None:
    """The flags are the installed release's (its --help): 0.5.20 lacks what 0.5.23 added; a release from
    before the CUDA-graph rename (its --help lists --cuda-graph-max-bs) gets the old spelling."""
    profile_020 = tmp_path / "0.5.20.yaml"
    profile_020.write_text(
        (PROFILES / "qwen3.8-27b-int4-32gb.yaml")
        .read_text()
        .replace("sglang_version: 0.5.23", "sglang_version: 0.5.20")
    )
    release_020 = engine("--sim-profile", str(profile_020))
    with pytest.raises(UserError, match="has no flag --speculative-draft-sink-size"):
        release_020.check_value("speculative-draft-sink-size", 4)
    new = engine()
    new.check_value("speculative-draft-sink-size", 4)
    assert "--cuda-graph-max-bs-decode" in new.argv({"cuda-graph-max-bs": 16}, port=1)
    with pytest.raises(UserError, match="has no flag --speculative-ngram-branch-length"):
        new.check_value("speculative-ngram-branch-length", 18)
    with pytest.raises(UserError, match="set by specsweep"):
        new.check_value("port", 1234)
    before_rename = engine()
    before_rename.flags = (
        before_rename.flags - {"cuda-graph-max-bs-decode", "cuda-graph-max-bs-prefill"}
    ) | {"cuda-graph-max-bs"}
    assert "--cuda-graph-max-bs" in before_rename.argv({"cuda-graph-max-bs-decode": 16}, port=1)
    with pytest.raises(UserError, match="has no flag --cuda-graph-max-bs-prefill"):
        before_rename.check_value("cuda-graph-max-bs-prefill", 2048)


@pytest.mark.server
def test_sglang_rules() -> None:
    e = engine()
    assert (
        e.derive({"speculative-algorithm": "EAGLE", "speculative-num-steps": 3, "speculative-eagle-topk": 1})[
            "speculative-num-draft-tokens"
        ]
        == 4
    )
    assert "speculative-eagle-topk" not in e.derive(
        {"speculative-algorithm": "NGRAM", "speculative-eagle-topk": 4}
    )
    assert e.constraints(
        {
            "speculative-algorithm": "EAGLE",
            "speculative-num-steps": 2,
            "speculative-eagle-topk": 2,
            "speculative-num-draft-tokens": 8,
        }
    ) == {"draft_tree": 1.0}  # 7 candidates > 2 + 1*4
    with pytest.raises(UserError, match="without speculative-num-steps"):
        e.check_params({"speculative-algorithm": "EAGLE", "speculative-eagle-topk": 2})


@pytest.mark.server
def test_plan_derives_then_checks_then_weighs_the_constraints() -> None:
    e = engine()
    fine = e.plan({"speculative-algorithm": "EAGLE", "speculative-num-steps": 3, "speculative-eagle-topk": 1})
    assert fine.launchable and fine.params["speculative-num-draft-tokens"] == 4  # derived: steps + 1
    tree = {"speculative-algorithm": "EAGLE", "speculative-num-steps": 2, "speculative-eagle-topk": 2}
    too_big = e.plan({**tree, "speculative-num-draft-tokens": 8})
    assert not too_big.launchable and too_big.violations == {"draft_tree": 1.0} and not too_big.invalid
    refused = e.plan({"speculative-algorithm": "EAGLE", "speculative-eagle-topk": 2})
    # Invalid, not also infeasible.
    assert "without speculative-num-steps" in refused.invalid and not refused.violations


@pytest.mark.server
def test_how_many_requests_a_server_decodes_at_once() -> None:
    e = engine()
    assert e.running_limit({"speculative-algorithm": "none"}) is None  # the KV pool decides, at start-up
    reset = e.running_limit({"speculative-algorithm": "NEXTN", "speculative-num-steps": 2})
    assert reset is not None and reset.requests == 48 and "resets max-running-requests to 48" in reset.why
    given = e.running_limit({"speculative-algorithm": "NEXTN", "max-running-requests": 96})
    assert given is not None and (given.requests, given.param) == (96, "max-running-requests")


@pytest.mark.server
def test_final_chunk_new_and_old_field_names() -> None:
    e = engine()
    new = {
        "text": "x",
        "meta_info": {
            "finish_reason": {"type": "length"},
            "prompt_tokens": 30,
            "completion_tokens": 41,
            "cached_tokens": 0,
            "decode_throughput": 80.0,
            "first_token_latency": 0.5,
            "e2e_latency": 1.0,
            "spec_verify_ct": 10,
            "spec_num_correct_drafts": 30,
            "spec_num_proposed_drafts": 30,
            # 0.5.23: verify steps by correct drafts (2 with none, 3 with one, 5 with two or more ...)
            "spec_correct_drafts_histogram": [2, 3, 0, 5],
        },
    }
    report = e.read_final(new)
    # Tokens per verify step from the histogram where there is one: (1x2 + 2x3 + 4x5) / 10 steps.
    assert report is not None and (report.acceptance_length, report.accepted_tokens, report.decode_tps) == (
        2.8,
        30,
        80.0,
    )
    assert report.position_acceptance == (0.8, 0.5, 0.5)
    old = {
        "meta_info": {
            "finish_reason": "length",
            "completion_tokens": 21,
            "cached_tokens": 0,
            "spec_verify_ct": 5,
            "spec_accept_token_num": 15,
            "spec_draft_token_num": 15,
        }
    }
    report = e.read_final(old)
    assert report is not None and (report.accepted_tokens, report.draft_tokens, report.acceptance_length) == (
        15,
        15,
        4.0,
    )
    assert e.read_final({"text": "x", "meta_info": {"finish_reason": None}}) is None
    assert (
        e.classify_error(
            400,
            '{"error": {"message": "Input length (5000 tokens) exceeds the maximum allowed length (2994 tokens). Use a shorter input or enable --allow-auto-truncate."}}',
        )[0]
        == "does_not_fit"
    )


SPACE = """
engine: sglang
server: {launcher: ["{python}", -m, sweep.sim, --sim-time-scale, "0.005", --sim-seed, "1"], model: /models/q}
fixed: {kv-cache-dtype: fp8_e4m3, mem-fraction-static: 0.92}
params:
  speculative-algorithm: {choices: [NEXTN, MEDUSA]}
  speculative-num-steps: {int: [1, 5], when: {speculative-algorithm: NEXTN}}
enqueue:
  - {speculative-algorithm: NEXTN, speculative-num-steps: 3}
  - {speculative-algorithm: MEDUSA}
workloads: [{class: code}, {class: prose}, {class: tool, context: [4000]}]
probe: {repeats: 2, max_tokens: 64}
trials: 4
seed: 2
"""


def run_space(tmp_path: Path, text: str, *extra: str) -> optuna.Study:
    space = tmp_path / "s.yaml"
    space.write_text(text)
    assert main(["run", "--space", str(space), "--study", "s", "--runs", str(tmp_path / "runs"), *extra]) == 0
    return optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'runs' / 's' / 'study.db'}")


def records(study: optuna.Study) -> list[dict[str, Any]]:
    return [t.user_attrs.get("record", {}) for t in study.trials]


@pytest.mark.server
def test_study_against_the_simulator(tmp_path: Path) -> None:
    study = run_space(tmp_path, SPACE)
    base, nextn, medusa = records(study)[:3]
    assert [t.state.name for t in study.trials][:3] == ["COMPLETE", "COMPLETE", "FAIL"]
    # Launch facts from the log and /server_info.
    assert base["facts"]["kv_pool_tokens"] > 200_000 and base["facts"]["free_after_pool_gb"] > 0
    assert nextn["facts"]["resolved_args"]["speculative_num_draft_tokens"] == 4
    assert "max-running-requests: not set, speculative decoding reset it to 48" in nextn["facts"]["overrides"]
    assert any("capped to 9 by the mamba state cache" in line for line in nextn["facts"]["limit_changes"])
    assert nextn["facts"]["speculation_active"] is True and base["facts"]["speculation_active"] is False
    # Measurements: acceptance on, cache proven cold, prose accepts less than code.
    code, prose = nextn["workloads"]["code"], nextn["workloads"]["prose"]
    assert code["acceptance_length"]["median"] > prose["acceptance_length"]["median"] > 1
    # Per draft position (from each reply's histogram), falling along the chain, and the server's gauge.
    positions = code["position_acceptance"]
    assert len(positions) == 3 and 1 >= positions[0] >= positions[1] >= positions[2] > 0
    assert code["acceptance_gauge"]["median"] > 1 and "position_acceptance" in prose
    assert (
        base["workloads"]["code"]["position_acceptance"] == []
        and base["workloads"]["code"]["acceptance_gauge"] is None
    )
    assert code["decode_tps"]["median"] > 1.5 * base["workloads"]["code"]["decode_tps"]["median"]
    assert medusa["failure"] == "Unknown speculative algorithm name: MEDUSA" and medusa["stage"] == "launch"
    rows = [
        json.loads(line)
        for p in (tmp_path / "runs" / "s" / "trials").glob("*/requests.jsonl")
        for line in p.read_text().splitlines()
    ]
    assert rows and all(r["cached_tokens"] == 0 for r in rows)


def test_what_the_model_folder_decides(tmp_path: Path) -> None:
    """The architecture in config.json picks SGLang's auto parameters and whether adaptive runs; MLA attention
    (kv_lora_rank) keeps 1.5 GB back for prefill graphs."""

    def folder(name: str, **config: Any) -> SGLangEngine:
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(config))
        return SGLangEngine(ServerSetup(launcher=["sglang"], model=str(tmp_path / name)))

    llama = folder("llama", architectures=["LlamaForCausalLM"])
    shape = llama.spec_shape({"speculative-algorithm": "EAGLE"})
    assert shape is not None and (shape.depth, shape.width, shape.budget) == (5, 4, 7)
    standalone = llama.spec_shape({"speculative-algorithm": "STANDALONE"})
    assert standalone is not None and (standalone.depth, standalone.width) == (3, 1)
    mimo = folder("mimo", architectures=["MiMoV2ForCausalLM"])
    assert mimo.schedule_params({"speculative-algorithm": "NEXTN"}, [(1, 3)], "/c.json") is None
    assert llama.schedule_params({"speculative-algorithm": "NEXTN"}, [(1, 3)], "/c.json") is not None
    mla = folder("dsv3", architectures=["DeepseekV3ForCausalLM"], kv_lora_rank=512)
    share, _ = mla.memory_share(48, {}) or (0.0, "")
    plain, _ = llama.memory_share(48, {}) or (0.0, "")
    assert share < plain  # 1.5 GB for MLA prefill graphs against 8 MB per captured size


@pytest.mark.server
def test_static_and_adaptive_steps_are_arms_of_one_space(tmp_path: Path) -> None:
    """`null` among the candidate steps' choices leaves the flag out: one study launches static steps and the
    engine's adaptive controller side by side (the GPU space's arms), each with its own shape."""
    space = (
        SPACE.replace(
            "speculative-num-steps: {int: [1, 5], when: {speculative-algorithm: NEXTN}}",
            "speculative-num-steps: {int: [1, 5], when: {speculative-algorithm: NEXTN}}\n"
            '  speculative-adaptive-candidate-steps: {choices: [null, "1,3,5"], when: {speculative-algorithm: NEXTN}}',
        )
        .replace(
            "  - {speculative-algorithm: NEXTN, speculative-num-steps: 3}\n  - {speculative-algorithm: MEDUSA}\n",
            "  - {speculative-algorithm: NEXTN, speculative-num-steps: 3, speculative-adaptive-candidate-steps: null}\n"
            '  - {speculative-algorithm: NEXTN, speculative-num-steps: 3, speculative-adaptive-candidate-steps: "1,3,5"}\n',
        )
        .replace("trials: 4", "trials: 3")
    )
    study = run_space(tmp_path, space)
    static, adaptive = records(study)[1:3]
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    assert "--speculative-adaptive" not in static["argv"] and static["shape"]["variant"] in (None, "")
    assert (
        "--speculative-adaptive" in adaptive["argv"]
        and adaptive["shape"]["variant"] == "candidate_steps=1,3,5"
    )
    assert static["shape"]["depth"] == 3 and adaptive["shape"]["depth"] == 5


def test_a_draft_in_another_dtype_than_its_target_is_never_launched(tmp_path: Path) -> None:
    """With --dtype auto SGLang runs each model in its config's dtype, and a bfloat16 EAGLE3 draft of a float16
    target dies in its first layer (0.5.17 on the H100): such a trial is invalid, saying why and the fix; `dtype`
    given, or the same dtype, launches."""
    target, draft = tmp_path / "target", tmp_path / "draft"
    for folder, config in (
        (target, {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "float16"}),
        (
            draft,
            {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "torch_dtype": "bfloat16"},
        ),
    ):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
    e = SGLangEngine(ServerSetup(launcher=SIM, model=str(target)))
    eagle3 = {
        "speculative-algorithm": "EAGLE3",
        "speculative-draft-model-path": str(draft),
        "speculative-num-steps": 3,
        "speculative-eagle-topk": 1,
    }
    said = e.plan(eagle3).invalid
    assert "the draft model is bfloat16 and the target float16" in said and "`dtype: float16`" in said
    assert e.plan({**eagle3, "dtype": "float16"}).invalid == ""
    (draft / "config.json").write_text(json.dumps({"model_type": "llama", "dtype": "float16"}))
    assert e.plan(eagle3).invalid == ""
    # float32 checkpoints run as float16, Gemma's as bfloat16 (`_get_and_verify_dtype`)
    assert sglang_rules.auto_dtype({"torch_dtype": "float32"}) == "float16"
    assert sglang_rules.auto_dtype({"model_type": "gemma3_text"}) == "bfloat16"
    assert sglang_rules.draft_dtype_clash({"model_type": "llama"}, {"dtype": "bfloat16"}) == (
        "float16",
        "bfloat16",
    )
    assert sglang_rules.draft_dtype_clash({"dtype": "bfloat16"}, {"torch_dtype": "float8_e4m3fn"}) is None


@pytest.mark.server
def test_adaptive_candidate_steps_as_a_dimension(tmp_path: Path) -> None:
    """specsweep's `speculative-adaptive-candidate-steps` runs as 0.5.23's adaptive config file; a starting
    depth outside the candidates is never launched (0.5.23 refuses it)."""
    e = engine()
    with pytest.raises(UserError, match="speculative-adaptive-candidate-steps cannot be 'a,b'"):
        e.check_value("speculative-adaptive-candidate-steps", "a,b")
    plan = e.plan(
        {
            "speculative-algorithm": "NEXTN",
            "speculative-adaptive-candidate-steps": "1,3",
            "speculative-num-steps": 2,
        }
    )
    assert "is not in the adaptive config candidate_steps [1, 3]" in plan.invalid
    space = (
        SPACE.replace(
            "speculative-num-steps: {int: [1, 5], when: {speculative-algorithm: NEXTN}}",
            'speculative-adaptive-candidate-steps: {choices: ["1,2", "1,3,5"], when: {speculative-algorithm: NEXTN}}',
        )
        .replace("speculative-num-steps: 3}", 'speculative-adaptive-candidate-steps: "1,3,5"}')
        .replace("trials: 4", "trials: 3")
    )
    study = run_space(tmp_path, space)
    adaptive = records(study)[1]
    assert study.trials[1].state.name == "COMPLETE", adaptive.get("failure")
    assert adaptive["shape"]["variant"] == "candidate_steps=1,3,5" and adaptive["shape"]["depth"] == 5
    assert adaptive["facts"]["resolved_args"]["speculative_num_steps"] == 3  # the middle candidate to start
    assert adaptive["workloads"]["code"]["acceptance_length"]["median"] > 1


@pytest.mark.server
def test_input_too_long_does_not_fit(tmp_path: Path) -> None:
    text = SPACE.replace(
        "mem-fraction-static: 0.92}", "mem-fraction-static: 0.92, max-total-tokens: 3000}"
    ).replace("trials: 4", "trials: 1")
    (base,) = [r for r in records(run_space(tmp_path, text)) if r.get("workloads")]
    tool = base["workloads"]["tool@4k"]
    assert tool["status"] == "does_not_fit" and "exceeds the maximum allowed length" in tool["reason"]
    assert base["workloads"]["code"]["status"] == "ok"


@pytest.mark.server
def test_capture_oom_is_a_failed_trial_with_its_reason(tmp_path: Path) -> None:
    profile = PROFILES / "report004-3090-24gb.yaml"
    text = (
        SPACE.replace('--sim-seed, "1"]', f'--sim-seed, "1", --sim-profile, "{profile}"]')
        .replace(
            "fixed: {kv-cache-dtype: fp8_e4m3, mem-fraction-static: 0.92}",
            "fixed: {kv-cache-dtype: fp8_e4m3, chunked-prefill-size: 2048, cuda-graph-max-bs-decode: 24}",
        )
        .replace(
            "  speculative-num-steps: {int: [1, 5], when: {speculative-algorithm: NEXTN}}",
            "  speculative-num-steps: {int: [1, 5], when: {speculative-algorithm: NEXTN}}\n  mem-fraction-static: {choices: [0.92, 0.95]}",
        )
    )
    text = text.replace(
        "  - {speculative-algorithm: MEDUSA}",
        "  - {speculative-algorithm: NEXTN, speculative-num-steps: 2, mem-fraction-static: 0.95}",
    )
    text = text.replace(
        "- {speculative-algorithm: NEXTN, speculative-num-steps: 3}",
        "- {speculative-algorithm: NEXTN, speculative-num-steps: 3, mem-fraction-static: 0.92}",
    )
    study = run_space(tmp_path, text.replace("trials: 4", "trials: 3"))
    assert [t.state.name for t in study.trials] == ["COMPLETE", "COMPLETE", "FAIL"]
    failure = records(study)[2]["failure"]
    assert failure.startswith("CUDA-graph capture ran out of memory: CUDA out of memory. Tried to allocate")
    assert records(study)[2]["stage"] == "launch"


@pytest.mark.server
def test_no_invalid_combination_is_launched(tmp_path: Path) -> None:
    text = (
        SPACE.replace("  - {speculative-algorithm: MEDUSA}\n", "")
        .replace("[NEXTN, MEDUSA]", "[NEXTN]")
        .replace(
            "speculative-num-steps: {int: [1, 5], when: {speculative-algorithm: NEXTN}}",
            "speculative-num-steps: {int: [1, 3], when: {speculative-algorithm: NEXTN}}\n  speculative-eagle-topk: {choices: [1, 2, 4]}\n"
            "  speculative-num-draft-tokens: {int: [2, 32], when: {speculative-eagle-topk: [2, 4]}}",
        )
        .replace(
            "workloads: [{class: code}, {class: prose}, {class: tool, context: [4000]}]",
            "workloads: [{class: code}]",
        )
    )
    study = run_space(
        tmp_path,
        text.replace("probe: {repeats: 2, max_tokens: 64}", "probe: {repeats: 1, max_tokens: 16}"),
        "--trials",
        "14",
    )
    launched = infeasible = 0
    for trial in study.trials:
        record = trial.user_attrs["record"]
        p = record["params"]
        if record["stage"] == "infeasible":
            infeasible += 1
            assert not record["argv"] and max(trial.constraints.values()) > 0
            continue
        if p["speculative-algorithm"] == "none":
            continue
        launched += 1
        steps, topk, draft = (
            p["speculative-num-steps"],
            p.get("speculative-eagle-topk", 1),
            p["speculative-num-draft-tokens"],
        )
        assert draft - 1 <= topk + (steps - 1) * topk * topk
        if topk == 1:
            assert draft == steps + 1
    assert launched >= 3 and infeasible >= 1
    # The budget is launches: infeasible suggestions and repeats of a measured configuration do not count.
    assert sum(study_launched(t) for t in study.trials) == 14
    assert len(study.trials) == 14 + infeasible + sum("duplicate_of" in t.user_attrs for t in study.trials)
    # The start-up trials cover the space: a chain (top-k 1) and a tree, shallow and deep.
    covers = [t.params for t in study.trials if t.user_attrs.get("role") == "cover"]
    assert {p.get("speculative-eagle-topk") for p in covers} == {1, 2, 4}
    assert {p["speculative-num-steps"] for p in covers} == {1, 3}


def test_sim_cli_speaks_sglang(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["sim", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert (
        out.startswith("usage: sglang serve")
        and "--speculative-num-draft-tokens" in out
        and "--cuda-graph-max-bs-decode" in out
    )
    with pytest.raises(SystemExit) as exc:
        main(["sim", "--model-path", "/m", "--speculative-tokens", "4"])
    assert exc.value.code == 2
    assert "sglang serve: error: unrecognized arguments: --speculative-tokens 4" in capsys.readouterr().err


@pytest.mark.server
def test_radix_cache_serves_a_repeated_prompt(tmp_path: Path) -> None:
    import httpx

    from sweep.launch.server import ServerProcess, free_port

    port = free_port()
    argv = [*SIM, "--model-path", "/m", "--port", str(port), "--enable-metrics", "--sim-time-scale", "0.05"]
    body = {
        "text": "Copy this JSON exactly: " + json.dumps({"a": list(range(300))}),
        "sampling_params": {"max_new_tokens": 4},
    }
    with ServerProcess(argv, tmp_path / "sim.log", {**__import__("os").environ}) as server:
        server.wait_ready(f"http://127.0.0.1:{port}/health", timeout_s=30)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            cold = client.post("/generate", json=body).json()["meta_info"]
            warm = client.post("/generate", json=body).json()["meta_info"]
            assert cold["cached_tokens"] == 0 and warm["cached_tokens"] == warm["prompt_tokens"] - 1
            assert warm["first_token_latency"] < cold["first_token_latency"] / 10
            assert client.post("/flush_cache").status_code == 200
            assert client.post("/generate", json=body).json()["meta_info"]["cached_tokens"] == 0
            metrics = client.get("/metrics").text
            assert "sglang:cached_tokens_total" in metrics


@pytest.mark.server
def test_demo_engine_sim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--engine", "sim", "--runs", str(tmp_path), "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert "study demo-sim: 2 trials, 2 complete, 0 failed" in out
    assert (tmp_path / "demo-sim" / "trials" / "1" / "server.log").read_text().count(
        "The server is fired up and ready to roll!"
    ) == 1


@pytest.mark.server
def test_sim_chat_completions_stream(tmp_path: Path) -> None:
    import os

    import httpx

    from sweep.launch.server import ServerProcess, free_port

    port = free_port()
    argv = [
        *SIM,
        "--model-path",
        "/m",
        "--port",
        str(port),
        "--speculative-algorithm",
        "NEXTN",
        "--enable-cache-report",
    ]
    body = {
        "messages": [{"role": "user", "content": "Write a Python function that adds two numbers."}],
        "max_tokens": 32,
        "stream": True,
        "return_spec_tokens_details": True,
    }
    with ServerProcess(argv, tmp_path / "sim.log", os.environ) as server:
        server.wait_ready(f"http://127.0.0.1:{port}/health", timeout_s=30)
        with (
            httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client,
            client.stream("POST", "/v1/chat/completions", json=body) as resp,
        ):
            chunks = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: {")]
            assert resp.headers["content-type"].startswith("text/event-stream")
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
        final = chunks[-1]
        assert final["usage"]["completion_tokens"] == 32 and text
        assert final["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
        details = final["sglext"]["spec_tokens_details"]
        assert details["spec_verify_ct"] > 0 and 0 < details["spec_accept_rate"] <= 1
        too_long = {"messages": [{"role": "user", "content": "word " * 300_000}], "max_tokens": 8}
        error = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=too_long, timeout=30)
        assert error.status_code == 400 and error.json()["type"] == "BadRequestError"


RECORDED = Path(__file__).parent / "recordings" / "sglang-0.5.17-h200"


def recorded_final(name: str, index: int | None = None) -> dict[str, Any]:
    """A final streamed chunk the real SGLang 0.5.17 server sent on the H200 (a batch file keeps meta_info)."""
    data = json.loads((RECORDED / name).read_text())
    if index is not None:
        return {"text": "", "meta_info": data[index]}
    chunk: dict[str, Any] = data["last"]
    return chunk


def test_a_real_0_5_17_answer_gives_its_first_token_time_from_the_servers_stamps() -> None:
    chunk = recorded_final("eagle-acc3-generate_code.json")
    meta = chunk["meta_info"]
    assert "first_token_latency" not in meta  # 0.5.17 stamps instead
    report = SGLangEngine(ServerSetup(launcher=SIM, model="/models/q")).read_final(chunk)
    assert report is not None and report.ttft_s is not None and report.decode_tps is not None
    assert report.ttft_s == pytest.approx(meta["prefill_finished_time"] - meta["request_received_ts"])
    assert 0.05 < report.ttft_s < 0.1 and report.received_s == meta["request_received_ts"]
    assert report.prefill_tps == pytest.approx(meta["prompt_tokens"] / report.ttft_s)
    assert report.e2e_s == meta["e2e_latency"]
    # Forced acceptance 3 (SGLANG_SIMULATE_ACC_LEN): every one of 43 verify steps accepted 2 drafts. The last
    # step was cut by max_tokens, so counts give 2.953 ((128 - 1) / 43) and the server 2.977 (128 / 43).
    assert meta["spec_correct_drafts_histogram"] == [0, 0, 43] and report.acceptance_length == 3.0
    # The server's own rate and the one from its stamps agree on a request alone.
    assert report.decode_tps == pytest.approx(meta["decode_throughput"], rel=0.01)


def test_a_real_0_5_17_batch_reads_its_decode_rate_from_the_stamps_not_its_broken_throughput() -> None:
    engine = SGLangEngine(ServerSetup(launcher=SIM, model="/models/q"))
    for index in range(4):
        chunk = recorded_final("eagle-acc3-generate_batch4.json", index)
        meta = chunk["meta_info"]
        report = engine.read_final(chunk)
        assert report is not None and report.decode_tps is not None and report.ttft_s is not None
        decode = meta["request_finished_ts"] - meta["prefill_finished_time"]
        assert report.decode_tps == pytest.approx((meta["completion_tokens"] - 1) / decode)
        assert report.decode_tps < 1000 < meta["decode_throughput"]  # 0.5.17 said 20 to 56 million t/s


def test_the_0_5_17_table_is_what_the_real_server_s_help_lists() -> None:
    """The table read from 0.5.17's source against `launch_server --help` of the real 0.5.17 on the H200: every
    flag in the help's option lines is in the table, and what specsweep always adds is in both."""
    import re

    from sweep.releases.sglang import load_table

    table = load_table("0.5.17")
    spelled = {name for flag in table.values() for name in flag.names}
    help_text = (RECORDED / "launch_server-help.txt").read_text()
    listed = set(re.findall(r"^  (--[a-z0-9][a-z0-9-]*)", help_text, re.MULTILINE))
    assert len(listed) > 400 and listed <= spelled, sorted(listed - spelled)
    for flag in ("--enable-metrics", "--enable-cache-report", "--decode-log-interval", "--cuda-graph-max-bs"):
        assert flag in listed and flag in spelled


def test_every_engine_reads_the_table_of_the_nearest_release_not_newer() -> None:
    """One rule for every engine's tables (`releases.sources.Releases`): a server between two tabled releases
    reads the older one's flags, one older than all reads the oldest. vLLM once read its exact release only, and a
    release without a table raised."""
    from sweep.releases import vllm as vllm_release
    from sweep.releases.sglang import SGLANG

    assert SGLANG.nearest("0.5.21") == "0.5.20"
    assert SGLANG.nearest("0.5.23.post1") == SGLANG.nearest("0.6.0") == "0.5.23"
    assert SGLANG.nearest("0.4.9") == "0.5.17"
    assert vllm_release.VLLM.nearest("0.35.2") == vllm_release.PINNED
    newer = vllm_release.load_table("0.35.2")
    assert newer.flags == vllm_release.load_table(vllm_release.PINNED).flags and newer.flags
