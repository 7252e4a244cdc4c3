"""The vLLM engine: the speculative config built from dotted parameters, vLLM's rules, its log facts (thousands
separators), why a launch failed, and whole studies against the simulator's vLLM front end."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
import optuna
import pytest

from sweep.cli import main
from sweep.core.errors import LaunchError, UserError
from sweep.engines import ServerSetup
from sweep.engines.endpoints import prometheus_by_label
from sweep.engines.vllm import VLLMEngine, facts_from_log
from sweep.launch.server import ServerProcess, free_port

SIM = [sys.executable, "-m", "sweep.sim", "vllm"]
SPEC = "speculative-config."


@pytest.fixture(scope="module")
def engine() -> VLLMEngine:
    e = VLLMEngine(
        ServerSetup(
            launcher=SIM, model="/models/q", extra_args=["--sim-seed", "1", "--sim-startup-scale", "0.01"]
        )
    )
    e.prepare()
    return e


@pytest.mark.server
def test_the_speculative_config_is_one_json_value(engine: VLLMEngine) -> None:
    params = {
        "max-model-len": 8192,
        "enable-prefix-caching": False,
        SPEC + "method": "eagle3",
        SPEC + "model": "/models/draft",
        SPEC + "num_speculative_tokens": 4,
    }
    argv = engine.argv(engine.plan(params).params, 8123)
    assert argv[: len(SIM) + 2] == [*SIM, "serve", "/models/q"]
    assert "--no-enable-prefix-caching" in argv and argv[argv.index("--max-model-len") + 1] == "8192"
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 4}
    assert "--enable-prompt-tokens-details" in argv  # cached tokens are reported, so cache hits can be seen
    assert engine.env()["VLLM_SERVER_DEV_MODE"] == "1"  # /reset_prefix_cache between batches


@pytest.mark.server
def test_vllms_rules_before_any_launch(engine: VLLMEngine) -> None:
    # n-gram lookup bounds as vLLM fills them: both 5 when unset, one copies the other.
    derived = engine.plan({SPEC + "method": "ngram", SPEC + "num_speculative_tokens": 4}).params
    assert (derived[SPEC + "prompt_lookup_min"], derived[SPEC + "prompt_lookup_max"]) == (5, 5)
    one = engine.plan(
        {SPEC + "method": "ngram", SPEC + "num_speculative_tokens": 4, SPEC + "prompt_lookup_max": 3}
    )
    assert one.params[SPEC + "prompt_lookup_min"] == 3
    inverted = engine.plan(
        {
            SPEC + "method": "ngram",
            SPEC + "num_speculative_tokens": 4,
            SPEC + "prompt_lookup_min": 4,
            SPEC + "prompt_lookup_max": 2,
        }
    )
    assert not inverted.launchable and inverted.violations["lookup_min_over_max"] == 2
    assert (
        "needs a draft model"
        in engine.plan({SPEC + "method": "eagle3", SPEC + "num_speculative_tokens": 2}).invalid
    )
    assert "unknown speculative method" in engine.plan({SPEC + "method": "medusa"}).invalid
    assert "no field 'num_tokens'" in engine.plan({SPEC + "method": "mtp", SPEC + "num_tokens": 2}).invalid
    # Without a method nothing speculative is launched, so such trials are one configuration.
    assert engine.plan({SPEC + "method": "none", SPEC + "num_speculative_tokens": 3}).params == {
        SPEC + "method": "none"
    }
    shape = engine.spec_shape(derived)
    assert shape is not None and (shape.depth, shape.draft_model) == (4, False)
    assert shape.variant == f"{SPEC}prompt_lookup_min=5 {SPEC}prompt_lookup_max=5"
    with pytest.raises(UserError, match=r"gpu-memory-utilization cannot be 1\.5"):
        engine.check_value("gpu-memory-utilization", 1.5)


def test_log_facts_read_numbers_with_thousands_separators(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = """INFO 12-01 10:00:00 [gpu_model_runner.py] Model loading took 17.7000 GiB memory and 6.0 seconds
INFO 12-01 10:00:01 [gpu_worker.py] Available KV cache memory: 6.70 GiB
INFO 12-01 10:00:01 [kv_cache_utils.py] GPU KV cache size: 1,234,567 tokens
INFO 12-01 10:00:01 [kv_cache_utils.py] Maximum concurrency for 32,768 tokens per request: 37.68x
INFO 12-01 10:00:04 [gpu_model_runner.py] Graph capturing finished in 3 secs, took 0.54 GiB
"""
    facts = facts_from_log(log)
    assert (facts.kv_pool_tokens, facts.context_length, facts.max_concurrency) == (
        1234567,
        32768,
        37.68,
    )
    assert (facts.kv_cache_gb, facts.weight_gb, facts.graph_capture_gb) == (6.70, 17.7, 0.54)
    (tmp_path / "server.log").write_text(log)
    assert main(["inspect-log", "--engine", "vllm", str(tmp_path / "server.log"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kv_pool_tokens"] == 1234567


SPACE = """
engine: vllm
server: {launcher: ["{python}", -m, sweep.sim, vllm], model: /models/q,
         extra_args: [--sim-seed-file, "{seeds}", --sim-startup-scale, "0.01"]}
