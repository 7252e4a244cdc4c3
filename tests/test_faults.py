"""The fault matrix: servers that crash, hang, print garbage, daemonise or lose their port, and drivers that are
killed. Each case runs a real study against the simulator with a switchable fault (`--sim-fault`, stdlib HTTP)
and asserts what the study holds afterwards (states, reasons, values) and that no server process is left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
import pytest

from sweep.cli import main
from sweep.core.errors import SIGNALS, Interrupted, run_interruptible
from sweep.launch import processes
from sweep.launch.server import _escalating_interrupts
from sweep.storage import INTERRUPTED

ENV_PREFIX = f"{processes.MARKER_ENV}=".encode()

SPACE = """
engine: sglang
server:
  launcher: ["{{python}}", -m, sweep.sim, --sim-time-scale, "0", --sim-seed, "1", --served-model-name, {tag}{faults}]
  model: /models/fault-test
  startup_timeout: {startup}
fixed: {{mem-fraction-static: 0.9}}
params:
  speculative-algorithm: {{choices: [NEXTN]}}
  speculative-num-steps: {{int: [1, 4]}}
workloads: [{{class: code}}]
probe: {{repeats: 1, max_tokens: 16, stall_timeout_s: 2}}
confirm: {{launches: 0}}
trials: {trials}
seed: 1
"""


@dataclass
class Case:
    tmp: Path
    tag: str
    space: Path

    @property
    def runs(self) -> Path:
        return self.tmp / "runs"

    def argv(self, *extra: str) -> list[str]:
        return ["run", "--space", str(self.space), "--study", "f", "--runs", str(self.runs), *extra]

    def study(self) -> optuna.Study:
        return optuna.load_study(study_name="f", storage=f"sqlite:///{self.runs / 'f' / 'study.db'}")

    def trials(self) -> list[tuple[str, dict[str, Any]]]:
        return [(t.state.name, t.user_attrs.get("record") or {}) for t in self.study().trials]

    def left(self) -> list[int]:
        """Live processes started for this case (the tag is in their command line; forks keep it)."""
        return [p.pid for p in processes.table() if p.alive and self.tag in processes.command(p.pid)]


def make_case(tmp: Path, faults: tuple[str, ...] = (), trials: int = 2, startup: float = 20) -> Case:
    tag = f"fault-{uuid.uuid4().hex[:8]}"
    extra = "".join(f", --sim-fault, {f}" for f in faults)
    space = tmp / "space.yaml"
    space.write_text(SPACE.format(tag=tag, faults=extra, trials=trials, startup=startup))
    return Case(tmp, tag, space)


@pytest.fixture
def case(tmp_path: Path) -> Iterator[Case]:
    made = make_case(tmp_path)
    yield made
    _kill_everything(made)


def _kill_everything(case: Case) -> None:
    for pid in case.left():
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def run(case: Case, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    code = main(case.argv(*extra))
    return code, capsys.readouterr().err


def assert_no_orphans(case: Case) -> None:
    deadline = time.monotonic() + 5
    while case.left() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert case.left() == [], [processes.command(p) for p in case.left()]


# --- the server misbehaves ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("faults", "reason"),
    [
        (("exit-at-start",), "simulated fault: exit at start"),
        (("daemonise",), "left 1 process(es) running in the background: the server daemonises"),
    ],
)
@pytest.mark.server
def test_a_baseline_that_cannot_start_stops_the_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], faults: tuple[str, ...], reason: str
) -> None:
    case = make_case(tmp_path, faults)
    try:
        code, err = run(case, capsys)
        assert code == 2 and "the server exits at start even with speculation off" in err and reason in err
        ((state, record),) = case.trials()
        assert state == "FAIL" and record["stage"] == "launch" and reason in record["failure"]
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


@pytest.mark.server
def test_never_healthy_is_bounded_by_the_startup_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = make_case(tmp_path, ("never-healthy",), startup=2)
    try:
        code, err = run(case, capsys)
        # Bounded by the start-up timeout, in the run's own words (the launch gave up after its 2 s).
        assert code == 2 and "server not ready after 2 s" in err
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


# Requests are counted per launch: 1 is the warm-up, 2 the only measured request (repeats 1, one workload).
@pytest.mark.parametrize(
    ("faults", "reason"),
    [
        (("crash-mid-stream=2",), "server"),
        (("crash-after=2",), "the server exited (code 1) before the trial ended"),
        (("http-error=500",), "no workload was measured"),
        (("http-error=429",), "no workload was measured"),
        (("malformed-sse",), "JSONDecodeError"),
        (("cut-sse",), "the stream ended without the server's report"),
        (("stall=2",), "the server stopped producing tokens after 2 s"),
    ],
)
@pytest.mark.server
def test_a_server_failing_while_probed_fails_its_trials_with_the_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], faults: tuple[str, ...], reason: str
) -> None:
    case = make_case(tmp_path, faults)
    try:
        code, err = run(case, capsys)
        assert code == 0, err
        found = case.trials()
        assert len(found) == 2 and {state for state, _ in found} == {"FAIL"}, found
        for _, record in found:
            assert record["stage"] == "probe" and reason in record["failure"], record["failure"]
        # No trial taught the sampler a speed: failed trials have no values.
        assert all(t.values is None for t in case.study().trials)
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


@pytest.mark.server
def test_odd_bytes_are_kept_and_launch_facts_survive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = make_case(tmp_path, ("odd-bytes",), trials=1)
    try:
        code, err = run(case, capsys)
        assert code == 0, err
        ((state, record),) = case.trials()
        assert state == "COMPLETE"
        assert record["facts"]["kv_pool_tokens"] > 0  # read from lines after the odd bytes
        log = (case.runs / "f" / "trials" / "0" / "server.log").read_bytes()
        assert b"weights \xff\xfe\xc3( loaded\n" + b"x" * (1 << 20) + b"\n" in log
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


@pytest.mark.server
@pytest.mark.parametrize("fault", ["ignore-term", "escape-group"])
def test_servers_that_resist_or_escape_are_stopped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str
) -> None:
    case = make_case(tmp_path, (fault,), trials=1)
    try:
        code, err = run(case, capsys)
        assert code == 0, err
        assert [state for state, _ in case.trials()] == ["COMPLETE"]
        assert_no_orphans(case)
        assert not list((case.runs / "f" / "servers").glob("*.json"))  # nothing left to reap
    finally:
        _kill_everything(case)


# --- the driver is stopped -------------------------------------------------------------------------------------


def _driver(case: Case) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sweep", *case.argv()], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def _wait_for_log(case: Case, line: bytes, timeout: float = 120) -> None:
    """Until the first launch's server log holds `line` (a server up, a stream stalled)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = list((case.runs / "f" / "trials").glob("*/server.log"))
        if logs and line in logs[0].read_bytes():
            return
        time.sleep(0.05)
    raise AssertionError(f"the server never logged {line!r}")


