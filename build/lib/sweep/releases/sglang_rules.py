"""SGLang's own rules, as 0.5.23's source has them: the automatic memory fraction, the speculative parameters
it chooses where none are given, adaptive speculation's defaults and refusals, and block drafts' sizes.

The adapter (`sglang.py`) plans launches with them and the simulator resolves launches with them, so a rule is
written once; `tests/test_sglang_conformance.py` reads each back from the release's source.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep.core.errors import UserError

# Memory defaults by GPU size (`arg_groups/memory_hook.py`, tensor parallel under 4): the largest GPU memory
# (GB) each row applies below, its chunked-prefill size and its decode CUDA-graph max batch size.
AUTO_MEMORY = ((20, 2048, 8), (35, 4096, 48), (60, 4096, 32), (90, 8192, 256), (160, 8192, 256))
AUTO_MEMORY_TOP = (16384, 512)
MLA_PREFILL_GRAPH_MB = 1.5 * 1024  # `reserve_for_graph_mb`: what an MLA model's prefill graphs keep back


@dataclass(frozen=True)
class GraphReserve:
    """What SGLang's automatic `mem_fraction_static` keeps back for: the prefill chunk's activations, tensor
    parallelism, and the CUDA graphs it will capture (0: that phase captures none)."""

    chunk: int
    tensor_parallel: int = 1
    decode_max_bs: int = 0
    prefill_max_bs: int = 0
    mla: bool = False

    @property
    def megabytes(self) -> float:
        """`handle_gpu_memory_settings` + `reserve_for_graph_mb` (0.5.23): 512 MB, 1.5 MB per activation token,
        1/8 GB per GPU of the model, 2 MB per decode graph batch size, 8 MB per captured prefill size."""
        graphs = 2.0 * self.decode_max_bs
        if self.prefill_max_bs:
            graphs += MLA_PREFILL_GRAPH_MB if self.mla else 8 * len(prefill_graph_sizes(self.prefill_max_bs))
        return 512 + 1.5 * max(self.chunk, 2048) + self.tensor_parallel / 8 * 1024 + graphs


def prefill_graph_sizes(max_tokens: int) -> list[int]:
    """`generate_prefill_cuda_graph_batch_sizes`: the token counts the prefill graphs are captured for."""
    sizes = [
        *range(4, 33, 4),
        *range(48, 257, 16),
        *range(288, 513, 32),
        *range(576, 1025, 64),
        *range(1280, 4097, 256),
        *range(4608, max_tokens + 1, 512),
    ]
    return [s for s in sizes if s <= max_tokens]


def auto_memory_fraction(gpu_gb: float, reserve: GraphReserve) -> float:
    """SGLang's `mem_fraction_static` when unset: the GPU's memory less the reserve (at least 10 GB above 60 GB).
    Runs before the speculative hook, so it sizes decode graphs for the unset batch limit."""
    megabytes = gpu_gb * 1024
    reserved = reserve.megabytes
    if megabytes > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((megabytes - reserved) / megabytes, 3)


def memory_defaults(gpu_gb: float) -> tuple[int, int]:
    """The chunked-prefill size and decode max batch size SGLang picks for a GPU of this size."""
    return next(((c, b) for top, c, b in AUTO_MEMORY if gpu_gb < top), AUTO_MEMORY_TOP)


# `_auto_choose_speculative_params` (0.5.23): steps, topk and draft tokens where none is given, by architecture;
# STANDALONE always takes the default.
AUTO_SPEC_DEFAULT = (3, 1, 4)
AUTO_SPEC_BY_ARCHITECTURE = {
    "LlamaForCausalLM": (5, 4, 8),
    "Grok1ForCausalLM": (5, 4, 8),
    "Grok1VForCausalLM": (5, 4, 8),
}


def auto_spec_params(algorithm: str, architecture: str | None) -> tuple[int, int, int]:
    if algorithm == "STANDALONE" or architecture is None:
        return AUTO_SPEC_DEFAULT
    return AUTO_SPEC_BY_ARCHITECTURE.get(architecture, AUTO_SPEC_DEFAULT)


# Algorithms that draft with a model, step by step (SpeculativeAlgorithm.is_eagle in 0.5.23 holds EAGLE, EAGLE3
# and FROZEN_KV_MTP, which NEXTN/EAGLE become for Gemma 4 assistant drafts; NEXTN is EAGLE's alias, STANDALONE a
# separate draft model run the same way). The adapter and the simulator both read this one tuple.
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "FROZEN_KV_MTP")
# Block drafts: the flag of the block size, its default, and whether the block excludes the root it is verified
# with (DSPARK's gamma: num_draft_tokens = gamma + 1) or includes it (DFLASH: num_draft_tokens = block size).
BLOCK_SIZES = {
    "DFLASH": ("speculative-dflash-block-size", 16, False),
    "DSPARK": ("speculative-dspark-block-size", 7, True),
}
BLOCK_DRAFTS = tuple(BLOCK_SIZES)  # one draft forward proposes a whole block (steps and topk forced to 1)
# `adaptive_unsupported_reason` (0.5.23): the switches under which adaptive speculation does not run, and the
# reason it logs for each.
ADAPTIVE_UNSUPPORTED = (
    (
        "enable-dp-attention",
        "attention DP is not supported (adaptive tier decisions are not synchronized across DP ranks)",
    ),
    (
        "enable-multi-layer-eagle",
        "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement adaptive)",
    ),
    (
        "enable-two-batch-overlap",
        "enable_two_batch_overlap=True is not supported (adaptive state swap would discard the TboAttnBackend "
        "wrapper)",
    ),
    (
        "enable-pdmux",
        "enable_pdmux=True is not supported (adaptive state swap does not update decode_attn_backend_group)",
    ),
)
# Models whose overrides turn multi-layer EAGLE on under EAGLE/NEXTN (0.5.23 `arg_groups/overrides.py`,
# `model_overrides/`): adaptive speculation does not run on them.
MULTI_LAYER_EAGLE_ARCHITECTURES = frozenset(
    {
        "MiMoV2ForCausalLM",
        "MiMoV2FlashForCausalLM",
        "GigaChat35ForCausalLM",
        "GigaChat35ForCausalLMNextN",
        "Step3p5ForCausalLM",
        "Step3p7ForConditionalGeneration",
    }
)
# `adaptive_spec_params.DEFAULT_ADAPTIVE_CONFIG` (0.5.23): candidate steps per batch-size slot.
DEFAULT_ADAPTIVE_CONFIG: dict[str, dict[str, Any]] = {
    "1": {
        "candidate_steps": [1, 3, 5, 7],
        "up_hysteresis": 0.0,
        "down_hysteresis": -0.25,
        "ceiling_coeff": 0,
    },
    "8": {"candidate_steps": [0, 1, 3], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "32": {"candidate_steps": [0, 1], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
    "64": {"candidate_steps": [0], "up_hysteresis": 0.0, "down_hysteresis": 0.0, "ceiling_coeff": 0},
}


def resolved_algorithm(name: str | None) -> str | None:
    """`_resolve_speculative_algorithm_alias`: NEXTN is EAGLE (upper case, as the hook stores it)."""
    upper = name.upper() if name else None
    return "EAGLE" if upper == "NEXTN" else upper


def adaptive_unsupported_reason(
    algorithm: str | None, topk: int | None, switches: Iterable[str], architecture: str | None
) -> str | None:
    """`adaptive_unsupported_reason`: why adaptive speculation does not run (0.5.23 then warns and runs static
    steps), None where it does. `algorithm` as resolved; `switches`: the flags set (`enable-dp-attention`);
    a model whose override turns multi-layer EAGLE on counts as that switch."""
    if algorithm not in ("EAGLE", "EAGLE3"):
        return f"speculative_algorithm={algorithm} (only EAGLE/EAGLE3 are supported)"
    if topk is not None and topk != 1:
        return f"speculative_eagle_topk={topk} (only topk=1 is supported)"
    on = set(switches)
    if algorithm == "EAGLE" and architecture in MULTI_LAYER_EAGLE_ARCHITECTURES:
        on.add("enable-multi-layer-eagle")
    return next((why for flag, why in ADAPTIVE_UNSUPPORTED if flag in on), None)


def candidate_union(slots: Iterable[Mapping[str, Any]]) -> list[int]:
    """`resolve_candidate_steps_from_config`: every slot's candidate steps together, sorted."""
    return sorted({int(s) for slot in slots for s in slot.get("candidate_steps") or []})


