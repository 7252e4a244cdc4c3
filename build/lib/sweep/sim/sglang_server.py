"""The SGLang front end of the simulator: SGLang's start-up log lines, its HTTP API and its counters over the
engine-neutral core (`core.py`); its rules (what a launch resolves to, the memory plan) are in `sglang.py`.

Endpoints: /health, /health_generate, /server_info (/get_server_info), /model_info, /v1/models, /generate (text
or input_ids), /v1/chat/completions and /v1/completions (SSE too; `logprobs` for the first token), /flush_cache,
/metrics (with --enable-metrics), /tokenize (a prompt, or chat messages rendered by the model's template where the
profile's model has one).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
import time
from datetime import datetime
from http.server import ThreadingHTTPServer
from typing import Any

from sweep.releases.sglang_rules import EAGLE_FAMILY
from sweep.releases.sources import version_tuple
from sweep.sim.core import Simulator
from sweep.sim.flags import build_parser, normalize, startup_scale
from sweep.sim.model import MemoryPlan, Resolved, StartupFailure
from sweep.sim.profile import Profile
from sweep.sim.serving import Handler, finish, load_profile, serve, stop_sequences
from sweep.sim.sglang import plan_memory, resolve
from sweep.sim.text import NO_TEMPLATE, asked_logprobs, chat_prompt, detokenize, tokenize, usage


def log(message: str, scheduler: bool = False) -> None:
    stamp = datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    print(f"[{stamp}{' TP0' if scheduler else ''}] {message}", file=sys.stderr, flush=True)


class SGLangSimulator(Simulator):
    """The shared simulator with SGLang's /server_info, its Prometheus counters and its log lines."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        # SGLang reads its benchmarking switch once, as its modules load (`srt/environ.py`: -1 is off).
        length = float(os.environ.get("SGLANG_SIMULATE_ACC_LEN", "-1"))
        if length > 0 and self.resolved.speculative:
            self.synthetic_length = length

    def notice(self, line: str) -> None:
        log(line, scheduler=True)

    def _meta(
        self, prompt: int, completion: int, cached: int, drafts: tuple[int, int, int], times: dict[str, float]
    ) -> dict[str, Any]:
        """As SGLang's tokenizer manager writes it: proposed drafts are verify steps x (the launch's draft tokens
        - 1), whatever depth an adaptive controller ran (`tokenizer_manager.py`, 0.5.17-0.5.23)."""
        verify, correct, _ = drafts
        proposed = verify * max(1, self.resolved.draft_tokens - 1)
        return super()._meta(prompt, completion, cached, (verify, correct, proposed), times)

    def server_info(self) -> dict[str, Any]:
        r, p = self.resolved, self.plan
        args = {k: v for k, v in vars(self.args).items() if not k.startswith("sim_")}
        state: dict[str, Any] = {
            "effective_max_running_requests_per_dp": p.effective_max_running,
            "memory_usage": {
                "weight": self.profile.model.weight_gb,
                "kv_cache": round(p.pool_gb, 2),
                "graph": round(p.decode_graph_gb + p.prefill_graph_gb, 2),
                "token_capacity": p.pool_tokens,
            },
        }
        if length := self.accept_length():
            # internal_state._average_accept_length: accepted tokens (bonus included) per forward
            state["avg_spec_accept_length"] = length
        return args | {
            "speculative_algorithm": r.algorithm,
            "speculative_num_steps": r.steps or None,
            "speculative_eagle_topk": r.topk or None,
            "speculative_num_draft_tokens": r.draft_tokens or None,
            "max_running_requests": r.max_running_requests or None,
            "chunked_prefill_size": r.chunked_prefill_size,
            "mem_fraction_static": r.mem_fraction_static,
            "cuda_graph_config": {
                "decode": {"max_bs": r.max_bs_decode},
                "prefill": {"max_bs": r.max_bs_prefill},
            },
            "max_total_num_tokens": p.pool_tokens,
            "max_req_input_len": p.max_req_input_len,
            "version": self.profile.sglang_version,
            "status": "Up" if self.ready else "Starting",
            "internal_states": [state],
        }

    def metrics(self) -> str:
        labels = f'model_name="{self.args.served_model_name or self.args.model_path}",engine_type="unified"'
        with self.lock:
            lines = [
                f"sglang:{name}_total{{{labels}}} {float(value)}" for name, value in self.counters.items()
            ]
        lines.append(f"sglang:max_total_num_tokens{{{labels}}} {float(self.plan.pool_tokens)}")
        if self.resolved.speculative:  # gauges of the last logged decode step (--decode-log-interval 1)
            length = float(self.last_verify_tokens)
            lines.append(f"sglang:spec_accept_length{{{labels}}} {length}")
            budget = max(1, self.resolved.draft_tokens - 1)
            lines.append(f"sglang:spec_accept_rate{{{labels}}} {max(0.0, length - 1) / budget}")
        return "\n".join(lines) + "\n"


