"""Verdicts end to end against the SGLang simulator (real HTTP, real processes, noise drawn per launch): a known
true effect, a confirmation after the fact, multi-stream aggregates, broken outputs and a busy host."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import optuna
import pytest

from sweep.cli import main
from sweep.launch import host
from sweep.sim.profile import DEFAULT_PROFILE
from tests.conftest import host_readings

SIM = '["{python}", -m, sweep.sim, --sim-time-scale, "0.002"'


def space(tmp_path: Path, body: str, profile: Path | None = None, scale: str = "0.002") -> Path:
    """A space on the simulator. Each launch draws the next seed from a file: launches differ as real ones
    do, and the test sees the same launches every time (an A/A test is otherwise wrong 2% of the time)."""
    seeds = tmp_path / "seeds"
    seeds.write_text("1000")
    extra = f', --sim-seed-file, "{seeds}"' + (f', --sim-profile, "{profile}"' if profile else "")
    path = tmp_path / "space.yaml"
    launcher = SIM.replace('"0.002"', f'"{scale}"')
    path.write_text(f"engine: sglang\nserver: {{launcher: {launcher}{extra}], model: /m}}\n{body}")
    return path


def vllm_space(tmp_path: Path, body: str, *extra_args: str) -> Path:
    """A space on the vLLM simulator front end, its command line's extra arguments given."""
    path = tmp_path / "space.yaml"
    launcher = '["{python}", -m, sweep.sim, vllm]'
    extra = ", ".join(f"'{a}'" for a in extra_args)
    path.write_text(
        f"engine: vllm\nserver: {{launcher: {launcher}, model: /m, extra_args: [{extra}]}}\n"
        f"fixed: {{max-model-len: 8192}}\n{body}"
    )
    return path


def ab(tmp_path: Path, capsys: pytest.CaptureFixture[str], b: str, *extra: str) -> dict[str, str]:
    path = space(tmp_path, "workloads: [{class: code}]\nprobe: {repeats: 3, max_tokens: 96}\n")
    argv = ["ab", "--space", str(path), "--a", "baseline", "--b", b, "--runs", str(tmp_path / "runs"), *extra]
    assert main(argv) == 0
    rows = {}
    for line in capsys.readouterr().out.splitlines():
        cells = [c.strip() for c in line.split("  ") if c.strip()]
        if cells and cells[0].startswith("code: "):
            rows[cells[0]] = cells[-1]
    return rows


@pytest.mark.server
@pytest.mark.usefixtures("quiet_host")
def test_ab_finds_a_true_gain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = ab(tmp_path, capsys, "sim-speed-factor=1.25")
    assert rows["code: decode t/s"] == "faster"


@pytest.mark.server
@pytest.mark.usefixtures("quiet_host")
def test_ab_of_a_configuration_against_itself_claims_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ab(tmp_path, capsys, "baseline", "--max-rounds", "6")
    assert rows["code: decode t/s"] == "within noise"


