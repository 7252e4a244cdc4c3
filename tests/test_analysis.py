"""Verdicts on gains: paired by prompt, and "within noise" when the gain is not worth a configuration."""

from __future__ import annotations

import pytest

from sweep.analysis import paired_gains, verdict
from sweep.results import Spread


def spread(*values: float) -> Spread:
    s = Spread.of(list(values))
    assert s is not None
    return s


def test_gains_pair_by_prompt() -> None:
    gains = paired_gains(spread(100.0, 50.0, 90.0), spread(50.0, 50.0, 45.0))
    assert gains == pytest.approx([1.0, 0.0, 1.0])


def test_unpaired_spreads_compare_extremes() -> None:
    old = Spread(median=100.0, low=90.0, high=110.0, n=3)  # a record written before values were kept
    assert paired_gains(old, spread(50.0, 40.0)) == pytest.approx([90 / 50 - 1, 110 / 40 - 1])


@pytest.mark.parametrize(
    ("gain", "gains", "expected"),
    [
        (0.02, [0.01, 0.03, 0.02], "within noise: keep the cheaper config"),  # real but too small to matter
        (0.06, [-0.02, 0.06, 0.10], "within noise: keep the cheaper config"),  # small, and one prompt lost
        (0.90, [0.80, 0.90, 1.10], "faster"),
        (-0.20, [-0.30, -0.20, -0.10], "slower"),
        (1.80, [1.90, 1.80, -0.05], "mixed: faster on 2 of 3 prompts"),
    ],
)
def test_verdicts(gain: float, gains: list[float], expected: str) -> None:
    assert verdict(gain, gains) == expected
