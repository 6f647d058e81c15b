"""Sequential audits: the design, the weighted combination of per-look p-values (equivalence),
the family's validation, and why peeking needs a design."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from benchmarks._synthetic import answer_space, sample
from dbpa.stats import (
    SequentialDesign,
    permutation_test,
    sequential_design,
    sequential_p_value,
    sequential_unreachable_looks,
)
from tests.stats.simulations import sequential_equivalences
from tests.stats.synthetic_effects import SCENARIOS
from tests.support.rates import Rate, assert_rates

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


def test_peeking_at_a_fixed_k_p_value_is_invalid():
    """Why the weights: stopping at the first look whose plain p-value is <= alpha rejects a
    single null test far more often than alpha (looks at 8, 12, 16, 20): checked
    sequentially against a rate of 2 alpha, failed if it is alpha (probability 0.9)."""
    rng = np.random.default_rng(30)
    looks = (8, 12, 16, 20)

    def peeked():
        while True:
            space = answer_space(rng)
            a, b = sample(rng, space, ORIGINAL, 20), sample(rng, space, ORIGINAL, 20)
            yield any(
                permutation_test(
                    a[:k], b[:k], omega="energy_cosine", n_permutations=199, rng=rng
                ).p_value
                <= ALPHA
                for k in looks
            )

    assert_rates(peeked(), Rate(2 * ALPHA, "peeking at every look", ratio=0.5))


def test_no_sequential_equivalence_at_the_margin():
    """True effect = margin on a reweighted mixture of answer types, looks at 8, 12, 16, 20,
    every look taken: P(equivalent over the looks) <= alpha, checked sequentially (failed at
    1.5 alpha with probability 0.9). An audit costs four intervals with the tilted guard at
    B = 2000 (0.25 s), so the shapes whose rate is near alpha (few repeated answers changing
    shares: 0.044-0.058, about 450 audits for the check) and the Holm families of 4 are
    measured by ``python -m benchmarks.bench_rates --study sequential`` (400 single tests and 100
    families per shape, as the README quotes them); the family's correction is the fixed
    design's (``test_equivalence.py`` checks a Holm family of 4 at the margin)."""
    assert_rates(sequential_equivalences("mixture", 1, seed=31), Rate(ALPHA, "mixture"))


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
