"""Type-I error under true nulls and power under clear shifts, by simulation, for every omega."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from dbpa.stats import OMEGAS, permutation_test
from tests.stats.conftest import clustered

ALPHA = 0.05
B = 99  # alpha * (B + 1) is an integer: the randomized test has size exactly alpha
N_NULL = 2000


def _rejection_count(omega, draw, n_sims, seed, **kwargs):
    rng = np.random.default_rng(seed)
    count = 0
    for _ in range(n_sims):
        a, b = draw(rng)
        count += (
            permutation_test(a, b, omega=omega, n_permutations=B, rng=rng, **kwargs).p_value
            <= ALPHA
        )
    return count


def _inside_binomial_interval(count, n, p, level=0.999):
    lo, hi = binom.ppf((1 - level) / 2, n, p), binom.ppf(1 - (1 - level) / 2, n, p)
    return lo <= count <= hi, (lo, hi)


def _null_pair(rng):
    weights = (0.5, 0.3, 0.2)
    return clustered(rng, 20, 24, weights=weights), clustered(rng, 20, 24, weights=weights)


@pytest.mark.parametrize("omega", list(OMEGAS))
def test_type_one_error_at_k20(omega):
    count = _rejection_count(omega, _null_pair, N_NULL, seed=100 + list(OMEGAS).index(omega))
    ok, interval = _inside_binomial_interval(count, N_NULL, ALPHA)
    assert ok, f"{omega}: {count}/{N_NULL} rejections at alpha={ALPHA}, expected within {interval}"


@pytest.mark.parametrize("similarity", ["neg_l1", "neg_l2"])
def test_type_one_error_other_similarities(similarity):
    count = _rejection_count("jsd", _null_pair, N_NULL, seed=17, similarity=similarity)
    ok, interval = _inside_binomial_interval(count, N_NULL, ALPHA)
    assert ok, f"{count}/{N_NULL} outside {interval}"


def test_type_one_error_with_unequal_arms():
    def draw(rng):
        return clustered(rng, 25, 24, weights=(0.6, 0.4)), clustered(
            rng, 12, 24, weights=(0.6, 0.4)
        )

    count = _rejection_count("jsd", draw, N_NULL, seed=23)
    ok, interval = _inside_binomial_interval(count, N_NULL, ALPHA)
    assert ok, f"{count}/{N_NULL} outside {interval}"


@pytest.mark.parametrize("omega", list(OMEGAS))
def test_power_under_a_clear_shift(omega):
    def draw(rng):
        return clustered(rng, 20, 24, weights=(0.95, 0.05)), clustered(
            rng, 20, 24, weights=(0.3, 0.7)
        )

    n_sims = 40
    count = _rejection_count(omega, draw, n_sims, seed=5)
    assert count / n_sims >= 0.8, f"{omega}: power {count / n_sims:.2f}"
