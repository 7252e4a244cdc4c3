"""The simulator's vLLM front end: `vllm serve MODEL [flags]` as vLLM 0.34 parses it, its start-up log lines, its
OpenAI API (`/v1/completions` and `/v1/chat/completions` streaming with usage, `/tokenize` with a prompt or chat
messages, `/v1/models`, `/version`, `/health`), `/metrics`
with the speculative counters, and the dev-mode `/reset_prefix_cache`, over the same performance model as the
SGLang front end (`sweep/sim/model.py`: acceptance, step times, memory from the profile; SGLang's own rules are
in `sweep/sim/sglang.py`).

Facts from the release's source: `--speculative-config` is JSON (`-` in keys becomes `_`);
methods ngram / eagle / eagle3 / mtp / draft_model (legacy `*_mtp` names map to mtp); n-gram lookup bounds both 5
when unset, one copies the other, min <= max; `num_speculative_tokens_per_batch_size` is a list of [low, high,
k]; acceptance length is `1 + accepted / drafts`; KV token counts are logged with thousands separators;
`/health` answers only once the engine is up (the API server starts after it). What the reference does not
give (the exact wording of some errors, the default `max_num_seqs`) is modelled and named so here. The schedule's
rules (k >= 0, ranges from batch size 1, a k above the maximum cut to it) are read from vLLM's own
`v1/spec_decode/dynamic/utils.py`, where the reference gives only the form.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import sys
import threading
import time
from datetime import datetime
from http.server import ThreadingHTTPServer
from typing import Any

from sweep.releases.sglang_rules import EAGLE_FAMILY
from sweep.releases.vllm import load_table, release_parser
from sweep.sim.adaptive import AdaptiveSteps
from sweep.sim.core import Simulator
from sweep.sim.flags import add_sim_flags, startup_scale
from sweep.sim.model import GIB, MemoryPlan, Resolved, StartupFailure
from sweep.sim.profile import Profile
from sweep.sim.serving import Handler, finish, load_profile, serve, stop_sequences
from sweep.sim.text import NO_TEMPLATE, asked_logprobs, chat_prompt, tokenize, usage
from sweep.sim.verify_budget import VerifyBudget

VERSION = "0.34.0"
METHODS = {  # vLLM's method -> the performance model's algorithm
    "ngram": "NGRAM",
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "draft_model": "STANDALONE",
}
ALL_METHODS = (*METHODS, "ngram_gpu", "suffix", "custom_class", "extract_hidden_states", "dflash", "dspark")
# The speculative config's fields, as the release's SpeculativeConfig declares them.
SPEC_FIELDS = frozenset(load_table(VERSION).speculative)
DEFAULT_MAX_NUM_SEQS = 256  # modelled: vLLM derives it from the usage context and the device
DEFAULT_LOOKUP = 5
# What `parse` adds to vLLM's namespace for the shared simulator (not vLLM's arguments).
SHARED_ATTRIBUTES = ("model_path", "disable_radix_cache", "enable_metrics", "enable_cache_report")
BLOCK_SIZE = 16
# Defaults the release resolves after parsing (None in its arguments), as the simulator models them.
MODELLED = {"gpu_memory_utilization": 0.92, "block_size": BLOCK_SIZE, "enable_prefix_caching": True}


def vlog(message: str, source: str = "api_server.py") -> None:
    stamp = datetime.now().strftime("%m-%d %H:%M:%S")
    print(f"INFO {stamp} [{source}] {message}", file=sys.stderr, flush=True)


class HelpAction(argparse.Action):
    """`--help`, `--help=all` or `--help=GROUP`, as vLLM's serve takes it: print every flag and exit."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        parser.print_help()
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """`vllm serve`'s own parser for the release (every flag, alias, type and choice of its committed table,
    `sweep/releases/tables/`), plus `--help` as vLLM spells it and the simulator's flags. Where the release leaves
    a default to be resolved later (None in its arguments), the simulator's model resolves it: `MODELLED`."""
    parser = release_parser(VERSION, add_help=False, description=f"vLLM {VERSION} (specsweep simulator)")
    parser.add_argument(
        "--help", "-h", action=HelpAction, nargs="?", help="Show the flags (`--help=all`: every group)."
    )
    parser.set_defaults(**MODELLED)
    add_sim_flags(parser)
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """`serve MODEL [flags]`, with the attributes the shared simulator reads."""
    args = build_parser().parse_args(argv[1:]) if argv[:1] == ["serve"] else None
    if args is None or args.model_tag is None:  # the release's parser takes the model as optional
        raise SystemExit("usage: vllm serve MODEL [flags]")
    args.model_path = args.model_tag
    if isinstance(args.served_model_name, list):  # the release takes several names; the first is served
        args.served_model_name = args.served_model_name[0]
    args.disable_radix_cache = not args.enable_prefix_caching
    args.enable_metrics = True  # vLLM always serves /metrics
    args.enable_cache_report = args.enable_prompt_tokens_details
    args.host = args.host or "0.0.0.0"
    return args