class SGLangHandler(Handler):
    """SGLang's routes over the shared handler's plumbing (replies, SSE, faults)."""

    sim: SGLangSimulator

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        sim = self.sim
        if self._simulator_route(path):
            return
        if path in ("/health", "/health_generate"):
            self._send(200 if sim.ready else 503, {} if sim.ready else {"error": "Server is starting"})
        elif path in ("/server_info", "/get_server_info"):
            self._send(200, sim.server_info())
        elif path in ("/model_info", "/get_model_info"):
            self._send(
                200,
                {
                    "model_path": sim.args.model_path,
                    "is_generation": True,
                    "architectures": [sim.profile.model.architecture],
                },
            )
        elif path == "/v1/models":
            name = sim.args.served_model_name or sim.args.model_path
            self._send(
                200,
                {
                    "object": "list",
                    "data": [{"id": name, "object": "model", "max_model_len": sim.resolved.context_length}],
                },
            )
        elif path == "/metrics" and sim.args.enable_metrics:
            self._send(200, sim.metrics(), "text/plain; version=0.0.4")
        elif path == "/flush_cache":
            self._flush()
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        body = self._body()
        if body is None:
            return
        if path == "/flush_cache":
            self._flush()
        elif path in ("/tokenize", "/v1/tokenize"):
            if "messages" in body and not self.sim.profile.model.chat_template:
                self._send(
                    400, {"object": "error", "message": NO_TEMPLATE, "type": "BadRequestError", "code": 400}
                )
                return
            text = chat_prompt(body["messages"]) if "messages" in body else str(body.get("prompt", ""))
            tokens = tokenize(text)
            self._send(
                200,
                {"tokens": tokens, "count": len(tokens), "max_model_len": self.sim.resolved.context_length},
            )
        elif path == "/generate":
            self._generate(body)
        elif path == "/v1/chat/completions":
            self._chat(body)
        elif path == "/v1/completions":
            self._completions(body)
        else:
            self._send(404, {"detail": "Not Found"})

    def _flush(self) -> None:
        if self.sim.flush():
            self._send(
                200,
                "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting requests, the operation will not be performed.)\n",
                "text/plain",
            )
        else:
            self._send(400, "Cache not flushed: there are running or waiting requests.\n", "text/plain")

    def _generate(self, body: dict[str, Any]) -> None:
        params = body.get("sampling_params") or {}
        text = detokenize(body["input_ids"]) if "input_ids" in body else str(body.get("text", ""))
        max_new = int(params.get("max_new_tokens", 128))
        if error := self.sim.length_error(len(tokenize(text)), max_new):
            self._error(400, error)
            return
        request = self.faults.next_request()
        if code := self.faults.active.get("http-error"):
            self._error(code, "simulated fault")
            return
        out, meta, pieces = "", dict[str, Any](), 0
        if body.get("stream"):
            self._sse_start()
        # Token ids come rendered by the chat template (a chat prompt); text is sent as it is, to be continued.
        stop = stop_sequences(params.get("stop"))
        for piece, final in self.sim.generate(text, max_new, instruction="input_ids" in body, stop=stop):
            out += piece
            meta = final or meta
            if body.get("stream"):
                self._sse({"text": out, "meta_info": meta or {"finish_reason": None}})
                pieces += 1
                if fault := self.faults.mid_stream(request, pieces):
                    self._fault_in_stream(fault)
                    return
        if body.get("stream"):
            self._sse(b"[DONE]")
            self.faults.after_request(request)
        else:
            self._send(200, {"text": out, "meta_info": meta})

    def _admitted(self, prompt: str, max_new: int, shape: dict[str, Any]) -> int | None:
        """The request's number once the server takes it; None where it answered an error instead: a prompt and
        answer beyond the context (400, with the endpoint's own error fields `shape`), or the simulated fault."""
        if error := self.sim.length_error(len(tokenize(prompt)), max_new):
            body = {"object": "error", "message": error, "type": "BadRequestError", **shape, "code": 400}
            self._send(400, body)
            return None
        request = self.faults.next_request()
        if code := self.faults.active.get("http-error"):
            self._send(code, {"object": "error", "message": "simulated fault", "type": "Error", "code": code})
            return None
        return request

    def _completions(self, body: dict[str, Any]) -> None:
        """/v1/completions (OpenAI's text completions, as SGLang serves them beside /generate): the prompt as text
        to continue; `logprobs` (a count) gives the first token's choices in the legacy shape."""
        prompt = str(body.get("prompt", ""))
        max_new = int(body.get("max_tokens") or 16)
        if (request := self._admitted(prompt, max_new, {})) is None:
            return
        name = self.sim.args.served_model_name or self.sim.args.model_path
        base = {"id": f"cmpl-{random.getrandbits(48):x}", "object": "text_completion", "model": name}
        stream = bool(body.get("stream"))

        def chunk(piece: str) -> dict[str, Any]:
            return base | {"choices": [{"index": 0, "text": piece, "logprobs": None, "finish_reason": None}]}

        done = self._generated(
            prompt,
            max_new,
            request,
            chunk if stream else None,
            instruction=False,
            stop=stop_sequences(body.get("stop")),
        )
        if done is None:
            return
        text, meta = done
        counts = usage(meta)
        if stream:
            last = {"index": 0, "text": "", "logprobs": None, "finish_reason": finish(meta)}
            self._sse(base | {"choices": [last], "usage": counts})
            self._sse(b"[DONE]")
            self.faults.after_request(request)
            return
        logprobs = asked_logprobs(body, text, chat=False)
        choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish(meta)}
        self._send(200, base | {"choices": [choice], "usage": counts})

    def _chat(self, body: dict[str, Any]) -> None:
        if not self.sim.profile.model.chat_template:
            self._send(
                400, {"object": "error", "message": NO_TEMPLATE, "type": "BadRequestError", "code": 400}
            )
            return
        prompt = chat_prompt(body.get("messages") or [])
        max_new = int(body.get("max_tokens") or body.get("max_completion_tokens") or 128)
        if (request := self._admitted(prompt, max_new, {"param": None})) is None:
            return
        name = self.sim.args.served_model_name or self.sim.args.model_path
        base = {
            "id": f"chatcmpl-{random.getrandbits(48):x}",
            "object": "chat.completion.chunk",
            "model": name,
        }
        stream = bool(body.get("stream"))
        done = self._generated(
            prompt,
            max_new,
            request,
            (
                lambda piece: (
                    base | {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
                )
            )
            if stream
            else None,
            stop=stop_sequences(body.get("stop")),
        )
        if done is None:
            return
        text, meta = done
        cached = {"cached_tokens": meta["cached_tokens"]} if self.sim.args.enable_cache_report else None
        counts = usage(meta) | {"prompt_tokens_details": cached}
        extra: dict[str, Any] = {}
        if body.get("return_spec_tokens_details") and "spec_verify_ct" in meta:
            extra["sglext"] = {
                "spec_tokens_details": {k: v for k, v in meta.items() if k.startswith("spec_")}
            }
        if stream:
            self._sse(
                base
                | {"choices": [{"index": 0, "delta": {}, "finish_reason": finish(meta)}], "usage": counts}
                | extra
            )
            self._sse(b"[DONE]")
            self.faults.after_request(request)
            return
        message = {"role": "assistant", "content": text}
        choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish(meta)}
        # The first token's, as a tie probe asks (one token, `top_logprobs` of them); absent where not asked.
        if (logprobs := asked_logprobs(body, text, chat=True)) is not None:
            choice["logprobs"] = logprobs
        if body.get("return_meta_info"):
            choice["meta_info"] = meta
        self._send(200, base | {"object": "chat.completion", "choices": [choice], "usage": counts} | extra)


