"""Statistics of a study: noise measured from its own repeated launches, gains with intervals, verdicts.

The unit of evidence is a *launch*: one server process measured on a fixed list of prompts (prompt i is the
same text in every launch, so launches pair up prompt by prompt). Speeds are compared on a log scale, so a
gain is a ratio and noise is relative.

- *Launch noise* is how much the mean of a launch moves between launches of one configuration (a server that
  happens to run slower, the host's state). It is estimated from every configuration launched more than once
  in the study (the baseline's repeats, confirmation rounds), pooled, with its degrees of freedom.
- *Request noise* is how much one request moves around its launch and its prompt (two-way residual).
- Confirmation launches come in rounds (every configuration once per round, interleaved), a randomized block
  design: a gain is the mean of the round-by-round differences against the reference, and its interval is
  Student's t with the variance of those differences pooled over every configuration compared. A machine whose
  speed drifts over the night (seen here: a VM 12% slower after ten minutes, no other process busy) moves both
  sides of a difference alike, so it widens nothing. Launches without rounds (the search) are compared as
  two samples with the pooled launch variance. With no configuration launched twice there is no noise to go
  on, and the verdict says so ("unconfirmed").
- "faster" needs the 98% interval to exclude zero **and** the gain to reach a practical minimum (default 3%):
  a real +1% is not worth a configuration, and the cheaper one wins.
- Confirmation rounds are looked at after the first rounds and again after every extra round while a verdict
  is open, up to the cap (`Looks`). Every look is a chance for noise to cross the line, so each look's interval
  is wider than 98%: Pocock's constant boundary, calibrated so that over every look up to the cap, two equal
  configurations are called faster or slower in at most 2% of confirmations (`SEQUENTIAL_ERROR`; the practical
  minimum makes it rarer still). A fixed 98% at every look would call them so in 7.5% over ten looks. The
  calibration simulates Student's t of the round differences, whose law does not depend on the noise's size,
  so one calibration per (first, cap) holds for any noise; the cap can then be high (40 rounds), so a +5% under
  5% launch-to-launch noise is found (in 78-85% of confirmations, benchmarks/verdicts.py) while at the field's
  2% it settles in 6 to 19 rounds. A settled verdict stops; an open one keeps its rounds to the cap: giving up
  once the running estimate projects more rounds than the cap would find that +5% in a fifth of
  confirmations, not four in five (an early estimate is as noisy as the rounds behind it).
- A verdict is *settled* when more launches could not change it: faster or slower, or an interval inside
  ±min_gain. An open one says how many launches a side would settle it were its estimate and its noise to
  hold (`launches_to_settle`: the smallest n whose interval, with the degrees of freedom n adds, excludes zero
  or fits inside ±min_gain), so a verdict left open at the confirmation's cap names what it would take.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import scipy.stats

# 98%, not 95%: the confirmation looks at the data again after each extra round, and every look is a chance
# for noise to cross the line (benchmarks/verdicts.py: at 95% an A/A test was called faster 5% of the time).
CONFIDENCE = 0.98
# Over every look of a confirmation: the share in which equal configurations are called faster or slower.
SEQUENTIAL_ERROR = 1 - CONFIDENCE
CALIBRATION_PATHS = 20000  # simulated confirmations per calibration: the 2% quantile from 400 crossings
MIN_GAIN = 0.03  # a smaller gain is not worth a configuration, however sure
SETTLE_CAP = 100  # launches a side past which an open verdict is said to need "more than" this


class Verdict(StrEnum):
    FASTER = "faster"
    SLOWER = "slower"
    WITHIN_NOISE = "within noise"
    UNRELIABLE = "unreliable"  # the noise (host load, drift, spread) is too large to call it
    UNCONFIRMED = "unconfirmed"  # no launch-to-launch noise measured yet: the number stands alone
    NO_BASELINE = "no baseline"


@dataclass(frozen=True)
class Launch:
    """One launch's values for one workload, in prompt order (index i is the same prompt in every launch), and
    the confirmation round it was launched in (None in the search)."""

    values: tuple[float, ...]
    round: int | None = None

    def log_mean(self, n: int) -> float:
        """Mean log value over the first `n` prompts (the ones every compared launch has)."""
        return statistics.fmean(math.log(v) for v in self.values[:n])


@dataclass(frozen=True)
class Noise:
    """Relative noise (standard deviations on the log scale) measured in one study for one workload."""

    launch_sd: float | None  # of a launch's mean over the prompts; None: no configuration launched twice
    request_sd: float | None  # of one request around its launch and prompt
    df: int  # degrees of freedom of launch_sd
    launches: int  # launches it was measured from
    # Of the difference between two configurations launched in the same round (the machine's slow drift,
    # which moves both, cancels): pooled over every configuration compared with the reference.
    pair_sd: float | None = None
    pair_df: int = 0

    @property
    def measured(self) -> bool:
        return (self.launch_sd is not None and self.df > 0) or self.paired

    @property
    def paired(self) -> bool:
        return self.pair_sd is not None and self.pair_df > 0

    def describe(self) -> str:
        if not self.measured:
            return "launch-to-launch noise not measured (no configuration launched twice)"
        parts = []
        if self.paired and self.pair_sd is not None:
            parts.append(f"within a round {self.pair_sd / math.sqrt(2):.1%} per launch")
        if self.launch_sd is not None and self.df:
            parts.append(f"launch-to-launch {self.launch_sd:.1%} over the study")
        if self.request_sd is not None:
            parts.append(f"request-to-request {self.request_sd:.1%}")
        return f"{', '.join(parts)} ({self.launches} launches)"


def usable(launches: Sequence[Launch]) -> list[Launch]:
    return [launch for launch in launches if launch.values and all(v > 0 for v in launch.values)]


def common_prompts(*groups: Sequence[Launch]) -> int:
    return min((len(launch.values) for group in groups for launch in group), default=0)


def round_differences(candidate: Sequence[Launch], reference: Sequence[Launch]) -> list[float]:
    """Log differences of the candidate's and the reference's launches in the same round, round by round."""
    mine = {x.round: x for x in usable(candidate) if x.round is not None}
    theirs = {x.round: x for x in usable(reference) if x.round is not None}
    both = sorted(set(mine) & set(theirs))
    n = common_prompts([mine[r] for r in both], [theirs[r] for r in both])
    return [mine[r].log_mean(n) - theirs[r].log_mean(n) for r in both] if n else []


def measure_noise(groups: Sequence[Sequence[Launch]], reference: Sequence[Launch] = ()) -> Noise:
    """Pooled launch and request noise from groups of launches of one configuration each; with a reference
    (the baseline), also the noise of round-paired differences against it, pooled over the groups."""
    launch_ss, launch_df, request_ss, request_df, count = 0.0, 0, 0.0, 0, 0
    for raw in groups:
        group = usable(raw)
        count += len(group)
        n = common_prompts(group)
        if len(group) < 2 or n == 0:
            continue
        means = [launch.log_mean(n) for launch in group]
        grand = statistics.fmean(means)
        launch_ss += sum((m - grand) ** 2 for m in means)
        launch_df += len(group) - 1
        if n > 1:  # two-way residual: request noise after the launch's and the prompt's own effects
            logs = [[math.log(v) for v in launch.values[:n]] for launch in group]
            prompt_means = [statistics.fmean(row[i] for row in logs) for i in range(n)]
            request_ss += sum(
                (logs[j][i] - means[j] - prompt_means[i] + grand) ** 2
                for j in range(len(group))
                for i in range(n)
            )
            request_df += (len(group) - 1) * (n - 1)
    pair_ss, pair_df = 0.0, 0
    for paired in groups if reference else ():
        diffs = round_differences(paired, reference) if paired is not reference else []
        if len(diffs) >= 2:
            mean = statistics.fmean(diffs)
            pair_ss += sum((d - mean) ** 2 for d in diffs)
            pair_df += len(diffs) - 1
    return Noise(
        launch_sd=math.sqrt(launch_ss / launch_df) if launch_df else None,
        request_sd=math.sqrt(request_ss / request_df) if request_df else None,
        df=launch_df,
        launches=count,
        pair_sd=math.sqrt(pair_ss / pair_df) if pair_df else None,
        pair_df=pair_df,
    )


@dataclass(frozen=True)
class Looks:
    """A confirmation's looks at its rounds: after `first` rounds, then after every extra round up to `most`."""

    first: int
    most: int

    @property
    def span(self) -> tuple[int, int]:
        """The rounds of the first and last look (a look needs two rounds for a difference's spread)."""
        return max(self.first, 2), max(self.first, self.most, 2)

    @property
    def confidence(self) -> float:
        """Each look's confidence, so that over every look the error is `SEQUENTIAL_ERROR`."""
        return look_confidence(*self.span)

    def describe(self) -> str:
        first, last = self.span
        looks = last - first + 1
        # Pocock's intervals hold at every look at once (repeated confidence intervals): 98% over them all.
        return (
            f"{percent(1 - SEQUENTIAL_ERROR)} interval over up to {looks} looks ({percent(self.confidence)} each)"
            if looks > 1
            else f"{percent(self.confidence)} interval"
        )