fixed: {max-model-len: 65536, kv-cache-dtype: fp8}
params:
  speculative-config.method: {choices: [mtp]}
  speculative-config.num_speculative_tokens: {int: [1, 4]}
enqueue:
  - {speculative-config.method: mtp, speculative-config.num_speculative_tokens: 3}
workloads: [{class: code}, {class: prose}]
probe: {repeats: 2, max_tokens: 32}
confirm: {launches: 0}
trials: 3
seed: 2
"""


def run_space(tmp_path: Path, text: str) -> optuna.Study:
    space = tmp_path / "s.yaml"
    space.write_text(text.replace("{seeds}", str(tmp_path / "seeds")))
    assert main(["run", "--space", str(space), "--study", "s", "--runs", str(tmp_path / "runs")]) == 0
    return optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'runs' / 's' / 'study.db'}")


def records(study: optuna.Study) -> list[dict[str, Any]]:
    return [t.user_attrs["record"] for t in study.trials if "record" in t.user_attrs]


@pytest.mark.server
def test_a_vllm_study_against_the_simulator(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    study = run_space(tmp_path, SPACE)
    base, mtp = records(study)[:2]
    assert [t.state.name for t in study.trials][:2] == ["COMPLETE", "COMPLETE"]
    assert base["facts"]["kv_pool_tokens"] > 65536 and base["facts"]["engine"] == "vllm"
    assert mtp["facts"]["speculation_active"] is True and base["facts"]["speculation_active"] is False
    # Acceptance from the /metrics counters over each batch; decode faster than the baseline (client clock).
    code, prose = mtp["workloads"]["code"], mtp["workloads"]["prose"]
    assert code["acceptance_length"]["median"] > prose["acceptance_length"]["median"] > 1
    assert code["decode_tps"]["median"] > 1.5 * base["workloads"]["code"]["decode_tps"]["median"]
    # Per position from vLLM's per-position counters: one share per drafted position, none rising (a later
    # position is accepted only after every earlier one), and code's first above prose's.
    positions = code["position_acceptance"]
    assert len(positions) == 3 and 1 >= positions[0] >= positions[1] >= positions[2] > 0
    assert positions[0] > prose["position_acceptance"][0]
    assert base["workloads"]["code"]["position_acceptance"] == []
    rows = [
        json.loads(line)
        for p in (tmp_path / "runs" / "s" / "trials").glob("*/requests.jsonl")
        for line in p.read_text().splitlines()
    ]
    assert rows and all(r["cached_tokens"] == 0 for r in rows)  # the prefix cache was reset before each batch
    config = json.loads(mtp["argv"][mtp["argv"].index("--speculative-config") + 1])
    assert config == {"method": "mtp", "num_speculative_tokens": 3}
    # The export is the command a user runs (which trial it names is the verdict's business, and a busy host
    # may keep it at the baseline).
    capsys.readouterr()
    assert main(["export", "--study", "s", "--runs", str(tmp_path / "runs"), "--workload", "code"]) == 0
    command = capsys.readouterr().out
    assert " vllm serve /models/q --max-model-len 65536 " in command and "--port 8000" in command
    # No workload measured at several stream counts: no schedule, and the line says what to add.
    assert main(["export", "--study", "s", "--runs", str(tmp_path / "runs"), "--format", "schedule"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "two or more stream counts" in err[0] and "streams: [1, 2, 4, 8]" in err[0]


@pytest.mark.server
def test_a_vllm_schedule_export_is_flags_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """vLLM takes its schedule inside `--speculative-config`: the export names no config file and writes none."""
    run_space(tmp_path, SPACE.replace("[{class: code}, {class: prose}]", "[{class: code, streams: [1, 2]}]"))
    out = tmp_path / "schedule"
    capsys.readouterr()
    argv = [
        "export",
        "--study",
        "s",
        "--runs",
        str(tmp_path / "runs"),
        "--format",
        "schedule",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["vllm"]["file"] is None and document["vllm"]["params"] is not None
    rows = document["vllm"]["params"]["speculative-config.num_speculative_tokens_per_batch_size"]
    assert [r[2] for r in rows] == [step["depth"] for step in document["by_concurrency"]]
    assert sorted(p.name for p in out.iterdir()) == ["code-schedule.json"]
    assert main([*argv, "--workload", "cod"]) == 2
    assert capsys.readouterr().err.strip() == (
        "specsweep: error: study 's' has no workload 'cod'; fix: pass --workload one of: code "
        "(or leave it out for every workload)"
    )


@pytest.mark.server
def test_a_baseline_that_cannot_hold_one_request_stops_the_study_with_vllms_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = tmp_path / "s.yaml"
    space.write_text(
        SPACE.replace("{seeds}", str(tmp_path / "seeds")).replace(
            "max-model-len: 65536", "max-model-len: 262144"
        )
    )
    assert main(["run", "--space", str(space), "--study", "s", "--runs", str(tmp_path / "runs")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "cannot hold one request of max-model-len 262144 (at most" in error and "fix:" in error
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'runs' / 's' / 'study.db'}")
    (base,) = records(study)
    assert base["stage"] == "launch" and "max-model-len 262144" in base["failure"]


@pytest.mark.server
def test_demo_engine_vllm_sim(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--engine", "vllm-sim", "--runs", str(tmp_path), "--trials", "2"]) == 0
    out = capsys.readouterr().out
    assert "study demo-vllm-sim: 2 trials, 2 complete, 0 failed" in out
    log = (tmp_path / "demo-vllm-sim" / "trials" / "1" / "server.log").read_text()
    assert "GPU KV cache size: " in log and "Starting vLLM API server" in log


def deepest_position(engine: VLLMEngine, params: dict[str, Any], folder: Path) -> int:
    """Launch `params`, send one request alone, and read the deepest position vLLM's counters drafted."""
    port = free_port()
    server = ServerProcess(engine.argv(params, port), folder / "server.log", engine.env(), engine.exit_reason)
    with server, httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
        server.wait_ready(f"http://127.0.0.1:{port}/health", timeout_s=60)
        body = {"prompt": "Write a python function that parses a config file.", "max_tokens": 48}
        assert client.post("/v1/completions", json=body).status_code == 200
        positions = prometheus_by_label(
            client.get("/metrics").text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position"
        )
    return max(int(p) for p in positions)


