"""A model's geometry from its own files, without loading weights: `config.json` (a nested `text_config` too),
every safetensors header (8-byte little-endian length, then JSON: each tensor's dtype, shape and byte range), or a
GGUF file's metadata. Each number with where it came from: layers, which hold a KV cache (full attention), which a
window and which none (linear attention / recurrent state, held per request), KV heads x head dim or MLA's
latent, draft (MTP) layers counted from tensor names, vocabulary tensors, weight bytes; and where config and
tensors disagree."""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.core.errors import UserError
from sweep.model.files import gguf_metadata, read_config, safetensors_header
from sweep.records import WindowPool

GIB = 1024**3


# Bytes per KV element by the engines' dtype names (auto: the model's 16-bit dtype).
KV_DTYPE_BYTES = {
    "auto": 2,
    "bf16": 2,
    "bfloat16": 2,
    "f16": 2,
    "float16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "q8_0": 1,
}
# MTP layers under their own names: `mtp.layers.N.` (Qwen3-Next, Qwen3.5), `model.mtp_layers.N.` (MiMo). DeepSeek-V3
# and GLM-4.5 store them as the decoder layers past `num_hidden_layers` (`model.layers.61.` of a 61-layer model).
MTP_LAYER = re.compile(r"(?:^|\.)(?:mtp\.layers|mtp_layers)\.(\d+)\.")
LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
FULL_ATTENTION = re.compile(r"\.self_attn\.[kv]_proj\.weight$")
# The config keys released checkpoints count their MTP layers under: DeepSeek-V3, GLM-4.5, MiMo, Ernie 4.5
# (`num_nextn_predict_layers`), Qwen3.5 (`mtp_num_hidden_layers`), MiniMax-M2 (`num_mtp_modules`), IQuest
# (`num_mtp_layers`).
DRAFT_DEPTH_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules", "num_mtp_layers")
# `layer_types` names: attention over every token, over a window, and the rest (linear attention, recurrent
# state: a fixed state per request, no KV per token).
FULL_TYPES = {"full_attention", "attention", "global_attention"}
SLIDING_TYPES = {"sliding_attention", "local_attention", "chunked_attention"}
VOCAB_PADDING = 128  # tokens a separate draft model's vocabulary may differ by (its embedding's padding)
DSA_QUANT_BLOCK = 128  # `DSATokenToKVPool.quant_block_size`: elements per 4-byte fp8 scale
# Sliding-window patterns by family (llama.cpp's `set_swa_pattern` by GGUF architecture, transformers' config
# defaults by model_type, SGLang's `get_hybrid_layer_ids` for Llama 4's chunks): every n-th layer attends to
# every token, the others to the window. GGUF files and Gemma 3's config.json carry the window, not the pattern.
SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "cohere2": 4, "llama4": 4}


@dataclass(frozen=True)
class Fact:
    """A number and where it came from (`config.json: text_config.num_hidden_layers`, `tensors: mtp.layers.*`)."""

    value: int
    source: str


@dataclass(frozen=True)
class LinearState:
    """One linear-attention (gated delta net) or Mamba-2 layer's state, held per request, not per token: a
    convolution state of `conv_dim` x (`conv_kernel` - 1) and a recurrent state of `heads` x `head_dim` x
    `state_size` (SGLang's `Mamba2StateShape.create`: both split over tensor parallel; conv state in 16 bits,
    the recurrent state in float32 unless the config's `mamba_ssm_dtype` says otherwise: `mamba2_state_dtype`)."""

    conv_dim: int
    conv_kernel: int
    heads: int
    head_dim: int
    state_size: int
    temporal_bytes: int = 4
    conv_bytes: int = 2
    source: str = ""

    def layer_bytes(self, tp: int) -> int:
        conv = self.conv_dim // tp * (self.conv_kernel - 1) * self.conv_bytes
        return conv + self.heads // tp * self.head_dim * self.state_size * self.temporal_bytes