@functools.lru_cache(maxsize=64)
def look_confidence(first: int, most: int, error: float = SEQUENTIAL_ERROR) -> float:
    """The confidence each look's interval needs so that equal configurations, looked at after `first` rounds
    and every round after up to `most`, cross it (either way) at some look in `error` of confirmations:
    Pocock's constant boundary on each look's own p-value, calibrated by seeded simulation (the same answer
    every time) of Student's t over the rounds' differences."""
    if most <= first:
        return 1 - error
    rounds = np.arange(1, most + 1)
    draws = np.random.default_rng(0).standard_normal((CALIBRATION_PATHS, most))
    mean = np.cumsum(draws, axis=1) / rounds
    var = (np.cumsum(draws * draws, axis=1) - rounds * mean * mean) / np.maximum(rounds - 1, 1)
    looked = slice(first - 1, most)
    t = np.abs(mean[:, looked]) / np.sqrt(var[:, looked] / rounds[looked])
    smallest = (2 * scipy.stats.t.sf(t, rounds[looked] - 1)).min(axis=1)
    return 1 - float(np.quantile(smallest, error))


def percent(share: float) -> str:
    """98% as "98%", 0.9972 as "99.7%": a confidence as a person reads it."""
    return f"{share * 100:.3g}%"


@dataclass(frozen=True)
class Comparison:
    """A candidate against a reference (the baseline), with the interval and the verdict."""

    gain: float  # candidate / reference - 1, from the launch means
    low: float | None  # the interval, None when the noise is not measured
    high: float | None
    verdict: Verdict
    launches: tuple[int, int]  # candidate's, reference's
    why: str
    # An open verdict's launches a side that would settle it were its estimate and noise to hold (None: settled,
    # or past SETTLE_CAP); said in `why`.
    to_settle: int | None = None

    def settled(self, min_gain: float = MIN_GAIN) -> bool:
        """Whether more launches could not change the verdict: faster or slower for sure, or an interval that
        already excludes any practical gain or loss. Unconfirmed, unreliable or open-ended ones are not."""
        if self.verdict in (Verdict.FASTER, Verdict.SLOWER):
            return True
        if self.verdict != Verdict.WITHIN_NOISE or self.low is None or self.high is None:
            return False
        return -min_gain < self.low and self.high < min_gain

    @property
    def interval(self) -> str:
        if self.low is None or self.high is None:
            return "no interval"
        return f"{self.low:+.1%} .. {self.high:+.1%}"


