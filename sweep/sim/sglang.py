"""SGLang's rules in the simulator: its argument resolution and memory plan, in the order its hooks run.

Resolution follows `../shared/reference/sglang_vllm.md` §1-2 (speculative_hook, memory_hook); memory follows
the profile.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

from sweep.sim.adaptive import AdaptiveConfigError, load_config
from sweep.sim.model import (
    ALGORITHMS,
    EAGLE_FAMILY,
    GIB,
    SPEC_DEFAULT_MAX_RUNNING,
    MemoryPlan,
    Resolved,
    StartupFailure,
)
from sweep.sim.profile import Profile


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
        reserved_mb = 512 + 1.5 * max(chunked, 2048) + 1024 / 8 + 2 * max_bs_decode + 8 * max_bs_prefill / 256
        fraction = round((profile.gpu.memory_gb * 1024 - reserved_mb) / (profile.gpu.memory_gb * 1024), 3)
    kv_bytes = 1 if str(args.kv_cache_dtype).startswith("fp8") else 2
    notices: list[str] = []
    algorithm = args.speculative_algorithm.upper() if args.speculative_algorithm else None
    if algorithm is not None and algorithm not in ALGORITHMS:
        raise StartupFailure(f"ValueError: Unknown speculative algorithm name: {args.speculative_algorithm}")
    steps, topk, draft_tokens = (
        args.speculative_num_steps,
        args.speculative_eagle_topk,
        args.speculative_num_draft_tokens,
    )
    max_running = args.max_running_requests
    if algorithm is not None and max_running is None:
        max_running = SPEC_DEFAULT_MAX_RUNNING
        notices.append(
            "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
            "setting --max-running-requests."
        )
    adaptive_slots = None
    if getattr(args, "speculative_adaptive", False) and algorithm is not None:
        adaptive_slots, steps, topk, draft_tokens = _adaptive(args, algorithm, steps, topk)
    elif algorithm in EAGLE_FAMILY:
        if steps is None:
            # speculative_hook: auto parameters only when nothing was given
            if topk is not None or draft_tokens is not None:
                raise StartupFailure(
                    '  File "sglang/srt/arg_groups/speculative_hook.py", line 1160, in _handle_eagle_family\n'
                    "    assert speculative_eagle_topk is None and speculative_num_draft_tokens is None\nAssertionError"
                )
            steps, topk, draft_tokens = 3, 1, 4
        topk = topk or 1
        if topk == 1 and draft_tokens != steps + 1:
            if draft_tokens is not None:
                notices.append(
                    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
                )
            draft_tokens = steps + 1
        draft_tokens = draft_tokens or steps + 1
    elif algorithm == "NGRAM":
        topk = args.speculative_ngram_max_bfs_breadth  # NGRAM overwrites topk with its BFS breadth
        draft_tokens = draft_tokens or 12
        steps = draft_tokens // max(topk, 1)
    elif algorithm is not None:
        steps, topk, draft_tokens = 1, 1, draft_tokens or 16
    else:
        steps, topk, draft_tokens = 0, 0, 0
    return Resolved(
        algorithm=algorithm,
        steps=steps or 0,
        topk=topk or 0,
        draft_tokens=draft_tokens or 0,
        max_running_requests=max_running or 0,
        chunked_prefill_size=chunked,
        max_bs_decode=max_bs_decode,
        max_bs_prefill=max_bs_prefill,
        mem_fraction_static=fraction,
        kv_bytes=kv_bytes,
        context_length=args.context_length or profile.model.context_length,
        notices=notices,
        adaptive_slots=adaptive_slots,
    )


def _adaptive(
    args: argparse.Namespace, algorithm: str, steps: int | None, topk: int | None
) -> tuple[dict[int, dict[str, Any]], int, int, int]:
    """SGLang's checks for adaptive speculation (`adaptive_unsupported_reason`), then its slots: the buffers are
    sized for the deepest candidate, so the draft tokens (and memory) are those of the largest step."""
    reason = ""
    if algorithm not in ("EAGLE", "EAGLE3", "NEXTN"):  # NEXTN is an alias of EAGLE
        reason = f"speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"
    elif topk is not None and topk != 1:
        reason = f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    if reason:
        raise StartupFailure(f"ValueError: --speculative-adaptive is not supported with {reason}")
    try:
        slots = load_config(args.speculative_adaptive_config)
    except AdaptiveConfigError as exc:
        raise StartupFailure(f"ValueError: {exc}") from None
    deepest = max(s for entry in slots.values() for s in entry["candidate_steps"])
    first = sorted(set(slots[min(slots)]["candidate_steps"]))
    initial = steps if steps is not None else first[len(first) // 2]
    return slots, initial, 1, max(deepest, initial) + 1


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
    cell_assumed = int(cell * (1 + draft_layers / m.kv_layers))
    draft_gb = m.vocab_draft_gb if r.algorithm in EAGLE_FAMILY else 0.0
    budget_gb = r.mem_fraction_static * gpu.memory_gb - m.weight_gb - draft_gb - gpu.other_static_gb
    if budget_gb <= 0:
        raise StartupFailure(
            "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            f"Current value: mem_fraction_static={r.mem_fraction_static}"
        )
    pool_tokens = int(budget_gb * GIB / cell_assumed)
    if args.max_total_tokens:
        pool_tokens = min(pool_tokens, args.max_total_tokens)
    pool_gb = pool_tokens * cell / GIB
    free = gpu.memory_gb - gpu.cuda_context_gb - m.weight_gb - draft_gb - gpu.other_static_gb - pool_gb
    slots = args.max_mamba_cache_size or m.max_mamba_cache_size
    per_request = m.hybrid_state_slots_per_request + (r.draft_tokens if r.speculative else 0)
    if slots < per_request:
        raise StartupFailure(
            "RuntimeError: Not enough GPU memory for hybrid (mamba/linear-attention) state cache. "
            f"max_mamba_cache_size={slots} holds fewer than the {per_request} state slots one request needs."
        )
    log = []
    if r.max_running_requests:
        running = r.max_running_requests
    else:  # estimated from KV capacity: clamp(tokens/context_len*512, 2048, 4096), at most tokens//2
        running = min(max(2048, min(4096, pool_tokens * 512 // r.context_length)), pool_tokens // 2)
    if slots // per_request < running:
        log.append(
            f"max_running_requests is capped to {slots // per_request} by the mamba state cache "
            f"(max_mamba_cache_size={slots}, {per_request} state slots per request). To raise it: set "
            "--max-mamba-cache-size or lower --mem-fraction-static."
        )
        running = slots // per_request
    if pool_tokens < r.context_length:
        log.append(
            f"KV pool holds {pool_tokens} tokens, fewer than --context-length {r.context_length}. "
            "One full-length request cannot fit, so long inputs are rejected."
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
