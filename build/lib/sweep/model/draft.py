"""A draft held against its target before any server starts: an EAGLE-3 head launched as EAGLE, another model's
vocabulary, MTP asked of a checkpoint without MTP layers."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sweep.core.errors import UserError
from sweep.model.geometry import VOCAB_PADDING, Geometry, read_geometry
from sweep.records import DraftAsk, DraftKind

# --- the draft ---------------------------------------------------------------------------------------------


def is_eagle3_head(config: Mapping[str, Any]) -> bool:
    """EAGLE-3 heads say so: in their architecture (`LlamaForCausalLMEagle3`, `Eagle3DeepseekV2ForCausalLM`), a
    pruned `draft_vocab_size`, or an `eagle_config` naming the target layers whose hidden states they read."""
    names = " ".join(str(a) for a in config.get("architectures") or []).lower()
    eagle = config.get("eagle_config")
    aux = isinstance(eagle, dict) and "eagle_aux_hidden_state_layer_ids" in eagle
    return "eagle3" in names or "draft_vocab_size" in config or aux


def draft_geometry(ask: DraftAsk | None) -> Geometry | None:
    """A separate draft checkpoint's geometry, where the launch names one on this machine (None: the target's
    own layers, a hub id, or files the doctor cannot read)."""
    if ask is None or ask.path is None or not Path(ask.path).exists():
        return None
    try:
        return read_geometry(Path(ask.path))
    except (UserError, OSError, ValueError):
        return None


def draft_problems(target: Geometry, ask: DraftAsk, draft: Geometry | None) -> list[str]:
    """What makes the draft a launch asks for unable to work with the target, read from both checkpoints'
    files: MTP asked of a checkpoint without MTP layers, an EAGLE-3 head launched as EAGLE (or the reverse),
    a vocabulary or hidden size that is not the target's. Nothing where the files cannot tell."""
    if ask.kind is DraftKind.MTP:
        return _mtp_problems(draft or target, ask)
    if draft is None:
        return []
    out: list[str] = []
    arch = ", ".join(str(a) for a in draft.config.get("architectures") or []) or "no architecture named"
    head3 = is_eagle3_head(draft.config)
    if ask.kind is DraftKind.EAGLE and head3:
        out.append(
            f"{ask.flags} loads an EAGLE-3 head ({arch}) as EAGLE: it is fed one hidden state where it reads "
            "three and accepts nothing (accept length 1.00); launch it as EAGLE3"
        )
    elif ask.kind is DraftKind.EAGLE3 and not head3:
        out.append(
            f"{ask.flags} loads {arch}, not an EAGLE-3 head (no Eagle3 architecture, draft_vocab_size or "
            "eagle_config): launch an EAGLE head as EAGLE, or give an EAGLE-3 head"
        )
    target_vocab, draft_vocab = target.config.get("vocab_size"), draft.config.get("vocab_size")
    # An EAGLE head reads and writes the target's vocabulary; a separate model need only share its tokens, its
    # embedding padded otherwise (llama.cpp's `SPEC_VOCAB_MAX_SIZE_DIFFERENCE`: 128; Qwen2.5 0.5B against 72B).
    slack = VOCAB_PADDING if ask.kind is DraftKind.MODEL else 0
    if target_vocab and draft_vocab and abs(int(target_vocab) - int(draft_vocab)) > slack:
        out.append(
            f"the draft's vocabulary is {draft_vocab} tokens, the target's {target_vocab}: its tokens are not the "
            "target's (give a draft trained for this model)"
        )
    if ask.kind is not DraftKind.MODEL:
        reads = draft.config.get("target_hidden_size") or draft.config.get("hidden_size")
        hidden = target.config.get("hidden_size")
        if reads and hidden and int(reads) != int(hidden):
            out.append(
                f"the draft reads hidden states of width {reads}, the target's are {hidden}: it was trained for "
                "another model"
            )
    return out


def _mtp_problems(g: Geometry, ask: DraftAsk) -> list[str]:
    """MTP/NEXTN drafts with the checkpoint's own MTP layers: the tensors' count where the doctor read tensors
    (a quantized release may drop them while config.json still counts them), else config.json's."""
    if g.draft_layers is not None:
        held, where = g.draft_layers.value, g.draft_layers.source
    elif g.draft_layers_config is not None:
        held, where = g.draft_layers_config.value, g.draft_layers_config.source
    else:
        return []  # a config alone that names no depth: nothing to hold it against
    if held > 0:
        return []
    said = (
        f" although {g.draft_layers_config.source} says {g.draft_layers_config.value}"
        if g.draft_layers_config is not None
        and g.draft_layers_config.value > 0
        and g.draft_layers is not None
        else ""
    )
    return [
        f"{ask.flags} drafts with the checkpoint's MTP layers, and it has none ({where}){said}: use a "
        "checkpoint with its MTP layers, or another method"
    ]
