"""The values the engine interface speaks: a prompt's form and a request's settings, what a server reports of a
request and its draft counters, a launch's plan, command and running limit, and the setup every engine is built
with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sweep.records import SpecShape

Params = Mapping[str, Any]


class PromptForm(StrEnum):
    """How a prompt reaches the model."""

    CHAT = "chat"  # a user message, rendered by the model's own chat template (an instruction-tuned model)
    COMPLETION = "completion"  # the text as it is, to be continued (a base model: no chat template)


@dataclass(frozen=True)
class RequestSettings:
    """Sampling is fixed so that trials differ only in the server's settings."""

    max_tokens: int = 128
    seed: int = 1234
    temperature: float = 0.0
    ignore_eos: bool = False
    stop: tuple[str, ...] = ()  # the workload's stop sequences: the answer ends where its task does


@dataclass(frozen=True)
class ServerReport:
    """What a server said about one finished request (the final streamed chunk). Times are the server's own."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    decode_tps: float | None = None
    prefill_tps: float | None = None
    ttft_s: float | None = None
    e2e_s: float | None = None
    # When the request arrived, on the server's clock (seconds since the epoch): the requests of a batch line
    # up on it with no client clock in between.
    received_s: float | None = None
    draft_tokens: int = 0
    accepted_tokens: int = 0
    acceptance_length: float | None = None
    # Share of this request's verify steps that accepted the draft at each position, where the server says
    # (SGLang's per-request histogram of correct drafts).
    position_acceptance: tuple[float, ...] = ()


def positions_from_histogram(histogram: Sequence[int | float]) -> tuple[float, ...]:
    """Per draft position, the share of verify steps that accepted it, from a histogram of verify steps by
    how many drafts they accepted (`[steps with 0 correct, with 1, ...]`): position i is accepted by every step
    that accepted more than i drafts."""
    steps = float(sum(histogram))
    if steps <= 0:
        return ()
    return tuple(round(sum(histogram[i + 1 :]) / steps, 4) for i in range(len(histogram) - 1))


@dataclass(frozen=True)
class DraftCounters:
    """Cumulative speculative counters from a server's metrics; differences give acceptance over a window."""

    steps: float
    drafted: float
    accepted: float
    accepted_at: tuple[float, ...] = ()  # accepted drafts at each position, where the server counts them

    def position_acceptance_since(self, before: DraftCounters) -> tuple[float, ...]:
        """Per position, the share of verify steps since `before` that accepted the draft there."""
        steps = self.steps - before.steps
        if steps <= 0 or not self.accepted_at:
            return ()
        earlier = (*before.accepted_at, *[0.0] * len(self.accepted_at))
        return tuple(round((now - earlier[i]) / steps, 4) for i, now in enumerate(self.accepted_at))

    def acceptance_length_since(self, before: DraftCounters) -> float | None:
        """Tokens per verification step, bonus token included: 1 + accepted / steps."""
        steps = self.steps - before.steps
        return None if steps <= 0 else 1.0 + (self.accepted - before.accepted) / steps


@dataclass(frozen=True)
class SyntheticAcceptance:
    """How a server is told to accept its drafts at a forced mean length (tokens a verify step, the target's own
    included), the engines' benchmarking switch: such a server's answers are not text and its speeds say what a
    step costs, never what a workload gains."""

    length: float
    argv: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(
        default_factory=dict
    )  # the engine's own parameters, laid over the launch's


@dataclass(frozen=True)
class LaunchPlan:
    """What `Engine.plan` makes of a trial's parameters: the ones to launch, how far over each of the engine's
    constraints they are (> 0: infeasible), or why the engine refuses them."""

    params: dict[str, Any]
    violations: Mapping[str, float] = field(default_factory=dict)
    invalid: str = ""
    shape: SpecShape | None = None  # the depth, tree width and draft budget (None: no speculation)
    speculative: bool = False
    draft_in_pool: bool = False  # a draft's KV shares the target's pool (`Engine.draft_shares_pool`)
    kv_dtype: str = "auto"  # the KV cache's element type, by the engine's name for it
    # Speculative state that lasts across requests and a flush (an n-gram pool): a server per workload.
    server_per_workload: bool = False
    synthetic: SyntheticAcceptance | None = None  # acceptance forced (a cost profile's launch), else real

    @property
    def launchable(self) -> bool:
        return not self.invalid and not any(v > 0 for v in self.violations.values())


@dataclass(frozen=True)
class ServerCommand:
    """How one server of a plan starts and says it serves (`Engine.command`, once a launch)."""

    argv: list[str]
    env: dict[str, str]
    health_path: str
    measuring_argv: list[str] = field(default_factory=list)  # `Engine.measuring_argv`, as it is in `argv`


@dataclass(frozen=True)
class RunningLimit:
    """How many requests a server decodes at once, why, and the parameter that sets it."""

    requests: int
    why: str  # "-np 2", "SGLang resets max-running-requests to 48 for speculative decoding"
    param: str


@dataclass(frozen=True)
class ServerSetup:
    """Where the server comes from: the binary or launch prefix, the model, and flags passed through verbatim."""

    launcher: list[str]
    model: str
    extra_args: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"
