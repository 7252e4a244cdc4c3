"""SGLang's rules in the simulator: its argument resolution and memory plan, in the order its hooks run.

Resolution follows the release's `server_args.py` (its speculative and memory hooks); memory follows
the profile.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any

from sweep.releases.sglang_rules import (
    ADAPTIVE_UNSUPPORTED,
    BLOCK_SIZES,
    EAGLE_FAMILY,
    GraphReserve,
    adaptive_unsupported_reason,
    auto_memory_fraction,
    auto_spec_params,
    candidate_union,
    resolved_algorithm,
)
from sweep.sim.adaptive import AdaptiveConfigError, load_config
from sweep.sim.model import (
    ALGORITHMS,
    GIB,
    SPEC_DEFAULT_MAX_RUNNING,
    MemoryPlan,
    Resolved,
    StartupFailure,
)
from sweep.sim.profile import Profile

HOOK = "/usr/local/lib/python3.12/dist-packages/sglang/srt/arg_groups/speculative_hook.py"
# `_handle_eagle_family` with steps given and topk not: `cfg.speculative_eagle_topk > 1` on None (0.5.23).
TOPK_UNSET = (
    f'  File "{HOOK}", line 1274, in _handle_eagle_family\n    cfg.speculative_eagle_topk > 1\n'
    "TypeError: '>' not supported between instances of 'NoneType' and 'int'"
)
AUTO_PARAMS_GIVEN = f'  File "{HOOK}", line 1160, in _handle_eagle_family\n    assert (\nAssertionError'
SPEC_RESET = (
    "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
    "setting --max-running-requests."
)


@dataclass
class Speculation:
    """The speculative arguments as SGLang's hooks resolve them, and the warnings they log."""

    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    max_running: int | None
    notices: list[str] = field(default_factory=list)
    adaptive_slots: dict[int, dict[str, Any]] | None = None

    def reset_running(self) -> None:
        if self.max_running is None:
            self.max_running = SPEC_DEFAULT_MAX_RUNNING
            self.notices.append(SPEC_RESET)


def resolve(args: argparse.Namespace, profile: Profile) -> Resolved:
    """SGLang's defaults and speculative rules, in the order its hooks run (memory before speculative)."""
    graphs = profile.graphs
    chunked = args.chunked_prefill_size or graphs.default_chunked_prefill
    max_bs_decode = args.cuda_graph_max_bs_decode or graphs.default_max_bs_decode
    max_bs_prefill = (
        args.cuda_graph_max_bs_prefill
        if args.cuda_graph_max_bs_prefill is not None
        else graphs.default_max_bs_prefill
    )
    if args.mem_fraction_static is not None:
        fraction = args.mem_fraction_static
    else:
        fraction = auto_memory_fraction(
            profile.gpu.memory_gb,
            GraphReserve(
                chunk=chunked,
                tensor_parallel=args.tp_size * args.pp_size,
                decode_max_bs=0 if args.disable_cuda_graph else max_bs_decode,
                prefill_max_bs=0 if args.disable_cuda_graph else max_bs_prefill,
            ),
        )
    kv_bytes = 1 if str(args.kv_cache_dtype).startswith("fp8") else 2
    spec = speculation(args, profile.model.architecture)
    return Resolved(
        algorithm=spec.algorithm,
        steps=spec.steps or 0,
        topk=spec.topk or 0,
        draft_tokens=spec.draft_tokens or 0,
        max_running_requests=spec.max_running or 0,
        chunked_prefill_size=chunked,
        max_bs_decode=max_bs_decode,
        max_bs_prefill=max_bs_prefill,
        mem_fraction_static=fraction,
        kv_bytes=kv_bytes,
        context_length=args.context_length or profile.model.context_length,
        notices=spec.notices,
        adaptive_slots=spec.adaptive_slots,
        draft_kv_bytes=_draft_kv_bytes(args, kv_bytes),
        lookup_prompt=False,  # NGRAM's corpus holds what the model wrote, never the prompt
    )


def _draft_kv_bytes(args: argparse.Namespace, target: int) -> int:
    dtype = args.speculative_draft_kv_cache_dtype
    if dtype in (None, "auto"):
        return target
    return 1 if str(dtype).startswith("fp8") else 2


