"""Sample size by the normal approximation; power by simulation from pilots."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dbpa.stats import sample_size, simulate_power
from tests.stats.conftest import clustered


def test_sample_size_by_hand():
    # ((1.959964 + 0.841621) / 0.5)^2 = 31.39 -> 32
    assert sample_size(0.5, alpha=0.05, power=0.8) == 32


@pytest.mark.parametrize(
    ("effect", "alpha", "power", "m"),
    [(0.3, 0.05, 0.8, 1), (0.5, 0.01, 0.9, 8), (1.2, 0.1, 0.5, 100)],
)
def test_sample_size_formula(effect, alpha, power, m):
    z = norm.ppf(1 - alpha / (2 * m)) + norm.ppf(power)
    assert sample_size(effect, alpha=alpha, power=power, m=m) == max(
        2, math.ceil((z / effect) ** 2)
    )


def test_sample_size_grows_with_the_family():
    assert sample_size(0.5, m=1) < sample_size(0.5, m=10) < sample_size(0.5, m=100)


def test_power_is_high_under_a_clear_shift():
    rng = np.random.default_rng(1)
    a = clustered(rng, 200, weights=(0.9, 0.1))
    b = clustered(rng, 200, weights=(0.1, 0.9))
    result = simulate_power(a, b, k=15, n_simulations=40, n_permutations=99, rng=2)
    assert result.power >= 0.9
    assert result.ci_low <= result.power <= result.ci_high
    assert result.rejections == round(result.power * 40)


def test_power_is_alpha_under_the_null():
    rng = np.random.default_rng(3)
    pilot = clustered(rng, 300, weights=(0.5, 0.5))
    result = simulate_power(
        pilot, pilot, k=10, n_simulations=300, n_permutations=99, replace=True, rng=4
    )
    assert result.replace
    assert result.ci_low <= 0.05 <= result.ci_high


def test_arms_are_drawn_without_replacement_unless_asked():
    """A k beyond the pilot is refused rather than resampled with replacement, which made two
    pilots of one population look different."""
    rng = np.random.default_rng(5)
    small = clustered(rng, 8)
    assert not simulate_power(small, small, k=8, n_simulations=2, n_permutations=9, rng=0).replace
    with pytest.raises(ValueError, match=r"^k: 10 exceeds the smaller pilot \(8 rows\)"):
        simulate_power(small, small, k=10, n_simulations=2, n_permutations=9, rng=0)
    asked = simulate_power(small, small, k=10, n_simulations=2, n_permutations=9, replace=True)
    assert asked.replace


def test_a_smaller_share_of_changed_outputs_weakens_the_effect():
    rng = np.random.default_rng(6)
    a = clustered(rng, 200, weights=(0.9, 0.1))
    b = clustered(rng, 200, weights=(0.1, 0.9))
    kwargs = {"k": 15, "n_simulations": 60, "n_permutations": 99, "omega": "centroid"}
    full = simulate_power(a, b, rng=2, **kwargs)
    quarter = simulate_power(a, b, share=0.25, rng=2, **kwargs)
    assert (full.share, quarter.share) == (1.0, 0.25)
    assert full.power >= 0.9
    assert quarter.power <= full.power - 0.3
    # share < 1 draws the original arm and the unchanged outputs together: up to 2k rows of a.
    assert not quarter.replace
    with pytest.raises(ValueError, match=r"^k: with share < 1 a simulation draws up to 2k = 30"):
        simulate_power(a[:20], b, share=0.5, k=15, n_simulations=1, n_permutations=9)