STALLED = b"sim fault: this stream stalls here"


@pytest.mark.server
def test_a_killed_driver_is_recovered_by_the_next_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """SIGKILL during the baseline (a server that ignores SIGTERM and forks an escaping child): the next run
    stops what was left, marks the baseline interrupted and runs it again at once."""
    case = make_case(tmp_path, ("stall=2", "ignore-term", "escape-group"))
    case.space.write_text(case.space.read_text().replace("stall_timeout_s: 2", "stall_timeout_s: 60"))
    try:
        driver = _driver(case)
        _wait_for_log(case, STALLED)  # the stalled request is under way
        driver.kill()
        driver.wait()
        assert case.left(), "the escaped child outlives a SIGKILLed driver until the next run"
        assert [state for state, _ in case.trials()] == ["RUNNING"]
        case.space.write_text(case.space.read_text().replace("stall=2", "stall=99"))  # the next night works
        code, err = run(case, capsys)
        assert code == 0, err
        assert "stopped what a stopped sweep left running" in err
        assert "trial 0 was left running by a stopped sweep" in err
        states = case.trials()
        assert states[0][0] == "FAIL" and states[0][1]["stage"] == "interrupted"
        assert "the sweep running it (pid" in states[0][1]["failure"]
        baselines = [t for t in case.study().trials if t.user_attrs.get("role") == "baseline"]
        assert [t.state.name for t in baselines] == ["FAIL", "COMPLETE"]
        assert sum(state == "COMPLETE" for state, _ in states) == 2  # the budget was not eaten by the kill
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


