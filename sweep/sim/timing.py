"""The simulated clock's pieces: the prefill batch that arrivals join, and a decode step's cost for the requests
running at once."""

from __future__ import annotations

import dataclasses

from sweep.sim.model import StepModel


@dataclasses.dataclass
class PrefillBatch:
    """A prefill batch on the GPU: when it ends (monotonic wall clock) and the tokens it prefills."""

    end: float
    tokens: int


def step_cost(model: StepModel, running: int, depth: int) -> float:
    """A step's mean seconds at `depth` drafts for a batch of `running`: the cost curve an adaptive controller
    profiles at start-up."""
    return dataclasses.replace(model, steps_override=depth).mean_step_seconds(running)
