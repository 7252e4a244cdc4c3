"""What a probe measured: one row per request, the spread of a number over a workload's requests, the
capacity search's steps, and one summary per workload."""

from __future__ import annotations

import dataclasses
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Self

from sweep.answers.fidelity import TieProbe
from sweep.answers.health import OutputHealth
from sweep.records.facts import HostLoad

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
    # The prompt's and the answer's token ids as the server saw them (the n-gram replay's input), where the
    # engine gives both and their counts match the server's own; else empty, with `ids_missing` saying why.
    max_tokens: int = 0  # the request's limit on its answer (0: a record from before it was kept)
    prompt_ids: tuple[int, ...] = ()
    output_ids: tuple[int, ...] = ()
    ids_missing: str = ""

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
        values["prompt_ids"] = tuple(values.get("prompt_ids", ()))
        values["output_ids"] = tuple(values.get("output_ids", ()))
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
    # Whether its headline was read on the server's own clock (every request's decode rate as the server timed
    # it, no capacity): a host too slow for a simulated server's time scale leaves it the model's.
    server_clock: bool = False
    # How the prompts were sent ("chat": through the model's chat template; "completion": as text to continue)
    # and why, and whether the answers read as text (acceptance measured on loops overstates real gains).
    form: str = ""
    form_reason: str = ""
    output_health: OutputHealth | None = None
    # Tokens the chat template put before every message (the same in each request): a prefix cache may serve
    # them, and a request stays cold while its cached count is no more than this.
    template_tokens: int = 0

    @property
    def on_busy_host(self) -> bool:
        """Whether the rest of the machine took it while it was measured, or a simulated server fell behind its
        clock where the headline reads the client's (`HostLoad.lagged`)."""
        host = self.host
        return host is not None and (host.busy or (host.lagged and not self.server_clock))

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
