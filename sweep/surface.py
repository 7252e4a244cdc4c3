"""The surface model: what a configuration not yet launched would measure on a workload, and how sure that is.

Speculative decoding has a known shape. A verify step emits L = 1 + p + p^2 + ... + p^d tokens for a draft of
depth d whose positions are each accepted with probability p; a tree keeps more candidates per position, which
catches more (p = 1 - (1 - a)^(w^g) for w candidates, g < 1: they are correlated) at a cost. A step takes longer
with depth (drafting) and with the tokens verified. So, per workload and speculative method, the model fits

- the chain acceptance `a` and the tree gain `g` from the acceptance lengths the server reported, and
- the step time `t = c0 + c1 d + c2 b` (b: the draft budget) from L / decode t/s, ridge-regressed towards a
  prior scaled by the baseline's own per-token time,

and predicts decode t/s = L / t. What that shape cannot explain (an n-gram's match length, a memory flag) is
left to a Gaussian process over the swept parameters on the log scale, whose variance also grows with the
distance from what was measured: the uncertainty the search trades against the predicted speed.

Engines say what depth, width and budget a configuration has (`Engine.spec_shape`, kept in each record); this
module reads records and shapes only.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep.results import SpecShape, TrialRecord

ACCEPT_GRID = np.linspace(0.02, 0.99, 98)
GAIN_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
GAIN_PRIOR = 0.5  # with one tree width measured, the gain cannot be told from the data: assume this
LENGTH_SCALE = 0.35  # of the Gaussian process, in the swept parameters scaled to [0, 1]
MIN_SIGNAL_SD = 0.05  # what the process may still be wrong by where nothing was measured (log scale)
UNSEEN_METHOD_SD = 0.5  # a method with no measurement at all: anything from 0.6x to 1.6x
NOISE_FLOOR = 0.02  # relative noise assumed at least (a single launch is never more exact than this)


@dataclass(frozen=True)
class Axis:
    """One swept parameter as the model sees it: a range scaled to [0, 1] (log where the space says so), or
    one dimension per choice."""

    name: str
    low: float = 0.0
    high: float = 1.0
    log: bool = False
    choices: tuple[Any, ...] = ()

    def encode(self, value: Any) -> list[float]:
        if self.choices:
            return [0.7 if value == c else 0.0 for c in self.choices]  # distinct choices sit 1 apart
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            return [0.0]  # not set for this method: the other dimensions tell them apart
        low, high, v = self.low, self.high, float(value)
        if self.log:
            low, high, v = math.log(low), math.log(high), math.log(max(v, 1e-12))
        return [0.0 if high == low else (v - low) / (high - low)]


def encode(axes: Sequence[Axis], params: Mapping[str, Any]) -> list[float]:
    return [x for axis in axes for x in axis.encode(params.get(axis.name))]


@dataclass(frozen=True)
class Observation:
    """One launch of a configuration, on one workload."""

    params: Mapping[str, Any]
    shape: SpecShape | None
    tps: float
    accept_length: float | None = None


@dataclass(frozen=True)
class SurfacePoint:
    """The model's prediction for one configuration on one workload (what the dashboard draws)."""

    workload: str
    params: Mapping[str, Any]
    shape: SpecShape
    tps: float
    sd: float
    accept_length: float | None
    measured: bool  # launched already (its measurement is drawn beside it)


@dataclass(frozen=True)
class Prediction:
    tps: float
    sd: float  # on the log scale: tps x exp(+-sd) is one standard deviation
    accept_length: float | None = None

    @property
    def low(self) -> float:
        return self.tps * math.exp(-2 * self.sd)

    @property
    def high(self) -> float:
        return self.tps * math.exp(2 * self.sd)

    def expected_improvement(self, best: float) -> float:
        """Expected gain over `best`, as a fraction of it (on the log scale: ~ relative gain)."""
        if best <= 0:
            return math.inf
        gap = math.log(self.tps / best)
        if self.sd <= 0:
            return max(0.0, gap)
        z = gap / self.sd
        return gap * _phi_cdf(z) + self.sd * _phi_pdf(z)


