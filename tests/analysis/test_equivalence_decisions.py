"""A family's decisions with an equivalence margin, as the audit flow takes them: the same
as ``dbpa.stats.decide_family`` (the reference), with untested perturbations at p = 1."""

from __future__ import annotations

import numpy as np
import pytest

from dbpa.analysis import (
    AnalysisSpec,
    EquivalenceSpec,
    Margin,
    decide_family,
    equivalence_p_values,
    family_margin,
    interval_of_test,
)
from dbpa.stats import calibrate_margin, effect_interval
from dbpa.stats import decide_family as reference_decisions


def _arm(rng: np.random.Generator, k: int, shift: float) -> np.ndarray:
    z = rng.normal(size=(k, 8))
    z[:, 0] += shift
    return z / np.linalg.norm(z, axis=1, keepdims=True)


@pytest.mark.parametrize("correction", ["holm", "bonferroni", "bh", "by"])
def test_decisions_match_the_library_rule(correction):
    rng = np.random.default_rng(4)
    analysis = AnalysisSpec(correction=correction, alpha=0.05)
    original = _arm(rng, 20, 0.0)
    shifts = [0.0, 0.0, 0.3, 3.0, 3.0, 0.1, 1.5]
    intervals = [
        effect_interval(original, _arm(rng, 20, s), confidence=0.9, n_bootstrap=999, rng=i)
        for i, s in enumerate(shifts)
    ]
    p_change = [0.4, 0.9, 0.03, 0.001, 0.002, 0.2, 0.5]
    ids = [f"p{i}" for i in range(len(shifts))]
    margin = 0.3
    equiv = equivalence_p_values(dict(zip(ids, intervals, strict=True)), margin)
    got = decide_family(dict(zip(ids, p_change, strict=True)), analysis, equiv, margin)
    want = reference_decisions(p_change, intervals, margin, alpha=0.05, method=correction)
    assert [d.decision for d in got] == list(want.decisions)
    np.testing.assert_allclose([d.adjusted_equivalence_p for d in got], want.equivalence.adjusted)
    np.testing.assert_allclose([d.adjusted_p for d in got], want.change.adjusted)
    assert {d.decision for d in got} == {"changed", "equivalent", "inconclusive"}  # all three


def test_untested_perturbations_are_inconclusive_and_count_as_p_one():
    analysis = AnalysisSpec(correction="bonferroni", alpha=0.05)
    got = decide_family({"a": 0.001, "b": None}, analysis, {"a": 0.001, "b": 1.0}, 0.1)
    assert [(d.decision, d.tested) for d in got] == [("equivalent", True), ("inconclusive", False)]
    assert got[0].adjusted_equivalence_p == pytest.approx(0.002)  # m = 2 with the untested one
    assert got[1].equivalence_p == 1.0


def test_without_equivalence_p_values_decisions_are_as_before():
    got = decide_family({"a": 0.001, "b": 0.5}, AnalysisSpec(correction="holm"))
    assert [(d.reject, d.decision, d.margin) for d in got] == [
        (True, None, None),
        (False, None, None),
    ]


def test_a_missing_interval_or_margin_gives_p_one():
    iv = effect_interval(np.eye(6), np.eye(6)[::-1], n_bootstrap=200, rng=0)
    assert equivalence_p_values({"a": None, "b": iv}, 0.5)["a"] == 1.0
    assert equivalence_p_values({"b": iv}, None) == {"b": 1.0}


def test_outputs_that_never_vary_show_no_margin_and_calibrate_one_of_0():
    """Outputs that never vary calibrate a margin of 0 (nothing lies below it), and no
    positive margin is shown on them either: arms whose samples show one text may still
    differ by any margin (the tilted guard, ``dbpa.stats._tilted``)."""
    same = np.tile(np.eye(6)[0], (6, 1))
    assert family_margin(EquivalenceSpec(margin="replicates"), [(same, same)]).value == 0.0
    iv = effect_interval(same, same, n_bootstrap=200, rng=0)
    assert equivalence_p_values({"a": iv}, 0.0) == {"a": 1.0}
    assert equivalence_p_values({"a": iv}, 0.5) == {"a": 1.0}


def test_family_margin_is_the_calibration_of_the_pairs():
    rng = np.random.default_rng(2)
    pairs = [(_arm(rng, 10, 0.0), _arm(rng, 10, 0.0)) for _ in range(6)]
    margin = family_margin(EquivalenceSpec(quantile=0.9), pairs)
    reference = calibrate_margin(pairs, omega="energy_l2", quantile=0.9)
    assert margin == Margin(
        value=reference.margin,
        source="replicates",
        quantile=0.9,
        multiple=1.0,
        distances=tuple(reference.distances),
        k=10,
    )
    assert margin.pairs == 6
    twice = family_margin(EquivalenceSpec(quantile=0.9, multiple=2.0), pairs)
    assert twice.value == 2.0 * reference.margin
    assert twice.multiple == 2.0
    assert family_margin(EquivalenceSpec(margin=0.3), pairs) == Margin(0.3, "fixed")
    assert family_margin(EquivalenceSpec(), []).value is None


def test_a_tests_interval_is_seeded_by_its_id_and_needs_five_outputs():
    rng = np.random.default_rng(1)
    a, b = _arm(rng, 8, 0.0), _arm(rng, 8, 1.0)
    analysis = AnalysisSpec(n_permutations=200)
    first, again = (interval_of_test("abc123", a, b, analysis) for _ in range(2))
    np.testing.assert_array_equal(first.bootstrap, again.bootstrap)
    assert first.n_bootstrap == 1000  # at least MIN_BOOTSTRAP
    assert first.confidence == 0.90
    assert interval_of_test("abc123", a[:4], b, analysis) is None
