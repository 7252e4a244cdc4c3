"""`python -m sweep.sim.replay --replay DIR [SGLang flags]`: a real SGLang server's recorded bytes, served again.

The simulator says what we believe SGLang says; this says what a real one said. `DIR` holds what a real server
wrote and answered on a GPU (`tests/recordings/sglang-0.5.17-h200/`: SGLang 0.5.17 on an H200): its `--help`,
its start-up logs, `/server_info`, `/v1/models`, `/metrics` and the final `/generate` chunks. The stand-in
parses its command line with that release's own flag table (so it refuses what the release refuses), prints the
recorded log of the launch it was given (NGRAM's or EAGLE's), then answers every route from the recording. A
launch nothing was recorded for exits at start saying so: a failed trial with its reason. No launch without
speculation was recorded, and a sweep starts with one: `--replay-baseline-from ngram` serves it NGRAM's bytes
less what only speculation adds (its log lines, `spec_*` fields, `speculative_*` settings), and says so in its
log. Its speeds are NGRAM's, so a gain against it is no measurement: the bytes are what is under test. Per request only what must differ
does: a fresh id, and the recorded stamps moved to now with every interval kept (so a batch's windows line up).
Text is the recording's too: a random-weight model's, which specsweep rightly calls no text (the batch's answers,
recorded as meta_info only, carry the first single answer's text).

Tokens are counted by the simulator's tokenizer: the recorded model's tokenizer is not here, and a count is
all the probe asks of it.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import re
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.releases.sglang import release_parser
from sweep.sim.serving import Handler, Listener
from sweep.sim.text import chat_prompt, tokenize

READY = "The server is fired up and ready to roll!"
# Recordings by the algorithm a launch asks for.
RECORDINGS = {"NGRAM": "ngram", "EAGLE": "eagle-acc3"}
# What only a speculative launch logs (`server_args.py`'s resets for speculation, NGRAM's mixed-chunk notice).
SPECULATIVE_LINE = re.compile(r"for speculative decoding|speculative decoding\.|ngram", re.IGNORECASE)
LOGS = {"ngram": "ngram-manual.server.log", "eagle-acc3": "eagle-acc3-nograph.server.log"}
# Finals by answer length: a request for up to 64 tokens gets the batch's 64-token answers, a longer one the
# single 128-token answers.
SINGLE_FINALS = ("generate_code.json", "generate_prose.json", "generate_code2.json")
BATCH_FINALS = "generate_batch4.json"
STAMPS = (
    "request_received_ts",
    "api_server_dispatch_finish_ts",
    "forward_entry_time",
    "prefill_finished_time",
    "response_sent_to_client_ts",
    "request_finished_ts",
)


@dataclass
class Recording:
    """One recorded launch's bytes, as a launch with or without speculation would have them."""

    folder: Path
    name: str
    speculative: bool = True  # False: a launch without speculation served this recording, less its spec
    finals: list[tuple[dict[str, Any], str]] = field(default_factory=list)  # (meta_info, text)
    short_finals: list[tuple[dict[str, Any], str]] = field(default_factory=list)
    served: itertools.count[int] = field(default_factory=itertools.count)  # answers so far (threads share it)

    @classmethod
    def load(cls, folder: Path, name: str) -> Recording:
        recording = cls(folder, name)
        for single in SINGLE_FINALS:
            if (path := folder / f"{name}-{single}").is_file():
                last = json.loads(path.read_text())["last"]
                recording.finals.append((last["meta_info"], str(last["text"])))
        text = recording.finals[0][1] if recording.finals else ""
        batch = json.loads((folder / f"{name}-{BATCH_FINALS}").read_text())
        recording.short_finals = [(meta, text) for meta in batch]
        return recording

    def unspeculative(self) -> Recording:
        """The same bytes as a launch without speculation prints and answers them."""

        def plain(meta: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in meta.items() if not k.startswith("spec_")}

        return Recording(
            self.folder,
            self.name,
            False,
            [(plain(meta), text) for meta, text in self.finals],
            [(plain(meta), text) for meta, text in self.short_finals],
        )

    def log_lines(self) -> tuple[list[str], list[str]]:
        """The start-up log up to the ready line, and what it printed when stopped."""
        lines = (self.folder / LOGS[self.name]).read_text().splitlines()
        if not self.speculative:
            note = f"replay: no launch without speculation was recorded; serving {self.name}'s bytes less its spec"
            lines = [note, *(line for line in lines if not SPECULATIVE_LINE.search(line))]
        ready = next((i for i, line in enumerate(lines) if READY in line), len(lines) - 1)
        return lines[: ready + 1], lines[ready + 1 :]

    def server_info(self) -> dict[str, Any]:
        info: dict[str, Any] = json.loads(self.text("server_info.json"))
        if not self.speculative:
            info |= {
                k: None for k, v in info.items() if k.startswith("speculative_") and not isinstance(v, bool)
            }
            for state in info.get("internal_states") or []:
                state.pop("avg_spec_accept_length", None)
        return info

    def metrics(self) -> str:
        lines = self.text("metrics_after.txt").splitlines()
        return "\n".join(line for line in lines if self.speculative or "spec_" not in line) + "\n"

    def text(self, name: str) -> str:
        return (self.folder / f"{self.name}-{name}").read_text()

    def final(self, max_new: int) -> tuple[dict[str, Any], str]:
        """The next recorded final meta_info and text for an answer of up to `max_new` tokens, moved to now."""
        pool = self.short_finals if max_new <= 64 and self.short_finals else self.finals
        recorded, text = pool[next(self.served) % len(pool)]
        meta = copy.deepcopy(recorded)
        shift = time.time() - float(meta.get("request_received_ts") or time.time())
        for key in STAMPS:
            if isinstance(meta.get(key), int | float):
                meta[key] += shift
        return meta | {"id": uuid.uuid4().hex}, text


