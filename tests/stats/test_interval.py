"""The effect interval: its estimator, its bootstrap, its validation and its coverage."""

from __future__ import annotations

import copy
import itertools
import math
import re

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from dbpa.stats import INTERVAL_OMEGAS, OMEGAS, EffectInterval, effect_interval, permutation_test
from tests.stats.conftest import clustered
from tests.stats.simulations import lower_misses, relabelling_lower
from tests.stats.synthetic_effects import scenario, true_effect
from tests.support.rates import Rate, assert_rates


def _brute_u(a, b, metric="euclidean"):
    daa, dbb, dab = cdist(a, a, metric), cdist(b, b, metric), cdist(a, b, metric)
    ka, kb = len(a), len(b)
    return 2 * dab.mean() - daa.sum() / (ka * (ka - 1)) - dbb.sum() / (kb * (kb - 1))


def test_estimate_is_the_two_sample_u_statistic(rng):
    a, b = clustered(rng, 9, 6), clustered(rng, 13, 6, weights=(0.2, 0.8))
    assert effect_interval(a, b, rng=0).estimate == pytest.approx(_brute_u(a, b), rel=1e-12)
    l1 = effect_interval(a, b, omega="energy_l1", rng=0).estimate
    assert l1 == pytest.approx(_brute_u(a, b, "cityblock"), rel=1e-12)


def test_centroid_and_cosine_scales_are_squared_centroid_distances(rng):
    a, b = clustered(rng, 12, 5), clustered(rng, 15, 5, weights=(0.3, 0.7))
    centroid = effect_interval(a, b, omega="centroid", rng=0).estimate
    # unbiased |mu_a - mu_b|^2: the plug-in minus each arm's variance of its mean
    plug_in = np.sum((a.mean(0) - b.mean(0)) ** 2)
    var_means = a.var(0, ddof=1).sum() / len(a) + b.var(0, ddof=1).sum() / len(b)
    assert centroid == pytest.approx(plug_in - var_means, rel=1e-10)
    ua = a / np.linalg.norm(a, axis=1, keepdims=True)
    ub = b / np.linalg.norm(b, axis=1, keepdims=True)
    cosine = effect_interval(a, b, omega="energy_cosine", rng=0).estimate
    assert cosine == pytest.approx(effect_interval(ua, ub, omega="centroid", rng=0).estimate)


def test_estimate_is_unbiased_where_the_test_statistic_is_not():
    """Same distribution: the U-statistic averages 0, the test's energy_l2 statistic does not."""
    rng = np.random.default_rng(4)
    s = scenario("null")
    estimates, statistics = [], []
    for _ in range(300):
        a, b = s.draw(rng, 8)
        estimates.append(effect_interval(a, b, n_bootstrap=100, rng=rng).estimate)
        statistics.append(permutation_test(a, b, omega="energy_l2", n_permutations=1).statistic)
    se = np.std(estimates) / math.sqrt(len(estimates))
    assert abs(np.mean(estimates)) < 3 * se
    assert np.mean(statistics) > 10 * se


def test_bootstrap_is_centred_on_the_estimate_despite_repeated_rows(rng):
    """Counting a repeated row as a pair (distance 0) would shift every replicate by about
    the within-arm mean distance / k; the distinct-row U-statistic stays centred."""
    a, b = clustered(rng, 20, 8), clustered(rng, 20, 8, weights=(0.3, 0.7))
    r = effect_interval(a, b, n_bootstrap=4000, rng=1)
    within = cdist(a, a).sum() / (20 * 19)
    assert abs(r.bootstrap.mean() - r.estimate) < 0.05 * within / 20
    assert abs(r.bootstrap.mean() - r.estimate) < 0.1 * r.bootstrap.std()


def test_result_is_frozen_documented_and_reproducible(rng):
    a, b = clustered(rng, 10, 4), clustered(rng, 10, 4)
    r = effect_interval(a, b, confidence=0.9, n_bootstrap=500, rng=3)
    assert isinstance(r, EffectInterval)
    assert r.n_bootstrap <= 500
    assert r.confidence == 0.9
    assert 0.0 <= r.low <= r.high
    assert (r.k_a, r.k_b) == (10, 10)
    assert "least-favourable" in r.method
    assert not r.bootstrap.flags.writeable
    assert not r.boundary.noise.flags.writeable
    assert not r.boundary.directions.flags.writeable
    assert r.boundary.directions.shape == (r.boundary.noise.size, 2)
    with pytest.raises(AttributeError):
        r.estimate = 1.0  # type: ignore[misc]
    again = effect_interval(a, b, confidence=0.9, n_bootstrap=500, rng=3)
    assert (again.low, again.high) == (r.low, r.high)
    assert "EffectInterval(omega='energy_l2'" in repr(r)


