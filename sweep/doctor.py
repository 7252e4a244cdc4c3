"""The sizing doctor: the memory truth behind a configuration, from the model's own files and the server's log.

It reads a model folder without loading weights: `config.json` (a nested `text_config` too), every safetensors
header (8-byte little-endian length, then JSON: each tensor's dtype, shape and byte range), or a GGUF file's
metadata. From them the geometry, each number with where it came from: layers, which hold a KV cache (full
attention) and which do not (linear attention / recurrent state), KV heads x head dim, draft (MTP) layers
counted from tensor names, vocabulary tensors, weight bytes; and where config and tensors disagree.

Then the per-token KV cost (target and draft apart) at the KV dtype; with a server log, the pool the engine
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

from sweep.errors import UserError
from sweep.modelfiles import gguf_metadata, read_config, safetensors_header
from sweep.results import LaunchFacts

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
DRAFT_DEPTH_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers")
# `layer_types` names: attention over every token, over a window, and the rest (linear attention, recurrent
# state: a fixed state per request, no KV per token).
FULL_TYPES = {"full_attention", "attention", "global_attention"}
SLIDING_TYPES = {"sliding_attention", "local_attention", "chunked_attention"}
# llama.cpp's sliding-window patterns by GGUF architecture (`set_swa_pattern` in llama-model.cpp): every n-th
# layer attends to every token, the others to the window. GGUF files carry the window, not the pattern.
GGUF_SWA_PATTERN = {"gemma2": 2, "gemma3": 6, "cohere2": 4}


@dataclass(frozen=True)
class Fact:
    """A number and where it came from (`config.json: text_config.num_hidden_layers`, `tensors: mtp.layers.*`)."""

    value: int
    source: str


@dataclass
class Geometry:
    layers: Fact | None = None
    kv_layers: Fact | None = None  # layers with a KV cache of every token (full attention)
    sliding_layers: Fact | None = None  # layers whose KV cache holds the last `sliding_window` tokens only
    sliding_window: Fact | None = None
    state_layers: Fact | None = None  # linear-attention / recurrent layers (a fixed state, no KV per token)
    kv_width: Fact | None = None  # KV heads x head dim, per layer, for K and for V
    head_dim: int | None = None  # a KV head's width: tensor parallel splits KV heads, never a head
    draft_layers: Fact | None = None  # MTP layers, counted from tensor names
    draft_layers_config: Fact | None = None  # what config.json says about them, if anything
    vocab_tensor_bytes: Fact | None = None  # embedding + output head
    weight_bytes: Fact | None = None
    disagreements: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)  # the (merged) config, as an engine would read it

    def cell_bytes(self, kv_bytes: int, draft_layers: int | None = None) -> tuple[int, int]:
        """Per-token KV bytes of the target and of the draft (its layers counted from tensors unless given)."""
        if self.kv_layers is None or self.kv_width is None:
            raise UserError(
                "the model's KV geometry is unknown", "give a folder with config.json or a GGUF file"
            )
        per_layer = self.layer_bytes(kv_bytes)
        drafts = (
            draft_layers
            if draft_layers is not None
            else (self.draft_layers.value if self.draft_layers else 0)
        )
        return self.kv_layers.value * per_layer, drafts * per_layer

    def layer_bytes(self, kv_bytes: int) -> int:
        """One layer's K and V for one token."""
        return 2 * (self.kv_width.value if self.kv_width else 0) * kv_bytes

    def token_bytes(self, kv_bytes: int, drafting: bool) -> int:
        """What a token of context costs: the target's layers, and the draft's where one drafts."""
        return sum(self.cell_bytes(kv_bytes, None if drafting else 0))

    def per_gpu(self, tp: int) -> Geometry:
        """The geometry one GPU of `tp` (tensor parallel) holds: the KV heads split between them, each GPU
        keeping at least one (fewer heads than GPUs are replicated)."""
        if tp <= 1 or self.kv_width is None or not self.head_dim:
            return self
        heads = self.kv_width.value // self.head_dim
        width = max(1, heads // tp) * self.head_dim
        return dataclasses.replace(
            self, kv_width=Fact(width, f"{self.kv_width.source}, over tensor parallel {tp}")
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
    if isinstance(types, list) and types:
        full = sum(1 for t in types if str(t) in FULL_TYPES)
        sliding = sum(1 for t in types if str(t) in SLIDING_TYPES)
        g.kv_layers = Fact(full, where + "layer_types (full attention)")
        if sliding:
            g.sliding_layers = Fact(sliding, where + "layer_types (sliding attention)")
        g.state_layers = Fact(len(types) - full - sliding, where + "layer_types (linear attention, state)")
    elif g.sliding_window and config.get("sliding_window_pattern") and g.layers:
        pattern = int(config["sliding_window_pattern"])
        g.kv_layers = Fact(g.layers.value // pattern, where + f"sliding_window_pattern ({pattern})")
        g.sliding_layers = Fact(g.layers.value - g.kv_layers.value, where + "sliding_window_pattern")
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
    for key in DRAFT_DEPTH_KEYS:
        if key in config:
            g.draft_layers_config = Fact(int(config[key]), where + key)
            break


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
    g.layers = fact("block_count")
    heads, key_length = fact("attention.head_count_kv"), fact("attention.key_length")
    if heads and key_length:
        g.kv_width = Fact(heads.value * key_length.value, f"{heads.source} x {key_length.source}")
        g.head_dim = key_length.value
    g.kv_layers = g.layers
    g.sliding_window = fact("attention.sliding_window")
    pattern = GGUF_SWA_PATTERN.get(arch)
    if g.layers and g.sliding_window and pattern:
        why = f"llama.cpp's {arch} pattern: every {pattern}th layer full"
        g.kv_layers = Fact(g.layers.value // pattern, f"{g.layers.source}, {why}")
        g.sliding_layers = Fact(g.layers.value - g.kv_layers.value, f"{g.layers.source}, {why}")
    g.draft_layers = fact("nextn_predict_layers") or Fact(0, f"gguf: no {arch}.nextn_predict_layers")
    g.weight_bytes = Fact(path.stat().st_size, "the file's size")
    return g


# --- the verdicts ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Finding:
    """One verdict: `ok` false where something is wrong, with its cause and what to do."""

    what: str
    ok: bool
    detail: str = ""
    # The finding's numbers for charts: `predicted_pool_tokens`, `unused_graph_gb`.
    numbers: dict[str, float] = field(default_factory=dict)
    # Parameters that mend it, by the engine's names (`export --pin-graphs` adds them to a launch).
    flags: dict[str, Any] = field(default_factory=dict)


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
    chunk = facts.extra.get("chunked_prefill_size")
    for capture in facts.extra.get("graph_captures", []):
        sizes = [int(s) for s in capture.get("sizes", [])]
        name = str(capture.get("graph", ""))
        prefill = "prefill" in name
        limit = chunk if prefill else running
        if not sizes or not limit or limit <= 0:
            continue
        above = [s for s in sizes if s > limit]
        if not above:
            continue
        gb = float(capture["gb"]) * len(above) / len(sizes)
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
    captures = [{str(c["graph"]): c for c in f.extra.get("graph_captures", [])} for f in (first, second)]
    saved = 0.0
    for name in dict.fromkeys([*captures[0], *captures[1]]):
        a, b = captures[0].get(name), captures[1].get(name)
        gb_a, gb_b = (float(c["gb"]) if c else 0.0 for c in (a, b))
        saved += gb_a - gb_b
        out.append(
            Finding(
                f"{name} graph: {gb_a:.2f} GB ({_sizes_text(a)}) -> {gb_b:.2f} GB ({_sizes_text(b)})",
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
            (first.extra.get("chunked_prefill_size"), second.extra.get("chunked_prefill_size")),
        ),
        ("GB left after the graphs", (first.free_after_graphs_gb, second.free_after_graphs_gb)),
    ):
        if a is not None or b is not None:
            out.append(Finding(f"{label}: {a} -> {b}", a == b))
    return out


def _sizes_text(capture: Mapping[str, Any] | None) -> str:
    if capture is None:
        return "not captured"
    sizes = [int(s) for s in capture.get("sizes", [])]
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


@dataclass(frozen=True)
class EngineRules:
    """What the doctor takes from an engine: how it reads the draft depth from config.json where it can read it
    wrong (`Engine.draft_layers_read`), the flags that cap its CUDA-graph capture (`Engine.graph_pins`), and
    the GPUs a model copy is split over (its KV heads with it)."""

    reads: DraftReading | None = None
    pins: GraphPins | None = None
    tensor_parallel: int = 1


@dataclass(frozen=True)
class Diagnosis:
    geometry: Geometry
    kv_bytes: int
    findings: list[Finding]
    against: list[Finding] = field(default_factory=list)  # a second launch's differences (`--against`)
    drafting: bool = True  # a draft shares the pool: its layers are priced per token

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
        out += [f"  disagreement: {d}" for d in g.disagreements]
        if g.kv_layers and g.kv_width:
            target, draft = g.cell_bytes(self.kv_bytes)
            if self.drafting:
                priced = f"{target} B target + {draft} B draft = {target + draft} B"
            else:  # as the verdicts price it: the draft's layers hold cache only while it drafts
                priced = f"{target} B" + (f" (the draft's {draft} B more when speculating)" if draft else "")
            out.append(f"KV per token at {self.kv_bytes} B/element: {priced}")
            if g.sliding_layers and g.sliding_window:
                window = g.sliding_layers.value * g.layer_bytes(self.kv_bytes)
                out.append(
                    f"  plus {window} B per token for the last {g.sliding_window.value} tokens only "
                    f"({g.sliding_layers.value} sliding-window layers)"
                )
        out += [_line(f) for f in self.findings]
        if self.against:
            out.append("against the second launch:")
            out += ["  " + _line(f, "same", "differs") for f in self.against]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "geometry": {
                k: v if not isinstance(v, Fact) else {"value": v.value, "source": v.source}
                for k, v in self.geometry.__dict__.items()
                if k != "config"
            },
            "kv_bytes_per_element": self.kv_bytes,
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
    g = read_geometry(model).per_gpu(rules.tensor_parallel)
    kv_bytes = KV_DTYPE_BYTES[kv_dtype]
    # Unsaid, a draft shares the pool where the log shows a draft pool.
    drafting = speculative if speculative is not None else bool(facts and facts.draft_kv_pool_tokens)
    findings = budget_findings(g, budget, facts, kv_bytes, drafting) if budget is not None else []
    differences: list[Finding] = []
    if facts is not None:
        draft_read = rules.reads(g.config) if rules.reads else None
        read = Fact(draft_read[0], f"config.json: {draft_read[1]}") if draft_read else None
        findings += pool_findings(g, facts, kv_bytes, read, drafting)
        findings += graph_findings(g, facts, kv_bytes, drafting, rules.pins)
        if against is not None:
            differences = launch_differences(g, facts, against, kv_bytes, drafting)
    return Diagnosis(g, kv_bytes, findings, differences, drafting)


def sizing(
    model: str, kv_dtype: str, facts: LaunchFacts, rules: EngineRules, speculative: bool
) -> list[dict[str, Any]] | None:
    """A launch's verdicts for a sweep's record, where the model is a local folder or GGUF the doctor can read
    (None where it is a hub id, or the files or the KV dtype say too little)."""
    path = Path(model)
    if not path.exists() or kv_dtype not in KV_DTYPE_BYTES:
        return None
    try:
        return [f.__dict__ for f in diagnose(path, kv_dtype, facts, rules, speculative).findings]
    except (UserError, OSError, ValueError):
        return None
