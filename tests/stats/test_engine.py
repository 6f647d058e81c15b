"""The permutation engine against exact enumeration, scipy and the literal Algorithm 1."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dbpa
from dbpa.stats import (
    OMEGAS,
    _omega,
    _permutation,
    permutation_test,
    permutation_test_matrix,
    pooled_similarity,
)
from tests.stats import reference
from tests.stats.conftest import clustered
from tests.support.literal_dbpa import algorithm1

SIMILARITY_OMEGAS = [name for name, o in OMEGAS.items() if o.level == "similarity"]
EMBEDDING_OMEGAS = [name for name, o in OMEGAS.items() if o.level == "embedding"]
SINGLE_OMEGAS = SIMILARITY_OMEGAS + EMBEDDING_OMEGAS  # auto has its own tests (test_combined)


def _arms(rng, k_a=4, k_b=3, d=5, shift=0.0):
    a = rng.normal(size=(k_a, d)) + 0.5
    b = rng.normal(size=(k_b, d)) + 0.5 + shift
    return a, b


@pytest.mark.parametrize("omega", SINGLE_OMEGAS)
def test_observed_statistic_matches_textbook_definition(omega, rng):
    a, b = _arms(rng, 12, 9, d=7, shift=0.4)
    edges = reference.jsd_edges(np.vstack([a, b]), "cosine")
    expected = reference.statistic(omega, a, b, "cosine", edges)
    got = permutation_test(a, b, omega=omega, n_permutations=1, rng=0).statistic
    assert got == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("similarity", ["neg_l1", "neg_l2"])
@pytest.mark.parametrize("omega", SIMILARITY_OMEGAS)
def test_statistic_under_distance_similarities(omega, similarity, rng):
    a, b = _arms(rng, 10, 8, d=4, shift=0.5)
    edges = reference.jsd_edges(np.vstack([a, b]), similarity)
    expected = reference.statistic(omega, a, b, similarity, edges)
    got = permutation_test(a, b, omega=omega, similarity=similarity, n_permutations=1, rng=0)
    assert got.statistic == pytest.approx(expected, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("omega", SINGLE_OMEGAS)
@pytest.mark.parametrize(("k_a", "k_b"), [(4, 3), (3, 5), (4, 4)])
def test_exact_enumeration_matches_brute_force(omega, k_a, k_b, rng):
    a, b = _arms(rng, k_a, k_b, shift=0.8)
    t_obs, p_exact, null = reference.exact_test(omega, a, b)
    result = permutation_test(a, b, omega=omega, n_permutations=1000, rng=0)
    assert result.exact
    assert result.evaluated == math.comb(k_a + k_b, k_a)
    assert result.n_permutations == 1000  # B as asked, not the splits evaluated
    assert result.statistic == pytest.approx(t_obs, rel=1e-9, abs=1e-12)
    assert result.p_value == pytest.approx(p_exact, abs=1e-12)
    np.testing.assert_allclose(
        np.sort(result.null_distribution), np.sort(null), rtol=1e-9, atol=1e-12
    )


def test_exact_p_value_is_rank_of_observed_split(rng):
    a, b = _arms(rng, 5, 5, shift=3.0)
    result = permutation_test(a, b, omega="centroid", n_permutations=10_000, rng=0)
    # A clear separation: only the observed split and its complement reach T_obs.
    assert result.exact
    assert result.p_value == pytest.approx(2 / math.comb(10, 5))


def test_random_splits_once_there_are_more_splits_than_b(rng):
    a, b = _arms(rng, 5, 5)
    result = permutation_test(a, b, n_permutations=251, rng=0)  # 252 distinct splits
    assert not result.exact
    assert result.n_permutations == result.evaluated == 251
    count = np.count_nonzero(result.null_distribution >= result.statistic - 1e-12)
    assert result.p_value == pytest.approx((1 + count) / 252)


def test_agrees_with_scipy_permutation_test_exact(rng):
    # One shared statistic: the 1-D energy distance squared (energy_l2 on d=1 embeddings).
    x, y = rng.normal(size=6), rng.normal(size=5) + 0.7

    def energy_sq(u, v, axis):
        u, v = np.moveaxis(u, axis, -1), np.moveaxis(v, axis, -1)

        def mean_abs(p, q):
            return np.abs(p[..., :, None] - q[..., None, :]).mean(axis=(-1, -2))

        return 2 * mean_abs(u, v) - mean_abs(u, u) - mean_abs(v, v)

    assert energy_sq(x, y, 0) == pytest.approx(stats.energy_distance(x, y) ** 2)
    ref = stats.permutation_test(
        (x, y),
        energy_sq,
        permutation_type="independent",
        alternative="greater",
        n_resamples=10_000,
        vectorized=True,
    )
    ours = permutation_test(x[:, None], y[:, None], omega="energy_l2", n_permutations=10_000, rng=0)
    assert ours.exact
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-9)
    assert ours.p_value == pytest.approx(ref.pvalue, abs=1e-12)


def test_agrees_with_scipy_permutation_test_randomized(rng):
    x, y = rng.normal(size=25), rng.normal(size=25) + 0.45

    def centroid(u, v, axis):
        return (u.mean(axis=axis) - v.mean(axis=axis)) ** 2

    b = 9999
    ref = stats.permutation_test(
        (x, y),
        centroid,
        permutation_type="independent",
        alternative="greater",
        n_resamples=b,
        vectorized=True,
        rng=1,
    )
    ours = permutation_test(x[:, None], y[:, None], omega="centroid", n_permutations=b, rng=2)
    assert ours.statistic == pytest.approx(ref.statistic, rel=1e-9)
    se = math.sqrt(2 * ref.pvalue * (1 - ref.pvalue) / b)
    assert abs(ours.p_value - ref.pvalue) < 4 * se + 1e-3


@pytest.mark.parametrize("shift", [0.0, 0.25, 0.6])
def test_agrees_with_literal_algorithm_1(shift):
    rng = np.random.default_rng(7)
    d = 48
    a = clustered(rng, 20, d, weights=(0.5, 0.5))
    b = clustered(rng, 20, d, weights=(0.5 + shift * 0.8, 0.5 - shift * 0.8 + 1e-9))
    b_perm = 1500
    t_lit, p_lit, null_lit = algorithm1(a, b, b_perm, np.random.default_rng(1))
    ours = permutation_test(a, b, n_permutations=b_perm, rng=2)
    assert ours.statistic == pytest.approx(t_lit, rel=1e-10)
    p = (p_lit + ours.p_value) / 2
    se = math.sqrt(2 * p * (1 - p) / b_perm)
    assert abs(ours.p_value - p_lit) < 4 * se + 2 / b_perm
    assert ours.null_mean == pytest.approx(null_lit.mean(), rel=0.05)


def test_fixed_range_matches_literal_with_fixed_edges(rng):
    a, b = _arms(rng, 15, 15, d=8, shift=0.3)
    t_lit, _, _ = algorithm1(a, b, 1, np.random.default_rng(0), edges=(-1.0, 1.0))
    ours = permutation_test(a, b, n_permutations=1, rng=0, range=(-1, 1))
    assert ours.statistic == pytest.approx(t_lit, rel=1e-10)
    assert ours.options["range"] == (-1.0, 1.0)


def test_bins_option_changes_the_histogram(rng):
    a, b = _arms(rng, 12, 12, d=6, shift=0.3)
    z = np.vstack([a, b])
    for bins in (5, 60):
        edges = reference.jsd_edges(z, "cosine", bins)
        expected = reference.statistic("jsd", a, b, "cosine", edges)
        assert permutation_test(
            a, b, bins=bins, n_permutations=1, rng=0
        ).statistic == pytest.approx(expected)


def test_matrix_form_equals_embedding_form(rng):
    a, b = _arms(rng, 9, 7, d=6, shift=0.4)
    s = pooled_similarity(a, b)
    by_matrix = permutation_test_matrix(s, 9, n_permutations=500, rng=3)
    by_embeddings = permutation_test(a, b, n_permutations=500, rng=3)
    assert by_matrix.p_value == by_embeddings.p_value
    np.testing.assert_array_equal(by_matrix.null_distribution, by_embeddings.null_distribution)


def test_same_seed_same_result_and_generator_advances(rng):
    a, b = _arms(rng, 20, 20, d=8)
    first = permutation_test(a, b, n_permutations=300, rng=11)
    again = permutation_test(a, b, n_permutations=300, rng=11)
    np.testing.assert_array_equal(first.null_distribution, again.null_distribution)
    assert first.p_value == again.p_value
    gen = np.random.default_rng(11)
    one = permutation_test(a, b, n_permutations=300, rng=gen)
    two = permutation_test(a, b, n_permutations=300, rng=gen)
    assert not np.array_equal(one.null_distribution, two.null_distribution)


@pytest.mark.parametrize("omega", ["jsd", "ks", "energy_l2"])
def test_result_does_not_depend_on_chunk_size(omega, rng, monkeypatch):
    a, b = _arms(rng, 15, 12, d=6, shift=0.2)
    whole = permutation_test(a, b, omega=omega, n_permutations=700, rng=5)
    monkeypatch.setattr(_permutation, "MEMORY_BUDGET_BYTES", 1)  # one split per chunk
    chunked = permutation_test(a, b, omega=omega, n_permutations=700, rng=5)
    np.testing.assert_allclose(chunked.null_distribution, whole.null_distribution, rtol=1e-12)
    assert chunked.p_value == whole.p_value


@pytest.mark.parametrize(("k_a", "k_b"), [(3, 2), (15, 12), (27, 27)])
def test_jsd_read_from_the_mixture_table_is_jsd_computed(k_a, k_b, rng, monkeypatch):
    """Up to ``MIXTURE_TABLE_ENTRIES`` the jsd kernel reads the mixture's entropy terms from
    a table (``_omega._mixture_table``): the same values, to the last bit, as computing them."""
    a, b = _arms(rng, k_a, k_b, d=6, shift=0.2)
    read = permutation_test(a, b, omega="jsd", n_permutations=500, rng=5)
    monkeypatch.setattr(_omega, "MIXTURE_TABLE_ENTRIES", 0)
    computed = permutation_test(a, b, omega="jsd", n_permutations=500, rng=5)
    np.testing.assert_array_equal(read.null_distribution, computed.null_distribution)
    assert read.statistic == computed.statistic
    assert read.p_value == computed.p_value


def test_result_fields_are_consistent(rng):
    a, b = _arms(rng, 10, 14, d=5, shift=0.5)
    r = permutation_test(a, b, n_permutations=400, rng=0)
    assert (r.k_a, r.k_b, r.omega, r.similarity) == (10, 14, "jsd", "cosine")
    assert r.null_mean == pytest.approx(r.null_distribution.mean())
    assert r.null_std == pytest.approx(r.null_distribution.std(ddof=1))
    assert r.effect == pytest.approx(r.statistic - r.null_mean)
    assert r.z == pytest.approx(r.effect / r.null_std)
    assert dict(r.options) == {"bins": 30, "range": "pooled"}
    assert r.n_permutations == r.evaluated == r.null_distribution.size == 400
    assert "n_permutations=400, evaluated=400, exact=False" in repr(r)
    with pytest.raises(ValueError, match="read-only"):
        r.null_distribution[0] = 1.0
    with pytest.raises(AttributeError):
        r.p_value = 0.5  # type: ignore[misc]


def test_p_value_is_never_zero_and_floors_at_one_over_b_plus_one(rng):
    a = clustered(rng, 30, 16, weights=(1.0, 0.0))
    b = clustered(rng, 30, 16, weights=(0.0, 1.0))
    r = permutation_test(a, b, n_permutations=99, rng=0)
    assert r.p_value == pytest.approx(1 / 100)


def test_identical_arms_are_not_rejected():
    a = np.tile([1.0, 2.0, 3.0], (6, 1))
    for omega in OMEGAS:
        r = permutation_test(a, a.copy(), omega=omega, n_permutations=200, rng=0)
        assert r.p_value == 1.0, omega
        assert r.null_std == 0.0, omega
        assert math.isnan(r.z), omega


def test_top_level_package_exports_the_entry_point():
    assert dbpa.permutation_test is permutation_test


@pytest.mark.parametrize("omega", [*SINGLE_OMEGAS, "auto"])
@pytest.mark.parametrize("k", [5, 12])  # 5: every split enumerated (252 <= B)
def test_the_capped_p_value_is_the_p_value_wherever_it_decides(omega, k):
    """Below the cap it is the full test's p-value (same splits, same order, fewer at a
    time); above it, 1.0 or the p-value itself: no decision at a level up to the cap moves."""
    rng = np.random.default_rng(40 + k)
    cap = 0.05
    seen = {"below": 0, "stopped": 0}
    for shift in (0.0, 0.0, 0.6, 1.0, 2.5, 5.0):
        a, b = _arms(rng, k, k, d=6, shift=shift)
        full = permutation_test(a, b, omega=omega, n_permutations=999, rng=7).p_value
        capped = _permutation.capped_p_value(a, b, cap=cap, omega=omega, n_permutations=999, rng=7)
        if full <= cap:
            assert capped == full
            seen["below"] += 1
        else:
            assert capped in (1.0, full)
            seen["stopped"] += capped == 1.0
        uncapped = _permutation.capped_p_value(
            a, b, cap=1.0, omega=omega, n_permutations=999, rng=7
        )
        assert uncapped == full
    assert seen["below"] >= 1
    assert seen["stopped"] >= 1


def test_the_capped_p_value_names_a_bad_cap():
    a, b = _arms(np.random.default_rng(1), 6, 6)
    with pytest.raises(ValueError, match="cap: must be in"):
        _permutation.capped_p_value(a, b, cap=0.0)


@pytest.mark.parametrize("omega", sorted(OMEGAS))
def test_identical_outputs_in_both_arms_are_never_a_change(omega):
    """Every output one text (a deterministic model): each split is the observed one. The
    similarities of equal vectors differ in their last bits by position in the pooled
    matrix, which jsd, auto and the CDF statistics read as a difference (30 of 30 null tests
    rejected before ties were merged)."""
    rng = np.random.default_rng(5)
    text = rng.normal(size=384).astype(np.float32)
    a, b = np.tile(text, (10, 1)), np.tile(text, (12, 1))
    result = dbpa.permutation_test(a, b, omega=omega, n_permutations=199, rng=1)
    assert result.p_value == 1.0


def test_equal_values_merged_at_the_tie_tolerance_only():
    from dbpa.stats._omega import TIE_ATOL, merged_ties

    m = np.array(
        [[1.0, 0.5, 0.5 + TIE_ATOL / 4], [0.5, 1.0 - TIE_ATOL / 2, 0.25], [0.2, 0.25, 1.0]]
    )
    merged = merged_ties(m)
    assert merged[0, 2] == merged[0, 1] == 0.5
    assert merged[1, 1] == merged[0, 0] == 1.0 - TIE_ATOL / 2  # the run's smallest
    assert merged[2, 0] == 0.2
    assert merged[1, 2] == 0.25


@pytest.mark.parametrize("omega", ["jsd", "energy", "wasserstein", "ks"])
@pytest.mark.parametrize(("k_a", "k_b"), [(3, 4), (12, 13), (30, 26), (70, 5)])
def test_statistics_of_tied_outputs_are_the_textbook_ones_split_by_split(omega, k_a, k_b, rng):
    """Outputs repeated and similarities tied everywhere (small integer embeddings under
    neg_l1: every similarity exact): each split's statistic is the one computed from its
    arms the textbook way, and the same splits are at least as extreme as the observed one.
    The jsd kernel reads several bins from one column of its product at every size here."""
    z = rng.integers(0, 3, size=(k_a + k_b, 3)).astype(np.float64)
    splits = np.zeros((40, k_a + k_b), dtype=bool)
    splits[0, :k_a] = True  # the observed split
    for row in splits[1:]:
        row[rng.choice(k_a + k_b, size=k_a, replace=False)] = True
    got = _permutation.split_statistics(
        z[:k_a], z[k_a:], splits, similarity="neg_l1", omega=omega
    ).values
    edges = reference.jsd_edges(z, "neg_l1")
    expected = np.array([reference.statistic(omega, z[m], z[~m], "neg_l1", edges) for m in splits])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
    tie = 1e-9 * (abs(expected[0]) + 1.0)
    np.testing.assert_array_equal(got >= got[0] - tie, expected >= expected[0] - tie)


@pytest.mark.parametrize(("k_a", "k_b", "d"), [(4, 5, 3), (20, 20, 6), (60, 60, 40), (110, 12, 4)])
def test_jsd_of_spread_similarities_is_the_textbook_one_split_by_split(k_a, k_b, d, rng):
    """Continuous embeddings whose similarities fill every bin, so that the kernel packs many
    bins of different capacities into each column of its product, up to its exact limit (a
    bin that can hold 6,555 first-group pairs beside small ones at 110 + 12): every split's
    jsd is the one of its arms' own histograms on the pooled edges."""
    z = rng.normal(size=(k_a + k_b, d))
    splits = np.zeros((60, k_a + k_b), dtype=bool)
    splits[0, :k_a] = True
    for row in splits[1:]:
        row[rng.choice(k_a + k_b, size=k_a, replace=False)] = True
    got = _permutation.split_statistics(z[:k_a], z[k_a:], splits, omega="jsd").values
    edges = reference.jsd_edges(z, "cosine")
    expected = np.array([reference.statistic("jsd", z[m], z[~m], "cosine", edges) for m in splits])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12)
