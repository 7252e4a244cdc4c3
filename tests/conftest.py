"""Shared fixtures. The engine in these tests is the real llama-server with the real Gemma 3 270M."""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sweep.engines.llamacpp_bundle import gemma_model, llama_server_binary
from sweep.launch import host
from sweep.launch.server import free_port

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def llama_server() -> Path:
    return llama_server_binary()


@pytest.fixture(scope="session")
def gemma() -> Path:
    return gemma_model()


def host_readings(share: float) -> Callable[..., host.HostSample]:
    """Host readings (in place of /proc) of a machine whose other processes use `share` of its 2 CPUs, at any
    moment: the load the test names, whatever else this machine runs (other tests, under xdist)."""

    def sample(server_pgid: int | None, *_: object, **__: object) -> host.HostSample:
        elapsed = 2 * time.monotonic()
        return host.HostSample(elapsed, share * elapsed, 0.0, 0.0, 2.0, 2)

    return sample


@pytest.fixture
def quiet_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test that asserts a verdict on the simulator's modelled times reads a quiet host: the verdict is the
    statistics' on those times, not what the machine's other work (another test) makes of them."""
    monkeypatch.setattr(host, "sample", host_readings(0.0))


def specsweep_argv(*args: str) -> list[str]:
    """`specsweep ARGS` as a child process of this interpreter (its own process, as a user runs it)."""
    return [sys.executable, "-m", "sweep", *args]


def server_processes(marker: str) -> list[int]:
    """Pids of live processes whose command line contains `marker` (used to prove none is left behind)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and "llama-server" in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real, throwaway PostgreSQL cluster on loopback (Debian's postgresql; `make test` installs it)."""
    bins = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    assert bins, (
        "PostgreSQL's server is needed for the shared-study test: `make test` installs it (apt-get install postgresql)"
    )
    bindir = bins[-1].parent
    # Not under pytest's tmp folder: its parents are private to root, and the server runs as postgres.
    data = Path(tempfile.mkdtemp(prefix="specsweep-pg-")) / "data"
    as_owner: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(data.parent, "postgres")
        as_owner = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    subprocess.run(
        [*as_owner, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "specsweep"],
        check=True,
        capture_output=True,
    )
    options = f"-p {port} -h 127.0.0.1 -k {data}"
    subprocess.run(
        [
            *as_owner,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-w",
            "-l",
            str(data / "log"),
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        yield f"postgresql://specsweep@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run(
            [*as_owner, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
        )


# The fast lane (`make check`) runs the tests that start no process and read no release. A test that starts one
# (llama-server, the simulator, PostgreSQL, Chromium, the CLI as a child), itself or through a fixture, is marked
# `server`; one that reads the SGLang release's source (which pip downloads) is marked `release`. The guard keeps
# the marks true: from the setup of an unmarked test's fixtures to its teardown, a process start is refused (as
# the OS refuses one, so a server thread never hangs) and the test fails, naming the mark it needs. Under `make
# test` a module's shared fixture may already be up; `make check` runs it unmarked.
STARTED = pytest.StashKey[list[str]]()


# `make test` runs the suite on one worker per core (pytest-xdist, --dist loadfile: a module's tests on one
# worker, so its module fixtures start once). A test that runs the real llama-server waits for its turn, from
# its setup to its teardown, on a lock the workers share: two llama-servers on two cores each would spin on each
# other's cores.
@contextlib.contextmanager
def llama_server_turn(item: pytest.Item) -> Iterator[None]:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    llama = "llama" in item.nodeid or {"llama_server", "gemma"} & set(getattr(item, "fixturenames", ()))
    if run is None or not llama:
        yield
        return
    with llama_server_lock(run).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def llama_server_lock(run: str) -> Path:
    return Path(tempfile.gettempdir()) / f"specsweep-tests-{run}-llama-server.lock"


def pytest_sessionfinish(session: pytest.Session) -> None:
    # A worker done with its tests takes no more turns; the lock file goes with the last of them.
    if run := os.environ.get("PYTEST_XDIST_TESTRUNUID"):
        llama_server_lock(run).unlink(missing_ok=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    if any(item.get_closest_marker(mark) is not None for mark in ("server", "release")):
        with llama_server_turn(item):
            return (yield)
    started = item.stash.setdefault(STARTED, [])
    allowed = subprocess.Popen.__init__

    def refuse(self: subprocess.Popen[bytes], args: object, *rest: object, **options: object) -> None:
        started.append(str(args)[:80])
        raise OSError(f"a test without @pytest.mark.server started a process: {started[-1]}")

    subprocess.Popen.__init__ = refuse  # type: ignore[method-assign]
    try:
        return (yield)
    finally:
        subprocess.Popen.__init__ = allowed  # type: ignore[method-assign]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
    report: pytest.TestReport = yield
    started = item.stash.get(STARTED, [])
    if started and report.when in ("setup", "call") and not report.skipped:
        report.outcome = "failed"
        report.longrepr = f"starts a process ({started[0]}): mark it @pytest.mark.server"
        started.clear()
    return report
