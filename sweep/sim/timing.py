"""The simulated clock: a stopwatch that scales time (`--sim-time-scale`), the prefill batch that arrivals join,
and a decode step's cost for the requests running at once."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from sweep.sim.model import StepModel


class StopWatch:
    """Watches the text a generation writes for its stop sequences: each piece is cut before the first one."""

    def __init__(self, stop: Sequence[str]) -> None:
        self.stop, self.text, self.matched = [s for s in stop if s], "", ""

    def cut(self, piece: str) -> str:
        if not self.stop:
            return piece  # nothing to watch for: the text need not be kept
        if self.matched:
            return ""
        before = len(self.text)
        self.text += piece
        hits = [(at, s) for s in self.stop if (at := self.text.find(s, max(0, before - len(s) + 1))) >= 0]
        if not hits:
            return piece
        at, self.matched = min(hits)
        self.text = self.text[:at]
        return self.text[before:]


@dataclasses.dataclass
class PrefillBatch:
    """A prefill batch on the GPU: when it ends (monotonic wall clock) and the tokens it prefills."""

    end: float
    tokens: int


def step_cost(model: StepModel, running: int, depth: int) -> float:
    """A step's mean seconds at `depth` drafts for a batch of `running`: the cost curve an adaptive controller
    profiles at start-up."""
    return dataclasses.replace(model, steps_override=depth).mean_step_seconds(running)