@dataclass
class Geometry:
    layers: Fact | None = None
    kv_layers: Fact | None = None  # layers with a KV cache of every token (full attention)
    sliding_layers: Fact | None = None  # layers whose KV cache holds the last `sliding_window` tokens only
    sliding_window: Fact | None = None
    state_layers: Fact | None = None  # linear-attention / recurrent layers (a fixed state, no KV per token)
    kv_width: Fact | None = None  # KV heads x head dim, per layer (for K; V's heads x v_head_dim)
    head_dim: int | None = None  # a KV head's width: tensor parallel splits KV heads, never a head
    v_head_dim: int | None = None  # V's head width where it differs from K's (SGLang: head_dim + v_head_dim)
    latent: Fact | None = None  # MLA: one latent + rope vector per layer and token, the same on every GPU
    rope_dim: int = 0  # of the latent, the rope part (DSA stores it in 16 bits under an fp8 cache)
    indexer: Fact | None = None  # DSA: the index keys' bytes per layer and token (fp8 with scales)
    linear_state: LinearState | None = None
    draft_layers: Fact | None = None  # MTP layers, counted from tensor names
    draft_layers_config: Fact | None = None  # what config.json says about them, if anything
    vocab_tensor_bytes: Fact | None = None  # embedding + output head
    weight_bytes: Fact | None = None
    disagreements: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # the (merged) config, as an engine would read it
    tensor_parallel: int = 1
    window: WindowPool | None = None  # how the engine pools the sliding-window layers (None: window only)
    draft: Geometry | None = None  # a separate draft checkpoint's geometry (EAGLE head, small model)

    @property
    def priced(self) -> bool:
        return self.kv_layers is not None and (self.kv_width is not None or self.latent is not None)

    def cell_bytes(self, kv_bytes: int, draft_layers: int | None = None) -> tuple[int, int]:
        """Per-token KV bytes of the target and of the draft: a separate draft at its own layers' cost, MTP
        layers (counted from tensors unless given) at the target's (they copy its attention). The target's
        include what its sliding-window layers add per full token where the engine pools them at a ratio."""
        if not self.priced or self.kv_layers is None:
            raise UserError(
                "the model's KV geometry is unknown", "give a folder with config.json or a GGUF file"
            )
        per_layer = self.layer_bytes(kv_bytes)
        target = self.kv_layers.value * per_layer + round(self.sliding_share * self.sliding_bytes(kv_bytes))
        if draft_layers == 0:
            return target, 0
        if self.draft is not None and self.draft.priced and draft_layers is None:
            return target, self.draft.draft_cost(kv_bytes)
        drafts = (
            draft_layers
            if draft_layers is not None
            else (self.draft_layers.value if self.draft_layers else 0)
        )
        return target, drafts * per_layer

    def draft_cost(self, kv_bytes: int) -> int:
        """What this checkpoint costs per token as a draft: its full-attention layers (an EAGLE head's one)."""
        return sum(self.cell_bytes(kv_bytes, 0))

    def layer_bytes(self, kv_bytes: int) -> int:
        """One full-attention layer's cache for one token: MLA's latent, else K and V of the KV heads."""
        if self.latent is not None:
            latent = self.latent.value * kv_bytes
            if self.indexer is not None and kv_bytes == 1:
                # DSA's scaled fp8 layout (`calculate_mla_kv_cache_dim`, CUDA's default backends): the latent
                # in fp8 with 4 bytes of scale per 128, the rope part in bf16.
                rank = self.latent.value - self.rope_dim
                latent = rank + rank // DSA_QUANT_BLOCK * 4 + self.rope_dim * 2
            return latent + (self.indexer.value if self.indexer else 0)
        if self.kv_width is None:
            return 0
        heads = self.kv_width.value // self.head_dim if self.head_dim else 1
        v_width = heads * self.v_head_dim if self.v_head_dim and self.head_dim else self.kv_width.value
        return (self.kv_width.value + v_width) * kv_bytes

    def sliding_bytes(self, kv_bytes: int) -> int:
        """Per token, the sliding-window layers' cache (held for the window's tokens, or at the engine's ratio)."""
        return (self.sliding_layers.value if self.sliding_layers else 0) * self.layer_bytes(kv_bytes)

    @property
    def sliding_share(self) -> float:
        """Sliding-window tokens held per full-attention token where the engine sizes them together (0: the
        window's tokens only, not per pool token)."""
        return (self.window.ratio or 0.0) if self.window is not None and self.window.apart else 0.0

    def state_bytes(self) -> int:
        """Linear-attention / recurrent state one request holds, on one GPU."""
        if self.linear_state is None or not self.state_layers:
            return 0
        return self.state_layers.value * self.linear_state.layer_bytes(self.tensor_parallel)

    def token_bytes(self, kv_bytes: int, drafting: bool) -> int:
        """What a token of context costs: the target's layers, and the draft's where one drafts."""
        return sum(self.cell_bytes(kv_bytes, None if drafting else 0))

    def pooled(self, window: WindowPool) -> Geometry:
        """The geometry as an engine that holds sliding-window layers this way prices it: pooled with the full
        layers, they are full layers."""
        if window.apart or not self.sliding_layers or self.kv_layers is None:
            return dataclasses.replace(self, window=window)
        full = Fact(
            self.kv_layers.value + self.sliding_layers.value,
            f"{self.kv_layers.source} + {self.sliding_layers.value} sliding-window layers ({window.source})",
        )
        return dataclasses.replace(self, kv_layers=full, sliding_layers=None, window=window)

    def per_gpu(self, tp: int) -> Geometry:
        """The geometry one GPU of `tp` (tensor parallel) holds: the KV heads split between them, each GPU
        keeping at least one (fewer heads than GPUs are replicated: SGLang's and vLLM's `get_num_kv_heads`,
        `max(1, heads // tp)`); MLA's latent whole on every GPU (vLLM: one KV head of kv_lora_rank +
        qk_rope_head_dim); the linear-attention state split."""
        if tp <= 1:
            return self
        draft = self.draft.per_gpu(tp) if self.draft is not None else None
        if self.latent is not None or self.kv_width is None or not self.head_dim:
            return dataclasses.replace(self, tensor_parallel=tp, draft=draft)
        heads = self.kv_width.value // self.head_dim
        width = max(1, heads // tp) * self.head_dim
        return dataclasses.replace(
            self,
            kv_width=Fact(width, f"{self.kv_width.source}, over tensor parallel {tp}"),
            tensor_parallel=tp,
            draft=draft,
        )


# --- reading the files --------------------------------------------------------------------------------------


def geometry_of(model: Path) -> Geometry:
    if model.is_file() and model.suffix == ".gguf":
        return _gguf_geometry(model)
    if not model.is_dir():
        raise UserError(
            f"{model} is neither a model folder nor a .gguf file", "give the folder with config.json"
        )
    config, prefix = read_config(model)
    geometry = Geometry(config=config)
    _from_config(geometry, config, prefix)
    files = sorted(model.glob("*.safetensors"))
    if files:
        _from_tensors(
            geometry, {name: (f, entry) for f in files for name, entry in safetensors_header(f).items()}
        )
    if geometry.layers is None and geometry.kv_layers is None:
        raise UserError(f"{model} has no config.json and no safetensors files", "give the model's folder")
    return geometry


def read_geometry(model: Path) -> Geometry:
    """`geometry_of`, read once while the model's files are unchanged: a sweep asks at every launch, and a
    large model's headers are hundreds of files. Callers must not change what it returns."""
    files = [model] if model.is_file() else sorted(model.glob("*.json")) + sorted(model.glob("*.safetensors"))
    stats = [(f.name, f.stat()) for f in files]
    return _geometry_of_files(model, tuple((name, st.st_mtime_ns, st.st_size) for name, st in stats))


@functools.lru_cache(maxsize=8)
def _geometry_of_files(model: Path, files: tuple[tuple[str, int, int], ...]) -> Geometry:
    return geometry_of(model)


def _from_config(g: Geometry, config: Mapping[str, Any], prefix: str) -> None:
    where = f"config.json: {prefix}"
    if "num_hidden_layers" in config:
        g.layers = Fact(int(config["num_hidden_layers"]), where + "num_hidden_layers")
    types = config.get("layer_types")
    if config.get("sliding_window"):
        g.sliding_window = Fact(int(config["sliding_window"]), where + "sliding_window")
    elif config.get("attention_chunk_size"):  # Llama 4: chunked attention, a window the engines pool as one
        g.sliding_window = Fact(int(config["attention_chunk_size"]), where + "attention_chunk_size")
    if isinstance(types, list) and types:
        full = sum(1 for t in types if str(t) in FULL_TYPES)
        sliding = sum(1 for t in types if str(t) in SLIDING_TYPES)
        g.kv_layers = Fact(full, where + "layer_types (full attention)")
        if sliding:
            g.sliding_layers = Fact(sliding, where + "layer_types (sliding attention)")
        g.state_layers = Fact(len(types) - full - sliding, where + "layer_types (linear attention, state)")
    elif g.sliding_window and g.layers and (pattern := _swa_pattern(config)):
        said = "sliding_window_pattern" if "sliding_window_pattern" in config else "model_type's pattern"
        g.kv_layers = Fact(g.layers.value // pattern, where + f"{said} ({pattern})")
        g.sliding_layers = Fact(g.layers.value - g.kv_layers.value, where + said)
    elif isinstance(config.get("hybrid_override_pattern"), str) and g.layers:
        # Nemotron-H: a character per layer, `*` attention, `M` Mamba-2, `-` / `E` MLP or experts only.
        plan = str(config["hybrid_override_pattern"])
        g.kv_layers = Fact(plan.count("*"), where + "hybrid_override_pattern (*: attention)")
        g.state_layers = Fact(plan.count("M"), where + "hybrid_override_pattern (M: Mamba-2)")
    elif "full_attention_interval" in config and g.layers:
        interval = int(config["full_attention_interval"])
        g.kv_layers = Fact(g.layers.value // interval, where + f"full_attention_interval ({interval})")
        g.state_layers = Fact(g.layers.value - g.kv_layers.value, where + "full_attention_interval")
    elif g.layers:
        g.kv_layers = Fact(g.layers.value, where + "num_hidden_layers (all full attention)")
    heads = config.get("num_key_value_heads", config.get("num_attention_heads"))
    head_dim = config.get("head_dim") or (
        int(config["hidden_size"]) // int(config["num_attention_heads"])
        if "hidden_size" in config and "num_attention_heads" in config
        else None
    )
    if heads and head_dim:
        g.kv_width = Fact(int(heads) * int(head_dim), where + "num_key_value_heads x head_dim")
        g.head_dim = int(head_dim)
        if config.get("v_head_dim") and int(config["v_head_dim"]) != int(head_dim):
            g.v_head_dim = int(config["v_head_dim"])
    if config.get("kv_lora_rank"):
        # SGLang's `calculate_mla_kv_cache_dim`: kv_lora_rank + qk_rope_head_dim per layer, one vector for K and
        # V, stored whole on every GPU (`_compute_cell_size` does not divide it by the attention TP size).
        rope = int(config.get("qk_rope_head_dim") or 0)
        g.latent = Fact(int(config["kv_lora_rank"]) + rope, where + "kv_lora_rank + qk_rope_head_dim (MLA)")
        g.rope_dim = rope
        if config.get("index_topk") is not None and config.get("index_head_dim"):
            # DeepSeek sparse attention (`is_deepseek_dsa`): index keys in fp8 with a 4-byte scale per 128,
            # `index_kpool` tokens pooled into one (`_compute_dsa_indexer_cell_size`).
            dim = int(config["index_head_dim"])
            pooled = int(config.get("index_kpool") or 1)
            size = -(-(dim + dim // DSA_QUANT_BLOCK * 4) // pooled)
            g.indexer = Fact(size, where + "index_head_dim (DSA index keys, fp8 + scales)")
        g.kv_width = None
    g.linear_state = _linear_state(config, where)
    for key in DRAFT_DEPTH_KEYS:
        if config.get(key) is not None:
            g.draft_layers_config = Fact(int(config[key]), where + key)
            break


def _swa_pattern(config: Mapping[str, Any]) -> int | None:
    """Every n-th layer attends to every token: the config's `sliding_window_pattern`, else the family's (a
    Gemma 3 config.json leaves it to transformers' default, 6)."""
    if config.get("sliding_window_pattern"):
        return int(config["sliding_window_pattern"])
    return SWA_PATTERN.get(str(config.get("model_type", "")).removesuffix("_text"))


def _linear_state(config: Mapping[str, Any], where: str) -> LinearState | None:
    """The state a linear-attention layer holds per request: gated delta nets (`linear_*` keys: Qwen3-Next,
    Qwen3.5, SGLang's `Qwen3NextConfig.mamba2_cache_params`) or Mamba-2 (`mamba_*` / `ssm_state_size`)."""
    temporal = 2 if str(config.get("mamba_ssm_dtype", "float32")) in ("bfloat16", "float16") else 4
    if "linear_num_value_heads" in config and "linear_key_head_dim" in config:
        value_heads, value_dim = int(config["linear_num_value_heads"]), int(config["linear_value_head_dim"])
        key_heads, key_dim = int(config["linear_num_key_heads"]), int(config["linear_key_head_dim"])
        return LinearState(
            conv_dim=value_heads * value_dim + 2 * key_heads * key_dim,
            conv_kernel=int(config.get("linear_conv_kernel_dim", 4)),
            heads=value_heads,
            head_dim=value_dim,
            state_size=key_dim,
            temporal_bytes=temporal,
            source=where + "linear_* (gated delta net)",
        )
    heads = config.get("mamba_num_heads") or config.get("mamba_n_heads")
    if heads and config.get("mamba_head_dim") and config.get("ssm_state_size"):
        head_dim, size = int(config["mamba_head_dim"]), int(config["ssm_state_size"])
        return LinearState(
            conv_dim=int(heads) * head_dim + 2 * int(config.get("n_groups", 1)) * size,
            conv_kernel=int(config.get("conv_kernel", config.get("mamba_d_conv", 4))),
            heads=int(heads),
            head_dim=head_dim,
            state_size=size,
            temporal_bytes=temporal,
            source=where + "mamba_* (Mamba-2)",
        )
    return None


def decoder_prefix(names: Iterable[str], layers: int | None, drafts: int) -> str:
    """Where the decoder's layers are (`model.layers.`, `model.language_model.layers.`): the prefix holding every
    index below `num_hidden_layers` whose count is nearest the decoder's and its MTP layers', so a vision
    tower's `encoder.layers.N` is taken for neither."""
    indexes: dict[str, set[int]] = {}
    for name in names:
        if not MTP_LAYER.search(name) and (found := LAYER.search(name)):
            indexes.setdefault(name[: found.start(1)], set()).add(int(found.group(1)))

    def fit(prefix: str) -> tuple[bool, int]:
        held = indexes[prefix]
        covers = layers is not None and set(range(layers)) <= held
        return covers, -abs(len(held) - (layers or 0) - drafts) if layers is not None else len(held)

    return max(indexes, key=fit, default="")


def mtp_layer(name: str, layers: int | None, prefix: str) -> int | None:
    """The MTP layer a tensor belongs to, under every naming released checkpoints use (None: a target tensor)."""
    if found := MTP_LAYER.search(name):
        return int(found.group(1))
    found = LAYER.search(name)
    if layers is not None and found and name[: found.start(1)] == prefix and int(found.group(1)) >= layers:
        return int(found.group(1)) - layers  # stored as the next decoder layer
    return None


def _from_tensors(g: Geometry, tensors: Mapping[str, tuple[Path, Mapping[str, Any]]]) -> None:
    total = sum(int(e["data_offsets"][1]) - int(e["data_offsets"][0]) for _, e in tensors.values())
    g.weight_bytes = Fact(total, f"safetensors headers ({len(tensors)} tensors)")
    count = g.layers.value if g.layers else None
    prefix = decoder_prefix(tensors, count, g.draft_layers_config.value if g.draft_layers_config else 0)
    drafts = {name: index for name in tensors if (index := mtp_layer(name, count, prefix)) is not None}
    mtp = set(drafts.values())
    files = sorted({tensors[name][0].name for name in drafts})
    naming = "mtp.layers.N / mtp_layers.N / layers.N past num_hidden_layers"
    g.draft_layers = Fact(len(mtp), f"tensors: {naming} in {', '.join(files) or 'no file'}")
    decoder = [(name, m) for name in tensors if name not in drafts and (m := LAYER.search(name))]
    target = {int(m.group(1)) for name, m in decoder if name[: m.start(1)] == prefix}
    full = {
        int(m.group(1)) for name, m in decoder if name[: m.start(1)] == prefix and FULL_ATTENTION.search(name)
    }
    vocab = int(g.config.get("vocab_size", 0))
    vocab_bytes = sum(
        int(e["data_offsets"][1]) - int(e["data_offsets"][0])
        for _, e in tensors.values()
        if vocab and e.get("shape") and int(e["shape"][0]) == vocab
    )
    if vocab_bytes:
        g.vocab_tensor_bytes = Fact(vocab_bytes, f"tensors with {vocab} rows (embedding, output head)")
    if target and g.layers and len(target) != g.layers.value:
        g.disagreements.append(f"config says {g.layers.value} layers, the tensors hold {len(target)}")
    attending = g.kv_layers.value + (g.sliding_layers.value if g.sliding_layers else 0) if g.kv_layers else 0
    if full and g.kv_layers and len(full) != attending:
        g.disagreements.append(
            f"config says {attending} attention layers, the tensors hold {len(full)} (k/v projections)"
        )
    if full and g.kv_layers is None:
        g.kv_layers = Fact(len(full), "tensors: layers with self_attn.k_proj")
    if g.draft_layers_config and g.draft_layers_config.value != len(mtp):
        g.disagreements.append(
            f"{g.draft_layers_config.source} says {g.draft_layers_config.value} draft layers, the tensors hold {len(mtp)}"
        )
    elif g.draft_layers_config is None and mtp:
        g.disagreements.append(
            f"config.json names no draft depth ({', '.join(DRAFT_DEPTH_KEYS)}); the tensors hold {len(mtp)} MTP "
            "layers (an engine that falls back to num_hidden_layers over-counts the draft's KV)"
        )


def _gguf_geometry(path: Path) -> Geometry:
    meta = gguf_metadata(path)
    arch = str(meta.get("general.architecture", ""))

    def fact(key: str) -> Fact | None:
        value = meta.get(f"{arch}.{key}")
        return None if value is None else Fact(int(value), f"gguf: {arch}.{key}")

    g = Geometry(config={k: v for k, v in meta.items() if not isinstance(v, list)})
    tokens = meta.get("tokenizer.ggml.tokens")
    if isinstance(tokens, list):  # a draft must share the target's vocabulary: its size as config.json has it
        g.config["vocab_size"] = len(tokens)
    if f"{arch}.embedding_length" in meta:
        g.config["hidden_size"] = int(meta[f"{arch}.embedding_length"])
    g.layers = fact("block_count")
    heads, key_length = fact("attention.head_count_kv"), fact("attention.key_length")
    if heads and key_length:
        g.kv_width = Fact(heads.value * key_length.value, f"{heads.source} x {key_length.source}")
        g.head_dim = key_length.value
    g.kv_layers = g.layers
    g.sliding_window = fact("attention.sliding_window")
    pattern = SWA_PATTERN.get(arch)
    if g.layers and g.sliding_window and pattern:
        why = f"llama.cpp's {arch} pattern: every {pattern}th layer full"
        g.kv_layers = Fact(g.layers.value // pattern, f"{g.layers.source}, {why}")
        g.sliding_layers = Fact(g.layers.value - g.kv_layers.value, f"{g.layers.source}, {why}")
    g.draft_layers = fact("nextn_predict_layers") or Fact(0, f"gguf: no {arch}.nextn_predict_layers")
    g.weight_bytes = Fact(path.stat().st_size, "the file's size")
    return g