def speculation(args: argparse.Namespace, architecture: str) -> Speculation:
    """`handle_speculative_decoding`: the name (NEXTN is EAGLE), adaptive speculation, then the algorithm's
    own handler, raising StartupFailure with what SGLang prints where it refuses or crashes."""
    name = args.speculative_algorithm.upper() if args.speculative_algorithm else None
    algorithm = resolved_algorithm(name)
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise StartupFailure(f"ValueError: Unknown speculative algorithm name: {name}")
    spec = Speculation(
        algorithm,
        args.speculative_num_steps,
        args.speculative_eagle_topk,
        args.speculative_num_draft_tokens,
        args.max_running_requests,
    )
    if algorithm is None:
        return Speculation(None, 0, 0, 0, args.max_running_requests)
    if args.speculative_adaptive:
        _adaptive(args, spec, architecture)
    HANDLERS.get(algorithm, _other)(args, spec, architecture)
    return spec


def _adaptive(args: argparse.Namespace, spec: Speculation, architecture: str) -> None:
    """`_maybe_disable_adaptive` (a warning, then static parameters) and `_init_adaptive_speculative_params`."""
    switches = {flag for flag, _ in ADAPTIVE_UNSUPPORTED if getattr(args, flag.replace("-", "_"), False)}
    reason = adaptive_unsupported_reason(spec.algorithm, spec.topk, switches, architecture)
    if reason:
        spec.notices.append(
            f"speculative_adaptive disabled: {reason}. Falling back to static speculative params."
        )
        return
    try:
        slots = load_config(args.speculative_adaptive_config)
    except AdaptiveConfigError as exc:
        raise StartupFailure(str(exc)) from None
    candidates = candidate_union(slots.values())
    spec.topk = 1 if spec.topk is None else spec.topk
    spec.steps = candidates[len(candidates) // 2] if spec.steps is None else spec.steps
    if spec.steps not in candidates:
        raise StartupFailure(
            f"ValueError: --speculative-num-steps={spec.steps} is not in the adaptive config candidate_steps "
            f"{candidates}. Pass one of those values."
        )
    spec.draft_tokens = spec.steps + 1
    spec.adaptive_slots = slots


def _eagle_family(args: argparse.Namespace, spec: Speculation, architecture: str) -> None:
    """`_handle_eagle_family`: auto parameters only when nothing was given, topk 1 forces steps + 1, and a
    topk left unset beside given steps crashes its `topk > 1` check."""
    spec.reset_running()
    if spec.adaptive_slots is None and spec.steps is None:
        if spec.topk is not None or spec.draft_tokens is not None:
            raise StartupFailure(AUTO_PARAMS_GIVEN)
        spec.steps, spec.topk, spec.draft_tokens = auto_spec_params(spec.algorithm or "", architecture)
    if spec.topk == 1 and spec.draft_tokens != (spec.steps or 0) + 1:
        spec.notices.append(
            "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
        )
        spec.draft_tokens = (spec.steps or 0) + 1
    if spec.topk is None:
        raise StartupFailure(TOPK_UNSET)


def _ngram(args: argparse.Namespace, spec: Speculation, architecture: str) -> None:
    spec.reset_running()
    spec.topk = args.speculative_ngram_max_bfs_breadth  # NGRAM overwrites topk with its BFS breadth
    if spec.draft_tokens is None:
        spec.draft_tokens = 12
        spec.notices.append(
            "speculative_num_draft_tokens is set to 12 by default for ngram speculative decoding. "
            "You can override this by explicitly setting --speculative-num-draft-tokens."
        )
    if spec.steps is None:
        spec.steps = spec.draft_tokens // max(spec.topk, 1)


def _one_step_block(spec: Speculation, label: str) -> None:
    """DFLASH and DSPARK draft a block in one step: steps and topk are forced to 1, with a warning."""
    for attribute, flag in (("steps", "speculative_num_steps"), ("topk", "speculative_eagle_topk")):
        given = getattr(spec, attribute)
        if given is not None and int(given) != 1:
            spec.notices.append(f"{label} only supports {flag} == 1; overriding {flag}={given} to 1.")
        setattr(spec, attribute, 1)


def _dflash(args: argparse.Namespace, spec: Speculation, architecture: str) -> None:
    """`_handle_dflash`: the block is the verify width (`num_draft_tokens = block size`, 16 by default)."""
    if args.speculative_draft_model_path is None:
        raise StartupFailure(
            "ValueError: DFLASH speculative decoding requires setting --speculative-draft-model-path."
        )
    _one_step_block(spec, "DFLASH")
    block = args.speculative_dflash_block_size
    if block is not None:
        if block <= 0:
            raise StartupFailure(
                f"ValueError: DFLASH requires --speculative-dflash-block-size to be positive, got {block}."
            )
        if spec.draft_tokens is not None and spec.draft_tokens != block:
            raise StartupFailure(
                "ValueError: Both --speculative-num-draft-tokens and --speculative-dflash-block-size are set but "
                "they differ. For DFLASH they must match. "
                f"speculative_num_draft_tokens={spec.draft_tokens}, speculative_dflash_block_size={block}."
            )
        spec.draft_tokens = block
    if spec.draft_tokens is None:
        spec.draft_tokens = DFLASH_DEFAULT_BLOCK
        spec.notices.append(
            f"speculative_num_draft_tokens is not set; defaulting to {DFLASH_DEFAULT_BLOCK} for DFLASH."
        )
    spec.reset_running()


def _dspark(args: argparse.Namespace, spec: Speculation, architecture: str) -> None:
    """`_handle_dspark`: gamma drafts a block verified with the root (`num_draft_tokens = gamma + 1`)."""
    _one_step_block(spec, "DSpark")
    gamma = args.speculative_dspark_block_size
    if gamma is not None and gamma <= 0:
        raise StartupFailure(
            f"ValueError: DSpark requires --speculative-dspark-block-size to be positive, got {gamma}."
        )
    if gamma is None and spec.draft_tokens is None:
        gamma = DSPARK_DEFAULT_GAMMA
        spec.notices.append(f"DSpark gamma is not set; defaulting to {gamma}.")
    if gamma is not None:
        if spec.draft_tokens is not None and spec.draft_tokens != gamma + 1:
            raise StartupFailure(
                f"ValueError: DSpark speculative_num_draft_tokens must equal gamma + 1 (= {gamma + 1} for "
                f"gamma={gamma}), but got speculative_num_draft_tokens={spec.draft_tokens}."
            )
        spec.draft_tokens = gamma + 1
    if (spec.draft_tokens or 0) < 2:
        raise StartupFailure(
            "ValueError: DSpark speculative_num_draft_tokens must be >= 2 (= gamma + 1), "
            f"got {spec.draft_tokens}."
        )
    spec.reset_running()


def _other(args: argparse.Namespace, spec: Speculation, architecture: str) -> None:
    spec.steps, spec.topk, spec.draft_tokens = 1, 1, spec.draft_tokens or 16
    spec.reset_running()


DFLASH_DEFAULT_BLOCK = BLOCK_SIZES["DFLASH"][1]  # when the draft's config names no block size
DSPARK_DEFAULT_GAMMA = BLOCK_SIZES["DSPARK"][1]  # dspark_config.DEFAULT_DSPARK_GAMMA
HANDLERS = {
    "EAGLE": _eagle_family,
    "EAGLE3": _eagle_family,
    "STANDALONE": _eagle_family,
    "FROZEN_KV_MTP": _eagle_family,
    "NGRAM": _ngram,
    "DFLASH": _dflash,
    "DSPARK": _dspark,
}


def decode_buckets(max_bs: int, cap: int) -> list[int]:
    """SGLang's decode graph batch sizes up to max_bs, clamped to the running-request limit at capture time."""
    sizes = [*range(1, 9), *range(10, 33, 2), *range(40, 65, 4), *range(72, 257, 8), *range(272, 4097, 16)]
    top = min(max_bs, cap)
    return sorted({s for s in sizes if s <= top} | {top})


def plan_memory(r: Resolved, args: argparse.Namespace, profile: Profile) -> MemoryPlan:
    """The KV pool, the hybrid state slots and the CUDA graphs, or the StartupFailure SGLang would die with."""
    m, gpu, graphs = profile.model, profile.gpu, profile.graphs
    cell = m.kv_layers * 2 * m.kv_heads_x_head_dim * r.kv_bytes
    # SGLang sizes the pool per token for the target and the draft layers together. Reading the draft depth
    # from num_hidden_layers instead of the MTP layer count (the x5 case in report 000) inflates it.
    draft_layers = (
        (m.num_hidden_layers if m.mtp_misread else m.mtp_layers) if r.algorithm in EAGLE_FAMILY else 0
    )
    draft_cell = cell * r.draft_kv_bytes // max(1, r.kv_bytes)  # --speculative-draft-kv-cache-dtype
    cell_assumed = int(cell + draft_cell * draft_layers / m.kv_layers)
    draft_gb = m.vocab_draft_gb if r.algorithm in EAGLE_FAMILY else 0.0
    budget_gb = r.mem_fraction_static * gpu.memory_gb - m.weight_gb - draft_gb - gpu.other_static_gb
    if budget_gb <= 0:
        raise StartupFailure("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.")
    pool_tokens = int(budget_gb * GIB / cell_assumed)
    if args.max_total_tokens:
        pool_tokens = min(pool_tokens, args.max_total_tokens)
    pool_gb = pool_tokens * cell / GIB
    free = gpu.memory_gb - gpu.cuda_context_gb - m.weight_gb - draft_gb - gpu.other_static_gb - pool_gb
    slots = args.max_mamba_cache_size or m.max_mamba_cache_size
    # A dense model keeps no state cache: nothing there caps the running requests.
    per_request = m.hybrid_state_slots_per_request + (r.draft_tokens if r.speculative and m.hybrid else 0)
    if m.hybrid and slots < per_request:
        raise StartupFailure(
            "RuntimeError: Hybrid (mamba/linear-attention) state cache is too small to serve any requests. "
            f"max_mamba_cache_size={slots}, mamba_ratio={per_request}, resulting max_num_reqs=0. Try: (1) reduce "
            "--max-running-requests, (2) increase --mem-fraction-static, or (3) use GPUs with more memory."
        )
    log = []
    if r.max_running_requests:
        running = r.max_running_requests
    else:  # estimated from KV capacity: clamp(tokens/context_len*512, 2048, 4096), at most tokens//2
        running = min(max(2048, min(4096, pool_tokens * 512 // r.context_length)), pool_tokens // 2)
    if m.hybrid and slots // per_request < running:
        log.append(
            f"max_running_requests is capped to {slots // per_request} by the mamba state cache "
            f"(max_mamba_cache_size={slots}, {per_request} state slots per request). To raise it: increase "
            "--mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype "
            "bfloat16."
        )
        running = slots // per_request
    if pool_tokens < r.context_length:
        log.append(
            f"KV pool holds {pool_tokens} tokens, fewer than --context-length {r.context_length}. One full-length "
            "request cannot fit, so long requests will be refused or truncated at serving time. Lower "
            "--context-length, raise --mem-fraction-static, or free memory taken before the pool is sized."
        )
    buckets = decode_buckets(r.max_bs_decode, running) if not args.disable_cuda_graph else []
    width = r.draft_tokens if r.speculative else 1
    decode_gb = len(buckets) * graphs.decode_gb_per_bucket * math.sqrt(width)
    prefill_gb = 0.0
    if r.max_bs_prefill > 0 and not args.disable_cuda_graph:
        prefill_gb = graphs.prefill_gb_base + graphs.prefill_gb_per_1k_tokens * r.max_bs_prefill / 1024
    return MemoryPlan(
        cell_bytes=cell,
        cell_bytes_assumed=cell_assumed,
        pool_tokens=pool_tokens,
        draft_pool_tokens=pool_tokens if r.algorithm in EAGLE_FAMILY else None,
        pool_gb=pool_gb,
        free_after_pool_gb=free,
        mamba_slots=slots,
        slots_per_request=per_request,
        effective_max_running=running,
        decode_buckets=buckets,
        decode_graph_gb=decode_gb,
        prefill_graph_gb=prefill_gb,
        free_after_graphs_gb=free - decode_gb - prefill_gb,
        max_req_input_len=min(r.context_length - 1, pool_tokens - 1) - 5,
        log=log,
    )
