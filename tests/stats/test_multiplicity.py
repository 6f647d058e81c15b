"""Corrections against statsmodels and hand-computed (R p.adjust) values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from dbpa.stats import (
    CORRECTIONS,
    PermutationBudgetWarning,
    correct,
    loosest_threshold,
    min_permutations,
    rejected_together,
)

STATSMODELS = {"bonferroni": "bonferroni", "holm": "holm", "bh": "fdr_bh", "by": "fdr_by"}


@pytest.mark.parametrize("method", list(CORRECTIONS))
@pytest.mark.parametrize("seed", range(5))
def test_matches_statsmodels(method, seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 40))
    p = np.concatenate([rng.uniform(0, 0.02, m // 3), rng.uniform(size=m - m // 3)])
    p[rng.integers(0, m)] = p[0]  # a tie
    reject, adjusted, _, _ = multipletests(p, alpha=0.05, method=STATSMODELS[method])
    result = correct(p, method=method, alpha=0.05)
    np.testing.assert_allclose(result.adjusted, adjusted, rtol=1e-12)
    np.testing.assert_array_equal(result.reject, reject)
    np.testing.assert_array_equal(result.p_values, p)


# R: p.adjust(c(0.01, 0.02, 0.03, 0.04, 0.05), method=...), worked by hand.
R_P = [0.01, 0.02, 0.03, 0.04, 0.05]
R_ADJUSTED = {
    "bonferroni": [0.05, 0.10, 0.15, 0.20, 0.25],
    "holm": [0.05, 0.08, 0.09, 0.09, 0.09],
    "bh": [0.05, 0.05, 0.05, 0.05, 0.05],
    "by": [0.05 * 137 / 60] * 5,  # H_5 = 137/60
}


@pytest.mark.parametrize("method", list(R_ADJUSTED))
def test_matches_r_reference_values(method):
    np.testing.assert_allclose(correct(R_P, method=method).adjusted, R_ADJUSTED[method], rtol=1e-12)


def test_order_of_input_is_kept():
    p = [0.04, 0.001, 0.5]
    result = correct(p, method="holm", alpha=0.05)
    np.testing.assert_allclose(result.adjusted, [0.08, 0.003, 0.5])
    np.testing.assert_array_equal(result.reject, [False, True, False])


def test_minimum_permutations_follow_m_over_alpha():
    assert min_permutations(100, 0.05, "bonferroni") == 1999
    assert min_permutations(100, 0.05, "holm") == 1999
    assert min_permutations(100, 0.05, "bh") == 1999
    assert min_permutations(1, 0.05) == 19
    assert min_permutations(10, 0.05, "by") == int(
        np.ceil(10 * sum(1 / i for i in range(1, 11)) / 0.05 - 1)
    )


def test_warns_when_no_rejection_is_possible():
    p = np.full(100, 1 / 1000)
    with pytest.warns(PermutationBudgetWarning, match=r"use B >= 1999"):
        result = correct(p, method="bonferroni", n_permutations=999)
    assert not result.reject.any()  # the warning told the truth


def test_no_warning_when_b_is_enough():
    p = np.r_[1 / 2000, np.ones(99)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = correct(p, method="bonferroni", n_permutations=1999)
    assert result.reject[0]
    assert result.min_permutations == 1999


def test_bh_over_1000_tests_at_b_999_rejects_20_tests_at_the_floor_and_does_not_warn():
    """The floor 1/(B+1) = 0.001 is above BH's lone threshold 0.05/1000 but passes its 20th
    step: 20 tests at the floor are all rejected, 19 are not."""
    for hits, rejected in ((20, 20), (19, 0)):
        p = np.r_[np.full(hits, 1 / 1000), np.ones(1000 - hits)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            result = correct(p, method="bh", n_permutations=999)
        assert int(result.reject.sum()) == rejected
    assert rejected_together(1 / 1000, 1000, 0.05, "bh") == 20


@pytest.mark.parametrize(
    ("method", "m", "expected"),
    [
        ("bonferroni", 8, 0.05 / 8),
        ("holm", 8, 0.05 / 8),
        ("bh", 8, 0.05),
        ("by", 3, 0.05 / (11 / 6)),
    ],
)
def test_the_loosest_threshold_is_the_last_step_that_can_pass(method, m, expected):
    assert loosest_threshold(m, 0.05, method) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("p", "method", "expected"),
    [
        (0.05 / 10, "holm", 1),
        (0.0051, "holm", None),
        (0.0051, "bonferroni", None),
        (0.0051, "bh", 2),
        (0.05, "bh", 10),
        (0.0501, "bh", None),
        (0.05 / (10 * 2.9289682539682538), "by", 1),
        (0.05 / 2.9289682539682538, "by", 10),
    ],
)
def test_tests_rejected_together_at_a_p_value_agree_with_the_correction(p, method, expected):
    """Checked against ``correct`` itself on j tests at p and the rest at 1."""
    assert rejected_together(p, 10, 0.05, method) == expected
    for j in range(1, 11):
        rejects = correct(np.r_[np.full(j, p), np.ones(10 - j)], method=method).reject.any()
        assert rejects == (expected is not None and j >= expected)
