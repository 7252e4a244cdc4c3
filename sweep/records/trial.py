"""The records a sweep writes: one row per measured request, one summary per workload, one record per trial.

Each record has a plain-JSON form (`to_dict` / `from_dict`) so that a trial is complete both in
`runs/<study>/trials/<n>/record.json` and in the Optuna trial's user attributes.
"""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Self

from sweep.answers.fidelity import TieProbe
from sweep.answers.health import OutputHealth

# "stalled": the server stopped sending (or the request passed its deadline): the trial ends there.
RequestStatus = Literal["ok", "invalid", "does_not_fit", "error", "stalled"]
# A latency limit's name: what (time to first token, inter-token gap, time per output token, end to end) and
# which percentile, in seconds: `ttft_p90_s`, `tpot_p50_s`.
LATENCY_LIMIT = re.compile(r"(ttft|itl|tpot|e2e)_(p50|p90|p99)_s")


@dataclass(frozen=True)
class RequestMeasurement:
    """One measured request, as the client saw it and as the server reported it."""

    workload: str
    repeat: int
    stream: int
    nonce: str
    status: RequestStatus
    reason: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    ttft_s: float | None = None
    decode_s: float | None = None  # the client's first to last token
    itl_s: tuple[float, ...] = ()  # gaps between token-bearing chunks as the client saw them
    text: str = ""  # what the model said (greedy): compared with the baseline's for the same prompt
    client_decode_tps: float | None = None
    server_decode_tps: float | None = None
    server_prefill_tps: float | None = None
    server_ttft_s: float | None = None
    server_e2e_s: float | None = None
    server_received_s: float | None = None  # its arrival on the server's clock (epoch seconds), where it says
    draft_tokens: int = 0
    accepted_tokens: int = 0
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    # Share of verify steps that accepted the draft at each position: the request's own (SGLang's histogram of
    # correct drafts) or its batch's (the server's per-position counters: vLLM).
    position_acceptance: tuple[float, ...] = ()
    wall_s: float = 0.0
    # When it was sent, from its repeat's start (the client's clock): 0 for every request of a closed-loop
    # batch, its arrival on an open loop; a request's windows line up with the others' through it.
    sent_s: float = 0.0
    finish: str = (
        ""  # why the server ended the answer: "stop" (end of text, a stop word), "length" (max_tokens)
    )
    health: tuple[
        str, ...
    ] = ()  # what is wrong with the text (sweep/answers/health.py's symptoms); empty: it reads as text
    # Where the answer did its task and ran on (health's "ran_on"): the tokens before it did, estimated from
    # the share of the answer's characters.
    task_tokens: int | None = None
    # The prompt as sent (nonce, context and task), digested: texts compare across launches only where the
    # same prompt was sent (`sweep/answers/fidelity.py`).
    prompt_id: str = ""

    @property
    def tpot_s(self) -> float | None:
        """Time per output token after the first: the client's decode time over the tokens it brought."""
        if self.decode_s is None or self.completion_tokens <= 1:
            return None
        return self.decode_s / (self.completion_tokens - 1)

    @property
    def server_tpot_s(self) -> float | None:
        """Time per output token after the first by the server's own times, where it reports them."""
        if self.server_ttft_s is None or self.server_e2e_s is None or self.completion_tokens <= 1:
            return None
        return (self.server_e2e_s - self.server_ttft_s) / (self.completion_tokens - 1)

    @property
    def decode_tps(self) -> float | None:
        """The server's own decode rate where it reports one (it excludes HTTP and queueing), else the client's."""
        return self.server_decode_tps if self.server_decode_tps is not None else self.client_decode_tps

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}
        values = {k: v for k, v in data.items() if k in names}
        values["itl_s"] = tuple(values.get("itl_s", ()))
        values["position_acceptance"] = tuple(values.get("position_acceptance", ()))
        values["health"] = tuple(values.get("health", ()))
        return cls(**values)