def synthetic_length(fields: dict[str, Any], k: int) -> float | None:
    """The mean acceptance length `rejection_sample_method: synthetic` forces (None: acceptance is real), checked
    as `SpeculativeConfig._resolve_synthetic_acceptance_rates` checks it. Per-position rates are simulated by the
    mean length they give (1 + their sum): the simulator draws every forced length alike."""
    if fields.get("rejection_sample_method", "standard") != "synthetic":
        return None
    rates, length = fields.get("synthetic_acceptance_rates"), fields.get("synthetic_acceptance_length")
    invalid = "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n  Value error, "
    if (rates is None) == (length is None):
        raise StartupFailure(
            invalid
            + "rejection_sample_method='synthetic' requires exactly one of synthetic_acceptance_rates or "
            "synthetic_acceptance_length."
        )
    if rates is not None:
        if not isinstance(rates, list) or len(rates) != k:
            raise StartupFailure(invalid + f"synthetic_acceptance_rates must have length {k}, got {rates}.")
        return 1.0 + float(sum(rates))
    if not isinstance(length, int | float) or not 1.0 <= float(length) <= k + 1:
        raise StartupFailure(invalid + f"synthetic_acceptance_length must be in [1, {k + 1}], got {length}.")
    return float(length)


def speculative_fields(config: Any) -> dict[str, Any]:
    """The JSON as SpeculativeConfig takes it (`-` in keys becomes `_`), or the failure vLLM reports."""
    if not isinstance(config, dict):
        raise StartupFailure(
            "pydantic_core._pydantic_core.ValidationError: speculative_config must be a dict"
        )
    fields = {str(k).replace("-", "_"): v for k, v in config.items()}
    unknown = sorted(set(fields) - SPEC_FIELDS)
    if unknown:
        raise StartupFailure(
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
            f"{unknown[0]}\n  Extra inputs are not permitted [type=extra_forbidden]"
        )
    return fields


def resolve(args: argparse.Namespace, profile: Profile) -> Resolved:
    """vLLM's defaults and SpeculativeConfig rules, as the model reads them."""
    model = profile.model
    context = args.max_model_len or model.context_length
    if context > model.context_length:
        raise StartupFailure(
            f"ValueError: User-specified max_model_len ({context}) is greater than the derived max_model_len "
            f"(max_position_embeddings={model.context_length} in model's config.json)."
        )
    seqs = args.max_num_seqs or DEFAULT_MAX_NUM_SEQS
    cap = args.max_cudagraph_capture_size or min(seqs * 2, 512)
    algorithm, k, slots, verify_budget = None, 0, None, False
    if args.speculative_config is not None:
        fields = speculative_fields(args.speculative_config)
        method = str(fields.get("method") or ("ngram" if fields.get("model") == "ngram" else "draft_model"))
        method = "mtp" if method.endswith("_mtp") else method
        if method not in ALL_METHODS:
            raise StartupFailure(
                "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\nmethod\n"
                f"  Input should be {', '.join(repr(m) for m in ALL_METHODS)} [input_value={method!r}]"
            )
        if method not in METHODS:
            raise StartupFailure(f"NotImplementedError: the simulator does not model method {method!r}")
        if method in ("eagle", "eagle3", "draft_model") and not fields.get("model"):
            raise StartupFailure(f"ValueError: speculative method {method!r} needs a draft model (`model`)")
        k = _num_tokens(fields, method, model.mtp_layers)
        synthetic_length(fields, k)  # a bad forced length fails the start, as SpeculativeConfig's check does
        if method == "ngram":
            _lookup_bounds(fields)
        algorithm = METHODS[method]
        if fields.get("num_speculative_tokens_per_batch_size") is not None:
            slots = _batch_schedule(fields["num_speculative_tokens_per_batch_size"], k)
        verify_budget = bool(fields.get("enable_adaptive_verification"))
        if verify_budget and args.enforce_eager:  # VllmConfig._validate_adaptive_verification
            raise StartupFailure(
                "ValueError: Adaptive verification requires full CUDA graphs. Use cudagraph mode FULL, "
                "FULL_DECODE_ONLY, or FULL_AND_PIECEWISE, or disable adaptive verification."
            )
    return Resolved(
        algorithm=algorithm,
        steps=k,
        topk=1 if algorithm else 0,
        draft_tokens=k + 1 if algorithm else 0,
        max_running_requests=seqs,
        chunked_prefill_size=args.max_num_batched_tokens or 8192,
        max_bs_decode=cap,
        max_bs_prefill=0,
        mem_fraction_static=args.gpu_memory_utilization,
        kv_bytes=1 if str(args.kv_cache_dtype).startswith("fp8") else 2,
        context_length=context,
        adaptive_slots=slots,
        verify_budget=verify_budget,
    )