@pytest.mark.server
@pytest.mark.parametrize("signals", [(signal.SIGTERM,), (signal.SIGINT, signal.SIGINT)])
def test_sigterm_and_a_double_ctrl_c_stop_cleanly(
    tmp_path: Path, signals: tuple[signal.Signals, ...]
) -> None:
    """SIGTERM is Ctrl-C: the trial is marked, the server stopped, one line. A second Ctrl-C while a server
    that ignores SIGTERM is being stopped goes straight to SIGKILL, and nothing is left: with a stop grace of an
    hour, the driver ends only because the second Ctrl-C cut it short (the grace's default, 10 s, for one)."""
    case = make_case(tmp_path, ("stall=2", "ignore-term"))
    text = case.space.read_text().replace("stall_timeout_s: 2", "stall_timeout_s: 60")
    if len(signals) == 2:
        text = text.replace("server:\n", "server:\n  stop_timeout: 3600\n", 1)
        assert "stop_timeout: 3600" in text
    case.space.write_text(text)
    try:
        driver = _driver(case)
        _wait_for_log(case, STALLED)
        driver.send_signal(signals[0])
        if len(signals) == 2:  # the second while the server, which ignores SIGTERM, is being stopped
            _wait_for_log(case, b"sim fault: SIGTERM ignored")
            driver.send_signal(signals[1])
        _, err = driver.communicate(timeout=120)
        assert driver.returncode == 130
        lines = err.decode().strip().splitlines()
        how = "by SIGTERM" if signals[0] == signal.SIGTERM else "by the user (Ctrl-C)"
        assert lines[-1].startswith(f"specsweep: interrupted {how}")
        assert "Traceback" not in err.decode()
        ((state, record),) = case.trials()
        assert state == "FAIL" and record["failure"] == f"interrupted {how}"
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


@pytest.mark.server
def test_two_drivers_on_one_sqlite_study(tmp_path: Path) -> None:
    case = make_case(tmp_path, trials=4)
    try:
        (case.runs / "f").mkdir(parents=True)
        drivers = [_driver(case) for _ in range(2)]
        outputs = [d.communicate(timeout=180) for d in drivers]
        assert [d.returncode for d in drivers] == [0, 0], [err.decode()[-500:] for _, err in outputs]
        states = [state for state, _ in case.trials()]
        # Each worker may finish one more than the target; none is left RUNNING and exactly one baseline ran.
        assert 4 <= states.count("COMPLETE") <= 5 and "RUNNING" not in states
        assert sum(t.user_attrs.get("role") == "baseline" for t in case.study().trials) == 1
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


async def _cancelled_inside_a_task_group(failure: BaseException) -> None:
    """What a connection does when the loop's shutdown cancels it inside anyio's task group: it ends with a group."""
    try:
        await asyncio.sleep(60)
    except asyncio.CancelledError:
        raise BaseExceptionGroup("connect", [failure]) from None


async def _interrupted_while_connecting(failure: BaseException) -> None:
    asyncio.get_running_loop().create_task(_cancelled_inside_a_task_group(failure))
    await asyncio.sleep(0)
    raise Interrupted(signal.SIGINT)


