"""Properties that hold for any input: p in (0, 1], invariances, symmetry."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from dbpa.stats import OMEGAS, correct, permutation_test

SYMMETRIC = ["energy_cosine", "energy_l1", "energy_l2", "centroid"]
values = st.floats(-10, 10, allow_nan=False, allow_subnormal=False, width=64)


@st.composite
def arms(draw, max_k=6):
    d = draw(st.integers(1, 4))
    k_a, k_b = draw(st.integers(2, max_k)), draw(st.integers(2, max_k))
    # Rounded values make exact ties (duplicated outputs) common, as with real LLM outputs.
    a = np.round(draw(arrays(np.float64, (k_a, d), elements=values)), 1)
    b = np.round(draw(arrays(np.float64, (k_b, d), elements=values)), 1)
    a[np.linalg.norm(a, axis=1) == 0, 0] = 1.0  # keep cosine defined
    b[np.linalg.norm(b, axis=1) == 0, 0] = 1.0
    return a, b


settings.register_profile(
    "dbpa",
    deadline=None,
    max_examples=int(os.environ.get("DBPA_HYPOTHESIS_EXAMPLES", "60")),
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("dbpa")


@given(
    data=arms(),
    omega=st.sampled_from(list(OMEGAS)),
    n_perm=st.integers(1, 300),
    seed=st.integers(0, 2**32),
)
def test_p_value_in_unit_interval_and_statistic_finite(data, omega, n_perm, seed):
    a, b = data
    r = permutation_test(a, b, omega=omega, n_permutations=n_perm, rng=seed)
    assert 0.0 < r.p_value <= 1.0
    assert np.isfinite(r.statistic)
    assert r.statistic >= 0.0
    assert np.all(np.isfinite(r.null_distribution))
    if not r.exact:
        assert r.p_value >= 1 / (n_perm + 1)


@given(data=arms(max_k=5), omega=st.sampled_from(list(OMEGAS)), seed=st.integers(0, 2**32))
def test_invariant_to_row_order_within_each_arm(data, omega, seed):
    a, b = data
    rng = np.random.default_rng(seed)
    shuffled_a, shuffled_b = a[rng.permutation(len(a))], b[rng.permutation(len(b))]
    r = permutation_test(a, b, omega=omega, n_permutations=1000, rng=0)  # exact: <= 252 splits
    s = permutation_test(shuffled_a, shuffled_b, omega=omega, n_permutations=1000, rng=0)
    assert r.exact
    assert s.exact
    assert s.statistic == pytest.approx(r.statistic, rel=1e-9, abs=1e-12)
    assert s.p_value == pytest.approx(r.p_value, abs=1e-12)


@given(data=arms(max_k=5), omega=st.sampled_from(SYMMETRIC))
def test_symmetric_statistics_do_not_care_which_arm_is_original(data, omega):
    a, b = data
    r = permutation_test(a, b, omega=omega, n_permutations=1000, rng=0)
    s = permutation_test(b, a, omega=omega, n_permutations=1000, rng=0)
    assert s.statistic == pytest.approx(r.statistic, rel=1e-9, abs=1e-12)
    assert s.p_value == pytest.approx(r.p_value, abs=1e-12)


CONTINUOUS_ROTATION_INVARIANT = [
    "energy",
    "wasserstein",
    "mean_diff",
    "energy_cosine",
    "energy_l2",
    "centroid",
]


@given(data=arms(), omega=st.sampled_from(CONTINUOUS_ROTATION_INVARIANT))
def test_invariant_to_a_common_rotation(data, omega):
    # Histogram (jsd) and sup (ks) statistics jump when rounding moves a value across a bin
    # edge or breaks a tie, and L1 is not rotation invariant: those are left out.
    a, b = data
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(a.shape[1], a.shape[1])))
    r = permutation_test(a, b, omega=omega, n_permutations=1, rng=0)
    rotated = permutation_test(a @ q, b @ q, omega=omega, n_permutations=1, rng=0)
    # energy is a square root: rounding of order 1e-16 in the integral shows as ~1e-8.
    assert rotated.statistic == pytest.approx(r.statistic, rel=1e-7, abs=1e-7)


@given(
    p=st.lists(st.floats(0, 1), min_size=1, max_size=30),
    method=st.sampled_from(["bonferroni", "holm", "bh", "by"]),
)
def test_adjusted_p_values_are_valid_and_no_smaller(p, method):
    result = correct(p, method=method)
    assert np.all(result.adjusted >= np.asarray(p) - 1e-15)
    assert np.all(result.adjusted <= 1.0)
    order = np.argsort(p, kind="stable")
    assert np.all(np.diff(result.adjusted[order]) >= -1e-15)  # monotone in p
