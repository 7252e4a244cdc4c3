"""Record what a live vLLM server answers, for the replay tests (`tests/recordings/`).

Starts `vllm serve` once with the flags given, talks to every endpoint specsweep reads, saves each answer as it
came, and stops the server by its process group:

    python maintainers/record_vllm.py --out DIR [--timeout SECONDS] [--port N] [--launcher 'python3 -m vllm.entrypoints.cli.main'] \
        NAME -- MODEL [vllm serve flags...]

Writes DIR/NAME/: server.log (stdout and stderr byte for byte), models.json, metrics_before.txt,
metrics_after.txt, tokenize.json, completion_<label>.json (the stream's first and last chunks, every chunk's
keys, the final usage), chat.json, batch4.json (four requests at once), summary.json (argv, timings, errors).
Ends within --timeout seconds whatever the server does (default 540). Needs httpx.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

CODE = (
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n"
    * 4
)
PROSE = "The history of the city begins"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the results folder")
    parser.add_argument("--timeout", type=float, default=540, help="seconds for the whole recording")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--launcher", default="vllm", help="how vLLM is started, before 'serve'")
    parser.add_argument("name", help="the recording's folder under --out")
    parser.add_argument("serve", nargs=argparse.REMAINDER, help="-- MODEL and vllm serve's flags")
    args = parser.parse_args()
    serve = [a for a in args.serve if a != "--"]
    if not serve:
        parser.error("give the model after --")
    out: Path = args.out / args.name
    out.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + args.timeout
    argv = [*shlex.split(args.launcher), "serve", *serve, "--host", "127.0.0.1", "--port", str(args.port)]
    summary: dict[str, Any] = {"argv": argv, "errors": {}, "status": {}}
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1"}
    t0 = time.monotonic()
    with open(out / "server.log", "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
        try:
            client = httpx.Client(base_url=f"http://127.0.0.1:{args.port}", timeout=60)
            summary["ready_s"] = wait_ready(client, proc, deadline, t0, summary)
            if summary["ready_s"] is not None:
                talk(client, out, summary, f"http://127.0.0.1:{args.port}")
        finally:
            summary["wall_s"] = round(time.monotonic() - t0, 1)
            stop(proc)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    print(args.name, json.dumps({k: summary.get(k) for k in ("ready_s", "exited", "errors", "status")}))
    return 0 if summary["ready_s"] is not None and not summary["errors"] else 1


def wait_ready(
    client: httpx.Client, proc: subprocess.Popen[bytes], deadline: float, t0: float, summary: dict[str, Any]
) -> float | None:
    while time.monotonic() < deadline - 60:
        if proc.poll() is not None:
            summary["exited"] = proc.returncode
            return None
        try:
            if client.get("/health", timeout=5).status_code == 200:
                return round(time.monotonic() - t0, 1)
        except httpx.HTTPError:
            pass
        time.sleep(1)
    return None


def talk(client: httpx.Client, out: Path, summary: dict[str, Any], base: str) -> None:
    def save(name: str, value: Any) -> None:
        (out / name).write_text(value if isinstance(value, str) else json.dumps(value, indent=1))

    def step(label: str, action: Any) -> None:
        try:
            action()
        except Exception as error:  # every endpoint is a finding: keep going
            summary["errors"][label] = f"{type(error).__name__}: {error}"[:500]

    def completion(label: str, prompt: str, tokens: int) -> None:
        body = {
            "model": model,
            "prompt": prompt,
            "max_tokens": tokens,
            "temperature": 0,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True, "continuous_usage_stats": False},
        }
        chunks: list[dict[str, Any]] = []
        started = time.monotonic()
        with client.stream("POST", "/v1/completions", json=body, timeout=120) as response:
            summary["status"][label] = response.status_code
            for line in response.iter_lines():
                if line.startswith("data: ") and line != "data: [DONE]":
                    chunks.append(json.loads(line[6:]))
        save(
            f"completion_{label}.json",
            {
                "request": body,
                "first": chunks[:2],
                "last": chunks[-2:],
                "n_chunks": len(chunks),
                "keys": sorted({key for chunk in chunks for key in chunk}),
                "wall_s": time.monotonic() - started,
            },
        )

    models = client.get("/v1/models").json()
    save("models.json", models)
    model = models["data"][0]["id"]
    step("metrics_before", lambda: save("metrics_before.txt", client.get("/metrics").text))
    step(
        "tokenize",
        lambda: save(
            "tokenize.json",
            client.post("/tokenize", json={"model": model, "prompt": "def add(a, b):"}).json(),
        ),
    )
    step(
        "tokenize_chat",
        lambda: save(
            "tokenize_chat.json",
            client.post(
                "/tokenize",
                json={
                    "model": model,
                    "messages": [{"role": "user", "content": "alpha"}],
                    "add_generation_prompt": True,
                },
            ).json(),
        ),
    )
    step(
        "reset_prefix_cache",
        lambda: summary["status"].update(reset=client.post("/reset_prefix_cache").status_code),
    )
    for label, prompt in (("code", CODE), ("code2", CODE), ("prose", PROSE)):
        step(label, lambda label=label, prompt=prompt: completion(label, prompt, 128))
    step(
        "chat",
        lambda: save(
            "chat.json",
            client.post(
                "/v1/chat/completions",
                json={
                    "model": model,
                    "messages": [{"role": "user", "content": "Repeat exactly: " + CODE}],
                    "max_tokens": 64,
                    "temperature": 0,
                },
            ).json(),
        ),
    )

    def one(index: int) -> Any:
        return httpx.post(
            base + "/v1/completions",
            json={"model": model, "prompt": f"{index} " + CODE, "max_tokens": 64, "temperature": 0},
            timeout=120,
        ).json()

    step(
        "batch4",
        lambda: save("batch4.json", list(concurrent.futures.ThreadPoolExecutor(4).map(one, range(4)))),
    )
    step("metrics_after", lambda: save("metrics_after.txt", client.get("/metrics").text))


def stop(proc: subprocess.Popen[bytes]) -> None:
    """The server's whole process group: SIGTERM, then SIGKILL for whatever is left."""
    for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    time.sleep(2)  # the engine core's workers share the group: let them release the GPU
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    sys.exit(main())
