"""vLLM (0.34.0, held against its wheel: `releases/vllm.py`): `vllm serve MODEL --speculative-config JSON`.

A space sets vLLM's flags by their names (`max-model-len`, `gpu-memory-utilization`, ...) and the speculative
config by dotted names (`speculative-config.num_speculative_tokens: {int: [1, 8]}`), which become one JSON value.
Acceptance comes from `/metrics` counter deltas over each batch (`1 + accepted / drafts`, as `vllm bench serve`
computes it); the prompt cache is reset between batches through the dev-mode `/reset_prefix_cache`
(`VLLM_SERVER_DEV_MODE=1`), and requests report cached tokens with `--enable-prompt-tokens-details`.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx

from sweep.core.errors import SpeculationInactive, UserError
from sweep.engines.base import Engine
from sweep.engines.endpoints import (
    Turn,
    chat_messages,
    parse_prometheus,
    prometheus_by_label,
    renders_chat,
    template_header,
)
from sweep.engines.flags import argparse_reasons, flags_argv, help_flags
from sweep.engines.schedules import counterpart_elsewhere, drafts_somewhere, vllm_speculative_config
from sweep.engines.values import (
    DraftCounters,
    Params,
    PromptForm,
    RequestSettings,
    RunningLimit,
    ServerReport,
    ServerSetup,
    SyntheticAcceptance,
)
from sweep.launch.server import ExitPatterns
from sweep.records import DraftAsk, DraftKind, LaunchFacts, RequestStatus, SpecShape

SPEC = "speculative-config."
# SpeculativeConfig's fields a space may set: type, low, high (None: not a number).
SPEC_FIELDS: dict[str, tuple[type, float | None, float | None]] = {
    "method": (str, None, None),
    "model": (str, None, None),
    "num_speculative_tokens": (int, 1, 64),
    "prompt_lookup_min": (int, 1, 64),
    "prompt_lookup_max": (int, 1, 64),
    "draft_tensor_parallel_size": (int, 1, 64),
    "num_speculative_tokens_per_batch_size": (list, None, None),
    "max_model_len": (int, 1, 1 << 24),
    "quantization": (str, None, None),
    "kv_cache_dtype": (str, None, None),
    "enforce_eager": (bool, None, None),
    # vLLM's own controller: each step admits the drafts (up to num_speculative_tokens) that pay best.
    "enable_adaptive_verification": (bool, None, None),
}
ADAPTIVE = "enable_adaptive_verification"
METHODS = ("ngram", "ngram_gpu", "draft_model", "suffix", "eagle", "eagle3", "mtp", "dflash", "dspark")
LOOKUP_METHODS = ("ngram", "ngram_gpu", "suffix")  # drafts looked up in text: no draft forward
DEFAULT_LOOKUP = 5  # prompt_lookup_min/max, both unset (one unset copies the other)
VALUE_RANGES: dict[str, tuple[type, float, float]] = {
    "gpu-memory-utilization": (float, 0.01, 1.0),
    "max-model-len": (int, 1, 1 << 24),
    "max-num-seqs": (int, 1, 1 << 16),
    "max-num-batched-tokens": (int, 1, 1 << 24),
    "max-cudagraph-capture-size": (int, 1, 1 << 16),
    "block-size": (int, 1, 1024),
}
# The last batch-size range of a schedule reaches the server's running limit; without --max-num-seqs, the
# largest default vLLM picks by GPU memory (1024; 256 on smaller cards), so no batch falls outside it.
DEFAULT_MAX_NUM_SEQS_CEILING = 1024
# Flags specsweep sets itself on every launch.
MANAGED = {"host", "port", "help", "speculative-config", "enable-prompt-tokens-details", "model"}
NUM = r"([\d,]+)"
KV_TOKENS = re.compile(r"GPU KV cache size: " + NUM + " tokens")
CONCURRENCY = re.compile(r"Maximum concurrency for " + NUM + r" tokens per request: ([\d.,]+)x")
KV_MEMORY = re.compile(r"Available KV cache memory: ([\d.]+) GiB")
WEIGHTS = re.compile(r"Model loading took ([\d.]+) GiB")
GRAPHS = re.compile(r"Graph capturing finished in [\d.]+ secs?, took ([\d.]+) GiB")
EXIT_REASONS: ExitPatterns = (
    (re.compile(r"(No available memory for the cache blocks)"), "{0}: raise gpu-memory-utilization"),
    (
        re.compile(r"max seq len \((\d+)\).*?estimated maximum model length is (\d+)", re.S),
        "the KV cache cannot hold one request of max-model-len {0} (at most {1} tokens fit)",
    ),
    (re.compile(r"(User-specified max_model_len \(\d+\) is greater than[^\n]*)"), "{0}"),
    (re.compile(r"(?:torch\.)?OutOfMemoryError: CUDA out of memory\.([^\n]*)"), "CUDA out of memory:{0}"),
    (
        re.compile(r"ValidationError: \d+ validation errors? for SpeculativeConfig\n([^\n]*)\n\s*([^\n]*)"),
        "vLLM rejected the speculative config: {0}: {1}",
    ),
    # A config vLLM refuses: the field's own message, on the line after pydantic's count (0.34.0 on an H100: a
    # model folder that is not there reads "Value error, Invalid repository ID or local directory specified").
    (
        re.compile(r"ValidationError: \d+ validation errors? for (\w+)\n\s*(?:Value error, )?([^\n]*)"),
        "vLLM rejected its {0}: {1}",
    ),
    # The engine core's own exception: the front end only says "Engine core initialization failed. See root
    # cause above", which is no reason (0.34.0 on an H100: a package the engine core imports at start missing).
    (
        re.compile(r"\(EngineCore[^)\n]*\) ERROR [^\]\n]*\] ((?:\w+\.)*\w*(?:Error|Exception): [^\n]*)"),
        "{0} (in vLLM's engine core, at start)",
    ),
    *argparse_reasons("vLLM"),
    (re.compile(r"(ValueError: [^\n]*)"), "{0}"),
)
LENGTH_ERROR = "maximum context length"


def spec_fields(params: Params) -> dict[str, Any]:
    return {name.removeprefix(SPEC): value for name, value in params.items() if name.startswith(SPEC)}


def method(params: Params) -> str | None:
    value = spec_fields(params).get("method")
    return None if value in (None, "", "none") else str(value)


def number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def facts_from_log(log: str) -> LaunchFacts:
    facts = LaunchFacts()
    if kv := KV_TOKENS.search(log):
        facts.kv_pool_tokens = int(kv.group(1).replace(",", ""))
    if concurrency := CONCURRENCY.search(log):
        facts.context_length = int(concurrency.group(1).replace(",", ""))
        facts.max_concurrency = float(concurrency.group(2).replace(",", ""))
    if memory := KV_MEMORY.search(log):
        facts.kv_cache_gb = float(memory.group(1))
    if weights := WEIGHTS.search(log):
        facts.weight_gb = float(weights.group(1))
    if graphs := GRAPHS.search(log):
        facts.graph_capture_gb = float(graphs.group(1))
    return facts


class VLLMEngine(Engine):
    name = "vllm"
    default_port = 8000
    exit_patterns = EXIT_REASONS
    server_label = "vLLM"
    ready_marker = "Application startup complete"
    typical_startup_s = 120.0  # weights, profiling, KV cache and CUDA-graph capture
    drafts_per_request = False  # the usage chunk has no speculative numbers: /metrics counters do
    env_prefixes = ()  # VLLM_* settings are the user's (attention backend, ...); the dev mode is added

    @classmethod
    def ran(cls, argv: list[str]) -> bool:
        return "serve" in argv[:3]  # `vllm serve MODEL`

    def __init__(self, setup: ServerSetup) -> None:
        super().__init__(setup)
        self.flags: set[str] = set()

    @classmethod
    def default_launcher(cls, binary: str) -> list[str]:
        return ["vllm"] if binary == "embedded" else [binary]

    @classmethod
    def resolve_model(cls, model: str) -> str:
        if model == "embedded":
            raise UserError(
                "vLLM has no embedded model", "set server.model to a model path or Hugging Face id"
            )
        return model

    def prepare(self) -> None:
        """The installed vLLM's flags, from `vllm serve --help=all` (flags come and go between releases)."""
        self.flags = help_flags(
            [*self.setup.launcher, "serve", "--help=all"], self.env(), "speculative-config"
        )

    def env(self) -> dict[str, str]:
        return {**super().env(), "VLLM_SERVER_DEV_MODE": "1"}  # for /reset_prefix_cache between batches

    # --- parameters and launch ---------------------------------------------------------------------------
    def known_params(self) -> list[str]:
        return sorted((self.flags - MANAGED) | {SPEC + name for name in SPEC_FIELDS})

    def check_value(self, name: str, value: Any) -> None:
        if name.startswith(SPEC):
            self._check_spec_field(name.removeprefix(SPEC), value)
            return
        if name in MANAGED:
            raise UserError(f"--{name} is set by specsweep", f"remove '{name}' from the space")
        if self.flags and name not in self.flags:
            raise UserError(
                f"the installed vLLM has no flag --{name}",
                "remove it from the space (`vllm serve --help=all` lists the flags)",
            )
        if name in VALUE_RANGES:
            kind, low, high = VALUE_RANGES[name]
            _check_number(name, value, kind, low, high)

    def _check_spec_field(self, field: str, value: Any) -> None:
        if field not in SPEC_FIELDS:
            raise UserError(
                f"vLLM's speculative config has no field '{field}'",
                f"use one of: {', '.join(SPEC + f for f in SPEC_FIELDS)}",
            )
        kind, low, high = SPEC_FIELDS[field]
        if field == "method" and value not in (*METHODS, "none"):
            raise UserError(f"unknown speculative method '{value}'", f"vLLM's are: {', '.join(METHODS)}")
        if kind is int:
            assert low is not None and high is not None
            _check_number(SPEC + field, value, int, low, high)
        if kind is bool and not isinstance(value, bool):
            raise UserError(f"{SPEC}{field} cannot be {value!r}", f"give {SPEC}{field} true or false")

    def check_params(self, params: Params) -> None:
        super().check_params(params)
        fields = spec_fields(params)
        chosen = method(params)
        if chosen in ("eagle", "eagle3", "draft_model", "dflash", "dspark") and not fields.get("model"):
            raise UserError(
                f"speculative method {chosen} needs a draft model",
                f"set {SPEC}model to the draft's path or Hugging Face id",
            )
        if chosen not in (None, "mtp") and "num_speculative_tokens" not in fields:
            raise UserError(
                f"speculative method {chosen} needs num_speculative_tokens",
                f"set or sweep {SPEC}num_speculative_tokens",
            )
        if chosen and fields.get(ADAPTIVE) and params.get("enforce-eager"):  # VllmConfig's own refusal
            raise UserError(
                "vLLM's adaptive verification requires full CUDA graphs, which enforce-eager turns off",
                f"drop enforce-eager, or set {SPEC}{ADAPTIVE}: false",
            )

    def derive(self, params: dict[str, Any]) -> dict[str, Any]:
        """What vLLM would set anyway: no speculative fields without a method; n-gram lookup bounds filled as
        vLLM fills them (both 5 when unset, one copies the other)."""
        if method(params) is None:
            return {k: v for k, v in params.items() if not k.startswith(SPEC) or k == SPEC + "method"}
        out = dict(params)
        if out.get(SPEC + ADAPTIVE) is False:  # the default: no trial differs only there
            del out[SPEC + ADAPTIVE]
        if method(params) in ("ngram", "ngram_gpu"):
            low, high = out.get(SPEC + "prompt_lookup_min"), out.get(SPEC + "prompt_lookup_max")
            out[SPEC + "prompt_lookup_min"] = low or high or DEFAULT_LOOKUP
            out[SPEC + "prompt_lookup_max"] = high or low or DEFAULT_LOOKUP
        return out

    def constraints(self, params: Params) -> dict[str, float]:
        """vLLM refuses an n-gram lookup whose minimum exceeds its maximum."""
        fields = spec_fields(params)
        if "prompt_lookup_min" in fields and "prompt_lookup_max" in fields:
            return {"lookup_min_over_max": float(fields["prompt_lookup_min"] - fields["prompt_lookup_max"])}
        return {}

    def baseline_params(self) -> dict[str, Any]:
        return {SPEC + "method": "none"}

    def wants_speculation(self, params: Params) -> bool:
        return method(params) is not None

    @classmethod
    def schedule_form(
        cls, method: str, depths: list[tuple[int, int]], max_batch: int
    ) -> dict[str, Any] | None:
        if not counterpart_elsewhere(method, depths):
            return {"speculative_config": None}
        return {"speculative_config": vllm_speculative_config(method, depths, max_batch)}

    def schedule_params(
        self, params: Params, depths: list[tuple[int, int]], config: str
    ) -> dict[str, Any] | None:
        """`num_speculative_tokens_per_batch_size` inside the speculative config (chains only). A k of 0 drafts
        nothing at those batch sizes (vLLM takes k >= 0); a schedule with no depth above 0 is no speculation."""
        chosen = method(params)
        if chosen is None or not drafts_somewhere(depths):
            return None
        limit = self.running_limit(params)
        schedule = vllm_speculative_config(
            chosen, depths, limit.requests if limit else DEFAULT_MAX_NUM_SEQS_CEILING
        )
        return {
            **params,
            SPEC + "num_speculative_tokens": schedule["num_speculative_tokens"],
            SPEC + "num_speculative_tokens_per_batch_size": schedule["num_speculative_tokens_per_batch_size"],
        }

    @classmethod
    def schedule_runs(cls, shape: SpecShape) -> bool:
        """`num_speculative_tokens_per_batch_size` sets a chain's length."""
        return shape.width == 1

    def draft_ask(self, params: Params) -> DraftAsk | None:
        """The MTP methods (`mtp`, `deepseek_mtp`, `qwen3_next_mtp`, ...) draft with the target's own layers;
        `eagle`, `eagle3` and `draft_model` load the speculative config's `model`."""
        chosen = method(params)
        model = spec_fields(params).get("model")
        path = None if model in (None, "", self.setup.model) else str(model)
        flags = f"--speculative-config method={chosen}" + (f" model={path}" if path else "")
        if chosen is not None and "mtp" in chosen:
            return DraftAsk(DraftKind.MTP, path, flags)
        kind = {"eagle": DraftKind.EAGLE, "eagle3": DraftKind.EAGLE3, "draft_model": DraftKind.MODEL}.get(
            chosen or ""
        )
        return None if kind is None else DraftAsk(kind, path, flags)

    def memory_share(self, gpu_gb: float, params: Params) -> tuple[float, str] | None:
        if "gpu-memory-utilization" in params:
            return float(params["gpu-memory-utilization"]), "--gpu-memory-utilization"
        return 0.9, "vLLM's default --gpu-memory-utilization"

    def tensor_parallel(self, params: Params) -> int:
        return int(params.get("tensor-parallel-size", params.get("tp", 1)) or 1)

    def kv_cache_dtype(self, params: Params) -> str:
        return str(params.get("kv-cache-dtype", "auto"))

    def running_limit(self, params: Params) -> RunningLimit | None:
        if "max-num-seqs" in params:
            limit = int(params["max-num-seqs"])
            return RunningLimit(limit, f"--max-num-seqs {limit}", "max-num-seqs")
        return None

    def spec_shape(self, params: Params) -> SpecShape | None:
        """A chain of num_speculative_tokens (MTP: the model's own heads when unset); an n-gram's lookup bounds
        decide which drafts happen, not their length."""
        chosen = method(params)
        if chosen is None:
            return None
        fields = spec_fields(params)
        depth = int(fields.get("num_speculative_tokens") or 1)
        variant = ""
        if chosen in ("ngram", "ngram_gpu"):
            variant = " ".join(
                f"{SPEC}{f}={fields.get(f)}" for f in ("prompt_lookup_min", "prompt_lookup_max")
            )
        if fields.get(ADAPTIVE):  # the controller drafts up to the depth, step by step: its acceptance apart
            variant = f"{variant} adaptive verification".strip()
        return SpecShape(
            chosen,
            depth=depth,
            budget=depth,
            depth_param=SPEC + "num_speculative_tokens",
            budget_param=SPEC + "num_speculative_tokens",
            draft_model=chosen not in LOOKUP_METHODS,
            variant=variant,
            controller="vLLM adaptive verification" if fields.get(ADAPTIVE) else "",
        )

    def synthetic_acceptance(self, length: float) -> SyntheticAcceptance:
        """vLLM's benchmarking switch, two fields of the speculative config (`config/speculative.py`):
        `rejection_sample_method: synthetic` accepts drafts at per-position rates resolved from
        `synthetic_acceptance_length` (the minimum-variance schedule: every position up to the length, and one
        more with its fraction); the length counts the target's own token and must lie in [1, k + 1]."""
        return SyntheticAcceptance(
            length,
            params={
                SPEC + "rejection_sample_method": "synthetic",
                SPEC + "synthetic_acceptance_length": length,
            },
        )

    def speculative_state_persists(self, params: Params) -> bool:
        return method(params) == "suffix"  # suffix decoding caches earlier requests' outputs

    def argv(self, params: Params, port: int) -> list[str]:
        plain = {k: v for k, v in params.items() if not k.startswith(SPEC)}
        argv = [*self.setup.launcher, "serve", self.setup.model, *flags_argv(plain, negate="no-")]
        if method(params) is not None:
            config = {k: number(v) if isinstance(v, float) else v for k, v in spec_fields(params).items()}
            argv += ["--speculative-config", json.dumps(config, sort_keys=True)]
        return [
            *argv,
            *self.setup.extra_args,
            "--enable-prompt-tokens-details",
            "--host",
            self.setup.host,
            "--port",
            str(port),
        ]

    # --- what the server says about itself --------------------------------------------------------------
    @classmethod
    def facts_from_log(cls, log: str) -> LaunchFacts:
        return facts_from_log(log)

    def inspect_running(self, client: httpx.Client, facts: LaunchFacts, params: Params, log: str) -> None:
        models = client.get("/v1/models").json()
        facts.context_length = (
            int(models["data"][0].get("max_model_len") or facts.context_length or 0) or None
        )
        version = client.get("/version")
        facts.resolved_args = {
            "version": version.json().get("version") if version.status_code == 200 else None
        }
        facts.engine_version = str(facts.resolved_args["version"] or "")
        facts.chat_template, facts.chat_template_source = renders_chat(client)
        limit = self.running_limit(params)
        facts.max_running_requests = limit.requests if limit else facts.max_running_requests
        facts.speculation_requested = self.wants_speculation(params)
        # The spec-decode counters exist only when a speculative config is in force.
        counters = parse_prometheus(client.get("/metrics").text, "vllm:")
        facts.speculation_active = "spec_decode_num_drafts_total" in counters
        if facts.speculation_requested and not facts.speculation_active:
            raise SpeculationInactive(
                f"asked for {method(params)} but /metrics has no vllm:spec_decode counters"
            )

    # --- requests ------------------------------------------------------------------------------------------
    async def request(
        self,
        client: httpx.AsyncClient,
        content: str,
        form: PromptForm,
        settings: RequestSettings,
        history: tuple[Turn, ...] = (),
    ) -> tuple[str, dict[str, Any]]:
        # Usage on the last chunk, cached tokens in its details: the chat endpoint renders the model's template,
        # the completions endpoint takes the text as it is.
        body = {
            "model": self.setup.model,
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "seed": settings.seed,
            "ignore_eos": settings.ignore_eos,
            **({"stop": list(settings.stop)} if settings.stop else {}),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if form is PromptForm.CHAT:
            return "/v1/chat/completions", {"messages": chat_messages(content, history), **body}
        return "/v1/completions", {"prompt": content, **body}

    def continue_fields(self) -> dict[str, Any]:
        # vLLM refuses the two together: the turn continued, no new one opened
        return {"continue_final_message": True, "add_generation_prompt": False}

    async def template_tokens(self, client: httpx.AsyncClient) -> int:
        return await template_header(client)

    def has_token(self, chunk: dict[str, Any]) -> bool:
        return bool(self.text_so_far(chunk, ""))

    def text_so_far(self, chunk: dict[str, Any], text: str) -> str:
        for choice in chunk.get("choices") or []:
            text += str(choice.get("text") or (choice.get("delta") or {}).get("content") or "")
        return text

    def finish_reason(self, chunk: dict[str, Any]) -> str:
        return next(
            (str(c["finish_reason"]) for c in chunk.get("choices") or [] if c.get("finish_reason")), ""
        )

    def read_final(self, chunk: dict[str, Any]) -> ServerReport | None:
        usage = chunk.get("usage")
        if not usage or chunk.get("choices"):
            return None
        details = usage.get("prompt_tokens_details") or {}
        # No per-request speculative numbers: acceptance comes from the counters over the batch.
        return ServerReport(
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            cached_tokens=details.get("cached_tokens"),
        )

    def classify_error(self, status_code: int, body: str) -> tuple[RequestStatus, str]:
        try:
            data = json.loads(body)
            message = str(data.get("message") or (data.get("error") or {}).get("message") or body)
        except (json.JSONDecodeError, AttributeError):
            message = body.strip()[:300]
        if LENGTH_ERROR in message:
            return "does_not_fit", message
        return "error", f"HTTP {status_code}: {message}"

    async def tokenize(self, client: httpx.AsyncClient, text: str) -> list[int]:
        response = await client.post("/tokenize", json={"prompt": text, "add_special_tokens": False})
        response.raise_for_status()
        return [int(t) for t in response.json()["tokens"]]

    async def flush(self, client: httpx.AsyncClient) -> str:
        response = await client.post("/reset_prefix_cache")
        if response.status_code == 200:
            return ""
        return f"/reset_prefix_cache answered HTTP {response.status_code} (VLLM_SERVER_DEV_MODE=1 unset?)"

    async def draft_counters(self, client: httpx.AsyncClient) -> DraftCounters | None:
        response = await client.get("/metrics")
        values = parse_prometheus(response.text, "vllm:") if response.status_code == 200 else {}
        if "spec_decode_num_drafts_total" not in values:
            return None
        per_position = prometheus_by_label(
            response.text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "position"
        )
        return DraftCounters(
            steps=values["spec_decode_num_drafts_total"],
            drafted=values.get("spec_decode_num_draft_tokens_total", 0.0),
            accepted=values.get("spec_decode_num_accepted_tokens_total", 0.0),
            accepted_at=tuple(per_position[k] for k in sorted(per_position, key=int)),
        )


def _check_number(name: str, value: Any, kind: type, low: float, high: float) -> None:
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if not is_number or (kind is int and not float(value).is_integer()) or not low <= value <= high:
        raise UserError(
            f"{name} cannot be {value!r}", f"give {name} a {kind.__name__} from {low:g} to {high:g}"
        )
