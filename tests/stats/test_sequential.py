"""Sequential audits: the design, the weighted combination of per-look p-values (equivalence),
the family's validation, and why peeking needs a design."""

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
    sequential_p_value,
    sequential_unreachable_looks,
)
from tests.stats.synthetic_effects import SCENARIOS, scenario, true_effect

ALPHA = 0.05
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
        looks=(8, 12, 16, 20), weights=pytest.approx((0.1, 0.1, 0.1, 0.7)), futility=0.2
    )
    assert math.fsum(design.weights) == pytest.approx(1.0)
    assert sequential_design(8).looks == (8,)
    assert sequential_design(8).weights == (1.0,)


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


def _assert_at_most_alpha(rate: float, n: int, what: str) -> None:
    se = math.sqrt(ALPHA * (1 - ALPHA) / n)
    assert rate <= ALPHA + 2.5 * se, f"{what}: {rate:.3f} over {n}"


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
    n_bootstrap = max(AnalysisSpec().n_permutations, MIN_BOOTSTRAP)
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
    """True effect = margin where a few repeated answers change shares (the least favourable
    case): P(equivalent over the looks) <= alpha + 2.5 SE."""
    count = _sequential_equivalences("few_texts", 1, 200, seed=30)
    _assert_at_most_alpha(count / 200, 200, "sequential equivalence at the margin")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["shift", "spread", "mixture", "few_texts"])
def test_no_sequential_equivalence_at_the_margin(name):
    """400 single tests and 100 Holm families of 4, every perturbation at the margin, looks
    at 8, 12, 16, 20 (about 5 min per shape with the tilted guard, 15 s without)."""
    single = _sequential_equivalences(name, 1, 400, seed=31)
    family = _sequential_equivalences(name, 4, 100, seed=32)
    print(f"{name}: P(equivalent | theta = margin) {single / 400:.3f}, "
          f"Holm family of 4: {family / 100:.3f}")  # fmt: skip
    _assert_at_most_alpha(single / 400, 400, f"{name}: single test")
    _assert_at_most_alpha(family / 100, 100, f"{name}: Holm family of 4")


def test_looks_where_no_test_can_stop_as_changed():
    """m = 100, Holm: the first look's level is 0.1 * 0.05/100 = 5e-5, below 1/C(16, 8) =
    7.8e-5 (8 outputs per arm); at 12, 1/C(24, 12) = 3.7e-7 is below it. m = 10: 5e-4."""
    design = sequential_design(20)
    assert sequential_unreachable_looks(design, 100, ALPHA, "holm") == (8,)
    assert sequential_unreachable_looks(design, 10, ALPHA, "holm") == ()
    small = sequential_design(6, first=3, n_looks=2)  # looks at 3 and 6: 1/20 and 1/924
    assert sequential_unreachable_looks(small, 1, ALPHA, "holm") == (3,)
    with pytest.raises(ValueError, match=r"^design: expected a SequentialDesign"):
        sequential_unreachable_looks("d", 1, ALPHA, "holm")
