"""`ServerProcess`: one server, started in its own session, its output logged byte for byte, stopped with
everything it started.

The shape follows vLLM's `benchmarks/sweep` server: a context manager, a health wait that fails fast when the
process dies, and a stop that signals the whole group (never a kill by name). An overnight sweep adds what a
night brings: a server is only ready when the process answering on the port is the one launched (not whatever
else holds the port); a server that daemonises or leaves its group is still found (every launch marks its
processes' environment) and stopped; the driver's own death is covered by the kernel (the server gets SIGKILL
when the thread that started it is gone) and by a registry on disk that the next run of the study reaps.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType, TracebackType
from typing import BinaryIO
from urllib.parse import urlsplit

import httpx

from sweep.core.errors import SIGNALS, Interrupted, LaunchError, UserError
from sweep.launch import _session_exec, processes

# (log pattern, reason template filled with the pattern's groups), most specific first: each engine's table.
ExitPatterns = tuple[tuple[re.Pattern[str], str], ...]

DEFAULT_HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 300.0
STOP_GRACE_S = 10.0
KILL_WAIT_S = 5.0
POLL_INTERVAL_S = 0.25
LOG_TAIL_LINES = 12
READ_CHUNK = 1 << 16

# Decides from the log and the exit code why a server that exited did so (engines know their own log lines).
ExitReason = Callable[[str, int], str]

_LIVE: set[ServerProcess] = set()  # servers of this driver not yet stopped: stopped at exit whatever happens


# The line a Python traceback ends on (`AssertionError: ...`, `torch.OutOfMemoryError: ...`): a server's own
# exception says more than the shutdown lines printed after it (SGLang's last line names its process tree).
TRACEBACK = "Traceback (most recent call last):"
EXCEPTION_LINE = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?:: [^\n]*)?)$", re.M)


def reason_from_log(log: str, returncode: int, patterns: ExitPatterns, server: str) -> str:
    """Why a server exited: the first line in its log an engine's table knows, else the exception its last
    traceback ends on, else its last line."""
    for pattern, template in patterns:
        if found := pattern.search(log):
            return template.format(*(group.strip() for group in found.groups()))
    if TRACEBACK in log and (raised := EXCEPTION_LINE.findall(log.rsplit(TRACEBACK, 1)[1])):
        return f"{server} exited with code {returncode}; it raised {raised[0].strip()}"
    last = [line for line in log.splitlines() if line.strip()][-1:] or ["(empty log)"]
    return f"{server} exited with code {returncode}; last log line: {last[0].strip()}"


def free_port(host: str = DEFAULT_HOST) -> int:
    """A port nothing listens on now. The server binds it a moment later; a loser of that race fails its launch."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def ensure_port_free(host: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise UserError(
                f"port {port} on {host} is in use ({exc.strerror})",
                "stop what listens there, or drop `port:` from the space file so a free port is chosen",
            ) from None


def log_tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


