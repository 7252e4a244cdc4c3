"""Depth schedules in each engine's own form. A schedule is a list of (lowest batch size, depth), ascending from
batch size 1; depth 0 turns speculation off for those batch sizes.

- SGLang (0.5.23, `speculative/adaptive_spec_params.py`, `adaptive_step_router.py`): `--speculative-adaptive
  --speculative-adaptive-config FILE`, a JSON object keyed by batch size ("1", "4", ...), each slot with its
  `candidate_steps`. A batch is padded to its CUDA-graph size and served by the slot with the largest key not above
  it; a slot with one candidate never moves, so one candidate per slot is a fixed schedule. Chains only (top-k 1).
- vLLM (0.34, `SpeculativeConfig`): `num_speculative_tokens_per_batch_size`, a list of [low, high, k] batch-size
  ranges inside `--speculative-config`, with `num_speculative_tokens` the largest k.
- TensorRT-LLM (`DecodingBaseConfig.draft_len_schedule`): {batch size threshold: draft length}; it must hold
  batch size 1, whose length must equal `max_draft_len`, and no length may exceed it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Depths = Sequence[tuple[int, int]]  # (lowest batch size, depth), ascending, the first at batch size 1
# vLLM's method names for SGLang's (NEXTN is SGLang's name for a model's own MTP heads).
VLLM_METHODS = {
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "NEXTN": "mtp",
    "STANDALONE": "draft_model",
    "NGRAM": "ngram",
}


def drafts_somewhere(depths: Depths) -> bool:
    """Whether the schedule speculates at any batch size (all 0: it is no speculation at all)."""
    return any(depth > 0 for _, depth in depths)


def vllm_method(method: str) -> str | None:
    """vLLM's name for a speculative method measured on any engine, or None where vLLM has no counterpart (llama.cpp's
    n-gram lookups: their depth is a draft limit with other knobs beside it, not a chain's length)."""
    named = VLLM_METHODS.get(method.upper())
    return named or (method if method in VLLM_METHODS.values() else None)


def sglang_adaptive_config(depths: Depths) -> dict[str, dict[str, Any]]:
    return {str(batch): {"candidate_steps": [depth]} for batch, depth in depths}


def vllm_speculative_config(method: str, depths: Depths, max_batch: int) -> dict[str, Any]:
    ranges = []
    for index, (batch, depth) in enumerate(depths):
        high = depths[index + 1][0] - 1 if index + 1 < len(depths) else max_batch
        ranges.append([batch, max(batch, high), depth])
    return {
        "method": vllm_method(method) or method,
        "num_speculative_tokens": max(depth for _, depth in depths),
        "num_speculative_tokens_per_batch_size": ranges,
    }


def trtllm_speculative_config(depths: Depths) -> tuple[dict[str, Any], list[str]]:
    """The schedule and what had to change to be valid (lengths above batch size 1's are capped to it)."""
    first = depths[0][1]
    notes = [
        f"batch size {batch}: depth {depth} capped to {first} (TensorRT-LLM takes no length above batch size 1's)"
        for batch, depth in depths
        if depth > first
    ]
    schedule = {str(batch): min(depth, first) for batch, depth in depths}
    return {"max_draft_len": first, "draft_len_schedule": schedule}, notes


def counterpart_elsewhere(method: str, depths: Depths) -> bool:
    """Whether engines that take schedules (vLLM, TensorRT-LLM) run this method with a length above 0: a
    llama.cpp lookup's schedule has no counterpart there."""
    return vllm_method(method) is not None and drafts_somewhere(depths)


def tensorrt_llm_form(method: str, depths: Depths) -> dict[str, Any]:
    """TensorRT-LLM's form (no engine of ours runs it: the form is for people who serve with it)."""
    tensorrt, capped = trtllm_speculative_config(depths)
    return {
        "speculative_config": tensorrt if counterpart_elsewhere(method, depths) else None,
        "notes": capped,
    }


def no_counterpart_notes(method: str) -> list[str]:
    if vllm_method(method) is not None:
        return []
    return [f"{method} has no counterpart in vLLM or TensorRT-LLM: no schedule in their forms"]
