"""Open-loop load end to end on the SGLang simulator (real HTTP, real processes): requests arrive on their own
clock, verification competes with the other requests for the batch, and the records and the report say what a
configuration served at each rate."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sweep.cli import main
from sweep.sim.profile import DEFAULT_PROFILE
from tests.test_verdicts_sim import space

# At a time scale of 0.1 a simulated request of 64 tokens takes about 60 ms on the wall clock, which the arrivals
# are timed on: 4 requests a second arrive one at a time, 400 (eight in 18 ms) decode together however late a
# busy client sends a few of them (at 0.02 a request took 12 ms, and a busy run's late sends decoded apart).
BODY = """fixed: {kv-cache-dtype: fp8_e4m3}
params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {choices: [4]}
workloads: [{class: prose, rate: [4, 400], requests: 8, arrivals: constant}]
latency_limits: {ttft_p90_s: 30.0}
probe: {repeats: 2, max_tokens: 64}
trials: 2
"""


def narrow_knee(tmp_path: Path, per_token_ms: float) -> Path:
    """The default profile on a GPU whose forward stops being memory-bound at 8 tokens (the profile's knee is
    32) and costs `per_token_ms` a token past it."""
    text = re.sub(r"verify_knee_tokens: \d+", "verify_knee_tokens: 8", DEFAULT_PROFILE.read_text())
    profile = tmp_path / "narrow-knee.yaml"
    profile.write_text(re.sub(r"per_verify_token_ms: [\d.]+", f"per_verify_token_ms: {per_token_ms}", text))
    return profile


@pytest.mark.server
@pytest.mark.usefixtures("quiet_host")
def test_speculation_pays_less_as_arrivals_fill_the_batch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A GPU whose forward stops being memory-bound at 8 tokens and costs 2 ms a token past it (the default
    # profile's knee is 32 tokens): eight 5-token verify forwards at once go well past it, eight plain
    # decode tokens do not.
    path = space(tmp_path, BODY, narrow_knee(tmp_path, 2.0), scale="0.1")
    runs = str(tmp_path / "runs")
    assert main(["run", "--space", str(path), "--study", "load", "--runs", runs, "--no-confirm"]) == 0
    text = capsys.readouterr().out
    assert "prose: its best against no speculation: +" in text
    assert "speculation stops paying between 4 and 400 req/s" in text
    assert (
        "under load (open loop; goodput: requests within the latency limits per second, ttft_p90_s 30)"
        in text
    )
    assert main(["report", "--study", "load", "--runs", runs, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    trials = {t["role"]: t["record"]["workloads"] for t in report["trials"] if t["record"]}
    base, spec = trials["baseline"], next(w for role, w in trials.items() if role != "baseline")
    for workloads in (base, spec):
        slow, fast = workloads["prose/4rps"], workloads["prose/400rps"]
        assert (
            slow["status"] == fast["status"] == "ok"
            and slow["rate"] == 4.0
            and slow["arrivals"] == "constant"
        )
        assert slow["offered_rps"]["median"] == pytest.approx(4.0, rel=0.1)
        assert slow["goodput_rps"]["median"] > 0 and set(slow["latency"]) >= {
            "ttft_s",
            "tpot_s",
            "itl_s",
            "e2e_s",
        }
        assert slow["batch"]["median"] < 1.5 < fast["batch"]["median"]  # together only when they arrive so
    gain = {key: spec[key]["decode_tps"]["median"] / base[key]["decode_tps"]["median"] for key in spec}
    # Alone, a request's 5-token verify forward is nearly free; eight at once go past the GPU's knee.
    assert gain["prose/4rps"] > 1.2 and gain["prose/400rps"] < 1.0
    rows = [
        json.loads(line)
        for p in Path(runs, "load").glob("**/requests.jsonl")
        for line in p.read_text().splitlines()
    ]
    slow_sent = sorted(r["sent_s"] for r in rows if r["workload"] == "prose/4rps" and r["repeat"] == 0)
    assert slow_sent[-1] == pytest.approx(7 / 4, abs=0.2) and all(r["status"] == "ok" for r in rows)
    page = (tmp_path / "dashboards" / "load.html").read_text()
    assert "Latency and goodput against the arrival rate (open loop)" in page
    assert "No workload was measured open loop" not in page and '"name":"baseline"' in page


LLAMA = """
engine: llamacpp
server: {startup_timeout: 120}
fixed: {ctx-size: 4096, parallel: 2, threads: 2}
params:
  spec-type: {choices: [ngram-simple]}