def compare(
    candidate: Sequence[Launch],
    reference: Sequence[Launch],
    noise: Noise,
    min_gain: float = MIN_GAIN,
    confidence: float = CONFIDENCE,
    looks: Looks | None = None,
) -> Comparison | None:
    """The candidate's gain over the reference with a `confidence` interval, and what it means; launches in
    confirmation rounds looked at as `looks` says take each look's confidence instead (`Looks`)."""
    a, b = usable(candidate), usable(reference)
    n = common_prompts(a, b)
    if not a or not b or n == 0:
        return None
    diffs = round_differences(a, b)
    interval = f"{percent(confidence)} interval"
    if noise.paired and noise.pair_sd is not None and len(diffs) >= 2:
        # Interleaved rounds: compare within each round, so a machine that slows down over the night moves
        # both sides of every difference alike.
        d = statistics.fmean(diffs)
        sd, df, launches = noise.pair_sd / math.sqrt(len(diffs)), noise.pair_df, (len(diffs), len(diffs))
        if looks is not None:
            confidence, interval = looks.confidence, looks.describe()
    else:
        d = statistics.fmean(x.log_mean(n) for x in a) - statistics.fmean(x.log_mean(n) for x in b)
        launches = (len(a), len(b))
        if not noise.measured or noise.launch_sd is None or not noise.df:
            return Comparison(math.exp(d) - 1, None, None, Verdict.UNCONFIRMED, launches, noise.describe())
        sd, df = noise.launch_sd * math.sqrt(1 / len(a) + 1 / len(b)), noise.df
    gain = math.exp(d) - 1
    half = t_quantile(0.5 + confidence / 2, df) * sd
    # One launch a side's share of the noise, and the launches a side so far: what more launches would do.
    per_side, sides = sd * math.sqrt(min(launches)), min(launches)
    low, high = math.exp(d - half) - 1, math.exp(d + half) - 1
    width = (high - low) / 2
    if width > max(abs(gain), 2 * min_gain):
        verdict = Verdict.UNRELIABLE
        # Past ±100% the figure says only that the rounds were too few or too far apart (one degree of
        # freedom gives t = 31.8 at 98%): "±2887%" reads as a measurement, and it is not one.
        noise_text = f"±{width:.0%}" if width < 1 else "more than ±100%"
        why = f"the noise ({noise_text}) dwarfs the effect ({gain:+.1%})"
    elif low > 0 and gain >= min_gain:
        verdict, why = Verdict.FASTER, f"{interval} above zero and gain >= {min_gain:.0%}"
    elif high < 0 and gain <= -min_gain:
        verdict, why = Verdict.SLOWER, f"{interval} below zero and loss >= {min_gain:.0%}"
    else:
        verdict = Verdict.WITHIN_NOISE
        why = (
            f"smaller than the practical minimum of {min_gain:.0%}"
            if low > 0 or high < 0
            else f"the {interval} includes zero"
        )
    comparison = Comparison(gain, low, high, verdict, launches, why)
    if not comparison.settled(min_gain):
        needed = launches_to_settle(d, per_side, df, sides, min_gain, confidence)
        comparison = dataclasses.replace(
            comparison, why=f"{why}; {_settle_text(sides, needed)}", to_settle=needed
        )
    return comparison


def launches_to_settle(
    d: float, per_side: float, df: int, sides: int, min_gain: float, confidence: float, cap: int = SETTLE_CAP
) -> int | None:
    """The launches a side at which this estimate's interval would settle its verdict, were the estimate and
    the noise to hold: exclude zero where the gain reaches the practical minimum (faster or slower), else lie
    within ±min_gain (within noise). Each added launch a side adds a degree of freedom. None past `cap`."""
    edge = math.log1p(min_gain)
    margin = abs(d) if abs(d) >= edge else edge - abs(d)
    for n in range(sides, cap + 1):
        if t_quantile(0.5 + confidence / 2, df + n - sides) * per_side / math.sqrt(n) < margin:
            return n
    return None


def _settle_text(sides: int, needed: int | None) -> str:
    if needed is None:
        return (
            f"open after {sides} launches a side: more than {SETTLE_CAP} a side would settle it at this noise"
        )
    return f"open after {sides} launches a side: about {needed} a side would settle it at this noise"


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile (scipy's)."""
    if df <= 0:
        raise ValueError("degrees of freedom must be positive")
    return float(scipy.stats.t.ppf(p, df))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) by linear interpolation (numpy's default)."""
    if not values:
        return None
    return float(np.percentile(values, q))