@pytest.mark.server
@pytest.mark.usefixtures("quiet_host")
def test_confirm_after_the_fact_and_multi_stream_aggregates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    body = """fixed: {kv-cache-dtype: fp8_e4m3}
params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {int: [2, 4]}
workloads: [{class: tool, streams: [1, 4]}]
probe: {repeats: 2, max_tokens: 64}
confirm: {top: 1, launches: 2, max_launches: 3}
trials: 3
seed: 2
"""
    # At a tenth of the model's time a batch decodes for about 70 ms: four requests sent together overlap on
    # the server however late a busy machine sends them (at 0.002 they would decode one after another).
    path = space(tmp_path, body, scale="0.1")
    runs = str(tmp_path / "runs")
    assert main(["run", "--space", str(path), "--study", "late", "--runs", runs, "--no-confirm"]) == 0
    assert "verdicts are unconfirmed" in capsys.readouterr().out
    path.unlink()  # the study keeps its space: confirm needs only the study
    assert main(["confirm", "--study", "late", "--runs", runs]) == 0
    assert "confirmation: " in capsys.readouterr().out
    assert main(["report", "--study", "late", "--runs", runs, "--json"]) == 0
    report: dict[str, Any] = json.loads(capsys.readouterr().out)
    recs = {r["workload"]: r for r in report["recommendations"]}
    assert all(r["confirmed"] and r["verdict"] == "faster" for r in recs.values()), [
        (k, r["verdict"], r["why_verdict"]) for k, r in recs.items()
    ]
    # The confirmation looked after 2 rounds and may look after a third: each look's interval is wider.
    assert all("98% interval over up to 2 looks (" in r["why_verdict"] for r in recs.values())
    # Four streams at once: every request valid (the nonce leads the message, so the radix cache has nothing
    # to give but the chat template's header, the same in every request, where one was prefilled before another
    # arrived), and the aggregate is the sum of the
    # streams, not the survivors'.
    rows = [
        json.loads(line)
        for p in Path(runs, "late").glob("**/requests.jsonl")
        for line in p.read_text().splitlines()
    ]
    four = next(t for t in report["trials"] if t["role"] == "baseline")["record"]["workloads"][
        "tool/4streams"
    ]
    header = four["template_tokens"]
    assert four["form"] == "chat" and 0 < header < 10
    assert rows and all(r["status"] == "ok" and r["cached_tokens"] <= header for r in rows)
    one = next(t for t in report["trials"] if t["role"] == "baseline")["record"]["workloads"]["tool"]
    # Survivors alone would be one or two streams' worth. The streams are prefilled in one batch and step
    # together, so the window that ends with the last of them holds nearly their sum: what it lacks is how
    # unevenly their drafts were accepted (benchmarks/streams.py: 0.93-0.97 of it at 4 streams).
    assert four["aggregate_tps"]["median"] > 3 * one["decode_tps"]["median"]
    assert four["aggregate_tps"]["median"] == pytest.approx(four["sum_stream_tps"]["median"], rel=0.15)
    # A/B of two of its trials, by reference.
    path = space(tmp_path, body)
    argv = [
        "ab",
        "--space",
        str(path),
        "--a",
        "late:0",
        "--b",
        "late:1",
        "--rounds",
        "2",
        "--max-rounds",
        "2",
    ]
    assert main([*argv, "--runs", runs, "--study", "late-ab"]) == 0
    out = capsys.readouterr().out
    trial_1 = next(t for t in report["trials"] if t["number"] == 1 and t["phase"] == "search")["record"][
        "params"
    ]
    assert f"B: {' '.join(f'{k}={v}' for k, v in trial_1.items())}" in out
    assert (
        "A: kv-cache-dtype=fp8_e4m3 speculative-algorithm=none" in out
        and "tool/4streams: aggregate t/s" in out
    )