def _num_tokens(fields: dict[str, Any], method: str, mtp_layers: int) -> int:
    value = fields.get("num_speculative_tokens")
    if value is None and method == "mtp":
        return mtp_layers  # taken from the draft config (the model's own MTP layers)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise StartupFailure(
            "pydantic_core._pydantic_core.ValidationError: 1 validation error for SpeculativeConfig\n"
            f"  Value error, num_speculative_tokens must be > 0, got {value!r}"
        )
    return value


def _lookup_bounds(fields: dict[str, Any]) -> None:
    low, high = fields.get("prompt_lookup_min"), fields.get("prompt_lookup_max")
    low, high = low or high or DEFAULT_LOOKUP, high or low or DEFAULT_LOOKUP
    if low < 1 or high < 1 or low > high:
        raise StartupFailure(
            f"ValueError: prompt_lookup_min={low} must be >= 1 and <= prompt_lookup_max={high}"
        )


def _batch_schedule(ranges: Any, k: int) -> dict[int, dict[str, Any]]:
    """[[low, high, k], ...] as the model's per-batch-size slots (one depth per slot: a fixed schedule), checked
    as vLLM's `validate_and_normalize_dynamic_sd_schedule` checks it: positive, sorted, non-overlapping ranges from
    batch size 1, each k >= 0 (0: no drafts for those batches), and a k above num_speculative_tokens cut to it."""
    try:
        parsed = sorted((int(low), int(high), int(depth)) for low, high, depth in ranges)
    except (TypeError, ValueError):
        raise StartupFailure(
            "ValueError: Each speculative_token_schedule entry must be a 3-item sequence "
            f"(bs_lo, bs_hi, num_speculative_tokens), got {ranges!r}"
        ) from None
    if not parsed:
        raise StartupFailure("ValueError: speculative_token_schedule must not be empty.")
    for low, high, depth in parsed:
        if low <= 0 or high <= 0 or low > high:
            raise StartupFailure(
                f"ValueError: Batch-size range ({low}, {high}) must be positive, start <= end."
            )
        if depth < 0:
            raise StartupFailure("ValueError: speculative_token_schedule K values must be >= 0.")
    if any(low <= previous[1] for previous, (low, _, _) in itertools.pairwise(parsed)):
        raise StartupFailure("ValueError: Batch-size ranges must be non-overlapping and sorted.")
    if parsed[0][0] != 1:
        raise StartupFailure(
            "ValueError: The first batch-size range must start at 1 so every runtime batch size has a defined "
            "schedule."
        )
    return {low: {"candidate_steps": [min(depth, k)]} for low, _, depth in parsed}


