"""The projected k that would settle an inconclusive decision."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dbpa.stats import Settling, settling_k

Z90 = norm.ppf(0.95)  # half-width factor of a two-sided 90% interval


def _interval(theta: float, sigma: float, k: int) -> tuple[float, float, float]:
    """A normal-theory 90% interval centred on ``theta`` at k outputs per arm."""
    half = Z90 * sigma / math.sqrt(k)
    return theta, theta - half, theta + half


@pytest.mark.parametrize(("theta", "towards"), [(0.3, "equivalent"), (1.2, "changed")])
def test_in_the_normal_model_the_projected_k_settles_with_the_stated_power(theta, towards):
    """Where the estimate is the truth and se ~ 1/sqrt(k) (the projection's own model), a
    new run at the projected k settles in about ``power`` of the cases."""
    sigma, margin, k0 = 3.0, 1.0, 10  # inconclusive at k0: the interval holds 0 and 1
    settled = settling_k(*_interval(theta, sigma, k0), margin, k0, power=0.8)
    assert isinstance(settled, Settling)
    assert settled.towards == towards
    rng = np.random.default_rng(5)
    se = sigma / math.sqrt(settled.k)
    estimates = rng.normal(theta, se, size=20_000)
    if towards == "equivalent":
        share = np.mean(estimates + Z90 * se < margin)
    else:
        share = np.mean(estimates - Z90 * se > 0)
    assert share == pytest.approx(0.8, abs=0.02)  # k is rounded up: at least 0.8 - noise


def test_settled_or_directionless_intervals_have_no_projection():
    assert settling_k(0.1, 0.0, 0.5, margin=1.0, k=10) is None  # already equivalent
    assert settling_k(0.9, 0.2, 1.5, margin=1.0, k=10) is None  # already changed
    assert settling_k(-0.01, 0.0, 0.0, margin=1e-9, k=10) is None  # no direction
    assert settling_k(0.999, 0.0, 2.0, margin=1.0, k=10, max_k=1000) is None  # beyond max_k


def test_more_outputs_are_needed_the_closer_the_estimate_is_to_the_margin():
    ks = [settling_k(est, -0.1, est + 0.6, margin=0.5, k=20).k for est in (0.0, 0.2, 0.4)]
    assert ks == sorted(ks)
    assert ks[0] < ks[-1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"margin": 0.0}, "margin: must be positive"),
        ({"margin": float("nan")}, "margin: must be finite"),
        ({"estimate": "x"}, "estimate: must be a number"),
        ({"low": 2.0}, "low: 2.0 is above high"),
        ({"k": 1}, "k: must be >= 2"),
        ({"power": 1.0}, "power"),
        ({"confidence": 0.0}, "confidence"),
        ({"max_k": 5}, "max_k: must be >= 10"),
    ],
)
def test_validation_names_the_argument(kwargs, message):
    args = {"estimate": 0.2, "low": 0.0, "high": 1.2, "margin": 1.0, "k": 10, **kwargs}
    with pytest.raises(ValueError, match=message):
        settling_k(**args)


def test_a_stricter_level_needs_more_outputs_and_unsettles_a_bound_below_the_margin():
    """A family's correction asks each test for a smaller level than the interval's own."""
    own = settling_k(0.2, -0.1, 0.9, margin=1.0, k=10, level=0.05)
    assert own is None  # settled at the interval's level: its upper bound is below 1
    strict = settling_k(0.2, -0.1, 0.9, margin=1.0, k=10, level=0.05 / 6)
    assert isinstance(strict, Settling)
    assert strict.towards == "equivalent"
    wide = [settling_k(0.2, -0.1, 1.1, margin=1.0, k=10, level=a) for a in (0.05, 0.05 / 6)]
    assert wide[0].k < wide[1].k


def test_the_corrected_level_is_what_the_family_asks_of_the_test():
    from dbpa.stats import correct, corrected_level

    p = np.array([0.001, 0.02, 0.3, 0.04])
    bonferroni = correct(p, method="bonferroni", alpha=0.05).adjusted
    assert [corrected_level(0.05, pi, ai) for pi, ai in zip(p, bonferroni, strict=True)][:2] == [
        pytest.approx(0.05 / 4),
        pytest.approx(0.05 / 4),
    ]
    holm = correct(p, method="holm", alpha=0.05).adjusted  # the smallest p: alpha/m
    assert corrected_level(0.05, p[0], holm[0]) == pytest.approx(0.05 / 4)
    assert corrected_level(0.05, 0.5, 0.4) == 0.05  # never above alpha
    assert corrected_level(0.05, 0.0, 0.0) is None
    with pytest.raises(ValueError, match=r"^adjusted_p: must be a number"):
        corrected_level(0.05, 0.1, "x")
