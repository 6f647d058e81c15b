"""The simulations' ground truth: the closed-form effect of the Gaussian shape, and the
recorded effects of the answer-space shapes."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dbpa.stats._interval import energy_u_statistic
from dbpa.stats._similarity import l2_distance
from tests.stats.synthetic_effects import (
    SCENARIOS,
    TRUE_EFFECTS,
    TWO_TEXTS,
    GaussianShift,
    _chi_mean,
    scenario,
    true_effect,
)


@pytest.mark.parametrize("dim", [1, 4, 10])
def test_central_chi_mean_is_scipys(dim):
    assert math.isclose(_chi_mean(dim, 0.0), stats.chi(dim).mean(), rel_tol=1e-12)


@pytest.mark.parametrize(("dim", "noncentrality"), [(1, 0.3), (4, 1.0), (10, 0.5)])
def test_noncentral_chi_mean_integrates_the_noncentral_chi_square(dim, noncentrality):
    def root_times_density(w):
        return math.sqrt(w) * stats.ncx2.pdf(w, dim, noncentrality**2)

    expected = integrate.quad(root_times_density, 0.0, np.inf, limit=200)[0]
    assert math.isclose(_chi_mean(dim, noncentrality), expected, rel_tol=1e-7)


def test_one_dimensional_shift_matches_the_folded_normal():
    """In one dimension E|N(mu, 2)| is a folded normal's mean."""
    shift = 0.8
    sd = math.sqrt(2.0)
    folded = sd * math.sqrt(2 / math.pi) * math.exp(-(shift**2) / (2 * sd**2)) + shift * (
        1 - 2 * stats.norm.cdf(-shift / sd)
    )
    expected = 2 * folded - 2 * sd * math.sqrt(2 / math.pi)
    assert math.isclose(GaussianShift(1, shift).energy_distance(), expected, rel_tol=1e-10)


def test_gaussian_truth_agrees_with_a_large_sample():
    a, b = scenario("gauss_shift").draw(np.random.default_rng(3), 2500)
    estimate = energy_u_statistic(l2_distance(np.vstack([a, b])), 2500)
    assert abs(estimate - true_effect("gauss_shift")) < 0.025  # sd of the estimate ~0.007


def test_two_texts_truth_is_the_two_point_closed_form():
    """Two answers at distance d with shares p and q: theta = 2 d (p - q)^2 (the answers'
    own jitter, 0.001 of their length, changes it by about 0.2%)."""
    arm = TWO_TEXTS
    centre = arm.common**2 + arm.type_scale**2  # squared length before normalization
    d = arm.type_scale * math.sqrt(2.0 / centre)
    p, q = SCENARIOS["two_texts"][0].weights[0], SCENARIOS["two_texts"][1].weights[0]
    assert math.isclose(true_effect("two_texts"), 2 * d * (p - q) ** 2, rel_tol=0.01)


@pytest.mark.parametrize("name", [*SCENARIOS, "share_detail"])
def test_the_recorded_true_effect_is_the_large_sample_one(name):
    """Recomputed from TRUTH_N outputs per arm (seed 99): equal to the recorded value but for
    the summation order of another BLAS, so within a tolerance scaled to the terms summed (the
    null's effect is a difference of terms about 10^4 times larger than itself)."""
    assert set(TRUE_EFFECTS) == {*SCENARIOS, "share_detail"}
    between, within_original, within_perturbed = scenario(name).energy_terms()
    recomputed = 2.0 * between - within_original - within_perturbed
    scale = 2.0 * between + within_original + within_perturbed
    assert abs(recomputed - true_effect(name)) <= 1e-9 * scale
