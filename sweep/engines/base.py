"""The engine interface. Everything that differs between serving engines lives behind it, one file per engine."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import httpx

from sweep.results import LaunchFacts, RequestStatus

Params = Mapping[str, Any]


@dataclass(frozen=True)
class ServerReport:
    """What a server said about one finished request (the final streamed chunk)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int | None = None
    decode_tps: float | None = None
    prefill_tps: float | None = None
    draft_tokens: int = 0
    accepted_tokens: int = 0
    acceptance_length: float | None = None


@dataclass(frozen=True)
class DraftCounters:
    """Cumulative speculative counters from a server's metrics; differences give acceptance over a window."""

    steps: float
    drafted: float
    accepted: float

    def acceptance_length_since(self, before: DraftCounters) -> float | None:
        """Tokens per verification step, bonus token included: 1 + accepted / steps."""
        steps = self.steps - before.steps
        return None if steps <= 0 else 1.0 + (self.accepted - before.accepted) / steps


@dataclass(frozen=True)
class ServerSetup:
    """Where the server comes from: the binary or launch prefix, the model, and flags passed through verbatim."""

    launcher: list[str]
    model: str
    extra_args: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"


class Engine(ABC):
    """One kind of server. Subclasses turn a trial's parameters into argv and read what the server says."""

    name: ClassVar[str]
    # Environment variables the server reads before its CLI: removed from the child's environment.
    env_prefixes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, setup: ServerSetup) -> None:
        self.setup = setup

    # --- parameters and launch -------------------------------------------------------------------------
    @abstractmethod
    def known_params(self) -> list[str]:
        """Parameter names a space may set or sweep."""

    @abstractmethod
    def check_value(self, name: str, value: Any) -> None:
        """Raise UserError if `name` is unknown or `value` is not one the engine accepts."""

    def check_params(self, params: Params) -> None:
        """Check a whole trial's parameters: each value, then combinations."""
        for name, value in params.items():
            self.check_value(name, value)

    @abstractmethod
    def baseline_params(self) -> dict[str, Any]:
        """The parameters that turn speculation off."""

    @abstractmethod
    def wants_speculation(self, params: Params) -> bool: ...

    @abstractmethod
    def argv(self, params: Params, port: int) -> list[str]: ...

    def env(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith(self.env_prefixes or ("\0",))}

    @abstractmethod
    def health_path(self) -> str: ...

    # --- what the server says about itself --------------------------------------------------------------
    @abstractmethod
    def facts_from_log(self, log: str) -> LaunchFacts: ...

    @abstractmethod
    def exit_reason(self, log: str, returncode: int) -> str:
        """Why a server that exited during start did so, in one line, read from its log."""

    def inspect_running(self, client: httpx.Client, facts: LaunchFacts, params: Params, log: str) -> None:
        """Fill facts from the running server's API; raise SpeculationInactive if speculation was asked for
        and is not on."""

    # --- requests ------------------------------------------------------------------------------------------
    chat_path: ClassVar[str] = "/v1/chat/completions"

    @abstractmethod
    def request_fields(self) -> dict[str, Any]:
        """Extra body fields for every measured request (prompt cache off, timings on, ...)."""

    @abstractmethod
    def read_final(self, chunk: dict[str, Any]) -> ServerReport | None:
        """The server's report on a request, if this streamed chunk carries it."""

    @abstractmethod
    def classify_error(self, status_code: int, body: str) -> tuple[RequestStatus, str]:
        """Map an HTTP error to 'does_not_fit' (prompt over the limit) or 'error', with the server's message."""

    @abstractmethod
    async def count_tokens(self, client: httpx.AsyncClient, text: str) -> int:
        """Tokens in `text` by the server's own tokenizer."""

    async def flush(self, client: httpx.AsyncClient) -> None:
        """Drop cached prefixes between workloads, where the engine has a way to."""

    async def draft_counters(self, client: httpx.AsyncClient) -> DraftCounters | None:
        """Cumulative speculative counters, where the engine exposes them."""
        return None
