"""Sequential audits: the sequential p-value, the design, and error rates under stopping."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from benchmarks._synthetic import answer_space, sample
from dbpa.analysis import MIN_BOOTSTRAP, AnalysisSpec, SequentialSpec
from dbpa.stats import (
    SequentialDesign,
    correct,
    effect_interval,
    equivalence_p_value,
    permutation_test,
    sequential_design,
    sequential_family,
    sequential_family_stops,
    sequential_min_permutations,
    sequential_p_value,
    sequential_stop,
    sequential_threshold,
    sequential_unreachable_looks,
)
from tests.stats.synthetic_effects import SCENARIOS, scenario, true_effect

ALPHA = 0.05
H10 = sum(1 / i for i in range(1, 11))
NULL_ARM, _ = SCENARIOS["null"]
ORIGINAL, SHIFTED = SCENARIOS["shift"]


def test_the_sequential_p_value_is_the_smallest_weighted_p_value():
    p, w = [0.3, 0.004, 0.02], [0.1, 0.1, 0.8]
    brute = min(1.0, *(pj / wj for pj, wj in zip(p, w, strict=True)))
    assert sequential_p_value(p, w) == pytest.approx(brute)
    assert sequential_p_value([0.9], [0.5]) == 1.0  # capped


def test_default_design_keeps_most_of_the_level_for_the_last_look():
    design = sequential_design(20)
    assert design == SequentialDesign(
        looks=(8, 12, 16, 20), weights=pytest.approx((0.05, 0.05, 0.05, 0.85)), futility=0.2
    )
    assert math.fsum(design.weights) == pytest.approx(1.0)
    assert sequential_design(8).looks == (8,)
    assert sequential_design(8).weights == (1.0,)


def test_the_permutations_every_look_needs():
    """B + 1 >= 1 / (w_min * alpha / m): at m=10, alpha=0.05, w=0.05 that is 3999."""
    design = sequential_design(20)
    assert sequential_min_permutations(design, 10, 0.05, "holm") == 3999
    assert 1 / (3999 + 1) <= 0.05 * 0.05 / 10 < 1 / 3999
    by = sequential_min_permutations(design, 10, 0.05, "by")
    assert by == math.ceil(sum(1 / i for i in range(1, 11)) * 4000) - 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k_max": 1}, "k_max: must be >= 2"),
        ({"first": 30}, "first: 30 is above k_max (20)"),
        ({"n_looks": 0}, "n_looks: must be >= 1"),
        ({"final_weight": 0.0}, "final_weight: must be in (0, 1]"),
        ({"futility": 1.5}, "futility"),
    ],
)
def test_design_validation_names_the_argument(kwargs, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        sequential_design(**{"k_max": 20, **kwargs})


@pytest.mark.parametrize(
    ("p_values", "weights", "message"),
    [
        ([], [], "p_values: one per look taken"),
        ([0.1, 0.2], [0.5], "weights: one per look taken (2)"),
        ([1.2], [1.0], "p_values: must be in [0, 1]"),
        ([0.1], [0.0], "weights: must be positive"),
    ],
)
def test_p_value_validation_names_the_argument(p_values, weights, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        sequential_p_value(p_values, weights)


def test_family_validation_names_the_argument():
    design = sequential_design(10, first=6)
    ok = np.ones((10, 4))
    with pytest.raises(ValueError, match=r"^design: expected a SequentialDesign"):
        sequential_family(ok, [ok], "design")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^original: needs k_max = 10 rows"):
        sequential_family(ok[:5], [ok], design)
    with pytest.raises(ValueError, match=r"^perturbed: arm 0 needs k_max = 10 rows of 4 columns"):
        sequential_family(ok, [np.ones((10, 3))], design)
    with pytest.raises(ValueError, match=r"^perturbed: needs at least one perturbed arm"):
        sequential_family(ok, [], design)
    with pytest.raises(ValueError, match=r"^method: unknown"):
        sequential_family(ok, [ok], design, method="sidak")


def test_a_large_effect_stops_at_the_first_look_and_a_null_for_futility_or_at_the_end():
    rng = np.random.default_rng(3)
    space = answer_space(rng)
    design = sequential_design(20)
    original = sample(rng, space, ORIGINAL, 20)
    big = sample(rng, space, SHIFTED.__class__(**{**SHIFTED.__dict__, "drift": 1.0}), 20)
    null = sample(rng, space, ORIGINAL, 20)
    family = sequential_family(original, [big, null], design, n_permutations=4999, rng=rng)
    first, second = family.tests
    assert (first.reason, first.stopped_at) == ("changed", 8)
    assert second.reason in {"futile", "k_max"}
    assert family.reject.tolist() == [True, False]
    assert family.calls == max(first.stopped_at, second.stopped_at) + 8 + second.stopped_at
    assert family.fixed_calls == 3 * 20
    # each look is the permutation test of the first k outputs (same seed, same p-value)
    again = permutation_test(
        original[:8], big[:8], omega="energy_cosine", n_permutations=1999, rng=0
    )
    assert again.p_value <= first.p_values[0] * 3  # both at the floor of 1/(B+1)


def _family_errors(
    method: str, families: int, m: int, effects: int, seed: int
) -> tuple[float, float]:
    """(share of families with a false rejection, mean false discovery proportion) over
    ``families`` sequential families of ``m`` tests, the first ``effects`` of them shifted."""
    rng = np.random.default_rng(seed)
    design = sequential_design(20)
    any_false = fdp = 0.0
    for _ in range(families):
        space = answer_space(rng)
        original = sample(rng, space, ORIGINAL, 20)
        arms = [sample(rng, space, SHIFTED if i < effects else ORIGINAL, 20) for i in range(m)]
        family = sequential_family(
            original, arms, design, method=method, n_permutations=199, rng=rng
        )
        false = int(family.reject[effects:].sum())
        any_false += false > 0
        fdp += false / max(int(family.reject.sum()), 1)
    return any_false / families, fdp / families


def _assert_at_most_alpha(rate: float, n: int, what: str) -> None:
    se = math.sqrt(ALPHA * (1 - ALPHA) / n)
    assert rate <= ALPHA + 2.5 * se, f"{what}: {rate:.3f} over {n} families"


def test_family_wise_error_under_stopping_fast():
    """A null family of 4 with Holm, 300 families (a few seconds)."""
    fwer, _ = _family_errors("holm", 300, 4, 0, seed=1)
    _assert_at_most_alpha(fwer, 300, "holm FWER")


@pytest.mark.slow
@pytest.mark.parametrize("method", ["holm", "bonferroni", "bh", "by"])
def test_error_rates_under_stopping(method):
    """400 families of 6 per method (about 9 s each on the shared machine): null families
    keep the family-wise error within alpha + 2.5 SE; families with 3 shifted perturbations
    keep it too for Holm and Bonferroni, and the false discovery rate for BH and BY."""
    null_fwer, _ = _family_errors(method, 400, 6, 0, seed=10)
    fwer, fdr = _family_errors(method, 400, 6, 3, seed=20)
    print(f"{method}: null FWER {null_fwer:.3f}; 3 of 6 shifted: FWER {fwer:.3f}, FDR {fdr:.3f}")
    _assert_at_most_alpha(null_fwer, 400, f"{method} FWER, null family")
    if method in {"holm", "bonferroni"}:
        _assert_at_most_alpha(fwer, 400, f"{method} FWER, 3 of 6 shifted")
    else:
        _assert_at_most_alpha(fdr, 400, f"{method} FDR, 3 of 6 shifted")


@pytest.mark.slow
def test_peeking_at_a_fixed_k_p_value_is_invalid():
    """Why the weights: stopping at the first look whose plain p-value is <= alpha rejects a
    single null test far more often than alpha (300 tests, looks at 8, 12, 16, 20)."""
    rng = np.random.default_rng(30)
    looks, rejected = (8, 12, 16, 20), 0
    for _ in range(300):
        space = answer_space(rng)
        a, b = sample(rng, space, ORIGINAL, 20), sample(rng, space, ORIGINAL, 20)
        rejected += any(
            permutation_test(
                a[:k], b[:k], omega="energy_cosine", n_permutations=199, rng=rng
            ).p_value
            <= ALPHA
            for k in looks
        )
    assert rejected / 300 > ALPHA + 2.5 * math.sqrt(ALPHA * (1 - ALPHA) / 300)


def test_the_stopping_rule_look_by_look():
    design = sequential_design(20)  # looks 8, 12, 16, 20; weights 0.05 x3, 0.85
    threshold = 0.005
    assert sequential_stop([0.3], design, threshold).reason == "futile"  # > 0.2 at an interim
    assert sequential_stop([0.1], design, threshold) is None  # open
    changed = sequential_stop([0.1, 0.0002], design, threshold)  # 0.0002 / 0.05 = 0.004
    assert (changed.reason, changed.stopped_at) == ("changed", 12)
    assert changed.p_value == pytest.approx(0.004)
    assert sequential_stop([0.1, 0.0003], design, threshold) is None  # 0.006 > 0.005
    last = sequential_stop([0.1, 0.1, 0.1, 0.9], design, threshold)
    assert (last.reason, last.stopped_at) == ("k_max", 20)  # futility is for interim looks
    assert last.p_values == (0.1, 0.1, 0.1, 0.9)
    assert sequential_stop([0.1, 0.1, 0.1, 0.004], design, threshold).reason == "changed"
    no_futility = sequential_design(20, futility=None)
    assert sequential_stop([0.9], no_futility, threshold) is None


def test_the_stop_threshold_is_the_familys_lone_threshold():
    assert sequential_threshold(10, 0.05, "holm") == pytest.approx(0.005)
    assert sequential_threshold(10, 0.05, "bh") == pytest.approx(0.005)
    assert sequential_threshold(10, 0.05, "by") == pytest.approx(0.005 / H10)


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        ("holm", [0.05 / 10, 0.05 / 9, 0.05 / 8]),
        ("bh", [0.005, 0.010, 0.015]),
        ("by", [0.005 / H10, 0.010 / H10, 0.015 / H10]),
        ("bonferroni", [0.005, 0.005, 0.005]),
    ],
)
def test_the_stop_threshold_steps_with_the_tests_already_changed(method, expected):
    got = [sequential_threshold(10, 0.05, method, changed) for changed in range(3)]
    assert got == pytest.approx(expected)


def test_a_look_stops_in_order_of_sequential_p_values_stepping_the_threshold():
    """Holm, m = 3, a first look of weight 1: 0.02 stops only after 0.01 (<= 0.05/3) has
    made the threshold 0.05/2; 0.06 stays open (above the next threshold, 0.05)."""
    design = SequentialDesign(looks=(8, 20), weights=(1.0, 1e-9), futility=None)
    stops = sequential_family_stops(
        [[0.02], [0.06], [0.01]], design, m=3, alpha=ALPHA, method="holm"
    )
    assert [s.reason if s else None for s in stops] == ["changed", None, "changed"]
    alone = sequential_family_stops([[0.02]], design, m=3, alpha=ALPHA, method="holm")
    assert alone == [None]  # without another change first, 0.02 > 0.05/3
    after = sequential_family_stops([[0.02]], design, m=3, alpha=ALPHA, method="holm", changed=1)
    assert after[0].reason == "changed"


@pytest.mark.parametrize("method", ["holm", "bonferroni", "bh", "by"])
def test_every_test_stopped_as_changed_is_rejected_by_the_final_correction(method):
    """Random families and looks: the step thresholds never stop a test the end would keep."""
    rng = np.random.default_rng(3)
    design = sequential_design(20)
    stopped_changed = 0
    for _ in range(300):
        m = int(rng.integers(1, 9))
        # p-values from near 0 to 1, some tiny, at each of the 4 looks
        p = np.minimum(1.0, 10.0 ** rng.uniform(-5, 0, size=(m, len(design.looks))))
        tests: list = [None] * m
        for j in range(len(design.looks)):
            open_tests = [i for i in range(m) if tests[i] is None]
            changed = sum(t is not None and t.reason == "changed" for t in tests)
            found = sequential_family_stops(
                [list(p[i, : j + 1]) for i in open_tests], design, m=m, alpha=ALPHA,
                method=method, changed=changed,
            )  # fmt: skip
            for i, stop in zip(open_tests, found, strict=True):
                tests[i] = stop
        reject = correct([t.p_value for t in tests], method=method, alpha=ALPHA).reject
        for t, r in zip(tests, reject, strict=True):
            if t.reason == "changed":
                stopped_changed += 1
                assert r, (method, m, [t.p_value for t in tests])
    assert stopped_changed > 100  # the property was exercised


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda d: sequential_threshold(3, 0.05, "holm", 3), "changed: must be below m = 3"),
        (lambda d: sequential_threshold(3, 0.05, "holm", -1), "changed: must be >= 0"),
        (lambda d: sequential_threshold(3, 0.05, "holm", True), "changed: must be an integer"),
        (
            lambda d: sequential_family_stops(
                [[0.1], [0.1]], d, m=2, alpha=0.05, method="holm", changed=1
            ),
            "histories: 2 open tests and 1 changed exceed m = 2",
        ),
        (
            lambda d: sequential_family_stops([[0.1]], "d", m=2, alpha=0.05, method="holm"),
            "design: expected a SequentialDesign",
        ),
        (lambda d: sequential_stop([], d, 0.01), "p_values: one per look taken (1 to 4), got 0"),
        (lambda d: sequential_stop([0.1] * 5, d, 0.01), "p_values: one per look taken"),
        (lambda d: sequential_stop([0.1], "d", 0.01), "design: expected a SequentialDesign"),
        (lambda d: sequential_stop([0.1], d, 0.0), "threshold"),
        (lambda d: sequential_threshold(0, 0.05, "holm"), "m: must be >= 1"),
        (lambda d: sequential_threshold(3, 0.05, "sidak"), "method: unknown"),
    ],
)
def test_stop_validation_names_the_argument(call, message):
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        call(sequential_design(20))


def _sequential_equivalences(name: str, m: int, families: int, seed: int) -> int:
    """Families of ``m`` perturbations whose true effect equals the margin that declare any
    equivalence, with every look's equivalence p-value combined as the flow does
    (``min_j p_eq,j / w_j``, then the family's Holm correction). Every look is taken: the
    stopped test's looks are a prefix, so this is the worst case of any stopping rule."""
    rng = np.random.default_rng(seed)
    s, margin = scenario(name), true_effect(name)
    spec = SequentialSpec()
    design = spec.design(20, equivalence=True)
    # the bootstrap of a look's interval, as the flow sizes it (dbpa.analysis.interval_of_test)
    analysis = spec.look_analysis(AnalysisSpec(alpha=ALPHA, correction="holm"), 20, m)
    n_bootstrap = max(analysis.n_permutations, MIN_BOOTSTRAP)
    count = 0
    for _ in range(families):
        p = []
        for _ in range(m):
            a, b = s.draw(rng, design.k_max)
            p_eq = [
                equivalence_p_value(
                    effect_interval(a[:k], b[:k], n_bootstrap=n_bootstrap, rng=rng), margin
                )
                for k in design.looks
            ]
            p.append(sequential_p_value(p_eq, design.weights))
        count += bool(correct(p, method="holm", alpha=ALPHA).reject.any())
    return count


def test_no_sequential_equivalence_at_the_margin_fast():
    """True effect = margin (shift): P(equivalent over the looks) <= alpha + 2.5 SE."""
    count = _sequential_equivalences("shift", 1, 200, seed=30)
    _assert_at_most_alpha(count / 200, 200, "sequential equivalence at the margin")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["shift", "spread", "mixture"])
