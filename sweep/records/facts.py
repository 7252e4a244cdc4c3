"""What a launch was, as the engine and the machine said: the launch facts read from its log and endpoints (the
engine's pool, draft and captures, the doctor's findings), what the rest of the host did, and its GPU memory."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self

from sweep.core.clock import LATE_SHARE

# Beyond these shares of the machine, a measurement is not the configuration's alone. Windows shorter than
# BUSY_MIN_S are not judged: at the kernel's 10 ms accounting, a blip of 30 ms is 15% of a 0.1 s window.
BUSY_OTHER_CPU = 0.15
BUSY_STEAL = 0.05
BUSY_MIN_S = 1.0


@dataclass(frozen=True)
class HostLoad:
    """The rest of the machine while a trial was probed (shares of all CPUs' time)."""

    other_cpu: float  # used by processes other than the sweep and the server's group
    steal: float  # taken by the hypervisor
    loadavg: float  # 1-minute load average, the higher of start and end (the server's own load included)
    cpus: int
    seconds: float
    # The share of its modelled decode time a simulated server's requests ended behind its clock (its own count:
    # the host did not keep its time scale); None from a server that does not count it (every real one).
    server_lag: float | None = None

    @property
    def busy(self) -> bool:
        return self.seconds >= BUSY_MIN_S and (self.other_cpu > BUSY_OTHER_CPU or self.steal > BUSY_STEAL)

    @property
    def lagged(self) -> bool:
        """Whether a simulated server ran behind its clock beyond LATE_SHARE: what the client's clock measured
        was the host's pace (the durations the server reports stay the model's)."""
        return self.server_lag is not None and self.server_lag > LATE_SHARE

    def lag_text(self) -> str:
        """How far a simulated server fell behind its clock, where it did beyond LATE_SHARE ("" otherwise)."""
        return _lag_words(f"{self.server_lag:.0%}") if self.lagged and self.server_lag is not None else ""

    def describe(self) -> str:
        return describe_loads([self])

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def describe_loads(loads: Sequence[HostLoad]) -> str:
    """What the rest of the machine did over one or several windows, each figure as its range over them."""

    def spread(values: list[float], form: str) -> str:
        low, high = form.format(min(values)), form.format(max(values))
        return low if low == high else f"{low}-{high}"

    lag = [x.server_lag for x in loads if x.lagged and x.server_lag is not None]
    return (
        f"other processes used {spread([x.other_cpu for x in loads], '{:.0%}')} of {loads[0].cpus} CPUs, "
        f"steal {spread([x.steal for x in loads], '{:.0%}')}, load average "
        f"{spread([x.loadavg for x in loads], '{:.1f}')}"
        + (f"; {_lag_words(spread(lag, '{:.0%}'))}" if lag else "")
    )


def _lag_words(share: str) -> str:
    return (
        f"the simulated server ran {share} of its modelled decode time behind its clock (this host does not keep "
        "its --sim-time-scale: use a larger one)"
    )


@dataclass(frozen=True)
class GpuUse:
    """The machine's GPUs while a trial's server ran, read through NVML: their names, driver and memory, and
    what the server held at ready and at its peak while probed (`how`: by its process ids, or as the devices'
    memory in use less what was in use before the launch). `reason` says why there is nothing (no driver, no
    GPU), so a record says so rather than leaving the fields empty."""

    devices: tuple[str, ...] = ()
    driver: str = ""
    total_mib: float | None = None
    ready_mib: float | None = None
    peak_mib: float | None = None
    how: str = ""
    reason: str = ""

    @property
    def present(self) -> bool:
        return bool(self.devices)

    def describe(self) -> str:
        if not self.present:
            return f"no GPU ({self.reason})"
        names = ", ".join(f"{n} x{c}" if c > 1 else n for n, c in Counter(self.devices).items())
        held = (
            f"; the server held {self.ready_mib:.0f} MiB at ready, {self.peak_mib:.0f} MiB at its peak ({self.how})"
            if self.ready_mib is not None and self.peak_mib is not None
            else ""
        )
        missed = f"; {self.reason}" if self.reason else ""
        return f"{names} (driver {self.driver}, {self.total_mib:.0f} MiB){held}{missed}"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> GpuUse | None:
        if not data:
            return None
        return cls(**{**data, "devices": tuple(data.get("devices", ()))})


@dataclass(frozen=True)
class GraphCapture:
    """One CUDA-graph capture the engine logged: which graph, the memory it took and left free (GB), and the
    batch sizes (or token counts, for prefill) it captured."""

    graph: str
    gb: float
    free_after_gb: float
    sizes: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class CaptureOom:
    """A CUDA-graph capture that ran out of memory: what it needed and what was free (GB)."""

    needed_gb: float
    free_gb: float


@dataclass(frozen=True)
class Finding:
    """One verdict of the sizing doctor: `ok` false where something is wrong, with its cause and what to do."""

    what: str
    ok: bool
    detail: str = ""
    # The finding's numbers for charts: `predicted_pool_tokens`, `unused_graph_gb`.
    numbers: dict[str, float] = field(default_factory=dict)
    # Parameters that mend it, by the engine's names (`export --pin-graphs` adds them to a launch).
    flags: dict[str, Any] = field(default_factory=dict)


# Records written before the facts were typed kept these in `extra`: read into the fields that replaced them.
_EXTRA_FIELDS = {
    "max_total_num_tokens": "token_capacity",
    "chunked_prefill_size": "prefill_chunk_tokens",
    "graph_captures": "graph_captures",
    "max_mamba_cache_size": "state_slots",
    "capture_oom": "capture_oom",
    "max_concurrency": "max_concurrency",
    "constraints": "constraint_violations",
    "log_lost": "log_lost",
    "sizing": "sizing",
}


@dataclass
class LaunchFacts:
    """What the server said about itself at start: read from its log and its HTTP API, not derived."""

    kv_cache_mib: float | None = None
    kv_cells: int | None = None
    n_ctx_slot: int | None = None
    n_slots: int | None = None
    # Engine-neutral memory facts (GB and tokens as the engine logged them; None where it did not).
    kv_pool_tokens: int | None = None
    draft_kv_pool_tokens: int | None = None
    kv_cache_gb: float | None = None
    weight_gb: float | None = None
    free_after_pool_gb: float | None = None
    graph_capture_gb: float | None = None
    free_after_graphs_gb: float | None = None
    draft_weight_gb: float | None = None  # a draft model's own weights and pool, where it logs them apart
    draft_kv_cache_gb: float | None = None
    context_length: int | None = None
    max_running_requests: int | None = None
    # Lines in which the engine capped or reset a limit, each with its reason, in log order.
    limit_changes: list[str] = field(default_factory=list)
    # Resolved server arguments next to the requested ones, and what the engine silently changed.
    resolved_args: dict[str, Any] = field(default_factory=dict)
    overrides: list[str] = field(default_factory=list)
    speculation_requested: bool = False
    speculation_active: bool | None = None
    speculation_problem: str = ""
    # Whether the server's per-request draft counts are the drafts it made: SGLang 0.5.17-0.5.23 count an
    # adaptive launch's as verify steps x the launch's draft tokens, whatever steps its controller ran.
    drafts_counted: bool = True
    # Whether the served model has a chat template (None: the engine cannot tell), and where that was read.
    chat_template: bool | None = None
    chat_template_source: str = ""
    startup_s: float | None = None
    # Where the engine put the model: its buffers per device as logged (MiB: model, KV, compute), every KV
    # cache it made (MiB, cells, layers), the layers it offloaded of those it could, the devices it saw, and
    # why it could not offload where it could not (the engine's own words).
    buffers: dict[str, dict[str, float]] = field(default_factory=dict)
    gpu_buffers: dict[str, float] = field(default_factory=dict)  # the same summed over the GPUs, by kind
    kv_caches: list[dict[str, float]] = field(default_factory=list)
    offloaded_layers: int | None = None
    offloadable_layers: int | None = None
    devices: list[str] = field(default_factory=list)
    offload_problem: str = ""
    # Written by the engine at launch, so readers of records need no engine knowledge (which argv flag names
    # the model, what a GGUF file weighs).
    engine: str = ""
    model: str = ""
    # The server's release as it reports it (SGLang's /server_info, vLLM's /version, llama-server's build line;
    # where a build names none, its binary's digest): what a cost profile is keyed by.
    engine_version: str = ""
    # Scheduler limits as logged: the tokens it may hold at once, its prefill chunk (-1: none), the requests'
    # state slots of a hybrid (linear-attention) model, the concurrency the pool allows at full context.
    token_capacity: int | None = None
    prefill_chunk_tokens: int | None = None
    state_slots: int | None = None
    max_concurrency: float | None = None
    graph_captures: list[GraphCapture] = field(default_factory=list)
    # A capture that began and never ended: the start-up died in it (its memory 0, its free memory at begin).
    unfinished_capture: GraphCapture | None = None
    capture_oom: CaptureOom | None = None
    # Written by the driver: the engine's constraints an infeasible trial broke (>0: broken), why part of the
    # server's log is missing, and the sizing doctor's findings on this launch.
    constraint_violations: dict[str, float] = field(default_factory=dict)
    log_lost: str = ""
    sizing: list[Finding] = field(default_factory=list)

    @property
    def usable_context(self) -> int | None:
        """The longest prompt one request can have: the context length, unless the KV pool is smaller."""
        limits = [x for x in (self.context_length, self.kv_pool_tokens) if x]
        return min(limits) if limits else None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        data = {
            **{_EXTRA_FIELDS[k]: v for k, v in (data.get("extra") or {}).items() if k in _EXTRA_FIELDS},
            **data,
        }
        names = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in data.items() if k in names}
        # The nested records are typed before the facts are made, never stored as plain dicts.
        fields["graph_captures"] = [GraphCapture(**c) for c in data.get("graph_captures") or []]
        unfinished = data.get("unfinished_capture")
        fields["unfinished_capture"] = GraphCapture(**unfinished) if unfinished else None
        fields["capture_oom"] = CaptureOom(**data["capture_oom"]) if data.get("capture_oom") else None
        fields["sizing"] = [Finding(**f) for f in data.get("sizing") or []]
        return cls(**fields)


class DraftKind(StrEnum):
    """What drafts for a speculative trial, in the terms every engine shares."""

    MTP = "mtp"  # the target checkpoint's own MTP / NEXTN layers
    EAGLE = "eagle"  # an EAGLE (1/2) head: the target's last hidden state in
    EAGLE3 = "eagle3"  # an EAGLE-3 head: three of the target's hidden states in
    MODEL = "model"  # a separate small language model sharing the target's vocabulary


@dataclass(frozen=True)
class DraftAsk:
    """The draft a trial's parameters ask for, read by the engine from its own flags: what kind, the checkpoint
    it loads (None: the target's own files), and the flags that asked, to name them in a refusal."""

    kind: DraftKind
    path: str | None = None
    flags: str = ""


@dataclass(frozen=True)
class WindowPool:
    """How an engine holds the KV of sliding-window layers. `apart` False: in the same pool as full attention,
    every token priced at every layer (the window saves nothing). Apart with a `ratio`: a second pool of
    `ratio` tokens per full-attention token (SGLang's SWA pool); apart without one: the window's tokens only.
    `source`: the engine rule or flag that decides it."""

    apart: bool
    ratio: float | None = None
    source: str = ""
