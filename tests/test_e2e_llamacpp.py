"""End to end on the real llama-server and Gemma 3 270M (CPU): a 3-trial study, resumed, reported, and bad input."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from sweep.answers import fidelity
from sweep.cli import main
from sweep.engines import ServerSetup
from sweep.engines.llamacpp import LlamaCppEngine
from sweep.engines.llamacpp_bundle import gemma_model, llama_server_binary
from sweep.launch.server import ServerProcess, free_port
from sweep.probes.runner import probe
from sweep.space import parse_space
from tests.conftest import server_processes

SPACE = """
engine: llamacpp
server: {startup_timeout: 120}
fixed: {ctx-size: 2048, parallel: 1, threads: 2}
params:
  spec-type: {choices: [ngram-simple, ngram-mod]}
  spec-ngram-simple-size-n: {int: [2, 6], when: {spec-type: ngram-simple}}
enqueue:
  - {spec-type: ngram-simple, spec-ngram-simple-size-n: 3}
workloads:
  - {class: tool}
  - {class: prose}
probe: {repeats: 2, max_tokens: 48}
confirm: {launches: 0}
trials: 3
seed: 1
"""


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("e2e")
    space = root / "space.yaml"
    space.write_text(SPACE)
    argv = ["run", "--space", str(space), "--study", "e2e", "--runs", str(root / "runs")]
    assert main(argv) == 0
    return {"root": root, "argv": argv, "run_dir": root / "runs" / "e2e"}


def records(run_dir: Path) -> dict[int, dict[str, Any]]:
    return {
        int(p.parent.name): json.loads(p.read_text())
        for p in sorted((run_dir / "trials").glob("*/record.json"))
    }


def load(run_dir: Path) -> optuna.Study:
    """The study whose folder is `run_dir` (runs/<study>), from its SQLite storage."""
    return optuna.load_study(study_name=run_dir.name, storage=f"sqlite:///{run_dir / 'study.db'}")


def run_variant(tmp_path: Path, name: str, text: str, *extra: str, exit_code: int = 0) -> optuna.Study:
    """Run `specsweep run` on a space file `name`.yaml holding `text`, then load the study it made."""
    space = tmp_path / f"{name}.yaml"
    space.write_text(text)
    assert main(["run", "--space", str(space), "--runs", str(tmp_path / "runs"), *extra]) == exit_code
    return load(tmp_path / "runs" / name)


def quick(text: str) -> str:
    """Fewer, shorter requests: for tests about launches rather than measurements."""
    return text.replace("repeats: 2, max_tokens: 48", "repeats: 1, max_tokens: 16")


def ngram_mod_after_baseline(server: str) -> str:
    """The space with another `server:` line, and ngram-mod as the trial after the baseline."""
    return quick(
        SPACE.replace("server: {startup_timeout: 120}", server).replace(
            "- {spec-type: ngram-simple, spec-ngram-simple-size-n: 3}", "- {spec-type: ngram-mod}"
        )
    )


@pytest.mark.server
def test_three_trials_baseline_first(study_dir: dict[str, Any]) -> None:
    study = load(study_dir["run_dir"])
    assert [t.state.name for t in study.trials] == ["COMPLETE"] * 3
    assert study.trials[0].user_attrs["role"] == "baseline"
    assert study.metric_names == ["tool", "prose"]
    recs = records(study_dir["run_dir"])
    assert recs[0]["params"]["spec-type"] == "none"
    assert recs[1]["params"] == {
        "ctx-size": 2048,
        "parallel": 1,
        "threads": 2,
        "spec-type": "ngram-simple",
        "spec-ngram-simple-size-n": 3,
    }
    assert (
        "plotly" in (study_dir["root"] / "dashboards" / "e2e.html").read_text()[:5_000_000]
    )  # written by `run`
    for number, rec in recs.items():
        assert (study_dir["run_dir"] / "trials" / str(number) / "server.log").stat().st_size > 0
        assert rec["facts"]["n_ctx_slot"] == 2048


@pytest.mark.server
def test_baseline_has_no_drafts_and_ngram_drafts_on_tool(study_dir: dict[str, Any]) -> None:
    recs = records(study_dir["run_dir"])
    baseline = recs[0]
    assert baseline["facts"]["speculation_active"] is False
    assert all(w["draft_tokens"] == 0 for w in baseline["workloads"].values())
    ngram = recs[1]
    assert ngram["facts"]["speculation_active"] is True
    tool = ngram["workloads"]["tool"]
    assert tool["status"] == "ok"
    assert tool["draft_tokens"] > 0 and tool["accepted_tokens"] > 0
    assert 0 < tool["acceptance_rate"]["median"] <= 1
    assert tool["acceptance_length"]["median"] > 1


@pytest.mark.server
def test_every_measured_request_was_cold_and_unique(study_dir: dict[str, Any]) -> None:
    rows = [
        json.loads(line)
        for path in (study_dir["run_dir"] / "trials").glob("*/requests.jsonl")
        for line in path.read_text().splitlines()
    ]
    assert len(rows) == 3 * 2 * 2  # trials x workloads x repeats
    assert all(r["cached_tokens"] == 0 and r["status"] == "ok" for r in rows)
    # Unique on each server; the same prompt (nonce included) in every trial, so trials pair up.
    for path in (study_dir["run_dir"] / "trials").glob("*/requests.jsonl"):
        nonces = [json.loads(line)["nonce"] for line in path.read_text().splitlines()]
        assert len(set(nonces)) == len(nonces) == 4
    assert len({r["nonce"] for r in rows}) == 4
    assert all(r["server_decode_tps"] > 0 and r["ttft_s"] > 0 for r in rows)


@pytest.mark.server
def test_a_base_model_is_sent_text_to_continue_and_answers_with_text(study_dir: dict[str, Any]) -> None:
    """Gemma 3 270M is a base model (its GGUF has no chat template): the probes send continuations through
    /v1/completions, and without speculation the answers read as text (no loop, echo or template token)."""
    baseline = records(study_dir["run_dir"])[0]
    assert baseline["facts"]["chat_template"] is False
    for key, summary in baseline["workloads"].items():
        assert summary["form"] == "completion" and "no chat template" in summary["form_reason"], key
        health = summary["output_health"]
        assert health["answers"] == 2 and health["degenerate"] == 0, (key, health)
    rows = [json.loads(line) for line in (study_dir["run_dir"] / "trials" / "0" / "requests.jsonl").open()]
    assert all(r["finish"] in ("stop", "length") and r["health"] == [] for r in rows)


@pytest.mark.server
def test_a_base_model_forced_into_chat_is_not_representative(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's original failure, kept as a test: chat requests to a base model get llama-server's ChatML
    fallback and the model continues the template. The sweep says so at the first launch, and the report marks
    the verdict as not representative and keeps speculation off for it."""
    text = SPACE.replace("- {class: tool}", "- {class: tool, form: chat}").replace("trials: 3", "trials: 2")
    run_variant(tmp_path, "chat", text.replace("repeats: 2, max_tokens: 48", "repeats: 2, max_tokens: 40"))
    said = capsys.readouterr()
    assert "WARNING tool (chat form): 2/2 answers degenerate" in said.err
    assert "prose" not in [line.split()[3] for line in said.err.splitlines() if " WARNING " in line]
    assert main(["report", "--study", "chat", "--runs", str(tmp_path / "runs"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    recs = {r["workload"]: r for r in report["recommendations"]}
    tool, prose = recs["tool"], recs["prose"]
    assert not tool["representative"] and tool["form"].startswith("chat form (named by the workload)")
    assert "template" in tool["baseline_output_health"]["symptoms"]
    assert tool["recommended_trial"] == 0 and tool["why"].startswith("not representative")
    assert prose["representative"]
    assert any(m.startswith("tool: 2/2 answers degenerate") for m in report["warnings"])
    assert "tool left out" in report["overall"]["why"]


@pytest.mark.server
def test_no_server_is_left_running(study_dir: dict[str, Any]) -> None:
    for rec in records(study_dir["run_dir"]).values():
        port = rec["argv"][rec["argv"].index("--port") + 1]
        assert server_processes(f"--port {port}") == []


@pytest.mark.server
def test_second_run_resumes_without_repeating(
    study_dir: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    before = {p: p.stat().st_mtime_ns for p in (study_dir["run_dir"] / "trials").glob("*/record.json")}
    assert main(study_dir["argv"]) == 0
    after = {p: p.stat().st_mtime_ns for p in (study_dir["run_dir"] / "trials").glob("*/record.json")}
    assert after == before
    assert len(load(study_dir["run_dir"]).trials) == 3
    assert "study e2e: 3 trials, 3 complete, 0 failed" in capsys.readouterr().out


def numbers(listed: str) -> list[int]:
    """The launch numbers a warning lists (`0, 2, 5-7`)."""
    out: list[int] = []
    for part in listed.split(", "):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return out


@pytest.mark.server
def test_report_json_has_a_recommendation_per_workload(
    study_dir: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--study", "e2e", "--runs", str(study_dir["root"] / "runs"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    recs = {r["workload"]: r for r in report["recommendations"]}
    assert set(recs) == {"tool", "prose"}
    tool = recs["tool"]
    assert tool["baseline_tps"]["median"] > 0 and tool["trial"] != 0  # the best speculative configuration
    assert tool["search_gain"] == tool["decode_tps"]["median"] / tool["baseline_tps"]["median"] - 1
    # This study skipped the confirmation: one launch each, so nothing is claimed beyond the number; a launch on a
    # busy host (a shared CI machine) makes even that number unreliable, and the warnings say which.
    compared = {0, tool["trial"]}
    said = [re.match(r"host busy during trials? ([\d, -]+), tool:", m) for m in report["warnings"]]
    busy = [m for m in said if m and compared & set(numbers(m.group(1)))]
    assert tool["verdict"] == ("unreliable" if busy else "unconfirmed") and not tool["confirmed"]
    # Which configurations the search measured decides whether its best keeps the baseline's text: on this CPU
    # some n-gram configurations change a greedy answer (the output check), and then speculation stays off; on
    # real text the best n-gram lookup may well be slower than none, and then speculation stays off too.
    if busy:  # what the warnings name comes first: nothing from a busy host is acted on
        assert tool["recommended_trial"] == 0 and tool["why"].startswith("unreliable")
    elif tool["gain"] <= 0:
        assert tool["recommended_trial"] == 0 and tool["why"].startswith("the best measured was slower")
    else:
        assert "specsweep confirm" in tool["why"] or tool["why"].startswith(
            "the best measured changes the output"
        )
    assert tool["latency"]["ttft_s"]["p50"] > 0 and tool["latency"]["itl_s"]["p90"] > 0
    assert tool["latency"]["tpot_s"]["p50"] > 0


@pytest.mark.server
def test_port_in_use_is_one_line_and_leaves_the_study_intact(
    study_dir: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        space = study_dir["root"] / "port.yaml"
        space.write_text(SPACE.replace("server: {startup_timeout: 120}", f"server: {{port: {port}}}"))
        argv = [
            "run",
            "--space",
            str(space),
            "--study",
            "e2e",
            "--runs",
            str(study_dir["root"] / "runs"),
            "--trials",
            "5",
        ]
        assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"specsweep: error: port {port} on 127.0.0.1 is in use (Address already in use); fix: stop what listens there, or drop `port:` from the space file so a free port is chosen"
    ]
    assert len(load(study_dir["run_dir"]).trials) == 3


@pytest.mark.server
def test_server_that_exits_at_start_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dies = SPACE.replace("server: {startup_timeout: 120}", "server: {extra_args: [--spec-type, draft]}")
    study = run_variant(tmp_path, "dies", dies, exit_code=2)
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(
        "specsweep: error: the server exits at start even with speculation off: bad value for --spec-type: unknown speculative type: draft"
    )
    assert err.endswith("fix: fix the fixed flags, the model or server.extra_args in the space file")
    assert [t.state.name for t in study.trials] == ["FAIL", "WAITING"]  # the sweep stopped after the baseline
    assert "unknown speculative type: draft" in study.trials[0].user_attrs["record"]["failure"]
    # Fixed and run again: the study gets a new baseline, since the old one never ran.
    study = run_variant(tmp_path, "dies", quick(SPACE))
    # The failed start-up does not eat the budget: the study gets the 3 trials it asks for.
    assert [t.state.name for t in study.trials] == ["FAIL", "COMPLETE", "COMPLETE", "COMPLETE"]
    # The third is the model search's pick (the space is too small for start-up trials beyond the enqueued one).
    assert [t.user_attrs.get("role") for t in study.trials] == ["baseline", "enqueued", "baseline", "model"]


@pytest.mark.server
def test_speculation_that_does_not_start_is_a_failed_trial_not_a_baseline(tmp_path: Path) -> None:
    # A leftover draft-simple without a draft model makes llama-server run with no speculation at all
    # (non-fatal: `failed to initialize speculative decoding context`); the ngram-mod trial must say so.
    space = ngram_mod_after_baseline("server: {extra_args: [--spec-type, draft-simple]}")
    study = run_variant(tmp_path, "nospec", space, "--trials", "2")
    assert [t.state.name for t in study.trials] == ["COMPLETE", "FAIL"]
    record = study.trials[1].user_attrs["record"]
    assert record["stage"] == "speculation"
    assert record["facts"]["speculation_requested"] is True and record["facts"]["speculation_active"] is False
    assert (
        record["failure"]
        == "asked for speculation (ngram-mod) but it is off: draft-simple requires a draft context"
    )
    assert record["workloads"] == {}


@pytest.mark.server
def test_gpu_layers_on_a_cpu_build_fail_the_launch_in_llama_servers_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """This machine's llama-server is a CPU build: asked for GPU layers it only warns and runs on the CPU. The
    launch fails with its own reason, never a slow baseline; the record says there is no GPU and why, and
    holds where llama-server put the model (its CPU buffers, read at -lv 4)."""
    space = quick(SPACE.replace("threads: 2}", "threads: 2, gpu-layers: 99}"))
    study = run_variant(tmp_path, "cpu", space, "--trials", "1", exit_code=2)
    record = study.trials[0].user_attrs["record"]
    assert record["stage"] == "launch" and record["workloads"] == {}
    assert record["failure"] == (
        "asked for GPU layers (99) but llama-server runs on the CPU: no usable GPU found, --gpu-layers option "
        "will be ignored"
    )
    assert record["gpu"]["devices"] == [] and record["gpu"]["reason"].startswith("no NVIDIA driver or GPU")
    assert "asked for GPU layers (99)" in capsys.readouterr().err
    capsys.readouterr()
    plain = run_variant(tmp_path, "plain", quick(SPACE), "--trials", "1")
    # After the first launch the run says what the rest takes at what that launch took.
    assert re.search(
        r"plan, measured on this launch \(\d+ s: \d+ s start-up \+ \d+ s probing\): 0 more search launches",
        capsys.readouterr().err,
    )
    facts = plain.trials[0].user_attrs["record"]["facts"]
    # 3 full layers x 2048 cells x 1024 B of K and V: 6 MiB; the 15 window layers' cache holds what the window
    # needs (llama.cpp sizes it from the 512-token window and the batch), 15 MiB.
    first = facts["kv_caches"][0]
    assert (first["mib"], first["cells"], first["layers"]) == (6.0, 2048, 3)
    assert facts["buffers"]["CPU"]["kv"] == sum(c["mib"] for c in facts["kv_caches"])
    assert plain.trials[0].user_attrs["record"]["gpu"]["reason"].startswith("no NVIDIA driver or GPU")


@pytest.mark.server
def test_prompt_longer_than_the_context_does_not_fit(tmp_path: Path) -> None:
    space = quick(SPACE.replace("- {class: tool}\n  - {class: prose}", "- {class: tool, context: [3000]}"))
    study = run_variant(tmp_path, "long", space, "--trials", "1")
    trial = study.trials[0]  # the baseline; the enqueued trial waits for a later run
    # Its only workload does not fit: a failed trial with that reason, never a 0 t/s result for the sampler.
    assert trial.state.name == "FAIL" and trial.values is None
    record = trial.user_attrs["record"]
    assert record["stage"] == "probe" and record["failure"].startswith("no workload was measured (tool@3k: ")
    summary = record["workloads"]["tool@3k"]
    assert summary["status"] == "does_not_fit"
    assert "exceeds the available context size (2048 tokens)" in summary["reason"]


@pytest.mark.server
def test_interrupted_trial_is_marked_and_run_again(tmp_path: Path) -> None:
    space = tmp_path / "stop.yaml"
    space.write_text(SPACE.replace("max_tokens: 48", "max_tokens: 64"))
    argv = [sys.executable, "-m", "sweep", "run", "--space", str(space), "--runs", str(tmp_path / "runs")]
    sweep = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    log = tmp_path / "runs" / "stop" / "trials" / "1" / "server.log"
    deadline = time.monotonic() + 300
    while not (log.exists() and "listening on" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    sweep.send_signal(signal.SIGINT)
    _, err = sweep.communicate(timeout=60)
    assert sweep.returncode == 130
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith("specsweep: interrupted by the user (Ctrl-C); the study keeps its finished trials")
    )
    assert "Traceback" not in err
    study = load(tmp_path / "runs" / "stop")
    assert [t.state.name for t in study.trials[:2]] == ["COMPLETE", "FAIL"]
    assert study.trials[1].user_attrs["record"]["stage"] == "interrupted"
    port = study.trials[1].user_attrs["record"]["argv"][-1]
    assert server_processes(f"--port {port}") == []
    # Resumed with a target of 2: the interrupted trial does not count, so one more trial runs.
    study = run_variant(tmp_path, "stop", space.read_text(), "--trials", "2")
    assert [t.state.name for t in study.trials] == ["COMPLETE", "FAIL", "COMPLETE"]


@pytest.mark.server
def test_speculation_that_cannot_be_verified_is_not_counted(tmp_path: Path) -> None:
    study = run_variant(
        tmp_path, "noslots", ngram_mod_after_baseline("server: {extra_args: [--no-slots]}"), "--trials", "2"
    )
    assert [t.state.name for t in study.trials] == ["COMPLETE", "FAIL"]
    assert (
        study.trials[1].user_attrs["record"]["failure"]
        == "cannot verify speculation: /slots answered HTTP 501; drop --no-slots"
    )


@pytest.mark.server
def test_confirmation_on_the_real_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The search's winner launched again, interleaved with the baseline; the verdict comes from those launches.
    ngram-mod keeps an n-gram pool across requests, so each of its workloads gets a server of its own."""
    space = quick(SPACE).replace("confirm: {launches: 0}", "confirm: {top: 1, launches: 2, max_launches: 2}")
    space = space.replace(
        "- {spec-type: ngram-simple, spec-ngram-simple-size-n: 3}", "- {spec-type: ngram-mod}"
    )
    study = run_variant(tmp_path, "conf", space, "--trials", "2")
    out = capsys.readouterr().out
    confirm = optuna.load_study(
        study_name="conf:confirm", storage=f"sqlite:///{tmp_path / 'runs/conf/study.db'}"
    )
    labels = [t.user_attrs["label"] for t in confirm.trials]
    assert sorted(labels) == ["baseline", "baseline", "trial 1", "trial 1"]
    assert labels[0] != labels[1] and labels[2] != labels[3]  # interleaved: A B, then B A
    assert all(t.state.name == "COMPLETE" for t in confirm.trials)
    trial_dir = tmp_path / "runs" / "conf" / "confirm" / str(labels.index("trial 1"))
    assert (trial_dir / "server.log").stat().st_size > 0 and (trial_dir / "server-1.log").stat().st_size > 0
    assert "confirmation: 4 launches" in out and "x2" in out and "search said" in out
    assert study.trials[1].user_attrs["record"]["host"]["cpus"] >= 1
    rows = [json.loads(line) for line in (trial_dir / "requests.jsonl").read_text().splitlines()]
    assert all(r["text"] and r["itl_s"] for r in rows if r["status"] == "ok")
    # Resumed: the confirmation is complete, nothing is launched again.
    run_variant(tmp_path, "conf", space, "--trials", "2")
    assert len(optuna.load_study(study_name="conf:confirm", storage=confirm._storage).trials) == 4


@pytest.mark.server
def test_ab_on_the_real_server(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    space = tmp_path / "ab.yaml"
    space.write_text(quick(SPACE))
    argv = [
        "ab",
        "--space",
        str(space),
        "--a",
        "baseline",
        "--b",
        "spec-type=ngram-simple,spec-ngram-simple-size-n=3",
        "--rounds",
        "2",
        "--max-rounds",
        "2",
        "--runs",
        str(tmp_path / "runs"),
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "A: ctx-size=2048 parallel=1 threads=2 spec-type=none" in out
    assert "B: ctx-size=2048 parallel=1 threads=2 spec-type=ngram-simple spec-ngram-simple-size-n=3" in out
    speed = next(line for line in out.splitlines() if line.startswith("tool: decode t/s"))
    assert " x2 " in speed and "%" in speed and "[" in speed
    assert speed.split("  ")[-1].strip() in {"faster", "slower", "within noise", "unreliable"}
    assert any(line.startswith("tool: TTFT p50 (s)") for line in out.splitlines())
    assert main([*argv[:4], "nonsense", *argv[5:]]) == 2
    assert "is not baseline, STUDY:TRIAL or name=value" in capsys.readouterr().err


@pytest.mark.server
def test_the_baselines_server_ranks_the_tokens_where_another_answer_parts(tmp_path: Path) -> None:
    """A baseline launch given other answers to its prompts asks its own server, at the point each parts from
    its answer, for its likeliest next tokens: the model's runner-up there is a near-tie by its log-probabilities,
    a word it never ranked is not."""
    engine = LlamaCppEngine(ServerSetup([str(llama_server_binary())], str(gemma_model())))
    space = parse_space(yaml.safe_load(quick(SPACE)), tmp_path)
    workload = next(w for w in space.workloads if w.name == "prose")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    params = {"ctx-size": 2048, "parallel": 1, "threads": 2, **engine.baseline_params()}
    with ServerProcess(engine.argv(params, port), tmp_path / "server.log", engine.env()) as server:
        server.wait_ready(url + engine.health_path(), timeout_s=120)
        first = asyncio.run(probe(url, engine, [workload], space.probe)).summaries[workload.key]
        text, prompt = first.outputs[0], first.output_prompts[0]
        cut = next(m.start() + 1 for m in re.finditer(r"\w \w", text) if m.start() >= len(text) // 3)
        made_up = text[:cut] + " zebra" + text[cut:]
        looked = asyncio.run(
            probe(url, engine, [workload], space.probe, others={workload.key: {prompt: (made_up,)}})
        )
        [zebra] = looked.summaries[workload.key].ties
        # A token that shares no letter with the answer's own next word (" an" against " a" would part mid-word).
        runner_up = next(t for t, _ in zebra.choices if t.strip() and t[:2] != text[cut : cut + 2])
        other = text[:cut] + runner_up + " and so on"
        again = asyncio.run(
            probe(url, engine, [workload], space.probe, others={workload.key: {prompt: (other,)}})
        )
        [ranked] = again.summaries[workload.key].ties
    assert looked.summaries[workload.key].outputs == first.outputs  # the probes come after, outside the clock
    assert zebra.prompt_id == prompt and zebra.at == cut and zebra.other.startswith(" zebra")
    assert len(zebra.choices) == 5 and fidelity.tie_gap(zebra) is None  # never ranked: nothing explains it
    greedy = dict(ranked.choices)
    gap = fidelity.tie_gap(ranked)
    assert gap is not None and gap == pytest.approx(abs(max(greedy.values()) - greedy[runner_up]), abs=1e-6)
