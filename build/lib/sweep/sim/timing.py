"""The simulated clock's pieces: the prefill batch that arrivals join, a decode step's cost for the requests
running at once, and how far the host let requests fall behind the clock (`ClockLag`, served at
`core.clock.CLOCK_PATH`).

The simulator sleeps to each step's modelled end at its time scale (`--sim-time-scale`); a host too slow or too
busy for that scale wakes it late, and what the client's clock then measures is the host's pace, not the
model's (the durations the server reports stay the model's). A request that ends more than LATE_SHARE of its
modelled decode time behind its clock was not simulated at that scale."""

from __future__ import annotations

import dataclasses

from sweep.core.clock import LATE_SHARE
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


@dataclasses.dataclass
class ClockLag:
    """Requests' decode time as modelled and how late they ended, in wall seconds at the time scale, summed."""

    modelled_s: float = 0.0
    late_s: float = 0.0
    requests: int = 0
    late_requests: int = 0  # ended more than LATE_SHARE of their modelled time behind the clock

    def add(self, modelled_s: float, late_s: float) -> bool:
        """Count one request; True where it ended behind the clock beyond LATE_SHARE."""
        late = late_s > LATE_SHARE * modelled_s
        self.modelled_s += modelled_s
        self.late_s += late_s
        self.requests += 1
        self.late_requests += late
        return late

    def to_dict(self) -> dict[str, float | int]:
        return dataclasses.asdict(self)
