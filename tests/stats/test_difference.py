"""The difference of one perturbation's effect between two independent runs."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import numpy as np
import pytest

from dbpa.stats import EffectDifference, effect_difference
from tests.stats.simulations import boundary_only_interval
from tests.stats.synthetic_effects import scenario, true_effect
from tests.support.rates import Rate, assert_rates

CONFIDENCE = 0.90


def test_the_interval_is_the_percentile_interval_of_paired_replicate_differences():
    rng = np.random.default_rng(1)
    a, b = rng.normal(0.3, 0.05, 1000), rng.normal(0.1, 0.04, 800)
    d = effect_difference(0.31, a, 0.09, b, confidence=0.8)
    assert d == EffectDifference(
        estimate=pytest.approx(0.22),
        low=pytest.approx(np.quantile(a[:800] - b, 0.1)),
        high=pytest.approx(np.quantile(a[:800] - b, 0.9)),
        confidence=0.8,
        n_bootstrap=800,
    )


def test_a_run_against_itself_differs_by_exactly_zero():
    replicates = np.random.default_rng(2).normal(0.2, 0.05, 500)
    d = effect_difference(0.2, replicates, 0.2, replicates)
    assert (d.estimate, d.low, d.high) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"estimate_a": "x"}, "estimate_a: must be a number"),
        ({"estimate_b": math.inf}, "estimate_b: must be finite"),
        ({"replicates_a": np.ones(50)}, "replicates_a: needs a flat sequence of at least 100"),
        ({"replicates_b": np.ones((10, 20))}, "replicates_b: needs a flat sequence"),
        ({"replicates_b": [math.nan] * 200}, "replicates_b: replicates must be finite"),
        ({"replicates_a": ["a"] * 200}, "replicates_a: not a sequence of numbers"),
        ({"confidence": 1.5}, "confidence"),
    ],
)
def test_validation_names_the_argument(kwargs, message):
    args = {
        "estimate_a": 0.1,
        "replicates_a": np.zeros(200),
        "estimate_b": 0.0,
        "replicates_b": np.zeros(200),
        **kwargs,
    }
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        effect_difference(**args)


def _misses(first: str, second: str, k: int, seed: int) -> Iterator[bool]:
    """Whether each interval of (first's effect - second's) misses the true difference, each
    run drawn independently. Each run's interval is ``boundary_only_interval`` (B = 500):
    the estimate and bootstrap replicates ``effect_interval`` gives (pinned in
    test_prompt_sets.py), without its bounds, which the difference does not read."""
    truth = max(true_effect(first), 0.0) - max(true_effect(second), 0.0)
    rng = np.random.default_rng(seed)
    scenarios = [scenario(first), scenario(second)]
    while True:
        runs = [boundary_only_interval(*s.draw(rng, k), 500, rng) for s in scenarios]
        d = effect_difference(
            runs[0].estimate, runs[0].bootstrap, runs[1].estimate, runs[1].bootstrap
        )
        yield not d.low <= truth <= d.high


def test_coverage_fast():
    """Shift against mixture at k = 20: misses at most 1 - CONFIDENCE, checked sequentially
    (``tests/support/rates.py``: failed at 1.5 x that with probability 0.9)."""
    assert_rates(_misses("shift", "mixture", 20, 11), Rate(1 - CONFIDENCE, "shift - mixture"))


@pytest.mark.parametrize("k", [10, 40])
@pytest.mark.parametrize(("first", "second"), [("shift", "spread"), ("mixture", "null")])
def test_coverage(first, second, k):
    """Misses at most 1 - CONFIDENCE, checked sequentially (like each run's own interval, it
    is conservative: a few dozen pairs of runs decide)."""
    misses = _misses(first, second, k, 100 + k)
    assert_rates(misses, Rate(1 - CONFIDENCE, f"{first} - {second}, k={k}"))