GET_ROUTES = {
    "/health": "_health",
    "/health_generate": "_health",
    "/server_info": "_server_info",
    "/get_server_info": "_server_info",
    "/v1/models": "_models",
    "/metrics": "_metrics",
    "/flush_cache": "_flush",
}
POST_ROUTES = {
    "/flush_cache": "_flush",
    "/tokenize": "_tokenize",
    "/v1/tokenize": "_tokenize",
    "/generate": "_generate",
}


class ReplayHandler(Handler):
    recording: Recording
    ready = threading.Event()

    def do_GET(self) -> None:
        self._route(GET_ROUTES, None)

    def do_POST(self) -> None:
        if (body := self._body()) is not None:
            self._route(POST_ROUTES, body)

    def _route(self, routes: dict[str, str], body: dict[str, Any] | None) -> None:
        """Each route a table names, answered by the method of that name (404 for the rest)."""
        name = routes.get(self.path.split("?")[0])
        if name is None:
            self._send(404, {"detail": "Not Found"})
        else:
            getattr(self, name)(body)

    def _health(self, _: Any) -> None:
        self._send(200 if self.ready.is_set() else 503, {})

    def _server_info(self, _: Any) -> None:
        self._send(200, self.recording.server_info())

    def _models(self, _: Any) -> None:
        self._send(200, json.loads(self.recording.text("models.json")))

    def _metrics(self, _: Any) -> None:
        self._send(200, self.recording.metrics(), "text/plain; version=0.0.4")

    def _tokenize(self, body: dict[str, Any]) -> None:
        text = chat_prompt(body["messages"]) if "messages" in body else str(body.get("prompt", ""))
        tokens = tokenize(text)
        self._send(200, {"tokens": tokens, "count": len(tokens), "max_model_len": 8192})

    def _flush(self, _: Any) -> None:
        self._send(
            200,
            "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
            "requests, the operation will not be performed.)\n",
            "text/plain",
        )

    def _generate(self, body: dict[str, Any]) -> None:
        max_new = int((body.get("sampling_params") or {}).get("max_new_tokens", 128))
        meta, text = self.recording.final(max_new)
        first = {k: v for k, v in meta.items() if k not in ("e2e_latency", "request_finished_ts")}
        first |= {"finish_reason": None, "completion_tokens": 1}
        if not body.get("stream"):
            self._send(200, {"text": text, "meta_info": meta})
            return
        self._sse_start()
        self._sse({"text": text[:1], "meta_info": first})
        self._sse({"text": text, "meta_info": meta})
        self._sse(b"[DONE]")


def main(argv: list[str]) -> int:
    own = argparse.ArgumentParser(add_help=False)
    own.add_argument("--replay", type=Path, required=True)
    own.add_argument("--replay-baseline-from", choices=sorted(LOGS))
    known, rest = own.parse_known_args(argv)
    if not (known.replay / "launch_server-help.txt").is_file():
        print(f"--replay {known.replay}: no recording there (no launch_server-help.txt)", file=sys.stderr)
        return 2
    if "--help" in rest or "-h" in rest:
        print((known.replay / "launch_server-help.txt").read_text(), end="")
        return 0
    # The release's own flag table parses the command line: it refuses what the release refuses.
    info = json.loads((known.replay / "ngram-server_info.json").read_text())
    args = release_parser(str(info.get("version", "0.5.17"))).parse_args(rest)
    algorithm = args.speculative_algorithm
    name = RECORDINGS.get(algorithm) if algorithm else known.replay_baseline_from
    if name is None or not (known.replay / LOGS[name]).is_file():
        what = algorithm or "no speculation (--replay-baseline-from serves one a recording's bytes)"
        print(f"replay: {known.replay} holds no recorded launch with {what}", file=sys.stderr)
        return 1
    recording = Recording.load(known.replay, name)
    ReplayHandler.recording = recording if algorithm else recording.unspeculative()
    httpd = Listener((args.host, args.port), ReplayHandler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    start, stop_lines = ReplayHandler.recording.log_lines()
    for line in start:
        print(line, file=sys.stderr, flush=True)
    ReplayHandler.ready.set()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(0.5):
        pass
    httpd.shutdown()
    for line in stop_lines:
        print(line, file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
