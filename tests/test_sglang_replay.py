"""The real SGLang 0.5.17's bytes (recorded on an H200) served again by `sweep.sim.replay`: the engine's --help
reader, log reader, final-chunk reader and metrics reader, and a whole `specsweep run`, on what a real server
said rather than on what the simulator believes it says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweep.engines import ServerSetup, SGLangEngine
from tests.conftest import server_processes, specsweep_argv

RECORDED = Path(__file__).parent / "recordings" / "sglang-0.5.17-h200"
REPLAY = [sys.executable, "-m", "sweep.sim.replay", "--replay", str(RECORDED)]
SPACE = """
engine: sglang
server:
  launcher: {launcher}
  model: /srv/models/tiny-llama
  startup_timeout: 60
fixed: {{load-format: dummy, attention-backend: triton, context-length: 4096}}
params:
  speculative-algorithm: {{choices: [NGRAM]}}
  speculative-num-draft-tokens: {{choices: [8]}}
workloads: [{{class: code}}, {{class: prose}}]
probe: {{repeats: 2, max_tokens: 128}}
confirm: {{launches: 0}}
trials: 2
seed: 1
"""


def sweep(tmp_path: Path, *launcher: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "space.yaml").write_text(SPACE.format(launcher=json.dumps([*REPLAY, *launcher])))
    argv = specsweep_argv("run", "--space", str(tmp_path / "space.yaml"), "--runs", str(tmp_path / "runs"))
    return subprocess.run([*argv, "--study", "r"], capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.server
def test_the_engine_reads_0_5_17_s_flags_from_its_recorded_help() -> None:
    engine = SGLangEngine(ServerSetup(launcher=REPLAY, model="/srv/models/tiny-llama"))
    engine.prepare()
    assert {"cuda-graph-max-bs", "cuda-graph-max-bs-decode", "decode-log-interval"} <= engine.flags
    assert "speculative-draft-kv-cache-dtype" not in engine.flags  # 0.5.23's, not 0.5.17's


@pytest.mark.server
def test_a_whole_run_reads_the_real_servers_bytes(tmp_path: Path) -> None:
    done = sweep(tmp_path, "--replay-baseline-from", "ngram")
    assert done.returncode == 0, done.stderr[-3000:]
    trials = tmp_path / "runs" / "r" / "trials"
    assert "no launch without speculation was recorded" in (trials / "0" / "server.log").read_text()
    record = json.loads((trials / "1" / "record.json").read_text())
    facts, code = record["facts"], record["workloads"]["code"]
    # The log, as the real NGRAM launch printed it.
    assert (facts["kv_pool_tokens"], facts["free_after_pool_gb"], facts["weight_gb"]) == (
        16576028,
        12.4,
        0.13,
    )
    assert facts["graph_captures"] == [
        {"graph": "target verify", "gb": 0.06, "free_after_gb": 11.5, "sizes": [1, 2, 3, 4, 5, 6, 7, 8]}
    ]
    assert facts["speculation_active"] and facts["chat_template"]
    # The final chunks: prefill from 0.5.17's stamps (it has no first_token_latency), acceptance per request
    # from the histogram, the gauge as the server's last logged step (1.0, where the requests gave 6.2-6.5).
    recorded = [
        json.loads((RECORDED / f"ngram-{n}.json").read_text())["last"]["meta_info"]
        for n in ("generate_code", "generate_prose")
    ]
    assert code["prefill_tps"]["median"] > 0 and code["ttft_s"]["median"] > 0
    lengths = sorted(
        sum((k + 1) * c for k, c in enumerate(m["spec_correct_drafts_histogram"])) / m["spec_verify_ct"]
        for m in recorded
    )
    assert sorted(code["acceptance_length"]["values"]) == pytest.approx(lengths)
    assert code["acceptance_gauge"]["median"] == 1.0
    # A random-weight model's answers are no text: every verdict says so.
    report = subprocess.run(
        specsweep_argv("report", "--study", "r", "--runs", str(tmp_path / "runs"), "--json"),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    recommendations = json.loads(report.stdout)["recommendations"]
    assert len(recommendations) == 2 and not any(r["representative"] for r in recommendations)
    assert not server_processes(str(RECORDED))


@pytest.mark.server
def test_a_launch_nothing_was_recorded_for_fails_with_that_reason(tmp_path: Path) -> None:
    done = sweep(tmp_path)  # no recording of a launch without speculation, and none asked to stand in
    assert done.returncode == 2
    assert "holds no recorded launch with no speculation" in done.stderr
    refused = subprocess.run(
        [*REPLAY, "--model-path", "/m", "--speculative-draft-kv-cache-dtype", "fp8_e4m3"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (
        refused.returncode == 2
        and "unrecognized arguments: --speculative-draft-kv-cache-dtype" in refused.stderr
    )
