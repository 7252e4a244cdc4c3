"""One record per trial: the speculative shape a launch ran, where a failed trial stopped (`Stage`), and the
`TrialRecord` that holds its facts and its workloads' summaries."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Self

from sweep.records.facts import GpuUse, HostLoad, LaunchFacts
from sweep.records.requests import WorkloadSummary


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
