"""Record what a live SGLang server answers, for the replay tests (`tests/recordings/`).

Starts SGLang's server once with the flags given, talks to every endpoint specsweep reads, saves each answer as it
came, and stops the server by its process group:

    python maintainers/record_sglang.py --out DIR --model MODEL [--timeout SECONDS] [--port N] NAME [sglang flags...]

Writes DIR/NAME/: server.log, server_info.json, models.json, metrics_{before,after}.txt, tokenize*.json,
generate_*.json (the stream's first and last chunks), flush.txt, summary.json. Ends within --timeout seconds
(default 540) whatever the server does. Needs httpx.
"""

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--out", type=Path, required=True, help="the results folder")
parser.add_argument("--model", required=True, help="the model folder or id")
parser.add_argument("--timeout", type=float, default=540, help="seconds for the whole recording")
parser.add_argument("--port", type=int, default=30000)
parser.add_argument("name", help="the recording's folder under --out")
args, flags = parser.parse_known_args()
name, deadline, model, port = args.name, time.time() + args.timeout, args.model, args.port
out = args.out / name
out.mkdir(parents=True, exist_ok=True)
argv = [
    sys.executable,
    "-m",
    "sglang.launch_server",
    "--model-path",
    model,
    *flags,
    "--enable-metrics",
    "--enable-cache-report",
    "--decode-log-interval",
    "1",
    "--host",
    "127.0.0.1",
    "--port",
    str(port),
]
summary: dict = {"argv": argv, "env": {k: v for k, v in os.environ.items() if k.startswith("SGLANG_")}}
log = open(out / "server.log", "w")  # noqa: SIM115 (open for the server's whole life)
t0 = time.time()
proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
base = f"http://127.0.0.1:{port}"
c = httpx.Client(base_url=base, timeout=60)
ready = None
health_seen = []
while time.time() < deadline - 25:
    if proc.poll() is not None:
        summary["exited"] = proc.returncode
        break
    try:
        r = c.get("/health", timeout=5)
        if not health_seen or health_seen[-1][1] != r.status_code:
            health_seen.append((round(time.time() - t0, 1), r.status_code))
        if r.status_code == 200:
            ready = time.time() - t0
            break
    except httpx.HTTPError as e:
        if not health_seen or health_seen[-1][1] != type(e).__name__:
            health_seen.append((round(time.time() - t0, 1), type(e).__name__))
    time.sleep(1)
summary["health_transitions"] = health_seen
summary["ready_s"] = ready


def save(fname, obj):
    (out / fname).write_text(obj if isinstance(obj, str) else json.dumps(obj, indent=1))


def step(label, fn):
    try:
        return fn()
    except Exception as e:  # keep going: every endpoint is a finding
        summary.setdefault("errors", {})[label] = f"{type(e).__name__}: {e}"[:500]


def stream(label, payload):
    chunks, t = [], time.time()
    with c.stream("POST", "/generate", json=payload, timeout=120) as r:
        summary.setdefault("status", {})[label] = r.status_code
        for line in r.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                chunks.append(json.loads(line[6:]))
    save(
        f"generate_{label}.json",
        {
            "first": chunks[0] if chunks else None,
            "last": chunks[-1] if chunks else None,
            "n_chunks": len(chunks),
            "wall_s": time.time() - t,
        },
    )
    return chunks[-1] if chunks else None


if ready is not None:
    step("server_info", lambda: save("server_info.json", c.get("/server_info").json()))
    step("get_server_info", lambda: save("get_server_info.txt", f"{c.get('/get_server_info').status_code}"))
    step("models", lambda: save("models.json", c.get("/v1/models").json()))
    step("metrics_before", lambda: save("metrics_before.txt", c.get("/metrics").text))
    step(
        "tokenize",
        lambda: save("tokenize.json", c.post("/tokenize", json={"prompt": "def add(a, b):"}).json()),
    )
    step(
        "tokenize_chat",
        lambda: save(
            "tokenize_chat.json",
            (lambda r: {"status": r.status_code, "body": r.text[:2000]})(
                c.post(
                    "/tokenize",
                    json={"messages": [{"role": "user", "content": "alpha"}], "add_generation_prompt": True},
                )
            ),
        ),
    )
    step("flush0", lambda: save("flush.txt", f"{c.post('/flush_cache').status_code}"))
    code = (
        "def fibonacci(n):\n    if n < 2:\n        return n\n    return fibonacci(n - 1) + fibonacci(n - 2)\n\n"
        * 4
    )
    for _i, (label, text) in enumerate(
        (("code", code), ("code2", code), ("prose", "The history of the city begins"))
    ):
        step(
            f"gen_{label}",
            lambda label=label, text=text: stream(
                label,
                {
                    "text": text,
                    "sampling_params": {"max_new_tokens": 128, "temperature": 0, "ignore_eos": True},
                    "stream": True,
                },
            ),
        )
    step("flush1", lambda: c.post("/flush_cache"))
    # four at once: decode batches of 4 in the log
    import concurrent.futures as cf

    def one(i):
        r = httpx.post(
            base + "/generate",
            json={
                "text": f"{i} " + code,
                "sampling_params": {"max_new_tokens": 64, "temperature": 0, "ignore_eos": True},
            },
            timeout=120,
        )
        return r.json().get("meta_info")

    step("batch4", lambda: save("generate_batch4.json", list(cf.ThreadPoolExecutor(4).map(one, range(4)))))
    step(
        "chat",
        lambda: save(
            "chat.json",
            c.post(
                "/v1/chat/completions",
                json={
                    "model": "x",
                    "messages": [{"role": "user", "content": "Write a haiku"}],
                    "max_tokens": 16,
                },
            ).json(),
        ),
    )
    step("metrics_after", lambda: save("metrics_after.txt", c.get("/metrics").text))
    step("server_info_after", lambda: save("server_info_after.json", c.get("/server_info").json()))
summary["wall_s"] = time.time() - t0


def kill(sig):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


kill(signal.SIGTERM)
try:
    proc.wait(20)
except subprocess.TimeoutExpired:
    kill(signal.SIGKILL)
    proc.wait(5)
time.sleep(2)  # children (scheduler, detokenizer) of the same session release the GPU
kill(signal.SIGKILL)
summary["stop_s"] = time.time() - t0
save("summary.json", summary)
log.close()
print(
    name,
    json.dumps({k: summary.get(k) for k in ("ready_s", "exited", "health_transitions", "errors", "status")}),
)