def plan_memory(r: Resolved, args: argparse.Namespace, profile: Profile) -> MemoryPlan:
    """vLLM's sizing: the KV cache gets `gpu_memory_utilization` of the GPU less weights and activations, in
    blocks; the draft's layers share the pool (EAGLE/MTP: one layer each per token); graphs are captured after."""
    m, gpu, graphs = profile.model, profile.gpu, profile.graphs
    draft_layers = m.mtp_layers if r.algorithm in EAGLE_FAMILY else 0
    cell = (m.kv_layers + draft_layers) * 2 * m.kv_heads_x_head_dim * r.kv_bytes
    draft_gb = m.vocab_draft_gb if r.algorithm in EAGLE_FAMILY else 0.0
    available_gb = r.mem_fraction_static * gpu.memory_gb - m.weight_gb - draft_gb - gpu.other_static_gb
    if available_gb <= 0:
        raise StartupFailure(
            "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
            "when initializing the engine."
        )
    tokens = int(available_gb * GIB / cell) // args.block_size * args.block_size
    if tokens < r.context_length:
        needed = r.context_length * cell / GIB
        raise StartupFailure(
            f"ValueError: To serve at least one request with the models's max seq len ({r.context_length}), "
            f"({needed:.2f} GiB KV cache is needed, which is larger than the available KV cache memory "
            f"({available_gb:.2f} GiB). Based on the available memory, the estimated maximum model length is "
            f"{tokens}. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing "
            "the engine."
        )
    sizes = [] if args.enforce_eager else (args.cudagraph_capture_sizes or _capture_sizes(r.max_bs_decode))
    graph_gb = len(sizes) * graphs.decode_gb_per_bucket * math.sqrt(max(1, r.draft_tokens))
    pool_gb = tokens * cell / GIB
    free = gpu.memory_gb - gpu.cuda_context_gb - m.weight_gb - draft_gb - gpu.other_static_gb - pool_gb
    return MemoryPlan(
        cell_bytes=cell,
        cell_bytes_assumed=cell,
        pool_tokens=tokens,
        draft_pool_tokens=tokens if draft_layers else None,
        pool_gb=pool_gb,
        free_after_pool_gb=free,
        mamba_slots=r.max_running_requests,
        slots_per_request=1,
        effective_max_running=r.max_running_requests,
        decode_buckets=sorted(sizes),
        decode_graph_gb=graph_gb,
        prefill_graph_gb=0.0,
        free_after_graphs_gb=free - graph_gb,
        max_req_input_len=r.context_length,
    )


def _capture_sizes(cap: int) -> list[int]:
    return [s for s in (1, 2, 4, *range(8, cap + 1, 8)) if s <= cap]


class VLLMSimulator(Simulator):
    """The shared simulator with vLLM's counters: drafts, draft tokens, accepted tokens (and per position)."""

    def __init__(
        self, args: argparse.Namespace, profile: Profile, resolved: Resolved, plan: MemoryPlan
    ) -> None:
        super().__init__(args, profile, resolved, plan)
        if args.speculative_config is not None and resolved.speculative:  # the benchmarking switch
            self.synthetic_length = synthetic_length(
                speculative_fields(args.speculative_config), resolved.steps
            )
        if isinstance(self.adaptive, AdaptiveSteps):  # vLLM picks k by the batch size itself, with no padding
            self.adaptive.graph_batch_sizes = []
        if resolved.verify_budget:
            self.adaptive = VerifyBudget(resolved.steps)
        self.spec = {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0}
        self.prefix = {"queries": 0, "hits": 0}

    def notice(self, line: str) -> None:
        vlog(line, "adaptive.py")

    def record(self, meta: dict[str, Any]) -> None:
        with self.lock:
            self.prefix["queries"] += meta["prompt_tokens"]
            self.prefix["hits"] += meta["cached_tokens"]
            if meta.get("spec_verify_ct"):
                self.spec["num_drafts"] += meta["spec_verify_ct"]
                self.spec["num_draft_tokens"] += meta["spec_num_proposed_drafts"]
                self.spec["num_accepted_tokens"] += meta["spec_num_correct_drafts"]

    def metrics(self) -> str:
        name = self.args.served_model_name or self.args.model_path
        labels = f'model_name="{name}",engine="0"'
        with self.lock:
            lines = [
                f"vllm:prompt_tokens_total{{{labels}}} {float(self.counters['prompt_tokens'])}",
                f"vllm:generation_tokens_total{{{labels}}} {float(self.counters['generation_tokens'])}",
                f"vllm:prefix_cache_queries_total{{{labels}}} {float(self.prefix['queries'])}",
                f"vllm:prefix_cache_hits_total{{{labels}}} {float(self.prefix['hits'])}",
                f"vllm:num_requests_running{{{labels}}} {float(self.running)}",
            ]
            if self.resolved.speculative:
                lines += [f"vllm:spec_decode_{k}_total{{{labels}}} {float(v)}" for k, v in self.spec.items()]
                lines += [
                    f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{labels},position="{i}"}} {float(v)}'
                    for i, v in enumerate(self.accepted_at)
                ]
        return "\n".join(lines) + "\n"