def test_an_interrupt_in_the_event_loop_leaves_one_line_not_a_traceback(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # As asyncio.run leaves it: the cancelled connection's group is printed whole.
    with pytest.raises(Interrupted):
        asyncio.run(_interrupted_while_connecting(Interrupted(signal.SIGINT)))
    assert "unhandled exception during asyncio.run() shutdown" in caplog.text
    caplog.clear()
    with pytest.raises(Interrupted):
        run_interruptible(_interrupted_while_connecting(Interrupted(signal.SIGINT)))
    assert caplog.text == "" and "Traceback" not in capsys.readouterr().err
    # Anything else a task ends with is still said.
    with pytest.raises(Interrupted):
        run_interruptible(_interrupted_while_connecting(ValueError("a real fault")))
    assert "a real fault" in caplog.text


@contextlib.contextmanager
def _sweep_signals() -> Iterator[None]:
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    SIGNALS.install()
    try:
        yield
    finally:
        for sig, handler in kept.items():
            signal.signal(sig, handler)


def test_a_second_ctrl_c_while_the_first_unwinds_hurries_the_stop_and_a_third_raises() -> None:
    with _sweep_signals():
        with pytest.raises(Interrupted):
            signal.raise_signal(signal.SIGINT)
        assert not SIGNALS.pending()
        signal.raise_signal(signal.SIGINT)  # counted, not raised inside whatever cleanup runs now
        assert SIGNALS.pending()
        with _escalating_interrupts() as hurried:
            assert hurried.is_set()  # the server's stop goes straight to KILL
        with pytest.raises(Interrupted, match="SIGTERM"):
            signal.raise_signal(signal.SIGTERM)
    with _sweep_signals():  # a new command starts afresh
        assert not SIGNALS.pending()
        with pytest.raises(Interrupted):
            signal.raise_signal(signal.SIGHUP)


# --- the disk fills up -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def full_tmpfs(path: Path) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.decode().strip()}): needs root")
    try:
        with contextlib.suppress(OSError), (path / "filler").open("wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


@pytest.mark.server
def test_a_full_disk_keeps_the_measured_trial_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = make_case(tmp_path, trials=2)
    try:
        with full_tmpfs(tmp_path / "full") as full:
            storage = f"sqlite:///{tmp_path / 'study.db'}"
            code = main(
                ["run", "--space", str(case.space), "--study", "f", "--runs", str(full), "--storage", storage]
            )
            err = capsys.readouterr().err
        assert code == 2, err
        last = err.strip().splitlines()[-1]
        assert last.startswith("specsweep: error: cannot write ") and "No space left on device" in last
        assert "Traceback" not in err
        study = optuna.load_study(study_name="f", storage=storage)
        # The baseline was measured: it stays COMPLETE with its value, and the sweep stopped after it.
        assert [t.state.name for t in study.trials] == ["COMPLETE"]
        assert study.trials[0].values[0] > 0
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


def run_with_file_limit(case: Case, limit: int) -> subprocess.CompletedProcess[str]:
    """`specsweep run` in a process whose files may grow to `limit` bytes and no further (RLIMIT_FSIZE, which
    any user may lower: a write past it fails with EFBIG, as a full disk's fails with ENOSPC)."""

    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    argv = [sys.executable, "-m", "sweep", *case.argv()]
    return subprocess.run(argv, preexec_fn=limited, capture_output=True, text=True, timeout=300)


@pytest.mark.server
def test_a_disk_that_fills_while_optuna_commits_is_one_line_and_the_study_resumes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The study's database may grow no further than one finished trial's (a disk that fills mid-study): the
    next trial's commit fails inside Optuna (its StorageInternalError, then its own "Should not reach." once
    seen), and the run says so in one line, exit 2, no traceback. Room again: the same command marks the trial
    it interrupted and measures the rest."""
    (tmp_path / "one").mkdir()
    first, case = make_case(tmp_path / "one", trials=1), make_case(tmp_path, trials=3)
    try:
        assert main(first.argv()) == 0
        room = (first.runs / "f" / "study.db").stat().st_size
        done = run_with_file_limit(case, room)
        assert done.returncode == 2, done.stderr
        assert "Traceback" not in done.stderr
        (line,) = [x for x in done.stderr.splitlines() if x.startswith("specsweep: error: ")]
        assert line.startswith("specsweep: error: the study's storage failed (OperationalError: ")
        assert line.endswith(
            "run the same command again to resume: a trial it interrupted is marked and run again"
        )
        assert_no_orphans(case)
        assert main(case.argv()) == 0
        states = [state for state, _ in case.trials()]
        assert states.count("COMPLETE") == 3 and set(states) == {"COMPLETE", "FAIL"}
        capsys.readouterr()
        assert main(["report", "--study", "f", "--runs", str(case.runs)]) == 0
        assert f": {INTERRUPTED}" in capsys.readouterr().out.split("failed trials:")[1]
        assert_no_orphans(case)
    finally:
        _kill_everything(first)
        _kill_everything(case)


# --- the budget ------------------------------------------------------------------------------------------------


@pytest.mark.server
def test_start_ups_that_failed_on_bad_flags_do_not_eat_the_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A first night with a broken set-up (the server exits at start, speculation off or not), a second night
    with it fixed: the second gets the trials it asked for."""
    case = make_case(tmp_path, ("exit-at-start",), trials=2)
    try:
        code, err = run(case, capsys)
        assert code == 2 and "simulated fault: exit at start" in err
        case.space.write_text(case.space.read_text().replace(", --sim-fault, exit-at-start", ""))
        code, err = run(case, capsys)
        assert code == 0, err
        states = [state for state, _ in case.trials()]
        assert states == ["FAIL", "COMPLETE", "COMPLETE"]
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


@pytest.mark.server
def test_a_full_disk_under_the_database_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = make_case(tmp_path, trials=1)
    try:
        with full_tmpfs(tmp_path / "full") as full:
            code = main(["run", "--space", str(case.space), "--study", "f", "--runs", str(full)])
            err = capsys.readouterr().err
        assert code == 2, err
        lines = [line for line in err.strip().splitlines() if line.startswith("specsweep: error: ")]
        assert len(lines) == 1 and "Traceback" not in err
        assert "database or disk is full" in lines[0] and "its disk has space" in lines[0]
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


@pytest.mark.server
def test_a_trial_past_its_deadline_fails_and_the_sweep_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = make_case(tmp_path, trials=2)
    text = case.space.read_text().replace('--sim-time-scale, "0"', '--sim-time-scale, "1"')
    text = text.replace("[{class: code}]", "[{class: code}, {class: tool}]")
    case.space.write_text(
        text.replace("stall_timeout_s: 2}", "stall_timeout_s: 30, max_tokens: 64, trial_timeout_s: 1}")
    )
    try:
        code, err = run(case, capsys)
        assert code == 0, err
        found = case.trials()
        assert len(found) == 2 and {state for state, _ in found} == {"FAIL"}
        for _, record in found:
            assert (
                record["failure"]
                == "the trial passed its deadline of 1 s before code (probe.trial_timeout_s)"
            )
        assert_no_orphans(case)
    finally:
        _kill_everything(case)


@pytest.mark.server
@pytest.mark.parametrize(
    ("engine", "launcher", "speculates"),
    [
        ("sglang", ["-m", "sweep.sim"], ["--speculative-algorithm", "NGRAM"]),
        (
            "vllm",
            ["-m", "sweep.sim", "vllm"],
            [
                "--speculative-config",
                '{"method": "ngram", "num_speculative_tokens": 3}',
                "--max-model-len",
                "8192",
            ],
        ),
    ],
)
def test_a_baseline_whose_server_speculates_anyway_is_a_failed_trial_not_a_baseline(
    tmp_path: Path, engine: str, launcher: list[str], speculates: list[str]
) -> None:
    """A flag in server.extra_args (or a release whose default drafts) turns speculation on under the baseline:
    its numbers would understate every gain. The server's own word fails it before any request."""
    space = tmp_path / "space.yaml"
    space.write_text(
        f"engine: {engine}\n"
        f"server: {{launcher: {json.dumps([sys.executable, *launcher])}, model: /models/q, "
        f"extra_args: {json.dumps([*speculates, '--sim-time-scale', '0.01'])}}}\n"
        "params: {}\nworkloads: [{class: code}]\nprobe: {repeats: 1, max_tokens: 8}\ntrials: 1\n"
        "confirm: {launches: 0}\n"
    )
    code = main(["run", "--space", str(space), "--study", "b", "--runs", str(tmp_path / "runs")])
    study = optuna.load_study(study_name="b", storage=f"sqlite:///{tmp_path / 'runs' / 'b' / 'study.db'}")
    record = study.trials[0].user_attrs["record"]
    assert code != 0 or study.trials[0].state.name == "FAIL"
    assert record["stage"] == "speculation" and record["workloads"] == {}
    assert record["failure"].startswith("asked for no speculation, but the server speculates")