def test_interval_omegas_are_embedding_level_omegas():
    assert set(INTERVAL_OMEGAS) <= set(OMEGAS)
    assert all(OMEGAS[name].level == "embedding" for name in INTERVAL_OMEGAS)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"a": np.ones((4, 3))}, "a: the bootstrap needs at least 5"),
        ({"b": np.ones((4, 3))}, "b: the bootstrap needs at least 5"),
        ({"b": np.ones((6, 2))}, "b: embedding dimension"),
        ({"a": np.ones(6)}, "a: must be a 2-D"),
        ({"omega": "jsd"}, "omega: unknown 'jsd'"),
        ({"confidence": 1.0}, "confidence: must be in (0, 1)"),
        ({"n_bootstrap": 50}, "n_bootstrap: must be >= 100"),
        ({"n_bootstrap": 2.5}, "n_bootstrap: must be an integer"),
        ({"confidence": 0.995, "n_bootstrap": 100}, "n_bootstrap: a 0.995 interval's upper"),
        ({"rng": "seed"}, "rng: expected an int seed"),
        ({"a": np.zeros((6, 3)), "omega": "energy_cosine"}, "a: row 0 is a zero vector"),
    ],
)
def test_validation_names_the_argument(kwargs, message):
    args = {"a": np.arange(18.0).reshape(6, 3) + 1, "b": np.arange(18.0).reshape(6, 3) ** 0.5 + 1}
    args.update(kwargs)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        effect_interval(args.pop("a"), args.pop("b"), **args)


CONFIDENCE = 0.90
"""The interval an equivalence test at alpha = 0.05 reads."""


def _misses(name, k, seed, n_bootstrap):
    """Per audit: whether the interval misses the true effect (two-sided, upper side: truth
    above ``high``, lower side: truth below ``low``)."""
    truth = max(true_effect(name), 0.0)  # theta >= 0; the null's estimate is ~ -1e-4
    rng = np.random.default_rng(seed)
    s = scenario(name)
    while True:
        a, b = s.draw(rng, k)
        r = effect_interval(a, b, confidence=CONFIDENCE, n_bootstrap=n_bootstrap, rng=rng)
        yield not r.low <= truth <= r.high, truth > r.high, r.low > truth


SIDE = (1 - CONFIDENCE) / 2
"""Each side's nominal miss rate."""


def _assert_covers(name, k, seed, n_bootstrap):
    """Two-sided coverage at least CONFIDENCE and the upper side's at least 1 - SIDE (the
    side an equivalence claim rests on), checked sequentially (``tests/support/rates.py``:
    a miss rate of 1.5 x nominal is failed with probability 0.9)."""
    assert_rates(
        ((both, upper) for both, upper, _ in _misses(name, k, seed, n_bootstrap)),
        Rate(1 - CONFIDENCE, f"{name} k={k}: two-sided misses"),
        Rate(SIDE, f"{name} k={k}: upper-side misses"),
    )


def test_lower_bound_excludes_zero_exactly_when_the_permutation_test_rejects(rng):
    """At theta_0 = 0 the lower bound's test is the permutation test of no effect on the
    plug-in energy distance, the ``energy_l2`` omega's statistic (here enumerated over all
    252 splits) at (1 - confidence) / 2."""
    tail = (1 - CONFIDENCE) / 2
    seen = set()
    for shift in np.linspace(0.0, 1.5, 16):
        a = clustered(rng, 5, 4)
        b = clustered(rng, 5, 4) + shift
        test = permutation_test(a, b, omega="energy_l2", n_permutations=1000, rng=0)
        assert test.exact
        if abs(test.p_value - tail) < 0.02:  # too close to call with random relabellings
            continue
        r = effect_interval(a, b, confidence=CONFIDENCE, n_bootstrap=20000, rng=rng)
        assert (r.low > 0) == (test.p_value <= tail), (shift, test.p_value, r)
        seen.add(test.p_value <= tail)
    assert seen == {True, False}


def test_bounds_are_ordered_and_the_lower_one_below_the_estimate(rng):
    for shift in (0.0, 0.2, 0.5, 2.0):
        r = effect_interval(rng.normal(size=(12, 8)), rng.normal(size=(9, 8)) + shift, rng=rng)
        assert 0.0 <= r.low <= min(r.high, max(r.estimate, 0.0)), r


