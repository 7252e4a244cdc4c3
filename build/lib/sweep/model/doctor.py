"""The sizing doctor: the memory truth behind a configuration, from the model's geometry (`geometry.py`) and the
server's log.

The geometry is priced as the engine holds it (`EngineRules`, from the engine: how it pools sliding-window
layers, the draft its flags load, tensor parallel), and a draft that cannot work with the model is named before
any server starts (`draft.py`). Then the per-token KV cost (target, draft, window and state apart) at the KV
dtype; with a server log, the pool the engine should have had against the pool it logged (an engine that read
the draft depth wrong sized the pool with the wrong cost: the named cause), free memory left after the pool
larger than the pool (a miscalculation, not a shortage), and CUDA-graph batch sizes the server can never reach
(decode sizes above its running limit, prefill sizes above its chunk) with the memory they hold and the context
it would buy.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sweep.core.errors import UserError
from sweep.model.draft import draft_geometry, draft_problems
from sweep.model.geometry import GIB, KV_DTYPE_BYTES, Fact, Geometry, read_geometry
from sweep.records import DraftAsk, DraftKind, Finding, GraphCapture, LaunchFacts, WindowPool

MISMATCH = 0.03  # a pool this far from the prediction is named
SAME_GB = 0.01  # logs print GB to two decimals


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
