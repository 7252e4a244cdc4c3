"""Faults the simulator can be told to have (`--sim-fault NAME[=N]`, repeatable): what a night brings.

Start-up: `exit-at-start`, `never-healthy`, `odd-bytes` (invalid UTF-8 and a 1 MiB line in the log before the
facts), `ignore-term` (ignores SIGTERM and forks a child that does too), `daemonise` (double fork, new session,
the launched process exits 0), `escape-group` (forks a child into a session of its own).
Requests (chat completions, counted from 1): `crash-mid-stream=N` (exit halfway through the Nth stream),
`crash-after=N` (exit right after finishing the Nth), `http-error=CODE` (every request), `malformed-sse`,
`cut-sse` (the stream ends without the final chunk), `stall=N` (the Nth stream stops sending, forever).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field

MID_STREAM_PIECE = 2  # faults in a stream strike after its second chunk
START_FAULTS = {"exit-at-start", "never-healthy", "odd-bytes", "ignore-term", "daemonise", "escape-group"}
REQUEST_FAULTS = {"crash-mid-stream", "crash-after", "http-error", "malformed-sse", "cut-sse", "stall"}


@dataclass
class Faults:
    active: dict[str, int] = field(default_factory=dict)
    _requests: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def parse(cls, specs: list[str]) -> Faults:
        active = {}
        for spec in specs:
            name, _, arg = spec.partition("=")
            if name not in START_FAULTS | REQUEST_FAULTS:
                raise SystemExit(f"--sim-fault: unknown fault '{name}'")
            active[name] = int(arg or 1)
        return cls(active)

    def __contains__(self, name: str) -> bool:
        return name in self.active

    def next_request(self) -> int:
        with self._lock:
            self._requests += 1
            return self._requests

    def at_start(self) -> None:
        """Start-up faults, before the server listens."""
        if "odd-bytes" in self:
            sys.stderr.buffer.write(b"weights \xff\xfe\xc3( loaded\n" + b"x" * (1 << 20) + b"\n")
            sys.stderr.flush()
        if "exit-at-start" in self:
            print("RuntimeError: simulated fault: exit at start", file=sys.stderr, flush=True)
            os._exit(1)
        if "ignore-term" in self:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            _fork_forever(new_session=False)
        if "escape-group" in self:
            _fork_forever(new_session=True)
        if "daemonise" in self:
            if os.fork() > 0:
                os._exit(0)
            os.setsid()
            if os.fork() > 0:
                os._exit(0)

    def mid_stream(self, request: int, piece: int) -> str | None:
        """What the stream does after its `piece`th chunk: None (go on), "crash", "cut", "malformed", "stall"."""
        if piece != MID_STREAM_PIECE:
            return None
        if self.active.get("crash-mid-stream") == request:
            return "crash"
        if self.active.get("stall") == request:
            return "stall"
        if "cut-sse" in self:
            return "cut"
        if "malformed-sse" in self:
            return "malformed"
        return None

    def after_request(self, request: int) -> None:
        if self.active.get("crash-after") == request:
            os._exit(1)


def _ignored(signum: int, frame: object) -> None:
    """SIGTERM taken and ignored, said in the log (where a test sees the stop under way)."""
    os.write(2, b"sim fault: SIGTERM ignored\n")


def _fork_forever(new_session: bool) -> None:
    if os.fork() == 0:
        if new_session:
            os.setsid()
        signal.signal(signal.SIGTERM, _ignored)
        while True:
            time.sleep(1)