class VLLMHandler(Handler):
    """vLLM's routes over the shared handler's plumbing (replies, SSE, faults)."""

    sim: VLLMSimulator

    def do_GET(self) -> None:
        path, sim = self.path.split("?")[0], self.sim
        name = sim.args.served_model_name or sim.args.model_path
        if self._simulator_route(path):
            return
        if path == "/health":
            self._send(200, "", "text/plain")
        elif path == "/version":
            self._send(200, {"version": VERSION})
        elif path == "/v1/models":
            model = {"id": name, "object": "model", "max_model_len": sim.resolved.context_length}
            self._send(200, {"object": "list", "data": [model]})
        elif path == "/metrics":
            self._send(200, sim.metrics(), "text/plain; version=0.0.4")
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        body = self._body()
        if body is None:
            return
        if path == "/reset_prefix_cache" and os.environ.get("VLLM_SERVER_DEV_MODE") == "1":
            if self.sim.flush():
                self._send(200, "", "text/plain")
            else:
                self._error(500, "requests are running")
        elif path == "/tokenize":
            if "messages" in body and not self.sim.profile.model.chat_template:
                self._error(400, NO_TEMPLATE)
                return
            text = chat_prompt(body["messages"]) if "messages" in body else str(body.get("prompt", ""))
            tokens = tokenize(text)
            reply = {"count": len(tokens), "max_model_len": self.sim.resolved.context_length}
            self._send(200, reply | {"tokens": tokens, "token_strs": None})
        elif path == "/v1/completions":
            self._completions(body, str(body.get("prompt", "")))
        elif path == "/v1/chat/completions":
            if not self.sim.profile.model.chat_template:
                self._error(400, NO_TEMPLATE)
                return
            self._completions(body, chat_prompt(body.get("messages") or []), chat=True)
        else:
            self._send(404, {"detail": "Not Found"})

    def _error(self, code: int, message: str) -> None:
        kind = "BadRequestError" if code == 400 else "InternalServerError"
        self._send(code, {"object": "error", "message": message, "type": kind, "param": None, "code": code})

    def _completions(self, body: dict[str, Any], prompt: str, chat: bool = False) -> None:
        """/v1/completions, or /v1/chat/completions (`chat`: the prompt rendered, text in `delta.content`)."""
        max_new = int(body.get("max_tokens") or 16)
        n, limit = len(tokenize(prompt)), self.sim.resolved.context_length
        if n + max_new > limit:
            self._error(
                400,
                f"This model's maximum context length is {limit} tokens. However, your prompt contains {n} "
                f"input tokens, and you requested {max_new} output tokens. Please reduce the length of the "
                "input prompt or the number of requested output tokens.",
            )
            return
        request = self.faults.next_request()
        if code := self.faults.active.get("http-error"):
            self._error(code, "simulated fault")
            return
        name = self.sim.args.served_model_name or self.sim.args.model_path
        base = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{random.getrandbits(64):x}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": name,
        }
        stream = bool(body.get("stream"))

        def chunk(piece: str) -> dict[str, Any]:
            text: dict[str, Any] = {"delta": {"content": piece}} if chat else {"text": piece}
            choice = {"index": 0, **text, "logprobs": None, "finish_reason": None}
            return base | {"choices": [choice], "usage": None}

        done = self._generated(
            prompt,
            max_new,
            request,
            chunk if stream else None,
            instruction=chat,
            stop=stop_sequences(body.get("stop")),
        )
        if done is None:
            return
        text, meta = done
        self.sim.record(meta)
        details = (
            {"cached_tokens": meta["cached_tokens"]} if self.sim.args.enable_prompt_tokens_details else None
        )
        counts = usage(meta) | {"prompt_tokens_details": details}
        if not stream:
            said: dict[str, Any] = (
                {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
            )
            choice = {
                "index": 0,
                **said,
                "logprobs": asked_logprobs(body, text, chat),
                "finish_reason": finish(meta),
            }
            self._send(200, base | {"choices": [choice], "usage": counts})
            return
        last: dict[str, Any] = {"delta": {}} if chat else {"text": ""}
        self._sse(base | {"choices": [{"index": 0, **last, "finish_reason": finish(meta)}], "usage": None})
        if (body.get("stream_options") or {}).get("include_usage"):
            self._sse(base | {"choices": [], "usage": counts})
        self._sse(b"[DONE]")
        self.faults.after_request(request)


def start_up(args: argparse.Namespace, profile: Profile) -> VLLMSimulator:
    """Everything vLLM logs before its API server listens; raises StartupFailure where vLLM would die."""
    vlog(f"vLLM API server version {VERSION}")
    given = {
        k: v
        for k, v in vars(args).items()
        if not k.startswith("sim_") and k not in SHARED_ATTRIBUTES and v not in (None, False)
    }
    vlog(f"non-default args: {given}", "utils.py")
    resolved = resolve(args, profile)
    m, speed = profile.model, profile.speed
    vlog(f"Resolved architecture: {m.architecture}", "model.py")
    time.sleep(speed.startup_s * startup_scale(args))
    vlog(
        f"Model loading took {m.weight_gb:.4f} GiB memory and {speed.startup_s:.6f} seconds",
        "gpu_model_runner.py",
    )
    plan = plan_memory(resolved, args, profile)
    available = plan.pool_gb
    vlog(f"Available KV cache memory: {available:.2f} GiB", "gpu_worker.py")
    concurrency = plan.pool_tokens / resolved.context_length
    vlog(  # one line since 0.34 (`update_kv_cache_capacity`), the device first
        f"GPU KV cache size: {plan.pool_tokens:,} tokens, Maximum concurrency for {resolved.context_length:,} "
        f"tokens per request: {concurrency:.2f}x",
        "kv_cache_utils.py",
    )
    if plan.decode_buckets:
        time.sleep(profile.speed.capture_s_per_bucket * len(plan.decode_buckets) * startup_scale(args))
        if plan.decode_graph_gb > plan.free_after_pool_gb - 0.05:
            raise StartupFailure(
                f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {plan.decode_graph_gb:.2f} GiB. "
                f"GPU 0 has a total capacity of {profile.gpu.memory_gb:.2f} GiB of which "
                f"{max(0.0, plan.free_after_pool_gb):.2f} GiB is free."
            )
        seconds = profile.speed.capture_s_per_bucket * len(plan.decode_buckets)
        vlog(
            f"Graph capturing finished in {seconds:.0f} secs, took {plan.decode_graph_gb:.2f} GiB",
            "gpu_model_runner.py",
        )
    vlog(
        f"init engine (profile, create kv cache, warmup model) took {speed.startup_s:.2f} seconds", "core.py"
    )
    return VLLMSimulator(args, profile, resolved, plan)


def main(argv: list[str]) -> int:
    """`serve MODEL [flags]` (`specsweep sim vllm serve ...`, `python -m sweep.sim vllm serve ...`)."""
    profile = load_profile(argv)
    args = parse(argv)

    def come_up(sim: Simulator, httpd: ThreadingHTTPServer, stop: threading.Event) -> bool:
        # vLLM's API server starts only once the engine is up: /health answers as soon as the port does.
        sim.ready = "never-healthy" not in VLLMHandler.faults
        if sim.ready:
            threading.Thread(target=httpd.serve_forever, daemon=True).start()
        vlog(f"Starting vLLM API server 0 on http://{args.host}:{args.port}")
        print("INFO:     Application startup complete.", file=sys.stderr, flush=True)
        return sim.ready

    return serve(
        args,
        VLLMHandler,
        lambda: start_up(args, profile),
        lambda exc: f"OSError: [Errno {exc.errno}] {exc.strerror}: ('{args.host}', {args.port})",
        come_up,
    )