def test_no_sequential_equivalence_at_the_margin(name):
    """400 single tests and 100 Holm families of 4, every perturbation at the margin, looks
    at 8, 12, 16, 20 (about 25 s per shape; measured 0.000, 0.000, 0.028 single, 0.000 for
    the families: conservative, as the fixed-k interval is)."""
    single = _sequential_equivalences(name, 1, 400, seed=31)
    family = _sequential_equivalences(name, 4, 100, seed=32)
    print(f"{name}: P(equivalent | theta = margin) {single / 400:.3f}, "
          f"Holm family of 4: {family / 100:.3f}")  # fmt: skip
    _assert_at_most_alpha(single / 400, 400, f"{name}: single test")
    _assert_at_most_alpha(family / 100, 100, f"{name}: Holm family of 4")


def test_looks_where_no_test_can_stop_as_changed():
    """m = 100, Holm: the first look's level is 0.05 * 0.05/100 = 2.5e-5, below 1/C(16, 8) =
    7.8e-5 (8 outputs per arm); at 12, 1/C(24, 12) = 3.7e-7 is below it. m = 10: 2.5e-4."""
    design = sequential_design(20)
    assert sequential_unreachable_looks(design, 100, ALPHA, "holm") == (8,)
    assert sequential_unreachable_looks(design, 10, ALPHA, "holm") == ()
    small = sequential_design(6, first=3, n_looks=2)  # looks at 3 and 6: 1/20 and 1/924
    assert sequential_unreachable_looks(small, 1, ALPHA, "holm") == (3,)
    with pytest.raises(ValueError, match=r"^design: expected a SequentialDesign"):
        sequential_unreachable_looks("d", 1, ALPHA, "holm")
