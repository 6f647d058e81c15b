"""The planner of k: its recommendation checked by fresh simulation from the true arms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dbpa.stats import permutation_test, plan_k
from tests.stats.conftest import clustered

D = 8


def _original(rng, k):
    return rng.normal(size=(k, D))


def _shifted(rng, k, shift=1.0):
    return rng.normal(size=(k, D)) + shift * np.eye(D)[0]


def _fresh_power(k, *, omega, level, n_permutations, n_sims, seed, draw_b=_shifted):
    """Rejection rate at k with arms drawn from the true distributions, not the pilots."""
    rng = np.random.default_rng(seed)
    rejections = 0
    for _ in range(n_sims):
        a, b = _original(rng, k), draw_b(rng, k)
        p = permutation_test(a, b, omega=omega, n_permutations=n_permutations, rng=rng).p_value
        rejections += p <= level
    return rejections / n_sims


def test_recommended_k_reaches_the_target_power_fast():
    rng = np.random.default_rng(10)
    pilot_a, pilot_b = _original(rng, 400), _shifted(rng, 400)
    plan = plan_k(
        pilot_a,
        pilot_b,
        omega="energy_l2",
        candidates=(4, 8, 16, 32, 64),
        n_simulations=150,
        n_permutations=99,
        rng=1,
    )
    assert plan.level == 0.05
    assert plan.k is not None
    assert 16 < plan.k <= 64
    # The curve holds the candidates up to the first hit and the bisection around k.
    ks = [r.k for r in plan.curve]
    assert ks == sorted(ks)
    assert {4, 8, 16} <= set(ks)
    assert plan.k in ks
    assert plan.k - 1 in ks or plan.k in (4, 8, 16, 32, 64)
    fresh = _fresh_power(
        plan.k, omega="energy_l2", level=0.05, n_permutations=99, n_sims=300, seed=2
    )
    assert abs(fresh - 0.8) <= 0.1, f"k={plan.k}: fresh power {fresh:.2f}"


def _unit_original(rng, k):
    x = rng.normal(size=(k, D)) + 2.0 * np.eye(D)[0]
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _unit_shifted(rng, k):
    x = rng.normal(size=(k, D)) + 2.0 * np.eye(D)[0] + 1.2 * np.eye(D)[1]
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.slow
def test_recommended_k_reaches_the_target_power_for_auto_in_a_family():
    """auto on unit vectors, a Holm family of 10 (level 0.005), B=399: the fewest that
    resolve the level (p = 2/400 at most one relabelling as extreme), in the plan and in
    the check alike (B=999 took 21 CPU-s, 2026-11-27)."""
    rng = np.random.default_rng(11)
    pilot_a, pilot_b = _unit_original(rng, 500), _unit_shifted(rng, 500)
    plan = plan_k(
        pilot_a,
        pilot_b,
        omega="auto",
        m=10,
        correction="holm",
        candidates=(10, 20, 40, 80),
        n_simulations=150,
        n_permutations=399,
        rng=3,
    )
    assert plan.level == pytest.approx(0.005)
    assert plan.k is not None
    fresh_rng = np.random.default_rng(4)
    rejections = 0
    for _ in range(300):
        a, b = _unit_original(fresh_rng, plan.k), _unit_shifted(fresh_rng, plan.k)
        result = permutation_test(a, b, omega="auto", n_permutations=399, rng=fresh_rng)
        rejections += result.p_value <= 0.005
    assert abs(rejections / 300 - 0.8) <= 0.1, f"k={plan.k}: fresh power {rejections / 300:.2f}"


def test_detectable_share_shrinks_as_k_grows():
    rng = np.random.default_rng(12)
    pilot_a, pilot_b = _original(rng, 300), _shifted(rng, 300, shift=1.5)
    common = {"omega": "centroid", "candidates": (4, 64), "n_simulations": 100}
    small = plan_k(pilot_a, pilot_b, **common, n_permutations=99, detectable_at=16, rng=5)
    large = plan_k(pilot_a, pilot_b, **common, n_permutations=99, detectable_at=48, rng=5)
    assert small.detectable_share is not None
    assert large.detectable_share is not None
    assert large.detectable_share < small.detectable_share <= 1.0
    assert large.detectable_share >= 1 / 32
    shares = [r.share for r in large.share_curve]
    assert shares == sorted(shares)
    assert shares[-1] == 1.0
    assert len(shares) == 6
    # At the detectable share, fresh arms with that share of shifted outputs reach the target.
    share = large.detectable_share

    def mixed(rng, k):
        changed = rng.random(k) < share
        return np.where(changed[:, None], _shifted(rng, k, 1.5), _original(rng, k))

    fresh = _fresh_power(
        48, omega="centroid", level=0.05, n_permutations=99, n_sims=200, seed=6, draw_b=mixed
    )
    assert fresh >= 0.7, f"share {share}: fresh power {fresh:.2f}"


def test_no_candidate_reaches_the_target():
    rng = np.random.default_rng(13)
    pilot = clustered(rng, 200)
    plan = plan_k(
        pilot,
        pilot,
        omega="energy_l2",
        candidates=(5, 10),
        n_simulations=40,
        n_permutations=99,
        detectable_at=10,
        rng=0,
    )
    assert plan.k is None
    assert [r.k for r in plan.curve] == [5, 10]
    assert plan.detectable_share is None
    assert [r.share for r in plan.share_curve] == [1.0]


def test_first_candidate_already_reaches_the_target():
    rng = np.random.default_rng(14)
    plan = plan_k(
        _original(rng, 100),
        _shifted(rng, 100, shift=5.0),
        omega="energy_l2",
        candidates=(6, 12),
        n_simulations=30,
        n_permutations=99,
        rng=0,
    )
    assert plan.k == 6
    assert [r.k for r in plan.curve] == [6]


def test_level_follows_the_correction():
    rng = np.random.default_rng(15)
    a, b = _original(rng, 50), _shifted(rng, 50, shift=5.0)
    kwargs = {"omega": "energy_l2", "candidates": (6,), "n_simulations": 2, "rng": 0}
    assert plan_k(a, b, m=4, correction="bonferroni", n_permutations=99, **kwargs).level == 0.0125
    harmonic = 1 + 1 / 2 + 1 / 3 + 1 / 4
    by = plan_k(a, b, m=4, correction="by", n_permutations=199, **kwargs)
    assert by.level == pytest.approx(0.05 / (4 * harmonic))
    assert math.isclose(plan_k(a, b, m=1, n_permutations=99, **kwargs).level, 0.05)


def test_equal_populations_never_reach_power_from_a_small_pilot():
    # Resampled with replacement, two pilots of 10 from one population "differ" at k ~ 19.
    rng = np.random.default_rng(11)
    a, b = _original(rng, 10), _original(rng, 10)
    plan = plan_k(
        a,
        b,
        omega="energy_l2",
        m=8,
        candidates=(5, 10, 20, 40),
        n_simulations=40,
        n_permutations=199,
        detectable_at=20,
        rng=1,
    )
    assert plan.k is None
    assert plan.pilot_limit == 10
    assert [c.k for c in plan.curve] == [5, 10]  # nothing beyond the pilot is simulated
    assert all(not c.replace for c in plan.curve)
    assert plan.detectable_at is None  # 2k = 40 rows of pilot a would be needed


def test_candidates_must_fit_the_pilot():
    rng = np.random.default_rng(12)
    with pytest.raises(ValueError, match="candidates: none is at most the smaller pilot"):
        plan_k(_original(rng, 6), _shifted(rng, 8), candidates=(10, 20), rng=0)
