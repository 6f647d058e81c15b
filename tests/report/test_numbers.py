"""How numbers read: p at the resolution of the test, omega with 3 decimals, stars."""

from __future__ import annotations

import math

import pytest

from dbpa.report._format import (
    fmt_cost,
    fmt_effect,
    fmt_interval,
    fmt_omega,
    fmt_p,
    fmt_time,
    p_floor,
)


@pytest.mark.parametrize(
    ("p", "floor", "shown"),
    [
        (1 / 2000, 1 / 2000, "≤0.0005"),  # B = 1999: nothing reached the observed omega
        (1 / 2001, 1 / 2001, "≤0.0005"),  # B = 2000: 0.00049975 read as a bound, rounded up
        (1 / 1000, 1 / 1000, "≤0.001"),
        (1 / 500, 1 / 500, "≤0.002"),
        (2 / 2000, 1 / 2000, "0.001"),  # one permutation at or above: an ordinary p
        (0.012346, 1 / 2000, "0.01235"),
        (0.5, 1 / 2000, "0.5"),
        (1.0, None, "1"),
        (0.000123456, None, "0.0001235"),  # never scientific notation
        (None, None, "\N{EN DASH}"),
        (math.nan, None, "\N{EN DASH}"),
    ],
)
def test_p_values_have_four_significant_digits_or_read_as_a_bound(p, floor, shown):
    assert fmt_p(p, floor) == shown


def test_the_smallest_p_is_one_over_b_plus_one_or_one_over_the_splits_when_exact():
    assert p_floor(1999, exact=False) == 1 / 2000
    assert p_floor(20, exact=True) == 1 / 20


def test_omega_effect_cost_and_time_formats():
    assert fmt_omega(0.31249) == "0.312"
    assert fmt_omega(None) == "\N{EN DASH}"
    assert fmt_effect(0.1) == "+0.100"
    assert fmt_effect(-0.02) == "-0.020"
    assert fmt_cost(None) == "unknown"
    assert fmt_cost(0.01234) == "$0.0123"
    assert fmt_cost(1234.5) == "$1,234.50"
    assert fmt_time("2026-11-21T18:54:07.770589+00:00") == "2026-11-21 18:54:07 UTC"
    assert fmt_time("2026-11-21T20:54:07+02:00") == "2026-11-21 18:54:07 UTC"
    assert fmt_time(None) == "\N{EN DASH}"


@pytest.mark.parametrize(
    ("estimate", "low", "high", "shown"),
    [
        (-0.000873, 0.0, 0.438, "0 [0, 0.438]"),  # an unbiased estimate below 0
        (-0.162, 0.0, 0.0, "0 [0, 0]"),  # repeated texts: the bound at 0
        (0.5, 0.0, 0.438, "0.438 [0, 0.438]"),  # above the upper bound
        (0.0123, 0.0, 0.031, "0.0123 [0, 0.031]"),  # inside: unchanged
    ],
)
def test_an_estimate_is_never_shown_outside_its_interval(estimate, low, high, shown):
    """The tables show the estimate clipped into its interval, for an effect and for the
    difference of two runs' effects alike."""
    from dbpa.report._data import EffectBounds
    from dbpa.stats import EffectDifference

    assert fmt_interval(EffectBounds(estimate, low, high, 0.9)) == shown
    assert fmt_interval(EffectDifference(estimate, low, high, 0.9, 100)) == shown
