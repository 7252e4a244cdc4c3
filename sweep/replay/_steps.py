"""What a replay works on and what it gives: a request's token ids, and the drafted and accepted tokens of
each verify step."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TokenIds:
    """One answered request's tokens as the server saw them: the prompt after its template, then the answer."""

    prompt: tuple[int, ...]
    output: tuple[int, ...]


@dataclass(frozen=True)
class VerifyStep:
    """One verify step: the tokens the drafter proposed and how many of them the target kept."""

    drafted: int
    accepted: int


@dataclass(frozen=True)
class Replayed:
    """A drafter's verify steps over one request, in order."""

    steps: tuple[VerifyStep, ...]

    @property
    def drafted(self) -> int:
        return sum(s.drafted for s in self.steps)

    @property
    def accepted(self) -> int:
        return sum(s.accepted for s in self.steps)

    @property
    def acceptance_length(self) -> float | None:
        """Tokens per verify step (the accepted ones and the target's own), as the engines report it."""
        return 1.0 + self.accepted / len(self.steps) if self.steps else None


@dataclass(frozen=True)
class ReplayArm:
    """One drafter configuration an engine can replay: its parameters as a space names them, and the replay
    of one request (its token ids, its `max_tokens` and the slot's context length)."""

    params: Mapping[str, Any]
    replay: Callable[[TokenIds, int, int], Replayed]

    @property
    def label(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in self.params.items())
