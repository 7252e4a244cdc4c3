"""`ServerProcess`: one server, started in its own session, its output teed to a log, stopped by process group.

The shape follows vLLM's `benchmarks/sweep` server: a context manager, a health wait that fails fast when the
process dies, and a stop that signals the whole group (never a kill by name).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

import httpx
import subprocess_tee

from sweep.engines.base import reason_from_log
from sweep.errors import LaunchError, UserError

DEFAULT_HOST = "127.0.0.1"
STARTUP_TIMEOUT_S = 300.0
STOP_GRACE_S = 10.0
POLL_INTERVAL_S = 0.25
LOG_TAIL_LINES = 12

# Decides from the log and the exit code why a server that exited did so (engines know their own log lines).
ExitReason = Callable[[str, int], str]


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
    """A server process in a new session whose stdout and stderr are teed into `log_path`."""

    def __init__(
        self,
        argv: Sequence[str],
        log_path: Path,
        env: Mapping[str, str],
        exit_reason: ExitReason | None = None,
    ) -> None:
        self.argv = list(argv)
        self.log_path = log_path
        self.env = dict(env)
        self._exit_reason = exit_reason
        self._pidfile = log_path.with_name(log_path.name + ".pid")
        self._thread: threading.Thread | None = None
        self._returncode: int | None = None
        self._tee_error: BaseException | None = None
        self.pid: int | None = None
        self.started_at = 0.0

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._pidfile.unlink(missing_ok=True)
        self.started_at = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, name=f"server-{self.log_path.parent.name}", daemon=True
        )
        self._thread.start()
        while self.pid is None and self._thread.is_alive():
            with contextlib.suppress(FileNotFoundError, ValueError):
                self.pid = int(self._pidfile.read_text())
            time.sleep(0.01)

    def _run(self) -> None:
        shim = [sys.executable, "-m", "sweep._session_exec", str(self._pidfile), "--", *self.argv]
        with self.log_path.open("w", encoding="utf-8", buffering=1) as log:
            try:
                done = subprocess_tee.run(
                    shim, stdout=log, stderr=log, env=self.env, stdin=subprocess.DEVNULL
                )
                self._returncode = done.returncode
            except BaseException as exc:  # the tee thread must not die silently: the health wait reports it
                self._tee_error = exc
                self._returncode = -1

    @property
    def returncode(self) -> int | None:
        """The exit code once the process has exited, else None."""
        if self._thread is not None and not self._thread.is_alive():
            return self._returncode
        return None

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""

    def exit_reason(self) -> str:
        code = self.returncode if self.returncode is not None else -1
        text = self.log_text()
        if self._tee_error is not None:
            return f"could not run the server: {self._tee_error}"
        if self._exit_reason is not None:
            return self._exit_reason(text, code)
        return reason_from_log(text, code, (), "the server")

    def wait_ready(self, health_url: str, timeout_s: float = STARTUP_TIMEOUT_S) -> float:
        """Poll `health_url` until it answers 200. Fails at once when the process exits. Returns seconds waited."""
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=5.0) as client:
            while time.monotonic() < deadline:
                if self.returncode is not None:
                    raise LaunchError(self.exit_reason())
                try:
                    if client.get(health_url).status_code == 200:
                        return time.monotonic() - self.started_at
                except httpx.TransportError:
                    pass  # not listening yet (connection refused), or busy loading
                time.sleep(POLL_INTERVAL_S)
        raise LaunchError(
            f"server not ready after {timeout_s:.0f} s (no 200 from {health_url}); last log lines: "
            f"{log_tail(self.log_text(), 3)}"
        )

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """TERM the process group, KILL it after the grace period, and make sure no member is left."""
        if self.pid is None:
            return
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
            if not self._group_alive():
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, sig)
            deadline = time.monotonic() + wait_s
            while self._group_alive() and time.monotonic() < deadline:
                time.sleep(0.05)
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self._pidfile.unlink(missing_ok=True)

    def _group_alive(self) -> bool:
        if self.pid is None:
            return False
        leader_running = self._thread is not None and self._thread.is_alive()
        try:
            os.killpg(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return leader_running or _group_has_live_member(self.pid)


def _group_has_live_member(pgid: int) -> bool:
    """True if a process other than a zombie is in the group (a reaped leader may leave children behind)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # fields after the command name: state, ppid, pgrp, ...
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False
