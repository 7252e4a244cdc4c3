"""The simulator knows when the host cannot keep its time scale: at a scale no machine can hold, its requests end
behind their modelled clock; it says so once in its log, serves its counts at `CLOCK_PATH`, and the study reads
them beside the host's load. A headline on the client's clock (a front end that reports no durations of its
own) was then measured at the host's pace: the launch counts as on a busy host and its verdict as unreliable.
A headline on the server's own durations stays the model's: the report warns that the client-clock numbers
(aggregate t/s, latencies) are the host's pace, and the verdict stands."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import httpx
import pytest

from sweep.cli import main
from sweep.core.clock import CLOCK_PATH, LATE_SHARE
from sweep.launch.server import ServerProcess, free_port
from sweep.records import HostLoad, WorkloadSummary
from tests.test_verdicts_sim import space, vllm_space

# A step of tens of modelled milliseconds in a fraction of a microsecond: no host keeps it.
TOO_FAST = "0.00001"


def test_a_lag_past_the_share_makes_a_client_clock_headline_busy_and_leaves_a_server_clock_one() -> None:
    quiet = HostLoad(other_cpu=0.0, steal=0.0, loadavg=0.5, cpus=2, seconds=5.0)
    lagged = HostLoad(other_cpu=0.0, steal=0.0, loadavg=0.5, cpus=2, seconds=5.0, server_lag=LATE_SHARE * 3)
    assert not lagged.busy and lagged.lagged and "behind its clock" in lagged.describe()
    assert not HostLoad(0.0, 0.0, 0.5, 2, 5.0, server_lag=LATE_SHARE / 2).lagged
    client = WorkloadSummary("code", "ok", host=lagged)
    server = WorkloadSummary("code", "ok", host=lagged, server_clock=True)
    assert client.on_busy_host and not server.on_busy_host
    assert not WorkloadSummary("code", "ok", host=quiet).on_busy_host
    restored = WorkloadSummary.from_dict(json.loads(json.dumps(client.to_dict())))
    assert restored.host == lagged and restored.on_busy_host


@pytest.mark.server
def test_the_simulator_counts_and_says_how_far_it_fell_behind_its_clock(tmp_path: Path) -> None:
    log, port = tmp_path / "server.log", free_port()
    argv = [sys.executable, "-m", "sweep.sim", "--sim-time-scale", TOO_FAST, "--model-path", "/m"]
    base = f"http://127.0.0.1:{port}"
    with ServerProcess([*argv, "--port", str(port)], log, dict(os.environ)) as server:
        server.wait_ready(f"{base}/health", timeout_s=60)
        with httpx.Client(base_url=base, timeout=60) as client:
            assert client.get(CLOCK_PATH).json()["requests"] == 0
            for n in range(3):
                body = {
                    "text": f"Write a Python function number {n}.",
                    "sampling_params": {"max_new_tokens": 64},
                }
                assert client.post("/generate", json=body).status_code == 200
            counts = client.get(CLOCK_PATH).json()
    assert counts["requests"] == 3 and counts["late_requests"] >= 1
    assert counts["late_s"] > LATE_SHARE * counts["modelled_s"] > 0
    said = [line for line in log.read_text().splitlines() if "behind the clock" in line]
    assert len(said) == 1 and "use a larger --sim-time-scale" in said[0]


@pytest.mark.server
@pytest.mark.usefixtures("quiet_host")
@pytest.mark.parametrize(("engine", "busy"), [("vllm", True), ("sglang", False)])
def test_a_study_on_a_host_too_slow_for_the_scale_reads_the_lag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str, busy: bool
) -> None:
    body = (
        "workloads: [{class: code}]\nprobe: {repeats: 2, max_tokens: 48}\nconfirm: {launches: 0}\ntrials: 1\n"
    )
    if engine == "sglang":
        path = space(tmp_path, body, scale=TOO_FAST)
    else:
        path = vllm_space(tmp_path, body, "--sim-time-scale", TOO_FAST, "--sim-startup-scale", "0.001")
    runs = tmp_path / "runs"
    assert main(["run", "--space", str(path), "--study", "lag", "--runs", str(runs)]) == 0
    code = json.loads((runs / "lag" / "trials" / "0" / "record.json").read_text())["workloads"]["code"]
    assert code["host"]["server_lag"] > LATE_SHARE
    assert code["server_clock"] is (engine == "sglang")
    report = capsys.readouterr().out
    if busy:
        assert "host busy during trial 0, code" in report and "behind its clock" in report
    else:
        assert "host busy" not in report
        assert "its numbers on the client's clock (aggregate t/s, latencies) are this host's pace" in report
