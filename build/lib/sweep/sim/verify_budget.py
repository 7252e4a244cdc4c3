"""vLLM's adaptive verification (`enable_adaptive_verification` in `--speculative-config`), as the simulator runs
it: vLLM 0.34.0's `v1/worker/gpu/spec_decode/adaptive_verification.py`, read and redone for the simulator's
identical requests.

Each decode step vLLM scores every (request, draft position) slot by its survival probability, the running
product of the request's per-position acceptance estimates, and admits the number of slots that maximises
expected tokens per unit of step cost: (requests + the admitted slots' summed survival) / (draft cost at the
batch + verify cost at its tokens), from cost curves it profiles at start-up by replaying its decode graphs.
The estimates come from an online fit that starts from cold-start coefficients and learns from each verified
step. Here every request of a batch has the same acceptance, so the best slots fill position 1 of every
request, then position 2, and so on: the admitted depth is one per step, at most `num_speculative_tokens`.
The cost curve is the step model's own mean step time at each depth (what profiling would measure); the
estimate is the accepted share of the positions verified, starting from the cold-start prior.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable

# vLLM's cold start (acceptance_estimator.py: slope 0.5, bias -0.2 on a draft's log-odds) read at even odds:
# a prior acceptance of sigmoid(-0.2), worth this many verified positions before the fit replaces it.
PRIOR = 1 / (1 + math.exp(0.2))
PRIOR_WEIGHT = 8.0


class VerifyBudget:
    """The depth each step admits, shared by the server's request threads (the interface of `AdaptiveSteps`)."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.accepted = PRIOR * PRIOR_WEIGHT
        self.verified = PRIOR_WEIGHT
        self.lock = threading.Lock()
        self.admitted: list[int] = []  # each step's depth, for the log and the tests

    @property
    def estimate(self) -> float:
        """The per-position acceptance the controller believes now."""
        return self.accepted / self.verified

    def steps_for(self, batch: int, step_seconds: Callable[[int], float] | None = None) -> int:
        """The depth that maximises expected tokens a second at this batch (`step_seconds(depth)`)."""
        if step_seconds is None:
            return self.most
        with self.lock:
            a = self.estimate
        best, best_rate, survival, expected = 0, 0.0, 1.0, 1.0
        for depth in range(self.most + 1):
            if depth:
                survival *= a
                expected += survival
            rate = expected / max(step_seconds(depth), 1e-9)
            if rate > best_rate:
                best, best_rate = depth, rate
        with self.lock:
            self.admitted.append(best)
        return best

    def on_verify(self, correct: int, batch: int, depth: int = 0) -> list[str]:
        """Learn from one verify step: `correct` of its `depth` positions (the first rejection ends it)."""
        if depth <= 0:
            return []
        with self.lock:
            self.accepted += correct
            self.verified += min(depth, correct + 1)
        return []
