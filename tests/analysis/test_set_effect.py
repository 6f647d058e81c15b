"""The upper bound ``dbpa results`` shows for a pooled result: the mean effect's, on the side
of each prompt's 90% interval."""

from __future__ import annotations

import numpy as np

from dbpa.set_analysis import set_effect_upper
from dbpa.stats import effect_interval


def _interval(shift: float, seed: int):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(12, 4))
    b = rng.normal(size=(12, 4)) + shift
    return effect_interval(a, b, confidence=0.90, n_bootstrap=200, rng=seed)


def test_one_prompts_bound_is_its_intervals_high():
    interval = _interval(0.5, 1)
    assert set_effect_upper([interval], 0.90) == interval.high


def test_the_bound_of_a_set_covers_its_mean_estimate_and_needs_every_interval():
    intervals = [_interval(shift, seed) for seed, shift in enumerate((0.0, 0.5, 1.0))]
    upper = set_effect_upper(intervals, 0.90)
    assert upper is not None
    assert upper >= np.mean([iv.estimate for iv in intervals])
    assert set_effect_upper([*intervals, None], 0.90) is None
    assert set_effect_upper([], 0.90) is None
