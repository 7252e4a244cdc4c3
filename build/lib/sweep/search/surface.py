"""The surface model: what a configuration not yet launched would measure on a workload, and how sure that is.

Speculative decoding has a known shape. A verify step emits L = 1 + p + p^2 + ... + p^d tokens for a draft of
depth d whose positions are each accepted with probability p; a tree keeps more candidates per position, which
catches more (p = 1 - (1 - a)^(w^g) for w candidates, g < 1: they are correlated) at a cost. A step takes longer
with depth (drafting) and with the tokens verified. So, per workload and speculative method, the model fits

- the chain acceptance `a` and the tree gain `g` from the acceptance lengths the server reported, and
- the step time `t = c0 + c1 d + c2 b + c3 d (w - 1)` (b: the draft budget; a wider tree level is a wider
  draft forward) from L / decode t/s, ridge-regressed towards a prior scaled by the baseline's own per-token
  time, or, where a cost profile measured the step times on this machine, those (`costs.py`),

and predicts decode t/s = L / t. What that shape cannot explain (an n-gram's match length, a memory flag) is
left to a Gaussian process over the swept parameters on the log scale, whose variance also grows with the
distance from what was measured: the uncertainty the search trades against the predicted speed.

Engines say what depth, width and budget a configuration has (`Engine.spec_shape`, kept in each record); this
module reads records and shapes only.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import scipy.stats

from sweep.records import SpecShape, TrialRecord

ACCEPT_GRID = np.linspace(0.02, 0.99, 98)
GAIN_GRID = (0.0, 0.25, 0.5, 0.75, 1.0)
# A copied run's positions each hold at this (one drafted token in a hundred parts from the text copied):
# 0.99 and 0.995 search the real llama-server's n-gram grids alike, 0.95-0.98 too shallow.
COPY_RUN = 0.99
GAIN_PRIOR = 0.5  # with one tree width measured, the gain cannot be told from the data: assume this
LENGTH_SCALE = 0.35  # of the Gaussian process, in the swept parameters scaled to [0, 1]
MIN_SIGNAL_SD = 0.05  # what the process may still be wrong by where nothing was measured (log scale)
UNSEEN_METHOD_SD = 0.5  # a method with no measurement at all: anything from 0.6x to 1.6x
UNSEEN_VARIANT_SD = (
    0.25  # a variant of a measured method (another match length) whose acceptance is unmeasured
)
MISFIT = 0.25  # how far the shape's form may be off on one launch of a method (shrinking with launches)
# The same where a cost profile measured the step times: what is left to the form is acceptance's extrapolation.
PROFILED_MISFIT = 0.05
# How far a cost profile's step times may sit off a workload's by one common factor (log scale): on the real
# llama-server a profile measured on code predicted tool's steps at 0.92 (CPU) and 0.75 (H200) of measured.
PROFILE_OFFSET_SD = 0.15
NOISE_FLOOR = 0.02  # relative noise assumed at least (a single launch is never more exact than this)
CONTEXT_SPREAD = 1.25  # prompt sizes within this ratio of each other are one context
CONTEXT_COORDINATE = 0.5  # the context's span in the process's coordinates: residuals carry across contexts


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
    context: float | None = None  # prompt tokens the requests carried (None: not known)
    # Share of verify steps that accepted each draft position (SGLang's histogram, vLLM's counters): position i
    # accepted means every one before it was, so a chain of depth d accepts 1 + the sum of the first d.
    positions: tuple[float, ...] = ()


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
class ContextCurve:
    """The model's prediction over context length for one method's best configuration on one workload (its
    variants at several context lengths), from the shortest measured context to the longest."""

    workload: str  # what the dashboard labels it: the workload's name, and its stream count beyond one
    params: Mapping[str, Any]
    shape: SpecShape
    contexts: tuple[float, ...]
    tps: tuple[float, ...]
    sd: tuple[float, ...]
    accept_length: tuple[float | None, ...]


@dataclass(frozen=True)
class PredictedSurface:
    """What the dashboard draws of the model: every configuration per workload, and curves over context."""

    points: tuple[SurfacePoint, ...] = ()
    curves: tuple[ContextCurve, ...] = ()


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

    def truth(self, noise: float) -> Prediction:
        """The prediction of the configuration's true speed: its doubt less one launch's noise."""
        return dataclasses.replace(self, sd=math.sqrt(max(self.sd**2 - noise**2, 0.0)))

    def expected_improvement(self, best: float) -> float:
        """Expected gain over `best`, as a fraction of it (on the log scale: ~ relative gain)."""
        if best <= 0:
            return math.inf
        gap = math.log(self.tps / best)
        if self.sd <= 0:
            return max(0.0, gap)
        z = gap / self.sd
        return float(gap * scipy.stats.norm.cdf(z) + self.sd * scipy.stats.norm.pdf(z))


def accept_length(a: float, gain: float, shape: SpecShape, copies: bool = False) -> float:
    """Tokens per verify step of a draft with this shape, for chain acceptance `a` and tree gain `gain` (or,
    where the drafts are `copies`, the share `a` of steps that find a run)."""
    return float(_lengths(np.array([a]), gain, shape, copies)[0])


def _lengths(a: np.ndarray, gain: float, shape: SpecShape, copies: bool = False) -> np.ndarray:
    """`accept_length` for every value of `a` at once. A model's draft is accepted position by position
    (L = 1 + p + p^2 + ... + p^depth). A lookup copies: where it finds the text being repeated, the run is
    accepted nearly whole, elsewhere nothing; with `copies`, `a` is the share of steps that find a run and a
    run's positions hold at COPY_RUN each, so a deeper draft keeps paying where a chain would have saturated
    (llama-server's ngram-simple on tool calls: accept length 7.98 at 16 drafted, 17.8 at 48)."""
    depth = shape.reach
    if depth <= 0:
        return np.ones(len(a))
    if copies:
        r = COPY_RUN
        return 1 + a * r * (1 - r**depth) / (1 - r)
    width = max(1.0, min(float(shape.width), (shape.budget or depth) / depth))
    p = 1 - (1 - a) ** (width**gain)
    lengths: np.ndarray = 1 + p * (1 - p**depth) / (1 - p)
    return lengths


@dataclass(frozen=True)
class Contexts:
    """The context sizes (prompt tokens) a surface spans. With two or more, acceptance is fitted at each and
    read between them on a log scale, a step's time scales with the baseline's per-token time there (which
    grows with the cache it reads), and the residual process gets context as one more coordinate."""

    sizes: tuple[float, ...] = ()

    @classmethod
    def of(cls, values: Iterable[float | None]) -> Contexts:
        known = [v for v in values]
        if not known or any(v is None or v <= 0 for v in known):
            return cls()  # an unknown context cannot be placed: the surface stays at one context
        sizes: list[float] = []
        for value in sorted(v for v in known if v is not None):
            if not sizes or value > sizes[-1] * CONTEXT_SPREAD:
                sizes.append(value)
        return cls(tuple(sizes) if len(sizes) > 1 else ())

    @property
    def modelled(self) -> bool:
        return len(self.sizes) > 1

    def group(self, context: float | None) -> float:
        """The measured size a context belongs to (0.0 where contexts are not modelled)."""
        if not self.modelled or context is None:
            return 0.0
        return min(self.sizes, key=lambda size: abs(math.log(size / context)))

    def coordinate(self, context: float | None) -> list[float]:
        if not self.modelled:
            return []
        low, high = math.log(self.sizes[0]), math.log(self.sizes[-1])
        at = math.log(context) if context else low
        return [CONTEXT_COORDINATE * (at - low) / (high - low)]

    def interpolate(self, context: float | None, values: Mapping[float, Any]) -> Any:
        """`values` (numbers or tuples of numbers, by measured size) read at `context`: linear in the context
        (as the cache a token reads) between the two nearest sizes that have a value, the nearest one's beyond."""
        known = sorted(values.items())
        if len(known) == 1 or context is None or context <= known[0][0]:
            return known[0][1]
        for (x0, y0), (x1, y1) in itertools.pairwise(known):
            if context <= x1:
                share = (context - x0) / (x1 - x0)
                if isinstance(y0, tuple):
                    return tuple(a + share * (b - a) for a, b in zip(y0, y1, strict=True))
                return y0 + share * (y1 - y0)
        return known[-1][1]


@dataclass(frozen=True)
class MethodFit:
    """One speculative method on one workload: acceptance (per measured context) and step time (in units of the
    baseline's per-token time at the same context)."""

    accept: Mapping[float, float] | None  # chain acceptance per position by context; None: none reported
    gain: float
    step: Mapping[float, StepFit]  # by context
    n: int  # launches it rests on
    # Each measured variant's own acceptance by context (`accept` is the fit over all variants, for the rest).
    variants: Mapping[str, Mapping[float, float]] = dataclasses.field(default_factory=dict)
    copies: bool = False  # lookup drafts fitted as copied runs (`_lengths`)
    # Lookup variants whose launches at several depths fit position-by-position acceptance instead.
    geometric: frozenset[str] = frozenset()
    # Per variant and context, the per-position acceptance its deepest chain reported: a shallower chain's
    # length read off it, not from the fitted form.
    curves: Mapping[tuple[str, float], tuple[float, ...]] = dataclasses.field(default_factory=dict)

    def acceptance(self, variant: str) -> Mapping[float, float] | None:
        return self.variants.get(variant, self.accept)

    def copies_for(self, variant: str) -> bool:
        return _copied_runs(self.copies, self.geometric, variant)


def _copied_runs(copies: bool, geometric: frozenset[str], variant: str) -> bool:
    """Whether a variant's drafts are fitted as copied runs: a lookup's are, unless its launches chose otherwise."""
    return copies and variant not in geometric


def _fit_acceptance(
    points: list[tuple[SpecShape, float]], gains: Sequence[float] | None = None, copies: bool = False
) -> tuple[float, float] | None:
    """Least squares over a grid of (a, gain), relative errors; a gain only where widths differ."""
    best = _best_fit(points, gains, copies)
    return None if best is None else (best[1], best[2])


def _best_fit(
    points: list[tuple[SpecShape, float]], gains: Sequence[float] | None, copies: bool
) -> tuple[float, float, float] | None:
    """(error, a, gain) of the least-squares fit."""
    if not points:
        return None
    widths = {min(p.width, max(1, (p.budget or p.depth) // max(1, p.depth))) for p, _ in points}
    gains = gains or (GAIN_GRID if len(widths) > 1 and not copies else (GAIN_PRIOR,))
    best: tuple[float, float, float] | None = None
    for gain in gains:
        error = np.zeros(len(ACCEPT_GRID))
        for shape, length in points:
            error += (_lengths(ACCEPT_GRID, gain, shape, copies) / length - 1) ** 2
        error += 1e-4 * (gain - GAIN_PRIOR) ** 2  # ties go to the prior
        i = int(np.argmin(error))
        if best is None or error[i] < best[0]:
            best = (float(error[i]), float(ACCEPT_GRID[i]), gain)
    return best


def _copies(measured: list[tuple[SpecShape, float]], noise: float) -> bool:
    """Whether one variant's lookup drafts are fitted as copied runs: yes, unless it was measured at several
    depths and position-by-position acceptance fits them better by more than the noise allows (one depth fits
    either form exactly: it cannot tell them apart)."""
    if len({s.depth for s, _ in measured}) < 2:
        return True
    fits = (_best_fit(measured, None, True), _best_fit(measured, None, False))
    run, geometric = (fits[0][0] if fits[0] else 0.0), (fits[1][0] if fits[1] else 0.0)
    return geometric + len(measured) * max(noise, NOISE_FLOOR) ** 2 >= run


def step_features(shape: SpecShape) -> np.ndarray:
    """What a step's time is linear in: one, the depth drafted, the tokens verified, and the candidates a tree
    drafts beyond a chain's at each level (depth x (width - 1): a wider level is a wider draft forward)."""
    return np.array([1.0, shape.depth, shape.budget or shape.depth, shape.depth * (max(1, shape.width) - 1)])


@dataclass(frozen=True)
class StepFit:
    """A step's time in baseline tokens, c0 + c1 depth + c2 budget + c3 depth (width - 1), and how sure the fit is
    of c (the posterior covariance of a Bayesian linear regression with the prior's stated spread)."""

    coef: tuple[float, ...]
    cov: tuple[float, ...]  # 4 x 4, row by row

    def tokens(self, shape: SpecShape) -> float:
        return float(step_features(shape) @ np.array(self.coef))

    def relative_sd(self, shape: SpecShape) -> float:
        x = step_features(shape)
        variance = float(x @ np.array(self.cov).reshape(len(x), len(x)) @ x)
        return math.sqrt(max(variance, 0.0)) / max(self.tokens(shape), 1e-9)


def step_prior(draft_model: bool) -> StepFit:
    """A model's draft step costs about one token, plus a sixth of one per position it drafts, plus a fiftieth
    per token verified, plus nothing (give or take a sixtieth) per extra candidate a tree level drafts; each as
    unsure as it is large, so two launches can overrule it.

    A lookup (n-gram) drafts no forward (its depth and width cost about nothing), but its counted
    step is far from one token: the engines count acceptance over the steps that drafted (llama-server's
    `spec_decode_num_drafts_total`), so a counted step's time holds the plain steps between drafts where no
    match was found, and verifying the tokens a match drafted (fewer than its maximum, each a tenth to a
    half of a token on a CPU). On the real llama-server (CPU) a counted step cost 4 to 7 tokens plus a tenth
    to a fifth per token allowed: both are left wide, for its launches to say.
    """
    if draft_model:
        mean, sd = (1.1, 1 / 6, 1 / 50, 0.0), (0.5, 1 / 6, 1 / 50, 1 / 60)
    else:
        mean, sd = (1.1, 0.0, 1 / 50, 0.0), (3.0, 1 / 100, 1 / 10, 1e-4)
    return StepFit(mean, tuple(np.diag(np.square(sd)).ravel().tolist()))


def fit_step(points: list[tuple[SpecShape, float]], prior: StepFit, noise: float) -> StepFit:
    """Step time (in baseline tokens) on `step_features`: the posterior under `prior`, each point known to
    within `noise` (relative). No coefficient but the first goes below nothing, and that one stays at a fifth
    of a token at least."""
    if not points:
        return prior
    x = np.array([step_features(s) for s, _ in points])
    y = np.array([t for _, t in points])
    sigma2 = (max(noise, NOISE_FLOOR) * float(np.mean(y))) ** 2
    size = x.shape[1]
    prior_precision = np.linalg.inv(np.array(prior.cov).reshape(size, size))
    cov = np.linalg.inv(x.T @ x / sigma2 + prior_precision)
    coef = cov @ (x.T @ y / sigma2 + prior_precision @ np.array(prior.coef))
    clamped = (float(max(coef[0], 0.2)), *(float(max(c, 0.0)) for c in coef[1:]))
    return StepFit(clamped, tuple(cov.ravel().tolist()))


class StepCost(Protocol):
    """A step's time in baseline tokens for a shape, and how sure that is (relative): a fit (`StepFit`) or a
    cost profile's measurements (`costs.StepTable`)."""

    def tokens(self, shape: SpecShape) -> float: ...

    def relative_sd(self, shape: SpecShape) -> float: ...


# A cost profile's step times by method and context (None: it has none there).
Profiled = Callable[[str, float | None], StepCost | None]


class WorkloadSurface:
    """The model of one workload at one or more context sizes, fitted to its observations (the baseline
    included, as the reference). With `profiled` step times (a cost profile), a method's steps are the
    profile's where it has them: the workload's own launches then teach acceptance alone."""

    def __init__(
        self,
        axes: Sequence[Axis],
        observations: Sequence[Observation],
        noise: float = NOISE_FLOOR,
        profiled: Profiled | None = None,
    ) -> None:
        self.axes = list(axes)
        self.noise = max(noise, NOISE_FLOOR)
        self.profiled = profiled
        self.contexts = Contexts.of(o.context for o in observations)
        positive = [o for o in observations if o.tps > 0]
        self._observed = positive
        baseline = [o for o in positive if o.shape is None]
        speculative = [o for o in positive if o.shape is not None]
        self._per_token = self._fit_per_token(baseline or speculative)
        self.methods: dict[str, MethodFit] = {}
        for method in dict.fromkeys(o.shape.method for o in speculative if o.shape):
            mine = [o for o in speculative if o.shape and o.shape.method == method]
            self.methods[method] = self._fit_method(mine)
        self._gp(speculative)

    def best_at(self, context: float | None = None) -> float:
        """The fastest measurement at this context (at any, where contexts are not modelled)."""
        group = self.contexts.group(context)
        return max((o.tps for o in self._observed if self.contexts.group(o.context) == group), default=0.0)

    def per_token(self, context: float | None) -> float:
        """The baseline's seconds per token at a context: linear in the context (each token reads the cache)."""
        u0, u1 = self._per_token
        return u0 + u1 * (context or 0.0) if self.contexts.modelled else u0

    def _fit_per_token(self, reference: list[Observation]) -> tuple[float, float]:
        if not reference:
            return (1.0, 0.0)
        seconds = [1 / o.tps for o in reference]
        if not self.contexts.modelled:
            return (statistics.median(seconds), 0.0)
        x = np.array([[1.0, o.context or 0.0] for o in reference])
        (u0, u1), *_ = np.linalg.lstsq(x, np.array(seconds), rcond=None)
        if u1 < 0 or u0 <= 0:  # noise against the cache's cost: keep it flat
            return (statistics.median(seconds), 0.0)
        return (float(u0), float(u1))

    def _fit_method(self, mine: list[Observation]) -> MethodFit:
        measured = [
            (o, o.shape, o.accept_length) for o in mine if o.shape and o.accept_length and o.shape.depth
        ]
        draft_model = all(o.shape.draft_model for o in mine if o.shape)
        steps = [(o, s, length / o.tps / self.per_token(o.context)) for o, s, length in measured]
        joint_step = fit_step([(s, t) for _, s, t in steps], step_prior(draft_model), self.noise)
        step = {0.0: joint_step}
        by_variant: dict[str, list[tuple[SpecShape, float]]] = {}
        for _, s, length in measured:
            by_variant.setdefault(s.variant, []).append((s, length))
        copies = not draft_model
        geometric = frozenset(
            v for v, points in by_variant.items() if copies and not _copies(points, self.noise)
        )
        joint = _fit_acceptance([(s, length) for _, s, length in measured], copies=copies)
        accept = None if joint is None else {0.0: joint[0]}
        gain = GAIN_PRIOR if joint is None else joint[1]
        variants = {
            variant: self._fit_by_context(
                [(o, s, n) for o, s, n in measured if s.variant == variant],
                gain,
                _copied_runs(copies, geometric, variant),
            )
            for variant in by_variant
        }
        if self.contexts.modelled and joint is not None:
            # Each measured context its own acceptance and step costs (the cache a draft reads grows with
            # it), pulled towards the fit over all of them where it has few launches.
            groups = {self.contexts.group(o.context) for o, _, _ in measured}
            step = {
                g: fit_step(
                    [(s, t) for o, s, t in steps if self.contexts.group(o.context) == g],
                    dataclasses.replace(joint_step, cov=tuple(4 * v for v in joint_step.cov)),
                    self.noise,
                )
                for g in groups
            }
            accept = self._fit_by_context(measured, gain, copies)
        return MethodFit(accept, gain, step, len(mine), variants, copies, geometric, self._curves(mine))

    def _curves(self, mine: list[Observation]) -> dict[tuple[str, float], tuple[float, ...]]:
        """Per variant and context, the per-position acceptance of the chain that reported the most positions
        (their mean position by position where several launches reported as many)."""
        found: dict[tuple[str, float], list[tuple[float, ...]]] = {}
        for o in mine:
            if o.shape is None or o.shape.width != 1 or not o.positions:
                continue
            key = (o.shape.variant, self.contexts.group(o.context))
            known = found.setdefault(key, [])
            if known and len(o.positions) < len(known[0]):
                continue
            if known and len(o.positions) > len(known[0]):
                known.clear()
            known.append(o.positions)
        return {
            k: tuple(statistics.mean(column) for column in zip(*v, strict=True)) for k, v in found.items()
        }

    def _fit_by_context(
        self, measured: list[tuple[Observation, SpecShape, float]], gain: float, copies: bool
    ) -> dict[float, float]:
        """Chain acceptance at each measured context (one, where contexts are not modelled), for a known gain."""
        groups = dict.fromkeys(self.contexts.group(o.context) for o, _, _ in measured)
        return {
            g: fit[0]
            for g in groups
            if (
                fit := _fit_acceptance(
                    [(s, n) for o, s, n in measured if self.contexts.group(o.context) == g], (gain,), copies
                )
            )
        }

    def accept_length(self, shape: SpecShape, context: float | None = None) -> float | None:
        fit = self.methods.get(shape.method)
        accept = None if fit is None else fit.acceptance(shape.variant)
        if fit is None or not accept:
            return None
        curve = fit.curves.get((shape.variant, self.contexts.group(context))) if shape.width == 1 else None
        if curve is not None and len(curve) >= shape.reach:
            return 1 + sum(curve[: shape.reach])
        copies = fit.copies_for(shape.variant)
        return accept_length(self.contexts.interpolate(context, accept), fit.gain, shape, copies)

    def structural_tps(self, shape: SpecShape, context: float | None = None) -> float | None:
        """Decode t/s from the fitted shape alone: tokens per step over a step's seconds."""
        length = self.accept_length(shape, context)
        if length is None:
            return None
        seconds = self.per_token(context) * self.step_at(shape.method, context).tokens(shape)
        return length / seconds if seconds > 0 else None

    def profiled_step(self, method: str, context: float | None) -> StepCost | None:
        """The cost profile's step times of a method at a context (None: no profile gives them)."""
        return self.profiled(method, context) if self.profiled is not None else None

    def step_at(self, method: str, context: float | None) -> StepCost:
        if (measured := self.profiled_step(method, context)) is not None:
            return measured
        by_context = self.methods[method].step
        return StepFit(
            self.contexts.interpolate(context, {g: f.coef for g, f in by_context.items()}),
            self.contexts.interpolate(context, {g: f.cov for g, f in by_context.items()}),
        )

    def _mean(self, shape: SpecShape | None, context: float | None) -> tuple[float, float]:
        """The shape's prediction (log t/s) and how unsure it is before any residual is learnt."""
        fit = self.methods.get(shape.method) if shape else None
        if fit is None or shape is None:
            return math.log(1 / self.per_token(context)), UNSEEN_METHOD_SD
        structural = self.structural_tps(shape, context)
        if structural is not None:
            # Misfit shrinking with launches, and how unsure the step costs are this far from what was measured.
            step_sd = self.step_at(shape.method, context).relative_sd(shape)
            variant_sd = 0.0 if shape.variant in fit.variants else UNSEEN_VARIANT_SD
            misfit = (PROFILED_MISFIT if self._priced(shape, context) else MISFIT) / math.sqrt(fit.n)
            return math.log(structural), math.hypot(misfit, step_sd, variant_sd)
        return math.log(self._method_median(shape.method, context)), MISFIT / math.sqrt(fit.n)

    def _method_median(self, method: str, context: float | None) -> float:
        group = self.contexts.group(context)
        values = [
            o.tps
            for o in self._observed
            if o.shape and o.shape.method == method and self.contexts.group(o.context) == group
        ]
        return statistics.median(values) if values else 1 / self.per_token(context)

    def _encode(self, params: Mapping[str, Any], context: float | None) -> list[float]:
        return encode(self.axes, params) + self.contexts.coordinate(context)

    def _gp(self, speculative: list[Observation]) -> None:
        width = len(self._encode({}, None))
        self._x = np.array([self._encode(o.params, o.context) for o in speculative]).reshape(
            len(speculative), width
        )
        means = [self._mean(o.shape, o.context)[0] for o in speculative]
        residuals = np.array([math.log(o.tps) - m for o, m in zip(speculative, means, strict=True)])
        spread = float(np.var(residuals)) if len(residuals) > 1 else 0.0
        self._signal = max(spread, MIN_SIGNAL_SD**2)
        # A profile's step times may sit off this workload's by one factor (its prompts, another night's
        # machine): the mean residual of the launches it priced, shrunk toward none by PROFILE_OFFSET_SD,
        # moves every prediction it prices alike; the process learns what is left.
        priced = np.array([self._priced(o.shape, o.context) for o in speculative], dtype=bool)
        each = self._signal + self.noise**2
        precision = int(priced.sum()) / each + 1 / PROFILE_OFFSET_SD**2
        self._offset = float(residuals[priced].sum() / each / precision) if priced.any() else 0.0
        self._offset_var = 1 / precision if priced.any() else 0.0
        residuals = residuals - self._offset * priced
        if len(speculative):
            k = self._kernel(self._x, self._x) + np.eye(len(speculative)) * self.noise**2
            self._k_inv = np.linalg.inv(k)
            self._alpha = self._k_inv @ residuals
        else:
            self._k_inv = np.zeros((0, 0))
            self._alpha = np.zeros(0)

    def _priced(self, shape: SpecShape | None, context: float | None) -> bool:
        """Whether a cost profile gives this shape's step times here."""
        return shape is not None and self.profiled_step(shape.method, context) is not None

    def _kernel(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.size == 0 or b.size == 0:
            return np.zeros((len(a), len(b)))
        d2 = ((a[:, None, :] - b[None, :, :]) ** 2).sum(axis=2)
        out: np.ndarray = self._signal * np.exp(-0.5 * d2 / LENGTH_SCALE**2)
        return out

    def predict(
        self, params: Mapping[str, Any], shape: SpecShape | None, context: float | None = None
    ) -> Prediction:
        return self.predict_many([(params, shape)], context)[0]

    def predict_many(
        self,
        configurations: Sequence[tuple[Mapping[str, Any], SpecShape | None]],
        context: float | None = None,
    ) -> list[Prediction]:
        """Predictions for many configurations at one context: the shape's mean once per shape, the process
        as one matrix product (the search ranks thousands of candidates per trial)."""
        if not configurations:
            return []
        by_shape: dict[SpecShape | None, tuple[float, float, float | None, bool]] = {}
        for _, shape in configurations:
            if shape not in by_shape:
                mean, doubt = self._mean(shape, context)
                length = 1.0 if shape is None else self.accept_length(shape, context)
                by_shape[shape] = (mean, doubt, length, self._priced(shape, context))
        means = np.array([by_shape[shape][0] for _, shape in configurations])
        prior_sd = np.array([by_shape[shape][1] for _, shape in configurations])
        if len(self._alpha):
            x = np.array([self._encode(params, context) for params, _ in configurations])
            k = self._kernel(x, self._x)
            residual = k @ self._alpha
            variance: np.ndarray = self._signal - np.einsum("ij,jk,ik->i", k, self._k_inv, k)
        else:
            residual, variance = np.zeros(len(configurations)), np.full(len(configurations), self._signal)
        # The shape's own doubt shrinks where the process has seen close neighbours.
        seen = 1 - variance / self._signal
        priced = np.array([by_shape[shape][3] for _, shape in configurations], dtype=float)
        sd = np.sqrt(
            np.maximum(variance, 0.0)
            + (prior_sd * (1 - seen)) ** 2
            + self._offset_var * priced
            + self.noise**2
        )
        tps = np.exp(means + self._offset * priced + residual)
        return [
            Prediction(float(t), float(d), by_shape[shape][2])
            for t, d, (_, shape) in zip(tps, sd, configurations, strict=True)
        ]


@dataclass(frozen=True)
class SurfaceAt:
    """One workload key: its family's surface read at the key's context, with the key's own noise."""

    surface: WorkloadSurface
    context: float | None = None
    noise: float = NOISE_FLOOR

    @property
    def best(self) -> float:
        return self.surface.best_at(self.context)

    def predict(self, params: Mapping[str, Any], shape: SpecShape | None) -> Prediction:
        return self.surface.predict(params, shape, self.context)

    def profiled(self, method: str) -> bool:
        """Whether a cost profile gives the method's step times here: its speed then awaits acceptance alone."""
        return self.surface.profiled_step(method, self.context) is not None

    def step_doubt(self, shape: SpecShape) -> float | None:
        """How unsure the cost profile's step time for this shape is here, relative (None: no profile gives it)."""
        measured = self.surface.profiled_step(shape.method, self.context)
        return None if measured is None else measured.relative_sd(shape)

    def predict_many(
        self, configurations: Sequence[tuple[Mapping[str, Any], SpecShape | None]]
    ) -> list[Prediction]:
        return self.surface.predict_many(configurations, self.context)

    def curve(
        self, workload: str, params: Mapping[str, Any], shape: SpecShape, points: int = 12
    ) -> ContextCurve:
        """The prediction for one configuration over the surface's measured context range (log-spaced)."""
        sizes = self.surface.contexts.sizes
        low, high = math.log(sizes[0]), math.log(sizes[-1])
        contexts = tuple(math.exp(low + (high - low) * i / (points - 1)) for i in range(points))
        predicted = [self.surface.predict(params, shape, c) for c in contexts]
        return ContextCurve(
            workload,
            params,
            shape,
            contexts,
            tuple(p.tps for p in predicted),
            tuple(p.sd for p in predicted),
            tuple(p.accept_length for p in predicted),
        )


def observations(
    records: Sequence[TrialRecord], workload: str, context: float | None = None
) -> list[Observation]:
    """What each complete launch measured on a workload (median decode t/s and acceptance length), at the
    context its requests carried (the prompt tokens the server counted; `context` where it counted none). Where
    the server gave acceptance per draft position but no length, the length is 1 + their sum (each verify
    step emits the bonus token and every draft position it accepted)."""
    out = []
    for record in records:
        summary = record.workloads.get(workload)
        if record.failed or summary is None or summary.status != "ok" or summary.decode_tps is None:
            continue
        length = summary.acceptance_length.median if summary.acceptance_length else None
        if length is None and summary.position_acceptance:
            length = 1 + sum(summary.position_acceptance)
        tokens = summary.prompt_tokens.median if summary.prompt_tokens else context
        out.append(
            Observation(
                record.params,
                record.shape,
                summary.decode_tps.median,
                length,
                tokens,
                summary.position_acceptance,
            )
        )
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