@dataclass(frozen=True)
class Spread:
    """Median and range of one metric over a workload's repeats, with the values in repeat order (repeat i
    uses the same prompt in every trial, so two trials' values pair up)."""

    median: float
    low: float
    high: float
    n: int
    values: tuple[float, ...] = ()

    @classmethod
    def of(cls, values: list[float]) -> Spread | None:
        if not values:
            return None
        return cls(statistics.median(values), min(values), max(values), len(values), tuple(values))


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

    @property
    def busy(self) -> bool:
        return self.seconds >= BUSY_MIN_S and (self.other_cpu > BUSY_OTHER_CPU or self.steal > BUSY_STEAL)

    def describe(self) -> str:
        return (
            f"other processes used {self.other_cpu:.0%} of {self.cpus} CPUs, steal {self.steal:.0%}, "
            f"load average {self.loadavg:.1f}"
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


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
class CapacityStep:
    """One run of a capacity search: the rate, whether every latency limit held, by how much each was over
    (seconds; <= 0 where it held), and the requests it was judged on (twice a run's where the first run came
    near a limit and was run again)."""

    rate: float
    held: bool
    over: dict[str, float] = field(default_factory=dict)
    requests: int = 0

    @property
    def label(self) -> str:
        """`0.5 held on 6`, `8 over on 12`: the rate, whether the limits held, and on how many requests."""
        return f"{self.rate:.3g} {'held' if self.held else 'over'}" + (
            f" on {self.requests}" if self.requests else ""
        )


@dataclass(frozen=True)
class Capacity:
    """What a capacity search found: the highest rate tried at which the limits held (0: not even the lowest of
    the range; the range's top: at least that), and its runs in order."""

    rps: float
    steps: tuple[CapacityStep, ...] = ()


def series_label(name: str, streams: int, rate: float | None = None) -> str:
    """A workload across its context lengths: `code`, `code, 4 streams`, `code, 2 req/s`."""
    if rate is not None:
        return f"{name}, {rate:g} req/s"
    return name + (f", {streams} streams" if streams > 1 else "")


@dataclass(frozen=True)
class WorkloadSummary:
    """What one trial measured on one workload (a class of prompts at one context length and stream count)."""

    workload: str  # the key: name, context and stream count (`tool@8k/2streams`)
    status: RequestStatus
    reason: str = ""
    # The key's parts, for grouping without reading the key: a workload's variants share the name.
    name: str = ""
    context_tokens: int | None = None  # the context it was padded to (None: the prompts as they are)
    streams: int = 1  # requests sent at once
    # Open loop: the requests' mean arrival rate (per second) and how they arrived ("poisson", "constant");
    # per repeat, the rate they arrived at (requests over the time from the first sent to the last) and the
    # goodput, requests that met every latency limit per second from the first sent to the last answered.
    rate: float | None = None
    arrivals: str = ""
    offered_rps: Spread | None = None
    goodput_rps: Spread | None = None
    # A capacity workload: the highest request rate at which the latency limits held on this launch, and the
    # runs of the search that found it.
    capacity_rps: Spread | None = None
    capacity_steps: tuple[CapacityStep, ...] = ()
    decode_tps: Spread | None = None
    # Multi-stream batches: every request's decode tokens over the batch's decode window (first token of the
    # first stream to last token of the last), and the field reports' "aggregate", the sum of per-stream rates.
    aggregate_tps: Spread | None = None
    sum_stream_tps: Spread | None = None
    # Multi-stream batches: how many requests decoded at once, as each request's decode saw it (the overlap of
    # the requests' decode windows over their length). Below `streams` where the client, prefill or the
    # server's limits held requests back: the batch size a depth schedule must be keyed by.
    batch: Spread | None = None
    ttft_s: Spread | None = None
    prefill_tps: Spread | None = None
    acceptance_rate: Spread | None = None
    acceptance_length: Spread | None = None
    position_acceptance: tuple[float, ...] = ()  # per draft position, the median over the requests
    # The server's own acceptance-length gauge after each batch (SGLang's `sglang:spec_accept_length`): a
    # cross-check of `acceptance_length`, which is computed per request from its own counts.
    acceptance_gauge: Spread | None = None
    draft_tokens: int = 0
    accepted_tokens: int = 0
    prompt_tokens: Spread | None = None
    requests: int = 0
    remeasured: int = 0  # batches measured again because a request in them was invalid
    # Percentiles (p50, p90, p99) of time to first token, inter-token latency and end-to-end time, seconds.
    latency: dict[str, dict[str, float]] = field(default_factory=dict)
    # The generated texts in prompt order (the same order as decode_tps.values), and the digest of the prompt
    # each answered (`RequestMeasurement.prompt_id`; empty in records written before it existed).
    outputs: tuple[str, ...] = ()
    output_prompts: tuple[str, ...] = ()
    # A baseline launch's word on where other configurations' answers parted from its own (`TieProbe`).
    ties: tuple[TieProbe, ...] = ()
    host: HostLoad | None = None  # what the rest of the machine did while this workload was measured
    # How the prompts were sent ("chat": through the model's chat template; "completion": as text to continue)
    # and why, and whether the answers read as text (acceptance measured on loops overstates real gains).
    form: str = ""
    form_reason: str = ""
    output_health: OutputHealth | None = None
    # Tokens the chat template put before every message (the same in each request): a prefix cache may serve
    # them, and a request stays cold while its cached count is no more than this.
    template_tokens: int = 0

    @property
    def headline(self) -> Spread | None:
        """What the verdicts compare on this workload: its capacity (requests per second within the latency
        limits) where it was searched for one, its decode t/s per request otherwise."""
        return self.capacity_rps if self.capacity_rps is not None else self.decode_tps

    @property
    def unit(self) -> str:
        return "req/s" if self.capacity_rps is not None else "t/s"

    def headline_text(self) -> str:
        """`code 62.7 t/s`, `prose/capacity 2.83 req/s`, or why it has no number."""
        if self.headline is None:
            return f"{self.workload} {self.status}"
        digits = 2 if self.capacity_rps is not None else 1
        return f"{self.workload} {self.headline.median:.{digits}f} {self.unit}"

    @property
    def series(self) -> str:
        """What its variants at several context lengths share (their name and stream count), as a label."""
        return series_label(self.name or self.workload, self.streams, self.rate)

    def over_limits(self, limits: Mapping[str, float]) -> dict[str, float]:
        """Seconds by which each latency limit (`ttft_p90_s: 2.0`) is exceeded; <= 0 where it is met. A capacity
        is the rate at which they are met: none is exceeded there (every one is, where no rate tried met them)."""
        if self.capacity_rps is not None:
            return {name: 0.0 if self.capacity_rps.median > 0 else math.inf for name in limits}
        over = {}
        for name, limit in limits.items():
            part, _, quantile = name.removesuffix("_s").partition("_")
            value = self.latency.get(f"{part}_s", {}).get(quantile)
            over[name] = float("inf") if value is None else value - limit
        return over

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        host = HostLoad(**data["host"]) if data.get("host") else None
        data = {
            **data,
            "outputs": tuple(data.get("outputs", ())),
            "output_prompts": tuple(data.get("output_prompts", ())),
            "ties": tuple(TieProbe.from_dict(t) for t in data.get("ties") or ()),
            "position_acceptance": tuple(data.get("position_acceptance", ())),
            "host": host,
            "output_health": OutputHealth.from_dict(data.get("output_health")),
            "capacity_steps": tuple(CapacityStep(**step) for step in data.get("capacity_steps", ())),
        }
        spreads = {
            f.name: Spread(**{**data[f.name], "values": tuple(data[f.name].get("values", ()))})
            if data.get(f.name)
            else None
            for f in dataclasses.fields(cls)
            if "Spread" in str(f.type)
        }
        return cls(**{**data, **spreads})


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


@dataclass(frozen=True)
class SpecShape:
    """A speculative configuration in the terms every engine shares, read by the engine from its own parameters
    (defaults and forced values applied): what the surface model fits and the dashboard draws on."""

    method: str  # the speculative method as the engine names it (NEXTN, ngram-mod, ...)
    depth: int  # draft positions one verify step can accept
    width: int = 1  # candidates per position (a tree's top-k); 1 for a chain
    budget: int = 0  # draft tokens verified per step, the root excluded (a chain's is its depth)
    # Whether a model drafts (a forward per depth step: EAGLE, MTP, a draft model), or drafts are looked up
    # (n-gram): then depth costs no draft time, only the verification of what was found.
    draft_model: bool = True
    # The parameter names behind each number, for axis titles ("" where the engine fixes or derives it).
    depth_param: str = ""
    width_param: str = ""
    budget_param: str = ""
    # What else decides which tokens are drafted, not how many (an n-gram's match length, a draft's minimum
    # probability), as "name=value" pairs: acceptance differs between variants and is fitted per variant.
    variant: str = ""
    # The engine's own controller sizing each step within this shape (vLLM's adaptive verification, SGLang's
    # adaptive steps); "" for a static configuration, whose every step drafts the same.
    controller: str = ""

    @property
    def reach(self) -> int:
        """Draft positions one verify step can accept: the depth, at most the tokens verified."""
        return min(self.depth, self.budget or self.depth)

    @property
    def draft_work(self) -> int:
        """What a step spends on speculation, to prefer the cheaper of two equally fast configurations: a
        forward per position a model drafts, and the tokens verified."""
        return (self.depth if self.draft_model else 0) + (self.budget or self.depth)

    @property
    def params(self) -> tuple[str, ...]:
        """The engine's parameters behind depth, budget and width, in that order (the ones it names)."""
        return tuple(dict.fromkeys(p for p in (self.depth_param, self.budget_param, self.width_param) if p))

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> SpecShape | None:
        if not data:
            return None
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


class Stage(StrEnum):
    """Where a trial stopped short of a complete measurement (NONE: it did not)."""

    NONE = ""
    INFEASIBLE = "infeasible"  # the engine's constraints rule it out: never launched
    PARAMS = "params"  # the engine refused the parameters before launch
    LAUNCH = "launch"  # the server did not come up (exited, out of memory, not ready in time)
    SPECULATION = "speculation"  # it came up without the speculation asked for
    PROBE = "probe"  # it died, or failed every request, while measured
    INTERRUPTED = "interrupted"  # the sweep was stopped (Ctrl-C, a signal, its driver died) during the trial
    ERROR = "error"  # specsweep itself failed (a bug: the record says what was raised)

    @classmethod
    def read(cls, value: str | None) -> Stage:
        """A stage as a stored record spells it (an unknown one, from another version, as ERROR)."""
        try:
            return cls(value or "")
        except ValueError:
            return cls.ERROR


# A launch that stopped here never measured anything: the search learns where servers do not start.
STARTUP_STAGES = frozenset({Stage.PARAMS, Stage.LAUNCH, Stage.SPECULATION})


@dataclass
class TrialRecord:
    """One trial: the parameters, the argv they became, what the server said, and what each workload measured."""

    number: int
    params: dict[str, Any]
    argv: list[str] = field(default_factory=list)
    # What of `argv` the engine added only to read the server (a debug log level): a served copy leaves it out.
    measuring_argv: list[str] = field(default_factory=list)
    facts: LaunchFacts = field(default_factory=LaunchFacts)
    workloads: dict[str, WorkloadSummary] = field(default_factory=dict)
    failure: str = ""
    stage: Stage = Stage.NONE  # where it failed
    host: HostLoad | None = None
    shape: SpecShape | None = (
        None  # the engine's reading of the speculative parameters (None: no speculation)
    )
    gpu: GpuUse | None = None  # None: not read (a record from before GPUs were recorded)
    # A cost profile's launch: the acceptance length the engine was told to force (None: a real measurement).
    # Its speeds say what a step costs; its answers are not text and it never feeds a verdict.
    synthetic_length: float | None = None

    @property
    def failed(self) -> bool:
        return bool(self.failure)

    @property
    def started(self) -> bool | None:
        """Whether its server came up (None: never launched, the engine's constraints ruled it out)."""
        return None if self.stage == Stage.INFEASIBLE else self.stage not in STARTUP_STAGES

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "params": self.params,
            "argv": self.argv,
            "measuring_argv": self.measuring_argv,
            "facts": self.facts.to_dict(),
            "workloads": {name: s.to_dict() for name, s in self.workloads.items()},
            "failure": self.failure,
            "stage": self.stage.value,
            "host": self.host.to_dict() if self.host else None,
            "shape": self.shape.to_dict() if self.shape else None,
            "gpu": self.gpu.to_dict() if self.gpu else None,
            "synthetic_length": self.synthetic_length,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls(
            number=data["number"],
            params=data["params"],
            argv=data.get("argv", []),
            measuring_argv=data.get("measuring_argv", []),
            facts=LaunchFacts.from_dict(data.get("facts", {})),
            workloads={n: WorkloadSummary.from_dict(s) for n, s in data.get("workloads", {}).items()},
            failure=data.get("failure", ""),
            stage=Stage.read(data.get("stage")),
            host=HostLoad(**data["host"]) if data.get("host") else None,
            shape=SpecShape.from_dict(data.get("shape")),
            gpu=GpuUse.from_dict(data.get("gpu")),
            synthetic_length=data.get("synthetic_length"),
        )