def in_process(profile: Profile, flags: list[str]) -> SGLangSimulator:
    """A simulated server without HTTP, logs or waiting (time scale 0): the same model, noise and text, for
    benchmarks and tests that only want the numbers. `flags` are SGLang's and the simulator's own."""
    args = normalize(
        build_parser(profile.sglang_version).parse_args(
            ["--model-path", "m", "--sim-time-scale", "0", "--enable-metrics", *flags]
        )
    )
    resolved = resolve(args, profile)
    return SGLangSimulator(args, profile, resolved, plan_memory(resolved, args, profile))


def start_up(args: argparse.Namespace, profile: Profile) -> SGLangSimulator:
    """Everything SGLang logs before it listens; raises StartupFailure where SGLang would die."""
    log(
        f"server_args=ServerArgs(model_path='{args.model_path}', speculative_algorithm={args.speculative_algorithm!r}, port={args.port})"
    )
    resolved = resolve(args, profile)
    for notice in resolved.notices:
        log(notice)
    if resolved.adaptive_slots is not None:
        first = sorted(set(resolved.adaptive_slots[min(resolved.adaptive_slots)]["candidate_steps"]))
        steps = resolved.steps if resolved.steps in first else first[len(first) // 2]
        log(f"AdaptiveSpeculativeParams initialized: steps={steps}, candidate_steps={first}", scheduler=True)
    speed, m = profile.speed, profile.model
    log(f"Load weight begin. avail mem={profile.gpu.memory_gb - 0.5:.2f} GB", scheduler=True)
    time.sleep(speed.startup_s * startup_scale(args))
    log(
        f"Load weight end. elapsed={speed.startup_s:.2f} s, type={m.architecture}, avail mem="
        f"{profile.gpu.memory_gb - 0.5 - m.weight_gb:.2f} GB, mem usage={m.weight_gb:.2f} GB.",
        scheduler=True,
    )
    drafting = resolved.algorithm in EAGLE_FAMILY
    if drafting:  # the draft model loads after the target, and logs its own line (0.5.17 on an H200)
        left = profile.gpu.memory_gb - 0.5 - m.weight_gb
        log(f"Load weight begin. avail mem={left:.2f} GB", scheduler=True)
        log(
            f"Load weight end. elapsed=0.01 s, type={m.architecture}MTP, avail mem="
            f"{left - m.vocab_draft_gb:.2f} GB, mem usage={m.vocab_draft_gb:.2f} GB.",
            scheduler=True,
        )
    plan = plan_memory(resolved, args, profile)
    dtype = "torch.float8_e4m3fn" if resolved.kv_bytes == 1 else "torch.bfloat16"
    half = plan.pool_gb / 2
    if m.hybrid:  # a dense model keeps no state cache
        log(
            f"Mamba Cache is allocated. max_mamba_cache_size: {plan.mamba_slots}, conv_state size: 0.05GB, ssm_state size: 1.20GB",
            scheduler=True,
        )
    log(
        f"KV Cache is allocated. dtype: {dtype}, #tokens: {plan.pool_tokens}, K size: {half:.2f} GB, V size: {half:.2f} GB",
        scheduler=True,
    )
    if drafting:  # a pool per model, each followed by what it left free
        draft_half = plan.pool_tokens * plan.cell_bytes / max(1, m.kv_layers) / 1024**3 / 2
        log(f"Memory pool end. avail mem={plan.free_after_pool_gb + 2 * draft_half:.2f} GB", scheduler=True)
        log(
            f"KV Cache is allocated. dtype: {dtype}, #tokens: {plan.pool_tokens}, K size: {draft_half:.2f} GB, V size: {draft_half:.2f} GB",
            scheduler=True,
        )
    log(f"Memory pool end. avail mem={plan.free_after_pool_gb:.2f} GB", scheduler=True)
    for line in plan.log:
        log(line, scheduler=True)
    _capture_graphs(resolved, plan, profile, args)
    log(
        f"max_total_num_tokens={plan.pool_tokens}, chunked_prefill_size={resolved.chunked_prefill_size}, "
        f"max_prefill_tokens={args.max_prefill_tokens}, max_running_requests={plan.effective_max_running}, "
        f"context_len={resolved.context_length}, available_gpu_mem={plan.free_after_graphs_gb:.2f} GB",
        scheduler=True,
    )
    return SGLangSimulator(args, profile, resolved, plan)


def _capture_graphs(r: Resolved, plan: MemoryPlan, profile: Profile, args: argparse.Namespace) -> None:
    free = plan.free_after_pool_gb
    role = "target verify" if r.speculative else "target decode"
    # Where the batch sizes go (cuda_graph_setup.py): 0.5.17 and 0.5.20 list them on the begin line, 0.5.23 on
    # the end line; a prefill graph lists its token counts on the begin line.
    sizes_at_end = version_tuple(profile.sglang_version) >= (0, 5, 23)
    decode = f"num_tokens_per_req={max(1, r.draft_tokens)}"
    steps = [
        (
            role,
            decode if sizes_at_end else f"{decode}, bs={plan.decode_buckets}",
            plan.decode_graph_gb,
            plan.decode_buckets,
            sizes_at_end,
        )
    ]
    if plan.prefill_graph_gb:
        prefill = [r.max_bs_prefill]
        steps.append(("target prefill", f"num_tokens={prefill}", plan.prefill_graph_gb, prefill, False))
    for name, what, gb, sizes, listed_at_end in steps:
        if not sizes:
            continue
        log(f"Capture {name} CUDA graph begin. backend=full, {what}, avail mem={free:.2f} GB", scheduler=True)
        time.sleep(profile.speed.capture_s_per_bucket * len(sizes) * startup_scale(args))
        if gb > free - 0.05:
            gpu = profile.gpu.memory_gb
            raise StartupFailure(
                f"Capture cuda graph failed: CUDA out of memory. Tried to allocate {gb:.2f} GiB. GPU 0 has a total "
                f"capacity of {gpu:.2f} GiB of which {max(0.0, free):.2f} GiB is free.\nPossible solutions:\n"
                "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
                "2. set --cuda-graph-max-bs-decode to a smaller value (e.g., 16)\n"
                "3. disable decode CUDA graph by --cuda-graph-backend-decode=disabled.\n"
                "torch.AcceleratorError: CUDA error: out of memory"
            )
        free -= gb
        log(
            f"Capture {name} CUDA graph end. {f'bs={sizes}, ' if listed_at_end else ''}elapsed={0.05 * len(sizes):.2f} s, mem usage={gb:.2f} GB, avail mem={free:.2f} GB.",
            scheduler=True,
        )


def template_lines(profile: Profile) -> list[str]:
    """What SGLang's template manager logs about the model's chat template (0.5.23, template_manager.py)."""
    if profile.model.chat_template:
        return ["Using default HuggingFace chat template with detected content format: string"]
    return [
        "No HuggingFace chat template found",
        "No chat template found, defaulting to 'string' content format",
    ]


def main(argv: list[str]) -> int:
    """SGLang's command line (`front.py` hands vLLM's to `vllm.py`)."""
    profile = load_profile(argv)
    args = normalize(build_parser(profile.sglang_version).parse_args(argv))

    def come_up(sim: Simulator, httpd: ThreadingHTTPServer, stop: threading.Event) -> bool:
        # SGLang's port answers during warm-up (health 503), then it says it is ready.
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        for line in template_lines(profile):
            log(line)
        log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
        if not args.skip_server_warmup:
            stop.wait(2.0 * startup_scale(args))  # the warm-up request
        sim.ready = "never-healthy" not in SGLangHandler.faults
        log("The server is fired up and ready to roll!")
        return True

    return serve(
        args,
        SGLangHandler,
        lambda: start_up(args, profile),
        lambda exc: (
            f"ERROR: [Errno {exc.errno}] error while attempting to bind on address ({args.host!r}, "
            f"{args.port}): {exc.strerror}"
        ),
        come_up,
    )