def _phi_pdf(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _phi_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def accept_length(a: float, gain: float, shape: SpecShape) -> float:
    """Tokens per verify step of a draft with this shape, for chain acceptance `a` and tree gain `gain`."""
    depth = min(shape.depth, shape.budget or shape.depth)
    if depth <= 0:
        return 1.0
    width = max(1.0, min(float(shape.width), (shape.budget or depth) / depth))
    p = 1 - float((1 - a) ** (width**gain))
    return 1 + sum(p**i for i in range(1, depth + 1))


@dataclass(frozen=True)
class MethodFit:
    """One speculative method on one workload: acceptance and step time."""

    accept: float | None  # chain acceptance per position; None: no acceptance was reported
    gain: float
    step: tuple[float, float, float]  # c0, c1 (per depth), c2 (per budget token), seconds
    n: int  # launches it rests on

    def accept_length(self, shape: SpecShape) -> float | None:
        return None if self.accept is None else accept_length(self.accept, self.gain, shape)

    def tps(self, shape: SpecShape) -> float | None:
        length = self.accept_length(shape)
        if length is None:
            return None
        c0, c1, c2 = self.step
        seconds = c0 + c1 * shape.depth + c2 * (shape.budget or shape.depth)
        return length / seconds if seconds > 0 else None


def _fit_acceptance(points: list[tuple[SpecShape, float]]) -> tuple[float, float] | None:
    """Least squares over a grid of (a, gain), relative errors; a gain only where widths differ."""
    if not points:
        return None
    widths = {min(p.width, max(1, (p.budget or p.depth) // max(1, p.depth))) for p, _ in points}
    gains = GAIN_GRID if len(widths) > 1 else (GAIN_PRIOR,)
    best: tuple[float, float, float] | None = None
    for gain in gains:
        for a in ACCEPT_GRID:
            error = sum((accept_length(float(a), gain, s) / length - 1) ** 2 for s, length in points)
            error += 1e-4 * (gain - GAIN_PRIOR) ** 2  # ties go to the prior
            if best is None or error < best[0]:
                best = (error, float(a), gain)
    assert best is not None
    return best[1], best[2]


def _fit_step(
    points: list[tuple[SpecShape, float]], per_token: float, draft_model: bool = True
) -> tuple[float, float, float]:
    """Ridge regression of step seconds on (1, depth, budget) towards a prior made of the baseline's
    per-token time: a step costs about one token, plus a sixth of one per position a draft model drafts, plus
    a fiftieth per token verified (a lookup drafter, n-gram, costs no draft forward)."""
    prior = np.array([1.1 * per_token, per_token / 6 if draft_model else 0.0, per_token / 50])
    if not points:
        return (float(prior[0]), float(prior[1]), float(prior[2]))
    x = np.array([[1.0, s.depth, s.budget or s.depth] for s, _ in points])
    y = np.array([t for _, t in points])
    weight = 0.5 / per_token**2  # the prior counts as half a launch per coefficient
    scale = np.diag([1.0, 1.0 / 16, 1.0 / 256])  # depths reach ~16, budgets ~256: compare like with like
    lhs = x.T @ x + weight * per_token**2 * np.linalg.inv(scale @ scale)
    rhs = x.T @ y + weight * per_token**2 * np.linalg.inv(scale @ scale) @ prior
    coef = np.linalg.solve(lhs, rhs)
    return (float(max(coef[0], 0.2 * per_token)), float(max(coef[1], 0.0)), float(max(coef[2], 0.0)))


class WorkloadSurface:
    """The model of one workload, fitted to its observations (the baseline included, as the reference)."""

    def __init__(
        self, axes: Sequence[Axis], observations: Sequence[Observation], noise: float = NOISE_FLOOR
    ) -> None:
        self.axes = list(axes)
        self.noise = max(noise, NOISE_FLOOR)
        baseline = [o.tps for o in observations if o.shape is None and o.tps > 0]
        speculative = [o for o in observations if o.shape is not None and o.tps > 0]
        self.baseline_tps = statistics.median(baseline) if baseline else None
        self.best = max((o.tps for o in observations if o.tps > 0), default=0.0)
        fallback = statistics.median([o.tps for o in speculative]) if speculative else None
        per_token = 1 / (self.baseline_tps or fallback or 1.0)
        self.methods: dict[str, MethodFit] = {}
        for method in dict.fromkeys(o.shape.method for o in speculative if o.shape):
            mine = [o for o in speculative if o.shape and o.shape.method == method]
            self.methods[method] = self._fit_method(mine, per_token)
        self._per_token = per_token
        self._gp(speculative)

    @staticmethod
    def _fit_method(mine: list[Observation], per_token: float) -> MethodFit:
        with_length = [(o.shape, o.accept_length, o.tps) for o in mine if o.shape and o.accept_length]
        fitted = _fit_acceptance([(s, length) for s, length, _ in with_length if s.depth > 0])
        steps = [(s, length / tps) for s, length, tps in with_length if s.depth > 0]
        step = _fit_step(steps, per_token, all(o.shape.draft_model for o in mine if o.shape))
        if fitted is None:
            return MethodFit(None, GAIN_PRIOR, step, len(mine))
        return MethodFit(fitted[0], fitted[1], step, len(mine))

    def _mean(self, shape: SpecShape | None) -> tuple[float, float]:
        """The shape's prediction (log t/s) and how unsure it is before any residual is learnt."""
        fit = self.methods.get(shape.method) if shape else None
        structural = fit.tps(shape) if fit and shape else None
        if structural is not None and fit is not None:
            return math.log(structural), 0.25 / math.sqrt(fit.n)
        if fit is not None and shape is not None:
            return math.log(self._method_median(shape.method)), 0.25 / math.sqrt(fit.n)
        reference = self.baseline_tps or self.best or 1.0
        return math.log(reference), UNSEEN_METHOD_SD

    def _method_median(self, method: str) -> float:
        values = [tps for (m, tps) in self._method_tps if m == method]
        return statistics.median(values) if values else (self.baseline_tps or 1.0)

    def _gp(self, speculative: list[Observation]) -> None:
        self._method_tps = [(o.shape.method, o.tps) for o in speculative if o.shape]
        width = len(encode(self.axes, {}))
        self._x = np.array([encode(self.axes, o.params) for o in speculative]).reshape(
            len(speculative), width
        )
        means = [self._mean(o.shape)[0] for o in speculative]
        residuals = np.array([math.log(o.tps) - m for o, m in zip(speculative, means, strict=True)])
        spread = float(np.var(residuals)) if len(residuals) > 1 else 0.0
        self._signal = max(spread, MIN_SIGNAL_SD**2)
        if len(speculative):
            k = self._kernel(self._x, self._x) + np.eye(len(speculative)) * self.noise**2
            self._k_inv = np.linalg.inv(k)
            self._alpha = self._k_inv @ residuals
        else:
            self._k_inv = np.zeros((0, 0))
            self._alpha = np.zeros(0)

    def _kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.size == 0 or b.size == 0:
            return np.zeros((len(a), len(b)))
        d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
        out: np.ndarray = self._signal * np.exp(-0.5 * d2 / LENGTH_SCALE**2)
        return out

    def predict(self, params: Mapping[str, Any], shape: SpecShape | None) -> Prediction:
        mean, prior_sd = self._mean(shape)
        x = np.array([encode(self.axes, params)])
        k = self._kernel(x, self._x)[0] if len(self._alpha) else np.zeros(0)
        residual = float(k @ self._alpha) if len(k) else 0.0
        variance = self._signal - (float(k @ self._k_inv @ k) if len(k) else 0.0)
        # The shape's own doubt shrinks where the process has seen close neighbours.
        seen = 1 - variance / self._signal
        sd = math.sqrt(max(variance, 0.0) + (prior_sd * (1 - seen)) ** 2 + self.noise**2)
        fit = self.methods.get(shape.method) if shape else None
        length = fit.accept_length(shape) if fit and shape else (1.0 if shape is None else None)
        return Prediction(math.exp(mean + residual), sd, length)


def observations(records: Sequence[TrialRecord], workload: str) -> list[Observation]:
    """What each complete launch measured on a workload (median decode t/s and acceptance length)."""
    out = []
    for record in records:
        summary = record.workloads.get(workload)
        if record.failed or summary is None or summary.status != "ok" or summary.decode_tps is None:
            continue
        length = summary.acceptance_length.median if summary.acceptance_length else None
        out.append(Observation(record.params, record.shape, summary.decode_tps.median, length))
    return out


class StartChance:
    """How likely a configuration is to start. Memory and state slots grow with the tokens a step verifies, so
    within a method a failure at some draft budget predicts failures at larger ones and a start predicts
    starts at smaller ones; where that says nothing (or contradicts itself), a kernel-weighted share of the
    launches nearby, pulled towards a prior (a space's corners often run out of memory; its middle starts)."""

    PRIOR = 0.8
    PRIOR_WEIGHT = 0.5
    LIKELY, UNLIKELY = 0.95, 0.0

    def __init__(
        self, axes: Sequence[Axis], launched: Sequence[tuple[Mapping[str, Any], SpecShape | None, bool]]
    ) -> None:
        self.axes = list(axes)
        self._launched = list(launched)
        width = len(encode(self.axes, {}))
        self._x = np.array([encode(self.axes, p) for p, _, _ in launched]).reshape(len(launched), width)
        self._started = np.array([1.0 if ok else 0.0 for _, _, ok in launched])

    def __call__(self, params: Mapping[str, Any], shape: SpecShape | None) -> float:
        if shape is not None:
            size = shape.budget or shape.depth
            same = [
                (s.budget or s.depth, ok) for _, s, ok in self._launched if s and s.method == shape.method
            ]
            failed_smaller = any(not ok and b <= size for b, ok in same)
            started_larger = any(ok and b >= size for b, ok in same)
            if failed_smaller != started_larger:
                return self.UNLIKELY if failed_smaller else self.LIKELY
        if not len(self._started):
            return self.PRIOR
        x = np.array(encode(self.axes, params))
        weights = np.exp(-0.5 * ((self._x - x) ** 2).sum(axis=1) / (LENGTH_SCALE / 2) ** 2)
        total = self.PRIOR_WEIGHT + float(weights.sum())
        return (self.PRIOR * self.PRIOR_WEIGHT + float(weights @ self._started)) / total


def request_noise(records: Sequence[TrialRecord], workload: str) -> float:
    """The relative spread of one launch's median on this workload, from its requests: the median over launches
    of sd / sqrt(n) on the log scale (what a launch's number could be off by, launch drift aside)."""
    spreads = []
    for record in records:
        summary = record.workloads.get(workload)
        values = summary.decode_tps.values if summary and summary.decode_tps else ()
        positive = [math.log(v) for v in values if v > 0]
        if len(positive) > 1:
            spreads.append(statistics.stdev(positive) / math.sqrt(len(positive)))
    return max(statistics.median(spreads), NOISE_FLOOR) if spreads else NOISE_FLOOR