workloads: [{class: tool, rate: [0.25, 20], requests: 4, arrivals: constant}]
probe: {repeats: 1, max_tokens: 24}
confirm: {launches: 0}
trials: 2
"""


@pytest.mark.server
def test_the_real_llama_server_queues_what_arrives_faster_than_its_slots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two slots, four requests: arriving together two decode at once and two wait for a slot, which their first
    tokens show (the third comes after the first answer ends). How much answers sent apart
    overlap is the machine's speed (none on a quiet machine; on a busy one an answer outlasts the gap, and
    they overlap as much as those sent together did), so it is held only to the slots."""
    path = tmp_path / "space.yaml"
    path.write_text(LLAMA)
    runs = str(tmp_path / "runs")
    assert main(["run", "--space", str(path), "--study", "real", "--runs", runs]) == 0
    assert "under load (open loop" in capsys.readouterr().out
    assert main(["report", "--study", "real", "--runs", runs, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    for trial in report["trials"]:
        slow, fast = trial["record"]["workloads"]["tool/0.25rps"], trial["record"]["workloads"]["tool/20rps"]
        assert slow["status"] == fast["status"] == "ok", (slow["reason"], fast["reason"])
        assert 1.2 < fast["batch"]["median"] <= 2.05 and slow["batch"]["median"] <= 2.05
        # What was sent and what came back, whatever the machine's speed (goodput itself is the machine's).
        assert fast["offered_rps"]["median"] > 10 * slow["offered_rps"]["median"]
        assert fast["goodput_rps"]["median"] > 0 and slow["goodput_rps"]["median"] > 0
    rows = [
        json.loads(line)
        for line in Path(runs, "real", "trials", "0", "requests.jsonl").read_text().splitlines()
    ]
    slow_sent = [r["sent_s"] for r in rows if r["workload"] == "tool/0.25rps"]
    assert slow_sent == pytest.approx([0.0, 4.0, 8.0, 12.0], abs=0.3)
    # Sent together, two wait for a slot: the third first token comes after the first answer ends.
    fast_rows = [r for r in rows if r["workload"] == "tool/20rps"]
    firsts = sorted(r["sent_s"] + r["ttft_s"] for r in fast_rows)
    assert firsts[2] >= min(r["sent_s"] + r["wall_s"] for r in fast_rows) - 0.05
    assert all(r["status"] == "ok" and r["cached_tokens"] == 0 for r in rows)


CAPACITY = """fixed: {kv-cache-dtype: fp8_e4m3}
params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {choices: [4]}
workloads: [{class: prose, rate: [4, 400], requests: 6, arrivals: constant}]
objective: capacity
latency_limits: {tpot_p90_s: 0.035}
probe: {repeats: 2, max_tokens: 64}
trials: 2
"""


@pytest.mark.server
def test_a_capacity_search_finds_where_speculation_stops_paying(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Time per output token held to 35 ms, judged on the simulated server's own (modelled) times, as on a real
    SGLang server's: a busy client machine's scheduling does not fail it (on the client's wall clock it was
    1.75 ms at this time scale, and a busy run failed the baseline at 4 req/s). Without speculation a token takes 24 ms however many requests run; a 4-step chain takes about a
    third of its 39 ms step alone, but six of them at once go far past the GPU's knee (here 8 tokens, 4 ms a
    token past it): speculation holds the limit only while few requests overlap, so its capacity is lower."""
    path = space(tmp_path, CAPACITY, narrow_knee(tmp_path, 4.0), scale="0.05")
    runs = str(tmp_path / "runs")
    assert main(["run", "--space", str(path), "--study", "cap", "--runs", runs, "--no-confirm"]) == 0
    text = capsys.readouterr().out
    assert "prose/capacity (constant arrivals): trial" in text and "holds the limits up to" in text
    assert main(["report", "--study", "cap", "--runs", runs, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    found = {t["role"]: t["record"]["workloads"]["prose/capacity"] for t in report["trials"] if t["record"]}
    base, spec = found.pop("baseline"), next(iter(found.values()))
    assert base["capacity_rps"]["median"] == 400.0  # held at the top of the range
    assert 4.0 <= spec["capacity_rps"]["median"] < 400.0 and len(spec["capacity_steps"]) == 5
    assert spec["capacity_steps"][0]["held"] and not spec["capacity_steps"][1]["held"]
    (rec,) = report["recommendations"]
    assert rec["unit"] == "req/s" and rec["recommended_trial"] == 0  # keep speculation off under this load
    page = (tmp_path / "dashboards" / "cap.html").read_text()
    assert "Capacity within the latency limits (open loop)" in page and "4 held" in page