@pytest.mark.server
def test_a_configuration_that_breaks_outputs_is_flagged_and_not_recommended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = tmp_path / "broken.yaml"
    profile.write_text(DEFAULT_PROFILE.read_text() + "broken_output_min_steps: 4\n")
    body = """params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {choices: [5]}
enqueue: [{speculative-algorithm: NEXTN, speculative-num-steps: 5}]
workloads: [{class: tool}]
probe: {repeats: 3, max_tokens: 48}
confirm: {launches: 0}
trials: 2
seed: 1
"""
    path = space(tmp_path, body, profile)
    assert main(["run", "--space", str(path), "--study", "broken", "--runs", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "CHANGES THE MODEL'S OUTPUT: 0/3 outputs identical" in out
    assert "3/3 structured answers broken" in out
    assert main(["report", "--study", "broken", "--runs", str(tmp_path / "runs"), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)["recommendations"][0]
    assert rec["output"]["changed"] and rec["output"]["first_divergence"] is not None
    assert rec["recommended_trial"] == 0  # the fast configuration is not recommended
    argv = ["export", "--study", "broken", "--runs", str(tmp_path / "runs"), "--workload", "tool"]
    assert main([*argv, "--format", "json"]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["trial"] == 0 and "changes the output" in exported["notes"][0]
    assert main(argv) == 0
    cli = capsys.readouterr()
    assert cli.out.strip().endswith("--port 30000") and cli.err.startswith("# unconfirmed")


@pytest.mark.server
def test_a_busy_host_is_named_and_its_verdicts_are_unreliable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(host, "sample", host_readings(0.5))
    # Long enough (3 answers of 160 tokens at ~40 t/s of the model, at a fifth of its time: ~2.4 s) that every
    # workload is measured over more than a second: shorter windows are not judged.
    path = space(tmp_path, "workloads: [{class: code}]\nprobe: {repeats: 3, max_tokens: 160}\n", scale="0.2")
    argv = ["ab", "--space", str(path), "--a", "baseline", "--b", "sim-speed-factor=1.5"]
    argv += ["--rounds", "2", "--max-rounds", "2", "--runs", str(tmp_path / "runs"), "--study", "busy"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "unreliable" in out and "host busy during" in out
    study = optuna.load_study(study_name="busy", storage=f"sqlite:///{tmp_path / 'runs/busy/study.db'}")
    hosts = [t.user_attrs["record"]["workloads"]["code"]["host"] for t in study.trials]
    assert all(h["other_cpu"] == 0.5 and h["cpus"] == 2 for h in hosts)


@pytest.mark.server
def test_latency_limits_are_optuna_constraints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = """params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {int: [2, 3]}
enqueue: [{speculative-algorithm: NEXTN, speculative-num-steps: 2}, {speculative-algorithm: NEXTN, speculative-num-steps: 2}]
workloads: [{class: code}]
probe: {repeats: 2, max_tokens: 32}
latency_limits: {ttft_p90_s: 0.000001, tpot_p50_s: 100}
trials: 3
seed: 1
"""
    path = space(tmp_path, body)
    assert main(["run", "--space", str(path), "--study", "lim", "--runs", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    study = optuna.load_study(study_name="lim", storage=f"sqlite:///{tmp_path / 'runs/lim/study.db'}")
    for trial in study.trials:  # TTFT over its limit, TPOT well under (a repeated configuration copies them)
        assert trial.constraints["latency ttft_p90_s"] > 0 and trial.constraints["latency tpot_p50_s"] < 0
    assert any("duplicate_of" in t.user_attrs for t in study.trials)  # steps 2..3 in 3 trials: one repeats
    # No configuration meets the TTFT limit: nothing is confirmed, and speculation stays off.
    assert "confirmation: none yet" in out and "run for code: trial 0" in out


PARAGRAPHS = (
    "The harbour master kept a ledger of every ship that came in after dark, and in the spring of that year he "
    "wrote that the fog had stayed for eleven days, longer than anyone in the village remembered.",
    "Our office moves to the third floor on Monday; the old rooms close at noon on Friday, so please take home "
    "anything you keep in the desks, and leave the keys with reception before you go.",
    "Water the seedlings every second morning until the first true leaves appear, then move them to the cold "
    "frame, where they should stay for a week before they go out into the beds.",
    "The committee agreed to keep the library open until nine on weekdays during the exam period, provided that "
    "two volunteers are on duty each evening and the reading room stays quiet.",
    "Bring a warm jacket, a torch and enough water for the day; the path above the lake is steep and narrow in "
    "places, and the last bus back to town leaves the car park at six.",
    "In the final quarter the shop sold more bicycles than in the whole of the previous year, mostly to people "
    "who had started riding to work when the bridge closed for repairs.",
)


def quoting(tmp_path: Path, capsys: pytest.CaptureFixture[str], stop: list[str] | None) -> dict[str, Any]:
    """A study of a workload that quotes a note's paragraph word for word on the simulator (a base model there:
    after the quote it starts the request again), with or without a stop sequence where the quote ends."""
    prompts = [
        f"Quote the second paragraph of this note word for word.\n\nDear Sam,\n\n{p}\n\nBest, Ines"
        for p in PARAGRAPHS
    ]
    workload = {"name": "quote", "prompts": prompts, **({"stop": stop} if stop else {})}
    body = f"""params:
  speculative-algorithm: {{choices: [NEXTN]}}
  speculative-num-steps: {{choices: [3]}}
enqueue: [{{speculative-algorithm: NEXTN, speculative-num-steps: 3}}]
workloads: {json.dumps([workload])}
probe: {{repeats: 3, max_tokens: 96}}
trials: 2
seed: 1
"""
    tmp_path.mkdir()
    runs = str(tmp_path / "runs")
    assert main(["run", "--space", str(space(tmp_path, body)), "--study", "quote", "--runs", runs]) == 0
    capsys.readouterr()
    assert main(["report", "--study", "quote", "--runs", runs, "--json"]) == 0
    return dict(json.loads(capsys.readouterr().out))


@pytest.mark.server
@pytest.mark.usefixtures("quiet_host")
def test_a_quoting_workload_that_runs_on_is_named_with_its_task_and_measured_alone_with_a_stop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without a stop sequence: the quote read as text, then the run-on; the report says so, how many tokens the
    # task was, and how to measure it alone, and the gain it found stays in view.
    report = quoting(tmp_path / "on", capsys, None)
    rec = report["recommendations"][0]
    answers = rec["baseline_output_health"]
    assert answers["symptoms"]["ran_on"] == answers["answers"] and answers["task_tokens"]
    words = min(len(p.split()) for p in PARAGRAPHS)
    assert all(t >= words for t in answers["task_tokens"])
    assert rec["recommended_trial"] == 0 and rec["withheld"]["configuration"] == "trial 1"
    assert "stop: [...]" in rec["withheld"]["evidence"] and "until only the task is measured" in rec["why"]
    # With the stop sequence the quote ends in: each answer is the paragraph, word for word; the answers are
    # text, and the confirmed gain is what to run.
    report = quoting(tmp_path / "stopped", capsys, ["\n\n"])
    rec = report["recommendations"][0]
    assert rec["baseline_output_health"]["degenerate"] == 0
    assert rec["verdict"] == "faster" and rec["recommended_trial"] == 1 and rec["withheld"] is None
    said = {o for t in report["trials"] for o in t["record"]["workloads"]["quote"]["outputs"]}
    assert said <= set(PARAGRAPHS) and len(said) >= 3
