"""Depth schedules end to end on the simulator: a sweep over depths at three stream counts, the exported SGLang
adaptive-speculation schedule launched as it is, and its speed at each concurrency against that concurrency's
best fixed depth."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sweep.analysis.schedule import DepthSchedule, ScheduleStep, _bounded, depth_schedules
from sweep.engines import ENGINES
from sweep.engines.base import Engine
from sweep.engines.schedules import (
    sglang_adaptive_config,
    trtllm_speculative_config,
    vllm_method,
    vllm_speculative_config,
)
from sweep.outputs.export import no_schedule_note, schedule_document
from sweep.probes.workloads import Workload
from sweep.records import SpecShape, Spread, TrialRecord, WorkloadSummary
from sweep.run.driver import Sweep
from sweep.run.preflight import build_engine
from sweep.run.study import open_study as load
from sweep.sim.profile import DEFAULT_PROFILE, Profile
from sweep.space import parse_space
from sweep.storage import Study, StudyPaths, TrialView, trial_views
from tests.conftest import specsweep_argv

SPACE = """
engine: sglang
server: {launcher: ["{python}", -m, sweep.sim, --sim-time-scale, "0.05"], model: /models/q}
fixed: {kv-cache-dtype: fp8_e4m3, max-running-requests: 16, max-mamba-cache-size: 512}
params:
  speculative-algorithm: {choices: [NEXTN]}
  speculative-num-steps: {int: [1, 8]}
workloads:
  - {class: code, streams: [1, 4, 16]}
probe: {repeats: 2, max_tokens: 160}
confirm: {launches: 0}
trials: 9
"""


def test_a_schedule_is_keyed_by_the_batch_measured_not_the_streams_sent() -> None:
    steps = [
        ScheduleStep(streams, f"code/{streams}streams", depth, 0, 1.0, None, batch)
        for streams, depth, batch in ((1, 7, 1.0), (4, 6, 3.6), (16, 4, 9.2), (32, 2, 9.9))
    ]
    bounded = _bounded(steps)
    # 16 streams that decoded 9.2 at a time start at sqrt(3.6 x 9.2) = 5.8, not at sqrt(4 x 16) = 8; 32 streams
    # that reached no larger a batch still get a bound of their own above it.
    assert [s.from_batch for s in bounded] == [1, 2, 6, 10]
    schedule = DepthSchedule("code", "NEXTN", {}, bounded)
    assert [schedule.depth_at(b) for b in (1, 2, 5, 6, 9, 10, 64)] == [7, 6, 6, 4, 4, 2, 2]


def test_the_engine_says_which_measured_shapes_its_schedule_can_run() -> None:
    """A tree (top-k 2) fastest at every concurrency: SGLang's adaptive speculation runs chains only, so its
    schedule is picked among the chains; an engine whose schedule runs any shape takes the tree."""
    workloads = [Workload("code", ("write a function",), streams=n) for n in (1, 4)]
    keys = [w.key for w in workloads]

    def launched(number: int, shape: SpecShape | None, speeds: tuple[float, float]) -> TrialView:
        record = TrialRecord(number, {"n": number}, shape=shape)
        for key, tps in zip(keys, speeds, strict=True):
            record.workloads[key] = WorkloadSummary(key, "ok", decode_tps=Spread.of([tps, tps, tps]))
        return TrialView(number, "COMPLETE", "baseline" if shape is None else "search", record)

    views = [
        launched(0, None, (50.0, 40.0)),
        launched(1, SpecShape("EAGLE", 3, 1, 3), (80.0, 45.0)),
        launched(2, SpecShape("EAGLE", 5, 1, 5), (70.0, 60.0)),
        launched(3, SpecShape("EAGLE", 4, 2, 8), (99.0, 90.0)),
    ]
    (chains,) = depth_schedules(views, workloads, ENGINES["sglang"].schedule_runs)
    assert [(s.trial, s.depth) for s in chains.steps] == [(1, 3), (2, 5)]
    (any_shape,) = depth_schedules(views, workloads, Engine.schedule_runs)
    assert [(s.trial, s.depth) for s in any_shape.steps] == [(3, 4), (3, 4)]


def test_arrivals_at_several_rates_give_a_schedule_keyed_by_the_batch_they_decoded_in() -> None:
    """Open-loop arrivals at 1, 4 and 16 requests a second decoded 1.1, 2.9 and 7.6 at once: the deepest chain
    is fastest alone, a shallower one as the batch fills, none at the top. The schedule is keyed by those
    batches, its steps say the rate, and it stands beside the streams' schedule of the same workload."""
    loads = [Workload("code", ("p",), rate=r, requests=8) for r in (1.0, 4.0, 16.0)]
    streams = [Workload("code", ("p",), streams=n) for n in (1, 4)]
    batches = {loads[0].key: 1.1, loads[1].key: 2.9, loads[2].key: 7.6}

    def launched(number: int, shape: SpecShape | None, speeds: dict[str, float]) -> TrialView:
        record = TrialRecord(number, {"n": number}, shape=shape)
        for key, tps in speeds.items():
            batch = Spread.of([batches.get(key, 1.0)] * 3)
            record.workloads[key] = WorkloadSummary(key, "ok", decode_tps=Spread.of([tps] * 3), batch=batch)
        return TrialView(number, "COMPLETE", "baseline" if shape is None else "search", record)

    keys = [w.key for w in (*loads, *streams)]
    views = [
        launched(0, None, dict(zip(keys, (50.0, 48.0, 45.0, 50.0, 45.0), strict=True))),
        launched(
            1, SpecShape("EAGLE", 2, 1, 2), dict(zip(keys, (70.0, 60.0, 40.0, 70.0, 60.0), strict=True))
        ),
        launched(
            2, SpecShape("EAGLE", 5, 1, 5), dict(zip(keys, (90.0, 55.0, 30.0, 90.0, 50.0), strict=True))
        ),
    ]
    schedules = depth_schedules(views, [*loads, *streams], ENGINES["sglang"].schedule_runs)
    (load,) = [s for s in schedules if s.under_load]
    (closed,) = [s for s in schedules if not s.under_load]
    assert [(s.rate, s.depth, s.from_batch) for s in load.steps] == [(1.0, 5, 1), (4.0, 2, 2), (16.0, 0, 5)]
    assert [(s.streams, s.depth) for s in closed.steps] == [(1, 5), (4, 2)]
    found = Study(views, [])
    document = schedule_document(load, [(s.from_batch, s.depth) for s in load.steps], loads, found)
    assert document["load"] == "open-loop arrivals" and [r["rate"] for r in document["by_concurrency"]] == [
        1,
        4,
        16,
    ]