@pytest.mark.server
def test_an_exported_depth_schedule_launches_and_runs_its_depth_per_batch_size(
    engine: VLLMEngine, tmp_path: Path
) -> None:
    """`num_speculative_tokens_per_batch_size` as the export writes it: one request alone runs the batch-1
    depth (5 positions drafted), not the schedule's smaller depths."""
    base = {"max-model-len": 65536, "kv-cache-dtype": "fp8", "max-num-seqs": 16, SPEC + "method": "mtp"}
    params = engine.schedule_params(base, [(1, 5), (2, 3), (8, 1)], "")
    assert params is not None
    config = json.loads((argv := engine.argv(params, 0))[argv.index("--speculative-config") + 1])
    assert config["num_speculative_tokens"] == 5
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 1, 5], [2, 7, 3], [8, 16, 1]]
    assert deepest_position(engine, params, tmp_path) == 4  # positions 0..4: the batch-1 depth of 5


@pytest.mark.server
def test_a_schedule_may_draft_nothing_at_large_batches_and_vllms_rules_hold(
    engine: VLLMEngine, tmp_path: Path
) -> None:
    """vLLM takes k = 0 for a batch-size range (speculation off there): a schedule whose best depth at 16 streams
    is none exports and launches. A schedule with no depth above 0 is no speculation at all; one whose first range
    does not start at batch size 1 is refused at start, as vLLM's `validate_and_normalize_dynamic_sd_schedule`
    refuses it."""
    base = {"max-model-len": 65536, "kv-cache-dtype": "fp8", "max-num-seqs": 16, SPEC + "method": "mtp"}
    assert engine.schedule_params(base, [(1, 0), (4, 0)], "") is None
    params = engine.schedule_params(base, [(1, 4), (2, 0)], "")
    assert params is not None
    config = json.loads((argv := engine.argv(params, 0))[argv.index("--speculative-config") + 1])
    assert config["num_speculative_tokens"] == 4
    assert config["num_speculative_tokens_per_batch_size"] == [[1, 1, 4], [2, 16, 0]]
    assert deepest_position(engine, params, tmp_path) == 3  # one request alone: the batch-1 depth of 4
    late = dict(params) | {SPEC + "num_speculative_tokens_per_batch_size": [[2, 16, 3]]}
    port = free_port()
    refused = ServerProcess(engine.argv(late, port), tmp_path / "late.log", engine.env(), engine.exit_reason)
    with refused, pytest.raises(LaunchError, match="first batch-size range must start at 1"):
        refused.wait_ready(f"http://127.0.0.1:{port}/health", timeout_s=60)