def adaptive_candidate_steps(path: str | None) -> list[int]:
    """The candidate steps of the config file at `path` (the default config's where none is given): the starting
    steps must be one of them."""
    config: Any = DEFAULT_ADAPTIVE_CONFIG
    if path is not None:
        try:
            config = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(
                f"cannot read the adaptive speculation config {path}: {exc}",
                "give speculative-adaptive-config a readable JSON file",
            ) from None
    slots = (
        [v for k, v in config.items() if str(k).isdigit() and isinstance(v, dict)]
        if isinstance(config, dict)
        else []
    )
    return candidate_union(slots)


# `is_hybrid_swa_model` (0.5.23 `configs/model_config.py`): the architectures whose sliding-window layers get a
# pool of their own (`SWA_SINK_ARCHS`, `MIMO_V2_MODEL_ARCHS` and the listed ones), or a config that says
# `is_hybrid_swa`. Every other model's sliding-window layers share the full pool and cost what a full layer
# costs per token (Gemma 2 and 3, Mistral's window): SGLang saves nothing on their windows.
HYBRID_SWA_ARCHITECTURES = frozenset(
    {
        "BeamForCausalLM",
        "Llama4ForConditionalGeneration",
        "DeepseekV4ForCausalLM",
        "DeepseekV4ForCausalLMNextN",
        "DeepseekV4ForCausalLMDSpark",
        "GptOssForCausalLM",
        "GraniteSWAForCausalLM",
        "GraniteMoeSWAForCausalLM",
        "IQuestQ1ForCausalLM",
        "IQuestQ1MTP",
        "MiMoV2ForCausalLM",
        "MiMoV2FlashForCausalLM",
        "MiMoV2MTP",
        "Step3p5ForCausalLM",
        "Step3p5MTP",
        "Step3p7ForConditionalGeneration",
        "Gemma4ForCausalLM",
        "Gemma4ForConditionalGeneration",
        "EmbeddingGemma2Model",
        "Gemma4UnifiedForConditionalGeneration",
        "DiffusionGemmaForBlockDiffusion",
        "LagunaForCausalLM",
        "MellumForCausalLM",
        "MuseGlimmerForCausalLM",
        "MuseGlimmerForConditionalGeneration",
        "InklingForConditionalGeneration",
        "InklingForConditionalGenerationMTP",
        "UnlimitedOCRForCausalLM",
    }
)
# `swa_full_tokens_ratio` (`arg_groups/fields/schedule.py`): SWA-pool tokens per full-pool token, 0.8 where
# unset; the model overrides that set another (`model_overrides/deepseek_v4.py`, `inkling.py`).
SWA_FULL_TOKENS_RATIO = 0.8
SWA_RATIO_BY_ARCHITECTURE = {"DeepseekV4ForCausalLM": 0.1, "InklingForConditionalGeneration": 0.1}