def test_native_forms() -> None:
    depths = [(1, 6), (4, 4), (16, 2)]
    assert sglang_adaptive_config(depths) == {
        "1": {"candidate_steps": [6]},
        "4": {"candidate_steps": [4]},
        "16": {"candidate_steps": [2]},
    }
    vllm = vllm_speculative_config("NEXTN", depths, 64)
    assert vllm == {
        "method": "mtp",
        "num_speculative_tokens": 6,
        "num_speculative_tokens_per_batch_size": [[1, 3, 6], [4, 15, 4], [16, 64, 2]],
    }
    trt, notes = trtllm_speculative_config([(1, 3), (8, 5)])
    assert trt == {"max_draft_len": 3, "draft_len_schedule": {"1": 3, "8": 3}} and "capped to 3" in notes[0]


def test_schedules_without_a_counterpart_export_no_engine_form(tmp_path: Path) -> None:
    """The baseline fastest at every concurrency: both vLLM and TensorRT-LLM want a largest length above 0, so
    neither gets a config, and the note says to run without speculation. A llama.cpp lookup's schedule has no
    counterpart there either."""
    space = parse_space(yaml.safe_load(SPACE.replace("{python}", sys.executable)), tmp_path)
    steps = _bounded([ScheduleStep(n, f"code/{n}streams", 0, 0, 10.0, 10.0, float(n)) for n in (1, 4, 16)])
    schedule = DepthSchedule("code", "NEXTN", {}, steps)
    depths = [(s.from_batch, s.depth) for s in steps]
    document = schedule_document(schedule, depths, space.workloads, Study([], []))
    assert document["vllm"]["speculative_config"] is None
    assert document["tensorrt_llm"]["speculative_config"] is None
    assert "run without it" in no_schedule_note("vllm", depths)
    # A llama.cpp lookup drafts up to a limit with its n-gram sizes beside it: no counterpart elsewhere.
    lookup = DepthSchedule(
        "code", "ngram-simple", {}, _bounded([dataclasses.replace(s, depth=48) for s in steps])
    )
    document = schedule_document(lookup, [(1, 48), (2, 48), (8, 48)], space.workloads, Study([], []))
    assert document["vllm"]["speculative_config"] is None
    assert document["tensorrt_llm"]["speculative_config"] is None
    assert "ngram-simple has no counterpart in vLLM or TensorRT-LLM" in document["notes"][-1]
    assert [vllm_method(m) for m in ("NEXTN", "EAGLE3", "mtp", "ngram", "ngram-simple")] == [
        "mtp",
        "eagle3",
        "mtp",
        "ngram",
        None,
    ]
    assert "usual concurrency" in no_schedule_note("llamacpp", [(1, 3), (4, 0)])


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("schedule")
    (root / "space.yaml").write_text(SPACE)
    argv = specsweep_argv(
        "run", "--space", str(root / "space.yaml"), "--study", "s", "--runs", str(root / "runs")
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return root


@pytest.mark.server
def test_the_exported_schedule_launches_and_keeps_each_concurrencys_best(swept: Path) -> None:
    out = swept / "schedule"
    argv = specsweep_argv(
        "export", "--study", "s", "--runs", str(swept / "runs"), "--format", "schedule", "--out", str(out)
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    document = json.loads(done.stdout)
    picks = {row["streams"]: row for row in document["by_concurrency"]}
    assert set(picks) == {1, 4, 16}
    # (That verification cost grows with the batch, so the best depth falls, is the simulator's property and is
    # tested on its model: here the tops at 1 and 16 streams are flat within 3%, and a measured pick may be any
    # depth on them. Each pick is held to its concurrency's best below, by relaunching both.)
    config = json.loads((out / "code-adaptive.json").read_text())
    # Each depth is keyed by the batch its streams were measured decoding in (16 streams of short requests on
    # two cores decode ~9 at a time, not 16), from halfway (log scale) after the batch below it.
    batches = [picks[s]["batch"] for s in (1, 4, 16)]
    assert batches[0] == 1 and 1 < batches[1] <= 4 and batches[1] < batches[2] <= 16
    # Sent together, 16 streams decode together (a listen backlog of 5 once held 10 of them back a second).
    assert batches[2] > 12
    bounds = [picks[s]["from_batch"] for s in (1, 4, 16)]
    assert bounds[0] == 1 and batches[0] < bounds[1] <= math.ceil(batches[1]) < bounds[2] <= math.ceil(
        batches[2]
    )
    assert config == {
        str(picks[s]["from_batch"]): {"candidate_steps": [picks[s]["depth"]]} for s in (1, 4, 16)
    }
    assert document["sglang"]["params"]["speculative-adaptive"] is True
    rows = document["vllm"]["speculative_config"]["num_speculative_tokens_per_batch_size"]
    assert [r[2] for r in rows] == [picks[s]["depth"] for s in (1, 4, 16)]

    # Launch it as exported, measure every concurrency, and hold it to the best fixed depth at each.
    space = parse_space(yaml.safe_load(SPACE.replace("{python}", sys.executable)), swept)
    engine = build_engine(space)
    engine.prepare()
    sweep = Sweep(space, engine, StudyPaths.for_study("check", swept / "runs", None), lambda _m: None)
    params = document["sglang"]["params"]
    record = sweep.trials.run(TrialRecord(0, params), lambda _m: None, trial_dir=swept / "check")
    assert not record.failed, record.failure
    log = (swept / "check" / "server.log").read_text()
    assert "AdaptiveSpeculativeParams initialized" in log
    views = {v.number: v for v in trial_views(load("s", None, swept / "runs"))}
    steps = [
        step
        for schedule in depth_schedules(list(views.values()), space.workloads, engine.schedule_runs)
        for step in schedule.steps
    ]
    # The sweep's best at each concurrency is the highest of several single launches (biased up): launch each
    # best fixed depth again, beside the schedule, and compare like with like.
    fixed: dict[int, TrialRecord] = {}
    for number in sorted({step.trial for step in steps}):
        record_of = views[number].record
        assert record_of is not None
        again = sweep.trials.run(
            TrialRecord(number, dict(record_of.params)), lambda _m: None, trial_dir=swept / f"fixed-{number}"
        )
        assert not again.failed, again.failure
        fixed[number] = again
    drift = Profile.load(DEFAULT_PROFILE).launch_drift
    for step in steps:
        scheduled, best = record.workloads[step.workload], fixed[step.trial].workloads[step.workload]
        assert scheduled.decode_tps is not None and best.decode_tps is not None
        gap = math.log(scheduled.decode_tps.median / best.decode_tps.median)
        # Within noise: three standard errors of the two launches' medians (their requests' spread) and of a
        # launch's drift each.
        allowed = 3 * math.sqrt(
            log_se(scheduled.decode_tps.values) ** 2 + log_se(best.decode_tps.values) ** 2 + 2 * drift**2
        )
        assert gap >= -allowed, (step.streams, scheduled.decode_tps.median, best.decode_tps.median, allowed)


def log_se(values: tuple[float, ...]) -> float:
    """The standard error of a mean of log values."""
    logs = [math.log(v) for v in values if v > 0]
    return statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else 0.0