def test_lower_side_is_nominal_when_nothing_changed():
    """With no effect, "low > 0" is a level-(1 - confidence)/2 test: the lower side misses at
    most its nominal 0.05 and is not conservative like the percentile bootstrap's (which
    covered 0.99-1.0): checked sequentially, failed at 0.075 and at 0.0125 each with
    probability 0.9."""
    misses = lower_misses("null", 20, 51, CONFIDENCE, 500)
    assert_rates(
        misses,
        Rate(SIDE, "null k=20: lower-side misses"),
        Rate(SIDE, "null k=20: lower-side misses, not conservative", ratio=0.25),
    )


def test_lower_side_is_valid_where_a_few_repeated_texts_change_shares():
    """The first-order part dominates when a model repeats a few texts and the change moves
    their shares; the worst-case first-order variance keeps the lower bound valid there (a
    relabelling pivot alone covered 0.82-0.91): misses at most 0.05, checked sequentially."""
    misses = lower_misses("few_texts", 40, 52, CONFIDENCE, 500)
    assert_rates(misses, Rate(SIDE, "few_texts k=40: lower-side misses"))


@pytest.mark.parametrize("name", ["null", "shift", "few_texts"])
def test_the_relabelling_bound_capped_by_the_upper_one_is_the_lower_bound(name):
    """What ``lower_misses`` rests on: on the interval's own stream, its ``low`` is the
    relabellings' bound (``relabelling_lower``) capped by ``high``, so where that bound is
    at most the truth the interval does not miss from below."""
    rng = np.random.default_rng(53)
    for _ in range(4):
        a, b = scenario(name).draw(rng, 20)
        ahead = copy.deepcopy(rng)
        r = effect_interval(a, b, confidence=CONFIDENCE, n_bootstrap=500, rng=rng)
        bound = relabelling_lower(a, b, CONFIDENCE, 500, ahead)
        assert r.low == min(bound, r.high), (name, r, bound)


def test_coverage_fast():
    _assert_covers("shift", 20, 31, 500)


SHAPES = ["null", "shift", "spread", "mixture", "few_texts", "two_texts", "gauss_shift"]
"""The shapes of the coverage study (their order gives each cell its seed)."""


@pytest.mark.parametrize(("name", "k"), [("few_texts", 20), ("two_texts", 20), ("mixture", 20)])
def test_coverage(name, k):
    """B = 1000, where the interval is sharp: a few repeated answers changing shares (the
    least favourable case for both bounds: two-sided 0.892-0.953 in the interval benchmark)
    and a reweighted mixture (where every interval with a correctly scaled variance
    under-covers the upper side). The interval is conservative where the second-order part
    dominates (see dbpa/stats/_interval.py and the README); every shape at k = 10, 20, 40,
    400 audits per cell, is ``python -m benchmarks interval``."""
    seed = 1000 + 10 * k + SHAPES.index(name)
    _assert_covers(name, k, seed, 1000)


@pytest.mark.xfail(strict=True, reason="conservative where every answer moves alike: each "
                   "bound holds whatever the direction of the change, and this one moves along "
                   "a direction the answers do not vary in; 0.99 for 0.90")  # fmt: skip
def test_coverage_is_not_nominal_where_a_change_moves_every_answer_alike():
    """Marks the known over-coverage: passes (and so fails as xfail) if the interval ever
    comes within 2.5 SE of nominal from above there."""
    n_sims = 100
    both = n_sims - sum(m for m, _, _ in itertools.islice(_misses("shift", 20, 41, 500), n_sims))
    assert both / n_sims <= CONFIDENCE + 2.5 * math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / n_sims)


@pytest.mark.parametrize("omega", sorted(INTERVAL_OMEGAS))
def test_identical_outputs_give_the_same_interval_under_every_distance(omega):
    """Every output one text: estimate 0, lower bound 0 (no change is excluded by rounding
    noise; energy_cosine's bound was 3.7e-18 above 0 on vectors not of norm 1), and no margin
    is shown (the upper bound is infinite: outputs that never vary show nothing)."""
    text = np.random.default_rng(5).normal(size=384).astype(np.float32)
    iv = effect_interval(np.tile(text, (10, 1)), np.tile(text, (12, 1)), omega=omega, rng=1)
    assert (iv.estimate, iv.low, iv.high) == (0.0, 0.0, math.inf)
