"""The statistics behind every verdict: noise from repeated launches, intervals, and what they let us say."""

from __future__ import annotations

import dataclasses
import math
import random

import numpy as np
import pytest

from sweep.core import stats
from sweep.core.stats import Launch, Noise, Verdict
from sweep.outputs.console import pct


def launches(
    rng: random.Random, mean: float, n: int, launch_sd: float, request_sd: float = 0.01
) -> list[Launch]:
    prompts = [1.0, 1.3, 0.8]  # prompt effects: they cancel because every launch uses the same prompts
    out = []
    for _ in range(n):
        drift = math.exp(rng.gauss(0, launch_sd))
        out.append(Launch(tuple(mean * p * drift * math.exp(rng.gauss(0, request_sd)) for p in prompts)))
    return out


@pytest.mark.parametrize(
    ("p", "df", "expected"),
    [
        (0.975, 1, 12.706),
        (0.975, 2, 4.303),
        (0.975, 3, 3.182),
        (0.975, 4, 2.776),
        (0.975, 10, 2.228),
        (0.95, 20, 1.725),
    ],
)
def test_t_quantiles_match_tables(p: float, df: int, expected: float) -> None:
    assert stats.t_quantile(p, df) == pytest.approx(expected, rel=2e-3)


def test_noise_is_measured_from_repeated_launches_and_pooled() -> None:
    rng = random.Random(4)
    groups = [launches(rng, mean, 6, launch_sd=0.03) for mean in (40.0, 80.0, 120.0) for _ in range(10)]
    noise = stats.measure_noise(groups)
    assert noise.df == 30 * 5 and noise.launches == 180
    assert noise.launch_sd == pytest.approx(0.03, rel=0.15)  # request noise (1%/sqrt(3)) adds a little
    assert noise.request_sd == pytest.approx(0.01, rel=0.2)


def test_configurations_launched_once_measure_no_launch_noise() -> None:
    rng = random.Random(1)
    noise = stats.measure_noise([launches(rng, 50.0, 1, 0.02), launches(rng, 60.0, 1, 0.02)])
    assert not noise.measured and noise.launch_sd is None
    found = stats.compare(launches(rng, 60.0, 1, 0.02), launches(rng, 50.0, 1, 0.02), noise)
    assert found is not None and found.verdict == Verdict.UNCONFIRMED and found.low is None
    assert "not measured" in found.why


def test_clear_gain_is_faster_with_an_interval_around_it() -> None:
    rng = random.Random(2)
    a, b = launches(rng, 50.0, 4, 0.015), launches(rng, 60.0, 4, 0.015)
    found = stats.compare(b, a, stats.measure_noise([a, b]))
    assert found is not None and found.verdict == Verdict.FASTER and found.settled()
    assert found.low is not None and found.high is not None
    assert 0 < found.low < found.gain < found.high and found.gain == pytest.approx(0.2, abs=0.04)


def test_loss_is_slower() -> None:
    rng = random.Random(3)
    a, b = launches(rng, 50.0, 4, 0.01), launches(rng, 40.0, 4, 0.01)
    found = stats.compare(b, a, stats.measure_noise([a, b]))
    assert found is not None and found.verdict == Verdict.SLOWER


def test_real_but_tiny_gain_is_within_noise() -> None:
    # +1.5% measured very precisely: the interval excludes zero, but it is below the practical minimum.
    a = [Launch((50.0, 60.0, 40.0))] * 2 + [Launch((50.1, 60.1, 40.1))] * 2
    b = [Launch((50.75, 60.9, 40.6))] * 2 + [Launch((50.85, 61.0, 40.7))] * 2
    found = stats.compare(b, a, stats.measure_noise([a, b]))
    assert found is not None and found.low is not None and found.low > 0
    assert found.verdict == Verdict.WITHIN_NOISE and "practical minimum" in found.why
    assert found.settled()  # more launches cannot make 1.5% worth a configuration


def test_aa_is_within_noise_and_open_ended_intervals_are_not_settled() -> None:
    rng = random.Random(5)
    a, b = launches(rng, 50.0, 5, 0.02), launches(rng, 50.0, 5, 0.02)
    found = stats.compare(b, a, stats.measure_noise([a, b]))
    assert found is not None and found.verdict == Verdict.WITHIN_NOISE
    assert found.low is not None and found.low < 0 < (found.high or 0)
    assert not found.settled()  # a +3% gain is still inside the interval: another round could tell


def test_noise_that_dwarfs_the_effect_is_unreliable() -> None:
    noise = Noise(launch_sd=0.3, request_sd=0.1, df=4, launches=6)
    found = stats.compare([Launch((52.0,))] * 3, [Launch((50.0,))] * 3, noise)
    assert found is not None and found.verdict == Verdict.UNRELIABLE and "dwarfs" in found.why


def test_noise_past_a_doubling_is_not_written_as_a_measurement() -> None:
    """Two launches a side at 17% launch noise and one degree of freedom (a noisy GPU host, 6 Dec): the
    interval runs past +999%, which the verdict words as noise, not as a figure; the console caps its ends."""
    noise = Noise(launch_sd=0.6, request_sd=0.05, df=1, launches=4)
    found = stats.compare([Launch((36.0,))] * 2, [Launch((48.0,))] * 2, noise)
    assert found is not None and found.verdict == Verdict.UNRELIABLE
    assert "the noise (more than ±100%) dwarfs the effect (-25.0%)" in found.why
    assert found.high is not None and found.high > 9.99 and pct(found.high) == ">+999%"
    assert pct(-0.245) == "-24%" and pct(None) == "-"


