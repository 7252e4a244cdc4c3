"""The records a sweep writes: one row per measured request, one summary per workload, one record per trial.

Each record has a plain-JSON form (`to_dict` / `from_dict`) so that a trial is complete both in
`runs/<study>/trials/<n>/record.json` and in the Optuna trial's user attributes.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any, Literal, Self

RequestStatus = Literal["ok", "invalid", "does_not_fit", "error"]


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
    client_decode_tps: float | None = None
    server_decode_tps: float | None = None
    server_prefill_tps: float | None = None
    server_ttft_s: float | None = None
    server_e2e_s: float | None = None
    draft_tokens: int = 0
    accepted_tokens: int = 0
    acceptance_rate: float | None = None
    acceptance_length: float | None = None
    wall_s: float = 0.0

    @property
    def decode_tps(self) -> float | None:
        """The server's own decode rate where it reports one (it excludes HTTP and queueing), else the client's."""
        return self.server_decode_tps if self.server_decode_tps is not None else self.client_decode_tps

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


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
class WorkloadSummary:
    """What one trial measured on one workload (a class of prompts at one context length and stream count)."""

    workload: str
    status: RequestStatus
    reason: str = ""
    decode_tps: Spread | None = None
    aggregate_tps: Spread | None = None
    ttft_s: Spread | None = None
    prefill_tps: Spread | None = None
    acceptance_rate: Spread | None = None
    acceptance_length: Spread | None = None
    draft_tokens: int = 0
    accepted_tokens: int = 0
    prompt_tokens: Spread | None = None
    requests: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        spreads = {
            f.name: Spread(**{**data[f.name], "values": tuple(data[f.name].get("values", ()))})
            if data.get(f.name)
            else None
            for f in dataclasses.fields(cls)
            if "Spread" in str(f.type)
        }
        return cls(**{**data, **spreads})


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
    startup_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


@dataclass
class TrialRecord:
    """One trial: the parameters, the argv they became, what the server said, and what each workload measured."""

    number: int
    params: dict[str, Any]
    argv: list[str] = field(default_factory=list)
    facts: LaunchFacts = field(default_factory=LaunchFacts)
    workloads: dict[str, WorkloadSummary] = field(default_factory=dict)
    failure: str = ""
    # Where a failure happened: "params", "launch" (the server did not come up), "speculation" (it came up
    # without the speculation asked for) or "probe" (it died or failed every request while measured).
    stage: str = ""

    @property
    def failed(self) -> bool:
        return bool(self.failure)

    def to_dict(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "params": self.params,
            "argv": self.argv,
            "facts": self.facts.to_dict(),
            "workloads": {name: s.to_dict() for name, s in self.workloads.items()},
            "failure": self.failure,
            "stage": self.stage,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        return cls(
            number=data["number"],
            params=data["params"],
            argv=data.get("argv", []),
            facts=LaunchFacts.from_dict(data.get("facts", {})),
            workloads={n: WorkloadSummary.from_dict(s) for n, s in data.get("workloads", {}).items()},
            failure=data.get("failure", ""),
            stage=data.get("stage", ""),
        )
