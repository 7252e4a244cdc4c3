"""The HTTP plumbing every front end shares: the handler (replies, SSE, faults), a request's stop sequences and
finish reason, the profile named on the command line, and a front end's life (`serve`)."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sweep.core.clock import CLOCK_PATH
from sweep.sim.core import Simulator
from sweep.sim.faults import Faults
from sweep.sim.model import StartupFailure
from sweep.sim.profile import DEFAULT_PROFILE, Profile


class Handler(BaseHTTPRequestHandler):
    sim: Simulator
    faults: Faults = Faults()
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: neither engine logs every request
        return

    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _simulator_route(self, path: str) -> bool:
        """The simulator's own GET routes, beside each engine's: how far its clock fell behind (CLOCK_PATH)."""
        if path != CLOCK_PATH:
            return False
        with self.sim.lock:
            lag = self.sim.lag.to_dict()
        self._send(200, {"time_scale": self.sim.time_scale, **lag})
        return True

    def _body(self) -> dict[str, Any] | None:
        """The request's JSON body ({} where it has none); None, answered with a 400, where it is not JSON."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}") if length else {}
        except json.JSONDecodeError:
            self._error(400, "invalid JSON body")
            return None

    def _error(self, code: int, message: str) -> None:
        """An error in the engine's own shape (SGLang's by default)."""
        self._send(code, {"error": {"message": message}})

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def _sse(self, payload: Any) -> None:
        self.wfile.write(
            b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()) + b"\n\n"
        )
        self.wfile.flush()

    def _fault_in_stream(self, fault: str) -> None:
        if fault == "crash":
            os._exit(1)
        if fault == "stall":
            # Said in the log, so that a test (or a person reading it) sees the stall begin.
            print("sim fault: this stream stalls here, forever", file=sys.stderr, flush=True)
            while True:
                time.sleep(1)
        if fault == "malformed":
            self._sse(b'{"choices": [{"delta": {"content": "x"')

    def _generated(
        self,
        prompt: str,
        max_new: int,
        request: int,
        chunk: Callable[[str], Any] | None,
        instruction: bool = True,
        stop: Sequence[str] = (),
    ) -> tuple[str, dict[str, Any]] | None:
        """The text and the final meta of a generation, each piece streamed as `chunk(piece)` where streaming
        (the stream started here); None when a fault cut the stream."""
        if chunk is not None:
            self._sse_start()
        text, meta, pieces = "", dict[str, Any](), 0
        for piece, final in self.sim.generate(prompt, max_new, instruction, stop):
            text += piece
            meta = final or meta
            if chunk is not None and piece:
                self._sse(chunk(piece))
                pieces += 1
                if fault := self.faults.mid_stream(request, pieces):
                    self._fault_in_stream(fault)
                    return None
        return text, meta


def stop_sequences(raw: Any) -> tuple[str, ...]:
    """A request's `stop`: one string or a list of them, as the OpenAI API and SGLang's sampling_params take."""
    found = [raw] if isinstance(raw, str) else raw or []
    return tuple(str(s) for s in found)


def finish(meta: dict[str, Any]) -> str:
    """The OpenAI finish reason of a generation's meta: "stop" where a stop sequence ended it, else "length"."""
    return "stop" if (meta.get("finish_reason") or {}).get("type") == "stop" else "length"


def load_profile(argv: list[str]) -> Profile:
    """The profile `--sim-profile` names among any engine's flags (the default one otherwise)."""
    probe = argparse.ArgumentParser(add_help=False)
    probe.add_argument("--sim-profile")
    known, _ = probe.parse_known_args(argv)
    return Profile.load(Path(known.sim_profile) if known.sim_profile else DEFAULT_PROFILE)


class Listener(ThreadingHTTPServer):
    # uvicorn's (and vLLM's) listen backlog. socketserver's default of 5 refuses the 7th of 16 connections
    # opened at once, and the client's retry a second later staggers a batch that was sent together.
    request_queue_size = 2048


def serve(
    args: argparse.Namespace,
    handler: type[Handler],
    start: Callable[[], Simulator],
    bind_error: Callable[[OSError], str],
    come_up: Callable[[Simulator, ThreadingHTTPServer, threading.Event], bool],
) -> int:
    """A front end's life: its start-up faults, its start (or the failure it prints), its port, then
    `come_up` (which serves the port, at the engine's moment, and says whether it did) until SIGTERM/SIGINT."""
    handler.faults = Faults.parse(args.sim_fault)
    handler.faults.at_start()
    try:
        sim = start()
    except StartupFailure as exc:
        print(f"Traceback (most recent call last):\n{exc}", file=sys.stderr, flush=True)
        return 1
    handler.sim = sim
    try:
        httpd = Listener((args.host, args.port), handler)
    except OSError as exc:
        print(bind_error(exc), file=sys.stderr)
        return 1
    httpd.daemon_threads = True
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    serving = come_up(sim, httpd, stop)
    while not stop.wait(0.5):
        pass
    if serving:
        httpd.shutdown()
    return 0