def hybrid_swa(architectures: Iterable[str], config: Mapping[str, Any]) -> bool:
    """`is_hybrid_swa_model`: whether SGLang pools this model's sliding-window layers apart (Laguna only with a
    window)."""
    names = set(architectures)
    if "LagunaForCausalLM" in names and not config.get("sliding_window"):
        return False
    return bool(names & HYBRID_SWA_ARCHITECTURES) or bool(config.get("is_hybrid_swa"))


def swa_ratio(architectures: Iterable[str], given: float | None) -> float:
    """The SWA pool's tokens per full-pool token: the flag's, else the model's override, else 0.8."""
    if given is not None:
        return float(given)
    return next(
        (SWA_RATIO_BY_ARCHITECTURE[a] for a in architectures if a in SWA_RATIO_BY_ARCHITECTURE),
        SWA_FULL_TOKENS_RATIO,
    )


# Algorithms that draft with the target checkpoint's own MTP layers when no draft path is given (0.5.23's
# `_handle_eagle_family` sets the path to the model's for the MTP architectures; the others load the target in
# draft mode): NEXTN always, EAGLE without a path. EAGLE3 needs a head; STANDALONE a model.
MTP_ALGORITHMS = frozenset({"NEXTN", "EAGLE"})


# `configs/model_config.py` `_get_and_verify_dtype`: with `--dtype auto` each model runs in its config's dtype
# (`dtype`, else `torch_dtype`; none is float32), float32 cast down to float16 (bfloat16 for Gemma).
HALF_DTYPES = frozenset({"float16", "bfloat16"})


def auto_dtype(config: Mapping[str, Any]) -> str:
    """The dtype `--dtype auto` runs a model of this config.json in."""
    named = str(config.get("dtype") or config.get("torch_dtype") or "float32").removeprefix("torch.")
    if named not in ("float32", "float"):
        return named
    return "bfloat16" if str(config.get("model_type", "")).startswith("gemma") else "float16"


def draft_dtype_clash(target: Mapping[str, Any], draft: Mapping[str, Any]) -> tuple[str, str] | None:
    """(target, draft) where `--dtype auto` would run a separate draft in another 16-bit dtype than its target.
    The draft's first layer concatenates the target's embeddings with its own hidden state, which promotes float16
    beside bfloat16 to float32, and its projection dies ("expected mat1 and mat2 to have the same dtype, but got:
    float != c10::BFloat16": 0.5.17 on the H100, a bfloat16 EAGLE3 draft of a float16 target)."""
    pair = auto_dtype(target), auto_dtype(draft)
    return pair if pair[0] != pair[1] and set(pair) <= HALF_DTYPES else None