class ServerProcess:
    """A server process in a new session whose stdout and stderr go, byte for byte, into `log_path`.

    `registry` is a folder where the launch is written down (pid, start time, marker) while it may be alive,
    so that a later run can stop what a killed driver left behind (`reap`)."""

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str],
        exit_reason: ExitReason | None = None,
        registry: Path | None = None,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        self.argv = list(argv)
        self.stop_grace_s = stop_grace_s
        self.log_path = log_path
        self.marker = uuid.uuid4().hex
        self.env = {**env, processes.MARKER_ENV: self.marker}
        self._exit_reason = exit_reason
        self._registry_file = registry / f"{self.marker}.json" if registry else None
        self._thread: threading.Thread | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._started = threading.Event()
        self._spawn_error: OSError | None = None
        self.log_error: str | None = None  # why part of the server's output is missing from its log
        self.pid: int | None = None
        self.started_at = 0.0
        # The exit code of a server that exited on its own (before stop() asked it to), else None.
        self.exited_early: int | None = None

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- start ------------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.started_at = time.monotonic()
        # One thread starts, reads and waits for the server: the kernel's parent-death signal is tied to the
        # thread that forked, so that thread lives exactly as long as the server.
        self._thread = threading.Thread(
            target=self._run, name=f"server-{self.log_path.parent.name}", daemon=True
        )
        self._thread.start()
        self._started.wait()
        if self._proc is not None:
            self.pid = self._proc.pid
            _LIVE.add(self)
            self._register()

    def _run(self) -> None:
        try:
            # Unbuffered: what was read is in the log (or lost) at once, never in a buffer at exit.
            log = self.log_path.open("wb", buffering=0)
        except OSError as exc:
            self._spawn_error = exc
            self._started.set()
            return
        # The server runs under the shim (its own session, dying with this thread): named by import, not by hand.
        shim = [sys.executable, "-m", _session_exec.__name__, "--", *self.argv]
        with log:
            try:
                self._proc = subprocess.Popen(
                    shim,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.env,
                )
            except OSError as exc:
                self._spawn_error = exc
                return
            finally:
                self._started.set()
            self._drain(self._proc, log)

    def _drain(self, proc: subprocess.Popen[bytes], log: BinaryIO) -> None:
        """Copy the server's output into the log as raw chunks, not lines: odd bytes and lines of any length are
        kept as written. A log that cannot be written (a full disk) is noted and the pipe still drained, so the
        server never blocks on its output."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while chunk := os.read(fd, READ_CHUNK):
            if self.log_error is None:
                try:
                    log.write(chunk)
                except OSError as exc:
                    self.log_error = (
                        f"the server log could not be written from byte {log.tell()}: {exc.strerror}"
                    )
        proc.stdout.close()
        proc.wait()

    def _register(self) -> None:
        if self._registry_file is None or self.pid is None:
            return
        entry = {
            "marker": self.marker,
            "pid": self.pid,
            "start_ticks": processes.start_ticks(self.pid),
            "driver_pid": os.getpid(),
            "driver_start_ticks": processes.start_ticks(os.getpid()),
            "argv": self.argv,
            "log": str(self.log_path),
        }
        with contextlib.suppress(OSError):  # a full disk must not stop a launch: the kernel's guard remains
            self._registry_file.parent.mkdir(parents=True, exist_ok=True)
            self._registry_file.write_text(json.dumps(entry))

    # --- what the server says ----------------------------------------------------------------------------------

    @property
    def returncode(self) -> int | None:
        """The exit code once the launched process has exited, else None."""
        if self._spawn_error is not None:
            return 127
        return self._proc.poll() if self._proc is not None else None

    def exited_within(self, timeout_s: float) -> bool:
        """Whether the process exits within `timeout_s` (returns at once when it has)."""
        deadline = time.monotonic() + timeout_s
        while self.returncode is None:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def await_line(self, text: str, timeout_s: float = 2.0) -> bool:
        """Wait (bounded) until `text` is in the log: the server answers health checks a moment before the thread
        copying its output has written what it printed before it, and facts are read from that log."""
        deadline = time.monotonic() + timeout_s
        while text and text not in self.log_text():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def log_text(self) -> str:
        try:
            return self.log_path.read_bytes().decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def exit_reason(self) -> str:
        if self._spawn_error is not None:
            return f"could not run the server: {self._spawn_error}"
        code = self.returncode if self.returncode is not None else -1
        text = self.log_text()
        if self._exit_reason is not None:
            return self._exit_reason(text, code)
        return reason_from_log(text, code, (), "the server")

    def processes(self) -> list[processes.Proc]:
        """Every live process of this launch: its group, and anything carrying its marker."""
        return processes.launched(self.marker, self.pid)

    def pids(self) -> set[int]:
        """The ids of `processes()`: the launch's GPU memory is counted by the processes stopping it ends."""
        return {p.pid for p in self.processes()}

    def wait_ready(self, health_url: str, timeout_s: float = STARTUP_TIMEOUT_S) -> float:
        """Poll `health_url` until the launched server answers 200. Fails at once when the process exits, or when
        what answers on the port is another process. Returns seconds waited."""
        deadline = time.monotonic() + timeout_s
        port = urlsplit(health_url).port
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                if self.returncode is not None:
                    raise LaunchError(self._exited_reason())
                try:
                    ready = client.get(health_url).status_code == 200
                except httpx.TransportError:
                    ready = False  # not listening yet (connection refused), or busy loading
                if ready and port is not None:
                    self._check_owner(port)
                    return time.monotonic() - self.started_at
                time.sleep(POLL_INTERVAL_S)
        raise LaunchError(
            f"server not ready after {timeout_s:.0f} s (no 200 from {health_url}); last log lines: "
            f"{log_tail(self.log_text(), 3)}"
        )

    def _exited_reason(self) -> str:
        left = self.processes()
        if left:
            return (
                f"the launched process exited (code {self.returncode}) and left {len(left)} process(es) running "
                "in the background: the server daemonises; run it in the foreground"
            )
        return self.exit_reason()

    def _check_owner(self, port: int) -> None:
        """The listening socket on `port` must belong to this launch: a 200 from anything else is not ours."""
        inodes = processes.listening_inodes(port)
        if not inodes:
            return  # nothing listens here on this machine: the launcher runs the server elsewhere
        holders = processes.socket_holders(inodes)
        ours = {p.pid for p in self.processes()}
        if not ours.intersection(holders):
            who = (
                f"pid {holders[0]}: {processes.command(holders[0])[:80]}"
                if holders
                else "another user's process"
            )
            raise LaunchError(
                f"port {port} answers, but it is held by another process ({who}), not by the launched server"
            )

    # --- stop ---------------------------------------------------------------------------------------------------

    def stop(self, grace_s: float | None = None) -> None:
        """TERM every process of the launch, KILL what is left after the grace period (the launch's own unless
        given). A Ctrl-C meanwhile goes straight to KILL, and is raised once the server is gone."""
        grace_s = self.stop_grace_s if grace_s is None else grace_s
        if self.pid is None:
            return
        if self.exited_early is None and self.returncode is not None:
            self.exited_early = self.returncode
        with _escalating_interrupts() as interrupted:
            processes.terminate(self.processes, grace_s, KILL_WAIT_S, self.pid, interrupted.is_set)
            if self._thread is not None:
                self._thread.join(timeout=KILL_WAIT_S)
            if not self.processes():
                _LIVE.discard(self)
                if self._registry_file is not None:
                    self._registry_file.unlink(missing_ok=True)


