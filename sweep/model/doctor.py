"""The sizing doctor: the memory truth behind a configuration, from the model's own files and the server's log.

It reads a model folder without loading weights: `config.json` (a nested `text_config` too), every safetensors
header (8-byte little-endian length, then JSON: each tensor's dtype, shape and byte range), or a GGUF file's
metadata. From them the geometry, each number with where it came from: layers, which hold a KV cache (full
attention), which a window and which none (linear attention / recurrent state, held per request), KV heads x
head dim or MLA's latent, draft (MTP) layers counted from tensor names, vocabulary tensors, weight bytes; and
where config and tensors disagree.

The geometry is priced as the engine holds it (`EngineRules`, from the engine: how it pools sliding-window
layers, the draft its flags load, tensor parallel), and a draft that cannot work with the model (an EAGLE-3
head launched as EAGLE, another model's vocabulary, MTP asked of a checkpoint without MTP layers) is named
before any server starts. Then the per-token KV cost (target, draft, window and state apart) at the KV dtype;
with a server log, the pool the engine
should have had against the pool it logged (an engine that read the draft depth wrong sized the pool with the
wrong cost: the named cause), free memory left after the pool larger than the pool (a miscalculation, not a
shortage), and CUDA-graph batch sizes the server can never reach (decode sizes above its running limit,
prefill sizes above its chunk) with the memory they hold and the context it would buy.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.core.errors import UserError
from sweep.model.files import gguf_metadata, read_config, safetensors_header
from sweep.records import DraftAsk, DraftKind, Finding, GraphCapture, LaunchFacts, WindowPool

GIB = 1024**3
MISMATCH = 0.03  # a pool this far from the prediction is named
SAME_GB = 0.01  # logs print GB to two decimals
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


# --- the verdicts ------------------------------------------------------------------------------------------


def pool_findings(
    g: Geometry, facts: LaunchFacts, kv_bytes: int, draft_layers_read: Fact | None, speculative: bool
) -> list[Finding]:
    """The pool the log shows against the pool at the true per-token cost. `draft_layers_read`: the draft depth
    the engine read (its pool was sized with it), where it reads one; without speculation no draft shares it."""
    out: list[Finding] = []
    target, draft = g.cell_bytes(kv_bytes, None if speculative else 0)
    if not speculative:
        draft_layers_read = None
    if facts.kv_pool_tokens:
        true_draft = (g.draft_layers.value if g.draft_layers else 0) if speculative else 0
        read_draft = draft_layers_read.value if draft_layers_read else true_draft
        assumed = sum(g.cell_bytes(kv_bytes, read_draft))
        if not _could_have_sized(facts, assumed):
            assumed = (
                target + draft
            )  # a release that reads the depth right: its budget holds no more than this

        truth = target + draft
        predicted = round(facts.kv_pool_tokens * assumed / truth)
        off = predicted / facts.kv_pool_tokens - 1
        if abs(off) <= MISMATCH:
            out.append(
                Finding(
                    f"KV pool {facts.kv_pool_tokens} tokens",
                    True,
                    f"as the files predict ({predicted})",
                    {"predicted_pool_tokens": predicted},
                )
            )
        else:
            cause = (
                f"cell size x{assumed / target:.1f} ({assumed} B where the target's layers take {target} B)"
            )
            if draft_layers_read and g.draft_layers and draft_layers_read.value != g.draft_layers.value:
                cause += (
                    f": draft depth read as {draft_layers_read.value} layers ({draft_layers_read.source}), "
                    f"the tensors hold {g.draft_layers.value}"
                )
            out.append(
                Finding(
                    f"KV pool {facts.kv_pool_tokens} tokens, should be {predicted}",
                    False,
                    f"{cause}; the true cost is {truth} B per token ({target} target + {draft} draft)",
                    {"predicted_pool_tokens": predicted},
                )
            )
        out += _bytes_per_token(facts, target, draft)
    pool_gb = facts.kv_cache_gb
    if pool_gb is not None and facts.free_after_pool_gb is not None and facts.free_after_pool_gb > pool_gb:
        out.append(
            Finding(
                f"{facts.free_after_pool_gb:.2f} GB free after a {pool_gb:.2f} GB pool",
                False,
                "more memory left than the pool holds: a miscalculation, not a shortage",
            )
        )
    return out


def _bytes_per_token(facts: LaunchFacts, target: int, draft: int) -> list[Finding]:
    """The logged pool's memory over its tokens against the files' cost (the target's, or the target's and the
    draft's where one pool holds both): a layer miscounted (sliding-window layers as full, a dtype) shows here
    even where the pool's size is right. Logs print GB to two decimals (MiB where the engine logs MiB)."""
    if not facts.kv_pool_tokens or not (facts.kv_cache_mib or facts.kv_cache_gb):
        return []
    if facts.kv_cache_mib:
        logged, rounding = facts.kv_cache_mib * 1024**2, 0.01 * 1024**2
    else:
        logged, rounding = (facts.kv_cache_gb or 0.0) * GIB, 0.01 * GIB
    per_token = logged / facts.kv_pool_tokens
    slack = MISMATCH + rounding / logged
    if any(abs(per_token / cost - 1) <= slack for cost in {target, target + draft} if cost):
        return []
    return [
        Finding(
            f"KV pool costs {per_token:.0f} B per token, the files say {target} B",
            False,
            f"{facts.kv_pool_tokens} tokens in {logged / GIB:.3f} GB: x{per_token / target:.2f} the files' cost "
            "(layers counted differently, or another KV dtype than the one given here)",
        )
    ]


def cache_findings(g: Geometry, facts: LaunchFacts, kv_bytes: int) -> list[Finding]:
    """Each KV cache the engine logged (llama.cpp: MiB, cells, layers, one line per cache: the full layers',
    the sliding window's) against the files' cost of that many cells of that many layers."""
    out = []
    layer = g.layer_bytes(kv_bytes)
    for cache in facts.kv_caches if layer else []:
        cells, layers, mib = int(cache["cells"]), int(cache["layers"]), float(cache["mib"])
        predicted = cells * layers * layer / 1024**2
        what = f"KV cache {mib:.2f} MiB for {cells} cells of {layers} layers"
        if abs(mib - predicted) <= max(MISMATCH * predicted, 0.01):
            out.append(
                Finding(what, True, f"as the files predict ({predicted:.2f} MiB at {layer} B a layer)")
            )
        else:
            out.append(
                Finding(
                    what,
                    False,
                    f"the files predict {predicted:.2f} MiB at {layer} B a layer and token: x{mib / predicted:.2f} "
                    "(another KV dtype than the one given here, or layers counted differently)",
                )
            )
    return out


def _could_have_sized(facts: LaunchFacts, cell: int) -> bool:
    """Whether a pool of the logged size at `cell` bytes per token fits the memory the log shows it had (the
    pool and what was left free after it): if not, the engine cannot have sized it with that cost."""
    if facts.kv_pool_tokens is None or facts.kv_cache_gb is None or facts.free_after_pool_gb is None:
        return True  # nothing to tell the readings apart: the engine's own reading stands
    had = (facts.kv_cache_gb + facts.free_after_pool_gb) * 1e9 * 1.1
    return facts.kv_pool_tokens * cell <= had


def graph_findings(
    g: Geometry, facts: LaunchFacts, kv_bytes: int, drafting: bool, pins: GraphPins | None = None
) -> list[Finding]:
    """CUDA-graph batch sizes the server cannot reach: decode sizes above the requests it runs at once, prefill
    sizes above its chunk; the memory they hold (a capture's memory shared over its sizes), the context it
    would buy back (a token costs the draft's layers too where one drafts), and the engine's flags that cap
    capture there (`pins`: `Engine.graph_pins`)."""
    out: list[Finding] = []
    truth = g.token_bytes(kv_bytes, drafting)
    running = facts.max_running_requests
    chunk = facts.prefill_chunk_tokens
    for capture in facts.graph_captures:
        sizes, name = capture.sizes, capture.graph
        prefill = "prefill" in name
        limit = chunk if prefill else running
        if not sizes or not limit or limit <= 0:
            continue
        above = [s for s in sizes if s > limit]
        if not above:
            continue
        gb = capture.gb * len(above) / len(sizes)
        tokens = int(gb * GIB / truth) if truth else 0
        kind = "chunked-prefill size" if prefill else "max running requests"
        flags = (pins(None, limit) if prefill else pins(limit, None)) if pins else {}
        out.append(
            Finding(
                f"{name or 'graph'}: {len(above)} of {len(sizes)} batch sizes above the {kind} ({limit})",
                False,
                f"about {gb:.2f} GB ({tokens} tokens of context) for sizes never run"
                + (f"; cap them: {_flags_text(flags)}" if flags else ""),
                {"unused_graph_gb": round(gb, 3)},
                flags,
            )
        )
    return out


def launch_differences(
    g: Geometry, first: LaunchFacts, second: LaunchFacts, kv_bytes: int, drafting: bool
) -> list[Finding]:
    """Two launches of the same model with other flags (a release's defaults against pinned values): each
    CUDA-graph capture's memory and sizes, the pool, what was left free; the graph memory the second holds
    less of, as the context it buys at the true per-token cost. A difference is `ok` false: one of the two
    spends memory the other does not."""
    truth = g.token_bytes(kv_bytes, drafting)
    out: list[Finding] = []
    captures = [{c.graph: c for c in f.graph_captures} for f in (first, second)]
    saved = 0.0
    for name in dict.fromkeys([*captures[0], *captures[1]]):
        one, two = captures[0].get(name), captures[1].get(name)
        gb_a, gb_b = (c.gb if c else 0.0 for c in (one, two))
        saved += gb_a - gb_b
        out.append(
            Finding(
                f"{name} graph: {gb_a:.2f} GB ({_sizes_text(one)}) -> {gb_b:.2f} GB ({_sizes_text(two)})",
                abs(gb_a - gb_b) < SAME_GB,
                f"{gb_b - gb_a:+.2f} GB",
                {"graph_gb_change": round(gb_b - gb_a, 3)},
            )
        )
    if abs(saved) >= SAME_GB and truth:
        more, less = ("first", "second") if saved > 0 else ("second", "first")
        tokens = int(abs(saved) * GIB / truth)
        out.append(
            Finding(
                f"the {more} launch holds {abs(saved):.2f} GB more CUDA-graph memory than the {less}",
                False,
                f"about {tokens} tokens of context at {truth} B per token",
                {"graph_gb_saved": round(saved, 3), "context_tokens": tokens},
            )
        )
    for label, (a, b) in (
        ("KV pool tokens", (first.kv_pool_tokens, second.kv_pool_tokens)),
        ("max running requests", (first.max_running_requests, second.max_running_requests)),
        (
            "chunked prefill",
            (first.prefill_chunk_tokens, second.prefill_chunk_tokens),
        ),
        ("GB left after the graphs", (first.free_after_graphs_gb, second.free_after_graphs_gb)),
    ):
        if a is not None or b is not None:
            out.append(Finding(f"{label}: {a} -> {b}", a == b))
    return out


def _sizes_text(capture: GraphCapture | None) -> str:
    if capture is None:
        return "not captured"
    sizes = capture.sizes
    if not sizes:
        return "sizes not logged"
    return f"size {sizes[0]}" if len(sizes) == 1 else f"{len(sizes)} sizes, {min(sizes)}-{max(sizes)}"


def _flags_text(flags: Mapping[str, Any]) -> str:
    return " ".join(f"--{name} {value}" for name, value in flags.items())


@dataclass(frozen=True)
class MemoryBudget:
    """A GPU's memory (GB as the engines print them: GiB) and the share the engine fills with weights and
    caches (`Engine.memory_share`), with where the share comes from."""

    gpu_gb: float
    share: float
    source: str


def budget_findings(
    g: Geometry, budget: MemoryBudget, facts: LaunchFacts | None, kv_bytes: int, drafting: bool
) -> list[Finding]:
    """The most the pool can hold on this GPU: its share less the weights (the log's, else the files'), at the
    true per-token cost. An upper bound: state caches, a draft's weights and activations come out of it too.
    A logged pool larger than it means the GPU or the share given here are not the launch's."""
    truth = g.token_bytes(kv_bytes, drafting)
    if facts is not None and facts.weight_gb:
        weights, source = facts.weight_gb, "the log's weight load"
        if facts.draft_weight_gb:  # a draft model's weights load apart, and come out of the share too
            weights, source = weights + facts.draft_weight_gb, "the log's weight loads, target and draft"
    elif g.weight_bytes is not None:
        weights, source = g.weight_bytes.value / GIB, "the files"
    else:
        return []
    room = budget.gpu_gb * budget.share - weights
    tokens = max(0, int(room * GIB / truth))
    what = f"room for the KV pool: at most {room:.2f} GB, {tokens} tokens"
    detail = (
        f"{budget.share} ({budget.source}) x {budget.gpu_gb:g} GB - {weights:.2f} GB of weights ({source}), "
        f"at {truth} B per token; state caches, a draft's weights and activations come out of it too"
    )
    if room <= 0:
        return [Finding(what, False, detail + ": the weights alone fill the share, the server cannot start")]
    pool = facts.kv_pool_tokens if facts is not None else None
    if pool and pool > tokens * (1 + MISMATCH):
        return [
            Finding(
                what,
                False,
                f"{detail}; the log's pool of {pool} tokens is larger: the GPU memory or the share given here "
                "are not the launch's",
            )
        ]
    if pool:
        detail += f"; the log's pool holds {pool / tokens:.0%} of it"
    return [Finding(what, True, detail, {"room_tokens": tokens})]


DraftReading = Callable[[Mapping[str, Any]], "tuple[int, str] | None"]
GraphPins = Callable[[int | None, int | None], dict[str, Any]]
WindowRule = Callable[[Mapping[str, Any]], WindowPool]


@dataclass(frozen=True)
class EngineRules:
    """What the doctor takes from an engine (`Engine.doctor_rules`): how it reads the draft depth from config.json where it can read it
    wrong (`Engine.draft_layers_read`), the flags that cap its CUDA-graph capture (`Engine.graph_pins`), and
    the GPUs a model copy is split over (its KV heads with it)."""

    reads: DraftReading | None = None
    pins: GraphPins | None = None
    tensor_parallel: int = 1
    windows: WindowRule | None = None  # how it pools a model's sliding-window layers (`Engine.window_pool`)
    draft: DraftAsk | None = None  # the draft the launch loads (`Engine.draft_ask`)


@dataclass(frozen=True)
class TokenCost:
    """What the cache costs on one GPU, each part apart: bytes per token of context for the target's layers
    pooled with every token, the draft's, and the sliding-window layers' (held for the window's tokens, or at
    `sliding_ratio` tokens per full token where the engine sizes a pool of its own for them), and the
    linear-attention state each request holds whatever its length."""

    kv_bytes_per_element: int
    tensor_parallel: int
    target: int
    draft: int
    sliding: int
    sliding_layers: int
    sliding_window: int | None
    sliding_ratio: float | None
    sliding_pooled: str
    state_per_request: int

    @classmethod
    def of(cls, g: Geometry, kv_bytes: int) -> TokenCost:
        target, draft = g.cell_bytes(kv_bytes)
        sliding = g.sliding_bytes(kv_bytes)
        share = g.sliding_share
        return cls(
            kv_bytes_per_element=kv_bytes,
            tensor_parallel=g.tensor_parallel,
            target=target - round(share * sliding),
            draft=draft,
            sliding=sliding,
            sliding_layers=g.sliding_layers.value if g.sliding_layers else 0,
            sliding_window=g.sliding_window.value if g.sliding_window and sliding else None,
            sliding_ratio=share or None,
            sliding_pooled=g.window.source if g.window is not None else "the window's tokens only",
            state_per_request=g.state_bytes(),
        )

    def lines(self, drafting: bool) -> list[str]:
        gpu = f" per GPU of {self.tensor_parallel}" if self.tensor_parallel > 1 else ""
        head = f"KV per token at {self.kv_bytes_per_element} B/element{gpu}: "
        if drafting and self.draft:
            out = [head + f"{self.target} B target + {self.draft} B draft = {self.target + self.draft} B"]
        else:  # as the verdicts price it: the draft's layers hold cache only while it drafts
            extra = f" (the draft's {self.draft} B more when speculating)" if self.draft else ""
            out = [head + f"{self.target} B{extra}"]
        if self.sliding and self.sliding_ratio:
            out.append(
                f"  plus {self.sliding} B per sliding-window token ({self.sliding_layers} sliding-window layers), "
                f"{self.sliding_ratio:g} of them per full token ({self.sliding_pooled}): "
                f"{round(self.sliding * self.sliding_ratio)} B per token"
            )
        elif self.sliding:
            out.append(
                f"  plus {self.sliding} B per token for the last {self.sliding_window} tokens only "
                f"({self.sliding_layers} sliding-window layers)"
            )
        if self.state_per_request:
            out.append(
                f"  plus {self.state_per_request} B ({self.state_per_request / 2**20:.1f} MiB) of linear-attention "
                "state per request, whatever its length"
            )
        return out


@dataclass(frozen=True)
class Diagnosis:
    geometry: Geometry
    kv_bytes: int
    findings: list[Finding]
    against: list[Finding] = field(default_factory=list)  # a second launch's differences (`--against`)
    drafting: bool = True  # a draft shares the pool: its layers are priced per token

    @property
    def cost(self) -> TokenCost | None:
        return TokenCost.of(self.geometry, self.kv_bytes) if self.geometry.priced else None

    def lines(self) -> list[str]:
        g = self.geometry
        out = ["geometry (each number with where it came from):"]
        for label, value in (
            ("layers", g.layers),
            ("KV (full-attention) layers", g.kv_layers),
            ("sliding-window layers", g.sliding_layers),
            ("sliding window (tokens)", g.sliding_window),
            ("linear-attention / state layers", g.state_layers),
            ("KV heads x head dim", g.kv_width),
            ("MLA latent + rope per layer", g.latent),
            ("DSA index key bytes per layer", g.indexer),
            ("draft (MTP) layers", g.draft_layers),
            ("draft layers in config", g.draft_layers_config),
            ("vocabulary tensors", g.vocab_tensor_bytes),
            ("weights", g.weight_bytes),
        ):
            if value is not None:
                shown = (
                    f"{value.value / 1e9:.2f} GB" if "tensors" in label or label == "weights" else value.value
                )
                out.append(f"  {label}: {shown}  ({value.source})")
        if g.v_head_dim:
            out.append(f"  V head dim: {g.v_head_dim}  (config.json: v_head_dim)")
        if g.linear_state is not None:
            out.append(f"  linear-attention state: {g.linear_state.source}")
        if g.draft is not None and g.draft.kv_layers is not None:
            out.append(f"  separate draft: {g.draft.kv_layers.value} layers ({g.draft.kv_layers.source})")
        out += [f"  disagreement: {d}" for d in g.disagreements]
        if self.cost is not None:
            out += self.cost.lines(self.drafting)
        out += [_line(f) for f in self.findings]
        if self.against:
            out.append("against the second launch:")
            out += ["  " + _line(f, "same", "differs") for f in self.against]
        return out

    def to_dict(self) -> dict[str, Any]:
        skip = {"config", "linear_state", "window", "draft"}
        return {
            "geometry": {
                k: v if not isinstance(v, Fact) else {"value": v.value, "source": v.source}
                for k, v in self.geometry.__dict__.items()
                if k not in skip
            },
            "kv_bytes_per_element": self.kv_bytes,
            "per_token": None if self.cost is None else dataclasses.asdict(self.cost),
            "findings": [f.__dict__ for f in self.findings],
            "against": [f.__dict__ for f in self.against],
        }


def _line(finding: Finding, ok: str = "ok", problem: str = "PROBLEM") -> str:
    return f"{ok if finding.ok else problem}: {finding.what}" + (
        f": {finding.detail}" if finding.detail else ""
    )


def diagnose(
    model: Path,
    kv_dtype: str = "auto",
    facts: LaunchFacts | None = None,
    rules: EngineRules = EngineRules(),
    speculative: bool | None = None,
    against: LaunchFacts | None = None,
    budget: MemoryBudget | None = None,
) -> Diagnosis:
    """The model's geometry (per GPU); with a GPU's `budget`, the most the pool can hold; with a launch's facts,
    the pool and graph verdicts; with a second launch's (`against`), what differs in memory between the two.
    `speculative`: whether a draft shares the pool."""
    if kv_dtype not in KV_DTYPE_BYTES:
        raise UserError(f"KV dtype '{kv_dtype}' is unknown here", f"use one of: {', '.join(KV_DTYPE_BYTES)}")
    g, problems = engine_geometry(model, rules)
    kv_bytes = KV_DTYPE_BYTES[kv_dtype]
    # Unsaid, a draft shares the pool where the log shows a draft pool.
    drafting = speculative if speculative is not None else bool(facts and facts.draft_kv_pool_tokens)
    findings = [Finding("the draft does not fit the model", False, problem) for problem in problems]
    findings += budget_findings(g, budget, facts, kv_bytes, drafting) if budget is not None else []
    differences: list[Finding] = []
    if facts is not None:
        draft_read = rules.reads(g.config) if rules.reads else None
        read = Fact(draft_read[0], f"config.json: {draft_read[1]}") if draft_read else None
        findings += pool_findings(g, facts, kv_bytes, read, drafting)
        findings += cache_findings(g, facts, kv_bytes)
        findings += graph_findings(g, facts, kv_bytes, drafting, rules.pins)
        if against is not None:
            differences = launch_differences(g, facts, against, kv_bytes, drafting)
    return Diagnosis(g, kv_bytes, findings, differences, drafting)


def engine_geometry(model: Path, rules: EngineRules) -> tuple[Geometry, list[str]]:
    """The model's geometry as the engine holds it on one GPU (its window pooling, a separate draft's own
    geometry, tensor parallel), and what is wrong with the draft the launch asks for."""
    g = read_geometry(model)
    if rules.windows is not None:
        g = g.pooled(rules.windows(g.config))
    draft = draft_geometry(rules.draft)
    if draft is not None and rules.draft is not None and rules.draft.kind is not DraftKind.MTP:
        g = dataclasses.replace(g, draft=draft)
    problems = draft_problems(g, rules.draft, draft) if rules.draft is not None else []
    return g.per_gpu(rules.tensor_parallel), problems


def draft_refusal(model: str, rules: EngineRules) -> str | None:
    """Why the draft a launch asks for cannot work with the model, from their files, to fail the trial before
    a server starts; None where it fits or the files cannot tell (a hub id, a folder the doctor cannot read)."""
    path = Path(model)
    if rules.draft is None or not path.exists():
        return None
    try:
        return "; ".join(engine_geometry(path, rules)[1]) or None
    except (UserError, OSError, ValueError):
        return None


def sizing(
    model: str, kv_dtype: str, facts: LaunchFacts, rules: EngineRules, speculative: bool
) -> list[Finding] | None:
    """A launch's verdicts for a sweep's record, where the model is a local folder or GGUF the doctor can read
    (None where it is a hub id, or the files or the KV dtype say too little)."""
    path = Path(model)
    if not path.exists() or kv_dtype not in KV_DTYPE_BYTES:
        return None
    try:
        return diagnose(path, kv_dtype, facts, rules, speculative).findings
    except (UserError, OSError, ValueError):
        return None