def test_percentiles_interpolate_like_numpy() -> None:
    values = [0.1, 0.2, 0.3, 0.4, 1.0]
    assert stats.percentile(values, 50) == pytest.approx(0.3)
    assert stats.percentile(values, 90) == pytest.approx(0.76)
    assert stats.percentile([], 50) is None


def test_an_open_verdict_says_how_many_launches_would_settle_it_and_more_of_them_do() -> None:
    """A true +5% at 4% launch noise is open after 3 launches a side; the verdict says how many a side would
    settle it, and that many (drawn from the same noise) do, as often as the design's power promises."""
    rng = random.Random(5)  # a draw that measured +5.4%, too noisy at 3 launches a side to call
    a, b = launches(rng, 50.0, 3, 0.04), launches(rng, 52.5, 3, 0.04)
    found = stats.compare(b, a, stats.measure_noise([a, b]))
    assert found is not None and not found.settled() and found.to_settle is not None
    assert (
        found.to_settle > 3 and f"open after 3 launches a side: about {found.to_settle} a side" in found.why
    )
    settled = 0
    for _ in range(50):
        n = 2 * found.to_settle
        a, b = launches(rng, 50.0, n, 0.04), launches(rng, 52.5, n, 0.04)
        more = stats.compare(b, a, stats.measure_noise([a, b]))
        settled += more is not None and more.settled()
    assert settled >= 35


def test_the_launches_to_settle_grow_as_the_estimate_nears_the_practical_minimum() -> None:
    far, near = (stats.launches_to_settle(math.log(g), 0.04, 4, 5, 0.03, 0.98) for g in (1.10, 1.04))
    assert far is not None and near is not None and 5 <= far < near
    assert stats.launches_to_settle(math.log1p(0.0299), 0.04, 4, 5, 0.03, 0.98) is None  # at the edge: never
    assert stats.launches_to_settle(0.0, 0.04, 4, 5, 0.03, 0.98) is not None  # A/A: settles within ±3%


def sequential_error(first: int, most: int, confidence: float, seed: int, paths: int = 20000) -> float:
    """How often two equal configurations' round differences cross a `confidence` interval (either way) at
    some look from `first` to `most` rounds: drawn here with a seed of this test's own, and compared with the
    interval's own t quantile (not the calibration's p-values)."""

    draws = np.random.default_rng(seed).normal(0.0, 0.07, (paths, most))  # any noise: t does not care
    crossed = np.zeros(paths, dtype=bool)
    for n in range(first, most + 1):
        rows = draws[:, :n]
        half = stats.t_quantile(0.5 + confidence / 2, n - 1) * rows.std(axis=1, ddof=1) / math.sqrt(n)
        crossed |= np.abs(rows.mean(axis=1)) > half
    return float(crossed.mean())


@pytest.mark.parametrize(("first", "most"), [(3, 10), (2, 5), (3, 30)])
def test_every_look_is_counted_equal_configurations_cross_in_two_percent(first: int, most: int) -> None:
    """Looked at after every round up to the cap, a fixed 98% interval calls equal configurations apart far
    more than 2% of the time; each look's interval from `Looks` brings it back to 2%, at any cap."""
    looks = stats.Looks(first, most)
    assert looks.confidence > stats.CONFIDENCE
    assert 0.014 < sequential_error(first, most, looks.confidence, seed=11) < 0.027
    assert sequential_error(first, most, stats.CONFIDENCE, seed=11) > 0.045


def test_more_looks_need_a_wider_interval_at_each_and_one_look_needs_none() -> None:
    per_look = [stats.Looks(3, most).confidence for most in (3, 4, 10, 30, 60)]
    assert per_look[0] == stats.CONFIDENCE and per_look == sorted(per_look) and len(set(per_look)) == 5
    assert stats.Looks(3, 30).confidence == stats.look_confidence(3, 30)  # seeded: the same every time


def test_a_confirmation_verdict_names_its_looks_and_is_wider_than_one_looks() -> None:
    """Round-paired launches compared under the plan's looks: the interval widens to the per-look level and
    the verdict's reason says so; a clear gain is still faster."""
    rng = random.Random(3)
    a, b = launches(rng, 50.0, 6, 0.02), launches(rng, 60.0, 6, 0.02)
    a = [dataclasses.replace(x, round=r) for r, x in enumerate(a)]
    b = [dataclasses.replace(x, round=r) for r, x in enumerate(b)]
    noise = stats.measure_noise([a, b], a)
    once, looked = stats.compare(b, a, noise), stats.compare(b, a, noise, looks=stats.Looks(3, 40))
    assert once is not None and looked is not None and looked.verdict == Verdict.FASTER
    assert looked.low is not None and once.low is not None and looked.low < once.low
    assert "98% interval over up to 38 looks (99.8% each) above zero" in looked.why
    assert "98% interval above zero" in once.why