@contextlib.contextmanager
def _escalating_interrupts() -> Iterator[threading.Event]:
    """While a server is being stopped, Ctrl-C and SIGTERM only hurry the stop; the interrupt is raised after,
    so a second Ctrl-C during shutdown still ends with the server's processes killed."""
    hurried = threading.Event()
    if SIGNALS.pending():  # a second Ctrl-C came while the first unwound, before this stop began
        hurried.set()
    if threading.current_thread() is not threading.main_thread():
        yield hurried
        return
    received: list[int] = []

    def hurry(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        hurried.set()

    previous = {sig: signal.signal(sig, hurry) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield hurried
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise Interrupted(signal.Signals(received[0]))


def reap(registry: Path) -> list[str]:
    """Stop what servers a dead driver left (their entries in `registry`); say what was stopped."""
    stopped = []
    for entry_file in sorted(registry.glob("*.json")) if registry.is_dir() else []:
        try:
            entry = json.loads(entry_file.read_text())
        except (OSError, ValueError):
            entry_file.unlink(missing_ok=True)
            continue
        if processes.same_process(entry["driver_pid"], entry["driver_start_ticks"]):
            continue  # its driver still runs (another worker of the study): its servers are its own
        # The group is the launch's only while its leader is the same process (pids and groups are reused).
        group = entry["pid"] if processes.same_process(entry["pid"], entry["start_ticks"]) else None
        left = processes.terminate(
            functools.partial(processes.launched, entry["marker"], group), KILL_WAIT_S, KILL_WAIT_S, group
        )
        if left:
            stopped.append(f"{len(left)} process(es) of {entry['argv'][0]} (log {entry['log']})")
        entry_file.unlink(missing_ok=True)
    return stopped


@atexit.register
def _stop_all() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop(grace_s=2.0)
