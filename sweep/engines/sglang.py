"""SGLang, as its releases run it (0.5.17 to 0.5.23): its flags and their rules, the launch's argv, what the
running server reports and the requests' API. Its log is read in `sglang_log.py`."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from sweep.core.errors import SpeculationInactive, UserError
from sweep.engines.base import Engine
from sweep.engines.endpoints import (
    Turn,
    chat_tokens,
    first_line,
    parse_prometheus,
    renders_chat,
    template_header,
)
from sweep.engines.flags import flags_argv, help_flags
from sweep.engines.schedules import sglang_adaptive_config
from sweep.engines.sglang_log import EXIT_REASONS, facts_from_log, graph_captures
from sweep.engines.values import (
    Params,
    PromptForm,
    RequestSettings,
    RunningLimit,
    ServerReport,
    ServerSetup,
    SyntheticAcceptance,
    positions_from_histogram,
)
from sweep.model.files import read_config
from sweep.records import (
    DraftAsk,
    DraftKind,
    LaunchFacts,
    RequestStatus,
    SpecShape,
    WindowPool,
)
from sweep.releases.sglang_rules import (
    ADAPTIVE_UNSUPPORTED,
    BLOCK_DRAFTS,
    BLOCK_SIZES,
    EAGLE_FAMILY,
    MTP_ALGORITHMS,
    GraphReserve,
    adaptive_candidate_steps,
    adaptive_unsupported_reason,
    auto_memory_fraction,
    auto_spec_params,
    draft_dtype_clash,
    hybrid_swa,
    memory_defaults,
    resolved_algorithm,
    swa_ratio,
)

SPECULATIVE_MAX_RUNNING = 48  # server_args.py: max_running_requests when unset and speculation is on


VALUE_RANGES: dict[str, tuple[type, float, float]] = {
    "speculative-num-steps": (int, 1, 64),
    "speculative-eagle-topk": (int, 1, 64),
    "speculative-num-draft-tokens": (int, 1, 1024),
    "mem-fraction-static": (float, 0.01, 0.99),
    "context-length": (int, 1, 1 << 24),
    "max-running-requests": (int, 1, 1 << 16),
    "cuda-graph-max-bs": (int, 1, 1 << 16),
}

# --- the engine -------------------------------------------------------------------------------------------

DEFAULT_LAUNCHER = ("python3", "-m", "sglang.launch_server")
# Flags specsweep sets itself on every launch.
MANAGED = {
    "model-path",
    "model",
    "host",
    "port",
    "enable-metrics",
    "enable-cache-report",
    "decode-log-interval",
    "help",
}
# 0.5.23 renamed the CUDA-graph flags (PR #23906); each name maps to the other release's spelling.
RENAMED = {
    "cuda-graph-max-bs-decode": "cuda-graph-max-bs",
    "cuda-graph-bs-decode": "cuda-graph-bs",
    "cuda-graph-max-bs": "cuda-graph-max-bs-decode",
    "cuda-graph-bs": "cuda-graph-bs-decode",
}
# specsweep's own dimension: adaptive speculation's candidate steps ("1,3,5"), written as a one-slot config file
# (`--speculative-adaptive-config`, content-addressed under ADAPTIVE_CONFIGS) at launch.
CANDIDATES = "speculative-adaptive-candidate-steps"
ADAPTIVE_CONFIGS = Path.home() / ".cache" / "specsweep" / "adaptive"


def parse_candidates(value: Any) -> list[int]:
    """Candidate steps as a space gives them ("1,3,5", "1 3 5" or a list), sorted; UserError where they are
    not non-negative integers with one above 0."""
    words = value if isinstance(value, list | tuple) else str(value).replace(",", " ").split()
    try:
        steps = sorted({int(str(w)) for w in words})
    except ValueError:
        steps = []
    if not steps or steps[0] < 0 or steps[-1] < 1:
        raise UserError(
            f"{CANDIDATES} cannot be {value!r}",
            'give it non-negative integers with one above 0, e.g. "1,3,5"',
        )
    return steps


def candidates_config(steps: list[int]) -> Path:
    """The adaptive config file holding one slot (every batch size) with these candidates."""
    text = json.dumps({"1": {"candidate_steps": steps}}, sort_keys=True)
    path = ADAPTIVE_CONFIGS / f"candidates-{'-'.join(map(str, steps))}.json"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return path


FLUSH_ATTEMPTS = 50
# Where SGLang says which chat template it loaded (template_manager.py); absent where it found none.
TEMPLATE_LOG = re.compile(
    r"(Loading chat template from argument: \S+|Inferred chat template from model path: \S+|"
    r"Using default HuggingFace chat template[^\n]*)"
)
LENGTH_ERRORS = (
    "longer than the model's context length",
    "exceeds the maximum allowed length",
    "maximum context length",
)


def request_times(meta: Mapping[str, Any]) -> tuple[float | None, float | None, float | None]:
    """A finished request's arrival (server clock), time to first token and end-to-end time, in the form its
    release gives them (with --enable-metrics): 0.5.23 says `first_token_latency`; 0.5.17 and 0.5.20 only
    stamp when the request arrived and when its prefill finished (`req_time_stats.py`), so its first token is
    the difference."""
    received = _number(meta.get("request_received_ts"))
    ttft = _number(meta.get("first_token_latency"))
    prefilled = _number(meta.get("prefill_finished_time"))
    if ttft is None and received is not None and prefilled is not None and prefilled > received:
        ttft = prefilled - received
    e2e = _number(meta.get("e2e_latency"))
    finished = _number(meta.get("request_finished_ts"))
    if e2e is None and received is not None and finished is not None and finished > received:
        e2e = finished - received
    return received, ttft, e2e


def acceptance_length(histogram: Any, completion: int, verify: int) -> float | None:
    """Tokens per verify step, the bonus included: from the per-request histogram of verify steps by correct
    drafts where the server gives one (a step that accepted k drafts gave k + 1 tokens, even where max_tokens
    cut the last one short: forced acceptance 3 reads exactly 3.0), else (completion - 1) / verify steps (the
    first token comes from prefill, not a verify step)."""
    counts = [int(c) for c in histogram] if isinstance(histogram, list) else []
    if (steps := sum(counts)) > 0:
        return sum((accepted + 1) * count for accepted, count in enumerate(counts)) / steps
    return (completion - 1) / verify if verify else None


def decode_rate(completion: int, ttft: float | None, e2e: float | None) -> float | None:
    """Decode tokens per second from the server's own times. Not its `decode_throughput`: 0.5.17 says 43,508,287
    t/s for one request of a batch of four (recorded on an H200), whose stamps give 153."""
    if ttft is None or e2e is None or e2e <= ttft or completion < 2:
        return None
    return (completion - 1) / (e2e - ttft)


def _number(value: Any) -> float | None:
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value > 0 else None
    )


def algorithm(params: Params) -> str | None:
    value = params.get("speculative-algorithm")
    return None if value in (None, "", "none", "None", "NONE") else str(value).upper()


class SGLangEngine(Engine):
    name = "sglang"
    default_port = 30000
    exit_patterns = EXIT_REASONS
    server_label = "SGLang"
    ready_marker = "The server is fired up and ready to roll"
    # Weights, KV pool and CUDA-graph capture: 0.5.17 on the H200 relaunched in 46-67 s, 100-117 s the first
    # time on a machine (its kernels compiled and cached).
    typical_startup_s = 60.0

    @classmethod
    def ran(cls, argv: list[str]) -> bool:
        return "--model-path" in argv  # only SGLang names the model so

    def __init__(self, setup: ServerSetup) -> None:
        super().__init__(setup)
        self.flags: set[str] = set()
        config, _ = read_config(Path(setup.model)) if Path(setup.model).is_dir() else ({}, "")
        # What SGLang decides from the model's config.json: the auto-chosen speculative parameters (by the
        # first architecture) and the prefill-graph reserve (1.5 GB for MLA attention, which has kv_lora_rank).
        self.architecture: str | None = (config.get("architectures") or [None])[0]
        self.mla = "kv_lora_rank" in config

    @classmethod
    def default_launcher(cls, binary: str) -> list[str]:
        return list(DEFAULT_LAUNCHER) if binary == "embedded" else [binary]

    @classmethod
    def resolve_model(cls, model: str) -> str:
        if model == "embedded":
            raise UserError(
                "SGLang has no embedded model", "set server.model to a model path or Hugging Face id"
            )
        return model  # a directory or a hub id: SGLang resolves it

    def prepare(self) -> None:
        """Read the installed SGLang's flags from its --help, once per study (renames differ by release)."""
        self.flags = help_flags([*self.setup.launcher, "--help"], self.env(), "speculative-algorithm")

    def flag_for(self, name: str) -> str:
        """The spelling of `name` the installed release knows (renamed CUDA-graph flags are mapped)."""
        if not self.flags or name in self.flags:
            return name
        if name in RENAMED and RENAMED[name] in self.flags:
            return RENAMED[name]
        raise UserError(
            f"the installed SGLang has no flag --{name}",
            "remove it from the space (its --help lists the flags; NGRAM window flags were removed in 0.5.23)",
        )

    def known_params(self) -> list[str]:
        return sorted((self.flags - MANAGED) | {CANDIDATES})

    def check_value(self, name: str, value: Any) -> None:
        if name in MANAGED:
            raise UserError(f"--{name} is set by specsweep", f"remove '{name}' from the space")
        if name == CANDIDATES:
            parse_candidates(value)
            return
        self.flag_for(name)
        if name in VALUE_RANGES:
            kind, low, high = VALUE_RANGES[name]
            number = isinstance(value, int | float) and not isinstance(value, bool)
            if not number or (kind is int and not float(value).is_integer()) or not low <= value <= high:
                raise UserError(
                    f"{name} cannot be {value!r}", f"give {name} a {kind.__name__} from {low:g} to {high:g}"
                )
        if (
            name == "speculative-algorithm"
            and algorithm({name: value}) is not None
            and not str(value).isidentifier()
        ):
            raise UserError(
                f"speculative algorithm '{value}' is not a name",
                "e.g. EAGLE, EAGLE3, NEXTN, STANDALONE, NGRAM",
            )

    def check_params(self, params: Params) -> None:
        super().check_params(params)
        given = parse_candidates(params[CANDIDATES]) if CANDIDATES in params else None
        if params.get("speculative-adaptive") and (why := self.adaptive_refusal(params, given)):
            raise UserError(
                f"adaptive speculation cannot run here: {why}",
                "use EAGLE, EAGLE3 or NEXTN with top-k 1 and steps among the config's candidate_steps",
            )
        if (clash := self.draft_dtype_clash(params)) is not None:
            target, draft = clash
            raise UserError(
                f"the draft model is {draft} and the target {target}: with --dtype auto SGLang runs each in its own"
                " and the draft's first layer fails (expected mat1 and mat2 to have the same dtype)",
                f"set `dtype: {target}` under fixed: (both models run in it), or convert the draft to {target}",
            )
        if (
            algorithm(params) in EAGLE_FAMILY
            and not params.get("speculative-adaptive")  # adaptive picks its starting steps from the config
            and "speculative-num-steps" not in params
            and ("speculative-eagle-topk" in params or "speculative-num-draft-tokens" in params)
        ):
            raise UserError(
                "speculative-eagle-topk or -num-draft-tokens without speculative-num-steps (SGLang dies with AssertionError)",
                "sweep speculative-num-steps too, or leave all three to SGLang's defaults",
            )

    def draft_dtype_clash(self, params: Params) -> tuple[str, str] | None:
        """(target, draft) dtypes where a separate draft would run in another 16-bit dtype than its target (read
        from both folders' config.json; None where `dtype` is given, a folder is not here, or they agree)."""
        ask = self.draft_ask(params)
        if ask is None or ask.path is None or params.get("dtype", "auto") != "auto":
            return None
        target, draft = Path(self.setup.model), Path(ask.path)
        if not (target.is_dir() and draft.is_dir()):
            return None
        return draft_dtype_clash(read_config(target)[0], read_config(draft)[0])

    def derive(self, params: dict[str, Any]) -> dict[str, Any]:
        """Values SGLang would force anyway, set before launch so no two trials differ only in an ignored value,
        and top-k made explicit where steps are given: 0.5.23 crashes on steps with top-k unset."""
        algo = algorithm(params)
        out = dict(params)
        if algo in EAGLE_FAMILY and "speculative-num-steps" in out:
            out.setdefault("speculative-eagle-topk", 1)
            if int(out["speculative-eagle-topk"]) == 1:  # topk 1 forces steps + 1
                out["speculative-num-draft-tokens"] = int(out["speculative-num-steps"]) + 1
        if algo == "NGRAM":
            # NGRAM overwrites topk with --speculative-ngram-max-bfs-breadth
            out.pop("speculative-eagle-topk", None)
        if algo in BLOCK_DRAFTS:  # one step of topk 1 drafts the whole block
            out.pop("speculative-num-steps", None)
            out.pop("speculative-eagle-topk", None)
        if CANDIDATES in out and algo is not None:  # adaptive chains: topk 1, draft tokens follow the steps
            out["speculative-adaptive"] = True
            out["speculative-eagle-topk"] = 1
            out.pop("speculative-num-draft-tokens", None)
        if algo is None:
            out = {
                k: v
                for k, v in out.items()
                if not k.startswith("speculative-") or k == "speculative-algorithm"
            }
        return out

    def adaptive_refusal(self, params: Params, candidates: list[int] | None = None) -> str | None:
        """Why 0.5.23 would not run adaptive speculation with these parameters (it warns and runs static steps,
        not what the trial asked for) or refuses its steps; None where it runs them. `candidates`: the config's
        candidate steps (default: read from the config the parameters name)."""
        topk = params.get("speculative-eagle-topk")
        switches = {flag for flag, _ in ADAPTIVE_UNSUPPORTED if params.get(flag)}
        algo = resolved_algorithm(algorithm(params))
        if reason := adaptive_unsupported_reason(
            algo, None if topk is None else int(topk), switches, self.architecture
        ):
            return reason
        if candidates is None:
            candidates = adaptive_candidate_steps(params.get("speculative-adaptive-config"))
        steps = params.get("speculative-num-steps")
        if steps is not None and int(steps) not in candidates:
            return (
                f"--speculative-num-steps={steps} is not in the adaptive config candidate_steps {candidates}"
            )
        return None

    def constraints(self, params: Params) -> dict[str, float]:
        """Optuna constraints (feasible when <= 0): the draft tree must hold num_draft_tokens - 1 candidates."""
        if algorithm(params) not in EAGLE_FAMILY or "speculative-num-draft-tokens" not in params:
            return {}
        steps, topk = (
            int(params.get("speculative-num-steps", 1)),
            int(params.get("speculative-eagle-topk", 1)),
        )
        pool = topk + (steps - 1) * topk * topk
        return {"draft_tree": float(int(params["speculative-num-draft-tokens"]) - 1 - pool)}

    def baseline_params(self) -> dict[str, Any]:
        return {"speculative-algorithm": "none"}

    def wants_speculation(self, params: Params) -> bool:
        return algorithm(params) is not None

    def schedule_params(
        self, params: Params, depths: list[tuple[int, int]], config: str
    ) -> dict[str, Any] | None:
        """Adaptive speculation with one candidate per batch-size slot: a fixed depth per batch size. 0.5.23 runs
        it for EAGLE and EAGLE3 chains only (NEXTN is EAGLE) and falls back to static steps elsewhere; its
        buffers are sized for the starting steps, the deepest candidate here."""
        deepest = max(depth for _, depth in depths)
        out = {k: v for k, v in params.items() if k != "speculative-num-draft-tokens"}
        out |= {"speculative-num-steps": deepest, "speculative-eagle-topk": 1, "speculative-adaptive": True}
        if deepest < 1 or self.adaptive_refusal(out, sorted({depth for _, depth in depths})) is not None:
            return None
        return {**out, "speculative-adaptive-config": config}

    def schedule_file(self, depths: list[tuple[int, int]]) -> dict[str, Any] | None:
        return sglang_adaptive_config(depths)

    @classmethod
    def schedule_runs(cls, shape: SpecShape) -> bool:
        """Adaptive speculation runs chains only (top-k 1, draft tokens = steps + 1)."""
        return shape.width == 1

    @classmethod
    def graph_pins(cls, decode_max: int | None, prefill_max: int | None) -> dict[str, Any]:
        # 0.5.23's names (argv() writes an older release's spelling where it has one).
        pins: dict[str, Any] = {}
        if decode_max:
            pins["cuda-graph-max-bs-decode"] = decode_max
        if prefill_max:
            pins["cuda-graph-max-bs-prefill"] = prefill_max
        return pins

    def memory_share(self, gpu_gb: float, params: Params) -> tuple[float, str] | None:
        if "mem-fraction-static" in params:
            return float(params["mem-fraction-static"]), "--mem-fraction-static"
        chunk, max_bs = memory_defaults(gpu_gb)
        chunk = int(params.get("chunked-prefill-size", chunk))
        off = bool(params.get("disable-cuda-graph"))
        decode_off = (
            off
            or params.get("cuda-graph-backend-decode") == "disabled"
            or params.get("disable-decode-cuda-graph")
        )
        prefill_off = (
            off
            or params.get("cuda-graph-backend-prefill") == "disabled"
            or params.get("disable-prefill-cuda-graph")
        )
        reserve = GraphReserve(
            chunk=chunk,
            tensor_parallel=self.tensor_parallel(params) * int(params.get("pp-size", 1)),
            decode_max_bs=0
            if decode_off
            else int(params.get("cuda-graph-max-bs-decode", params.get("cuda-graph-max-bs", max_bs))),
            prefill_max_bs=0 if prefill_off else int(params.get("cuda-graph-max-bs-prefill", chunk)),
            mla=self.mla,
        )
        return auto_memory_fraction(gpu_gb, reserve), f"SGLang's automatic value for a {gpu_gb:g} GB GPU"

    def draft_ask(self, params: Params) -> DraftAsk | None:
        """NEXTN, and EAGLE without a draft path (or with the model's own), draft with the target's MTP layers;
        EAGLE with a path loads an EAGLE head, EAGLE3 an EAGLE-3 head, STANDALONE a small model."""
        algo = algorithm(params)
        path = params.get("speculative-draft-model-path")
        path = None if path in (None, "", self.setup.model) else str(path)
        flags = f"--speculative-algorithm {algo}" + (
            f" --speculative-draft-model-path {path}" if path else ""
        )
        if algo in MTP_ALGORITHMS and (algo == "NEXTN" or path is None):
            return DraftAsk(DraftKind.MTP, path, flags)
        kind = {"EAGLE": DraftKind.EAGLE, "EAGLE3": DraftKind.EAGLE3, "STANDALONE": DraftKind.MODEL}.get(
            algo or ""
        )
        return None if kind is None else DraftAsk(kind, path, flags)

    def window_pool(self, config: Mapping[str, Any], params: Params) -> WindowPool:
        """0.5.23 pools sliding-window layers apart only for its hybrid-SWA architectures (`is_hybrid_swa_model`),
        at `--swa-full-tokens-ratio` SWA tokens per full token; `--disable-hybrid-swa-memory` turns that off."""
        names = [str(a) for a in config.get("architectures") or []]
        if not hybrid_swa(names, config):
            return WindowPool(
                False, None, f"SGLang pools {names[0] if names else 'this model'}'s windows as full layers"
            )
        if params.get("disable-hybrid-swa-memory"):
            return WindowPool(False, None, "--disable-hybrid-swa-memory")
        given = params.get("swa-full-tokens-ratio")
        ratio = swa_ratio(names, None if given is None else float(given))
        source = "--swa-full-tokens-ratio" if given is not None else "SGLang's swa_full_tokens_ratio"
        return WindowPool(True, ratio, f"SGLang's SWA pool, {source} {ratio:g}")

    def tensor_parallel(self, params: Params) -> int:
        # `--tp-size`, its alias, or `--tp` (argparse takes the one flag it starts)
        for name in ("tp-size", "tensor-parallel-size", "tp"):
            if name in params:
                return int(params[name] or 1)
        return 1

    @classmethod
    def draft_layers_read(cls, config: Mapping[str, Any]) -> tuple[int, str] | None:
        """0.5.23 reads the draft depth from `num_nextn_predict_layers`; a model that names it otherwise
        (Qwen3.5/3.8: `text_config.mtp_num_hidden_layers`) falls back to the whole model's `num_hidden_layers`
        (report 000: 64 read for 1, the pool cut x5)."""
        if "num_nextn_predict_layers" in config:
            return int(config["num_nextn_predict_layers"]), "num_nextn_predict_layers"
        if "num_hidden_layers" in config:
            return int(config["num_hidden_layers"]), "num_hidden_layers (no num_nextn_predict_layers)"
        return None

    def kv_cache_dtype(self, params: Params) -> str:
        return str(params.get("kv-cache-dtype", "auto"))

    def running_limit(self, params: Params) -> RunningLimit | None:
        """`--max-running-requests` where given; unset, speculative decoding resets it to 48 (server_args.py) and
        without it the KV pool decides at start-up."""
        if "max-running-requests" in params:
            limit = int(params["max-running-requests"])
            return RunningLimit(limit, f"--max-running-requests {limit}", "max-running-requests")
        if self.wants_speculation(params):
            why = f"SGLang resets max-running-requests to {SPECULATIVE_MAX_RUNNING} for speculative decoding"
            return RunningLimit(SPECULATIVE_MAX_RUNNING, why, "max-running-requests")
        return None

    def spec_shape(self, params: Params) -> SpecShape | None:
        """Steps x top-k with a draft-token budget (EAGLE family, SGLang's auto-chosen values for the model's
        architecture where unset); NGRAM drafts up to its draft tokens over `max_bfs_breadth` branches; DFLASH
        and DSPARK draft a block in one step; the other methods a block of their draft tokens. Adaptive
        speculation is SGLang's own controller over that shape."""
        shape = self._static_shape(params)
        if shape is not None and params.get("speculative-adaptive"):
            return dataclasses.replace(shape, controller="SGLang adaptive steps")
        return shape

    def _static_shape(self, params: Params) -> SpecShape | None:
        algo = algorithm(params)
        if algo is None:
            return None
        draft_tokens = params.get("speculative-num-draft-tokens")
        if algo in EAGLE_FAMILY and CANDIDATES in params:
            # The server moves between the candidates; the deepest bounds the chain, the set is the variant.
            steps_set = parse_candidates(params[CANDIDATES])
            return SpecShape(
                algo,
                depth=steps_set[-1],
                budget=steps_set[-1],
                variant=f"candidate_steps={','.join(map(str, steps_set))}",
            )
        if algo in EAGLE_FAMILY:
            if "speculative-num-steps" not in params:
                steps, topk, draft_tokens = auto_spec_params(algo, self.architecture)
            else:
                steps, topk = (
                    int(params["speculative-num-steps"]),
                    int(params.get("speculative-eagle-topk", 1)),
                )
                draft_tokens = steps + 1 if topk == 1 or draft_tokens is None else int(draft_tokens)
            return SpecShape(
                algo,
                depth=steps,
                width=topk,
                budget=int(draft_tokens) - 1,
                depth_param="speculative-num-steps",
                width_param="speculative-eagle-topk",
                budget_param="speculative-num-draft-tokens",
            )
        if algo in BLOCK_DRAFTS:
            flag, block, verified_with_root = BLOCK_SIZES[algo]
            size = int(params.get(flag, block))
            budget = (
                (size if verified_with_root else size - 1)
                if flag in params or draft_tokens is None
                else int(draft_tokens) - 1
            )
            return SpecShape(algo, depth=budget, budget=budget, depth_param=flag)
        budget = int(draft_tokens or (12 if algo == "NGRAM" else 16)) - 1
        if algo == "NGRAM":
            breadth = int(params.get("speculative-ngram-max-bfs-breadth", 10))
            return SpecShape(
                algo,
                depth=budget,
                width=breadth,
                budget=budget,
                width_param="speculative-ngram-max-bfs-breadth",
                budget_param="speculative-num-draft-tokens",
                draft_model=False,
            )
        return SpecShape(algo, depth=budget, budget=budget, budget_param="speculative-num-draft-tokens")

    def synthetic_acceptance(self, length: float) -> SyntheticAcceptance:
        """SGLang's benchmarking switch (`srt/environ.py`, `srt/speculative/spec_utils.py`): each verify step
        accepts `length` tokens, rounded down or up at random so the mean is `length` ("match-expected"), its
        drafted tokens a fixed id ("fixed"), read once as the server starts."""
        return SyntheticAcceptance(
            length,
            env={
                "SGLANG_SIMULATE_ACC_LEN": f"{length:g}",
                "SGLANG_SIMULATE_ACC_METHOD": "match-expected",
                "SGLANG_SIMULATE_ACC_TOKEN_MODE": "fixed",
            },
        )

    def argv(self, params: Params, port: int) -> list[str]:
        if CANDIDATES in params:
            config = candidates_config(parse_candidates(params[CANDIDATES]))
            params = {k: v for k, v in params.items() if k != CANDIDATES}
            params["speculative-adaptive-config"] = str(config)
        spelled = {
            self.flag_for(name): value
            for name, value in params.items()
            if not (name == "speculative-algorithm" and algorithm(params) is None)
        }
        argv = [*self.setup.launcher, "--model-path", self.setup.model, *flags_argv(spelled)]
        # Metrics and cached-token reports are what the measurements rest on (and cost a server nothing).
        return [
            *argv,
            *self.setup.extra_args,
            "--enable-metrics",
            "--enable-cache-report",
            *self.measuring_argv(),
            "--host",
            self.setup.host,
            "--port",
            str(port),
        ]

    def measuring_argv(self) -> list[str]:
        """A log line every decode batch (the release's default: every 40), so the accept-length counters fold
        in exact windows: one line a step is what a server in service need not write."""
        return ["--decode-log-interval", "1"]

    @classmethod
    def facts_from_log(cls, log: str) -> LaunchFacts:
        return facts_from_log(log)

    def exit_reason(self, log: str, returncode: int) -> str:
        reason = super().exit_reason(log, returncode)
        _, unfinished = graph_captures(log)
        if unfinished is None:
            return reason
        return f"{reason} (during the {unfinished.graph} CUDA-graph capture, begun with {unfinished.free_after_gb:.2f} GB free)"

    def inspect_running(self, client: httpx.Client, facts: LaunchFacts, params: Params, log: str) -> None:
        info = client.get("/server_info").json()
        models = client.get("/v1/models").json()
        facts.context_length = (
            int(models["data"][0].get("max_model_len") or facts.context_length or 0) or None
        )
        keys = (
            "speculative_algorithm",
            "speculative_num_steps",
            "speculative_eagle_topk",
            "speculative_num_draft_tokens",
            "max_running_requests",
            "mem_fraction_static",
            "chunked_prefill_size",
            "max_total_num_tokens",
            "max_req_input_len",
            "version",
        )
        facts.resolved_args = {k: info.get(k) for k in keys}
        facts.engine_version = str(info.get("version") or "")
        states = info.get("internal_states") or [{}]
        effective = states[0].get("effective_max_running_requests_per_dp")
        facts.resolved_args["effective_max_running_requests"] = effective
        facts.overrides = self._overrides(params, info, effective)
        facts.chat_template, facts.chat_template_source = renders_chat(client)
        if facts.chat_template and (said := TEMPLATE_LOG.search(log)):
            facts.chat_template_source = said.group(0).strip()
        facts.speculation_requested = self.wants_speculation(params)
        facts.speculation_active = info.get("speculative_algorithm") is not None
        if facts.speculation_requested and not facts.speculation_active:
            raise SpeculationInactive(
                f"asked for {algorithm(params)} but /server_info reports no speculative algorithm"
            )

    def _overrides(self, params: Params, info: dict[str, Any], effective: int | None) -> list[str]:
        found = []
        for name in (
            "speculative-num-steps",
            "speculative-eagle-topk",
            "speculative-num-draft-tokens",
            "max-running-requests",
        ):
            resolved = info.get(name.replace("-", "_"))
            if name in params and resolved is not None and int(params[name]) != int(resolved):
                found.append(f"{name}: asked {params[name]}, server uses {resolved}")
        if (
            "max-running-requests" not in params
            and self.wants_speculation(params)
            and info.get("max_running_requests") == SPECULATIVE_MAX_RUNNING
        ):
            found.append(
                f"max-running-requests: not set, speculative decoding reset it to {SPECULATIVE_MAX_RUNNING}"
            )
        asked = params.get("max-running-requests", info.get("max_running_requests"))
        if effective is not None and asked is not None and effective < int(asked):
            found.append(
                f"max-running-requests: {asked} resolved, but the server runs at most {effective} at once"
            )
        return found

    async def request(
        self,
        client: httpx.AsyncClient,
        content: str,
        form: PromptForm,
        settings: RequestSettings,
        history: tuple[Turn, ...] = (),
    ) -> tuple[str, dict[str, Any]]:
        # /generate, as SGLang's own bench_serving does: meta_info on the last chunk carries cached_tokens,
        # decode_throughput (with --enable-metrics) and the spec_* fields. A chat prompt is rendered by the
        # served chat template first (/tokenize with messages, as the chat endpoint renders it), then sent as
        # its token ids. The nonce is the first token after the template's header.
        prompt = (
            {"input_ids": await chat_tokens(client, content, history)}
            if form is PromptForm.CHAT
            else {"text": content}
        )
        return "/generate", {
            **prompt,
            "sampling_params": {
                "max_new_tokens": settings.max_tokens,
                "temperature": settings.temperature,
                "ignore_eos": settings.ignore_eos,
                **({"stop": list(settings.stop)} if settings.stop else {}),
            },
            "stream": True,
        }

    def continue_fields(self) -> dict[str, Any]:
        # SGLang's chat request field (serving_chat.py: the assistant's last message continued, not closed)
        return {"continue_final_message": True}

    async def template_tokens(self, client: httpx.AsyncClient) -> int:
        return await template_header(client)

    def has_token(self, chunk: dict[str, Any]) -> bool:
        return bool(chunk.get("text"))

    def text_so_far(self, chunk: dict[str, Any], text: str) -> str:
        # /generate streams the whole text so far in every chunk (incremental output is off by default).
        return str(chunk.get("text") or text)

    def finish_reason(self, chunk: dict[str, Any]) -> str:
        finish = (chunk.get("meta_info") or {}).get("finish_reason") or {}
        return str(finish.get("type") or "") if isinstance(finish, dict) else str(finish)

    def read_final(self, chunk: dict[str, Any]) -> ServerReport | None:
        meta = chunk.get("meta_info") or {}
        if not meta.get("finish_reason"):
            return None
        completion = int(meta.get("completion_tokens", 0))
        verify = int(meta.get("spec_verify_ct", 0))
        # Newer and older names (spec_num_correct_drafts / spec_accept_token_num, ...).
        correct = int(meta.get("spec_num_correct_drafts", meta.get("spec_accept_token_num", 0)))
        proposed = int(meta.get("spec_num_proposed_drafts", meta.get("spec_draft_token_num", 0)))
        prompt, cached = int(meta.get("prompt_tokens", 0)), meta.get("cached_tokens")
        received, ttft, e2e = request_times(meta)
        return ServerReport(
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
            decode_tps=decode_rate(completion, ttft, e2e) or meta.get("decode_throughput"),
            prefill_tps=(prompt - (cached or 0)) / ttft if ttft else None,
            ttft_s=ttft,
            e2e_s=e2e,
            received_s=received,
            draft_tokens=proposed,
            accepted_tokens=correct,
            acceptance_length=acceptance_length(
                meta.get("spec_correct_drafts_histogram"), completion, verify
            ),
            # 0.5.23: verify steps by how many drafts they accepted, per request.
            position_acceptance=positions_from_histogram(meta.get("spec_correct_drafts_histogram") or []),
        )

    def classify_error(self, status_code: int, body: str) -> tuple[RequestStatus, str]:
        try:
            data = json.loads(body)
            message = str(data.get("message") or (data.get("error") or {}).get("message") or body)
        except (json.JSONDecodeError, AttributeError):
            message = body.strip()[:300]
        if any(text in message for text in LENGTH_ERRORS):
            return "does_not_fit", message
        return "error", f"HTTP {status_code}: {message}"

    async def acceptance_gauge(self, client: httpx.AsyncClient) -> float | None:
        # `sglang:spec_accept_length` (--enable-metrics): accepted tokens per forward of the last logged interval,
        # one decode step with specsweep's --decode-log-interval 1 (metrics_reporter.py): a label, not a measure.
        try:
            response = await client.get("/metrics")
        except httpx.HTTPError:
            return None  # a server gone after its batch fails the trial where the next request does
        values = parse_prometheus(response.text, "sglang:") if response.status_code == 200 else {}
        gauge = values.get("spec_accept_length")
        return gauge if gauge else None

    async def tokenize(self, client: httpx.AsyncClient, text: str) -> list[int]:
        response = await client.post("/tokenize", json={"prompt": text})
        response.raise_for_status()
        return [int(t) for t in response.json()["tokens"]]

    async def flush(self, client: httpx.AsyncClient) -> str:
        # Flushing resets the radix cache, the KV pools and the NGRAM corpus: every batch starts cold.
        response = None
        for _ in range(FLUSH_ATTEMPTS):
            response = await client.post("/flush_cache")
            if response.status_code == 200:
                return ""
            await asyncio.sleep(0.1)  # 400 while requests are still running
        assert response is not None
        return (
            f"/flush_cache answered HTTP {response.status_code} ({first_line(response, 120)}) "
            f"{FLUSH_ATTEMPTS} times"
        )