@pytest.mark.server
def test_vllms_adaptive_verification_is_an_arm_it_launches_and_refuses_without_full_graphs(
    engine: VLLMEngine, tmp_path: Path
) -> None:
    """`enable_adaptive_verification` beside a bound k: the launch drafts, each step at the depth vLLM's
    controller admits (at most k), its shape fitted apart from the static k; false is the default and no trial
    differs only there; with enforce-eager vLLM refuses it, and so does the engine, before any launch."""
    base = {
        "max-model-len": 65536,
        "kv-cache-dtype": "fp8",
        SPEC + "method": "mtp",
        SPEC + "num_speculative_tokens": 5,
    }
    adaptive = engine.plan(base | {SPEC + "enable_adaptive_verification": True}).params
    assert engine.spec_shape(adaptive).variant == "adaptive verification"
    static = engine.plan(base | {SPEC + "enable_adaptive_verification": False}).params
    assert static == engine.plan(base).params and not engine.spec_shape(static).variant
    assert 1 <= deepest_position(engine, adaptive, tmp_path) <= 4  # positions 0..k-1 at most
    with pytest.raises(UserError, match="adaptive verification requires full CUDA graphs"):
        engine.check_params(adaptive | {"enforce-eager": True})
    port = free_port()
    eager = adaptive | {"enforce-eager": True}
    refused = ServerProcess(
        engine.argv(eager, port), tmp_path / "eager.log", engine.env(), engine.exit_reason
    )
    with refused, pytest.raises(LaunchError, match="Adaptive verification requires full CUDA graphs"):
        refused.wait_ready(f"http://127.0.0.1:{port}/health", timeout_s=60)
    with pytest.raises(UserError, match="true or false"):
        engine.check_params(base | {SPEC + "enable_adaptive_verification": "yes"})
