"""What the probes are told and what they hand back: the probe settings and their defaults, the timeouts, the
progress callback, and a probe's result (`Served`: what the server said about its own counting)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

from sweep.engines.values import PromptForm, RequestSettings
from sweep.probes.workloads import Workload, served_form
from sweep.records import (
    HostLoad,
    RequestMeasurement,
    WorkloadSummary,
)

DEFAULT_REPEATS = 3
COUNTER_SETTLE_S = 0.05  # llama-server adds a request's draft counters when its slot is released
COUNTER_RETRIES = 10
BATCH_ATTEMPTS = 3  # a batch with an invalid request is measured again, this many times in all
NONCE_TRIES = 20

Progress = Callable[[str], None]
# Starts watching the host when called; the function it returns stops and says what the rest of the machine did.
HostWatch = Callable[[], Callable[[], HostLoad | None]]


STALL_TIMEOUT_S = 180.0  # no byte from the server for this long (prefill of a long prompt included): stalled
REQUEST_BASE_S = 120.0  # a request's deadline: this, plus REQUEST_PER_TOKEN_S per max_tokens
REQUEST_PER_TOKEN_S = 1.0
TRIAL_TIMEOUT_S = 7200.0  # a whole trial (launch, every workload) ends here whatever happens


# Other configurations' answers, by workload key and then by prompt id (`RequestMeasurement.prompt_id`).
Others = Mapping[str, Mapping[str, tuple[str, ...]]]


@dataclass(frozen=True)
class ProbeSettings:
    """How workloads are sent. Every wait is bounded: a silent stream, a request and a whole trial."""

    repeats: int = DEFAULT_REPEATS
    request: RequestSettings = field(default_factory=RequestSettings)
    warmup: bool = True
    attempts: int = BATCH_ATTEMPTS
    stall_timeout_s: float = STALL_TIMEOUT_S
    request_timeout_s: float | None = None  # None: REQUEST_BASE_S + REQUEST_PER_TOKEN_S x max_tokens
    trial_timeout_s: float = TRIAL_TIMEOUT_S
    # The space's latency limits (`ttft_p90_s: 2.0`): an open-loop request that meets each (its own time, its
    # own inter-token percentile) counts towards the goodput.
    latency_limits: Mapping[str, float] = field(default_factory=dict)

    @property
    def request_deadline_s(self) -> float:
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        return REQUEST_BASE_S + REQUEST_PER_TOKEN_S * self.request.max_tokens

    def timeouts(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=10.0, read=self.stall_timeout_s, write=60.0, pool=self.request_deadline_s
        )


@dataclass
class ProbeResult:
    summaries: dict[str, WorkloadSummary]
    requests: list[RequestMeasurement]


@dataclass(frozen=True)
class Served:
    """What the running server takes: whether it has a chat template (None: unknown) and where that was read,
    how many tokens its template puts before every user message, and whether its replies' draft counts are the
    drafts it made (`LaunchFacts.drafts_counted`)."""

    chat_template: bool | None = None
    source: str = ""
    template_tokens: int = 0
    drafts_counted: bool = True

    def form(self, workload: Workload) -> tuple[PromptForm, str]:
        """The form the workload's requests take here, and why."""
        return served_form(workload.form, self.chat_template, self.source)


@dataclass(frozen=True)
class Sending:
    """How one workload's requests go out on this server: its prompts' form and the probe's settings."""

    workload: Workload
    form: PromptForm
    settings: ProbeSettings
    template_tokens: int = 0
    # What other configurations answered this workload's prompts (prompt id to texts): where an answer here
    # parts from one of them, the server is asked whether it was a near-tie (`TieProbe`).
    others: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
