"""The monitor benchmark's price of validity at every tick (``benchmarks.bench_monitor``): the
alarm line of the process that finds a re-weighting, in each form, and the ideal ratio (a
known-alternative likelihood ratio's median first passage of that line over the samples of
a fixed z-test at 0.05 with power 1/2) against simulated first passages.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from benchmarks.bench_monitor import alarm_line, ideal_ratio

SHIFT = 0.1
"""Mean shift of the simulated observations, in standard deviations."""
PATHS = 2000
STEPS = 4000


@pytest.mark.parametrize("line", [20.0, 133.0, 3650.0])
def test_the_ideal_ratio_is_the_simulated_first_passage(line):
    """Median samples until the log likelihood ratio of N(SHIFT, 1) against N(0, 1) reaches
    log(line), over the z-test's z_0.95^2 / SHIFT^2: within 6% of ``ideal_ratio`` (the
    median's standard error is below 2% at 2,000 paths; checking at whole samples delays
    the passage by under 1%)."""
    rng = np.random.default_rng(int(line))
    steps = SHIFT * rng.normal(SHIFT, 1.0, size=(PATHS, STEPS)) - SHIFT**2 / 2.0
    reached = np.cumsum(steps, axis=1) >= math.log(line)
    ever = reached.any(axis=1)
    assert ever.mean() > 0.9  # the median is of paths that passed; the others count as more
    samples = np.where(ever, np.argmax(reached, axis=1) + 1, STEPS + 1)
    fixed = norm.ppf(0.95) ** 2 / SHIFT**2
    assert float(np.median(samples)) / fixed == pytest.approx(ideal_ratio(line, 0.05), rel=0.06)


def test_the_ideal_ratio_grows_with_the_line():
    """The test form's one process (line 20) against the detector's (line 3,650) and the
    default's tick process in each form (weight 0.15)."""
    ratios = [ideal_ratio(line, 0.05) for line in (20.0, 1 / (0.15 * 0.05), 3650.0, 48_667.0)]
    assert ratios == sorted(ratios)
    assert ratios[0] < 2.0 < ratios[1]


@pytest.mark.parametrize(
    ("weights", "form", "alpha", "line"),
    [
        ((1.0,), "test", 0.05, 20.0),
        ((1.0,), "detect", 1 / 3650, 3650.0),
        ((0.5, 0.5), "test", 0.05, 40.0),
        ((0.25,) * 4, "detect", 1 / 3650, 8 * 3650.0),
        ((0.1, 0.6, 0.15, 0.15), "test", 0.05, 1 / (0.15 * 0.05)),
        ((0.1, 0.6, 0.15, 0.15), "detect", 1 / 3650, 2 * 3650 / 0.15),
    ],
)
def test_the_alarm_line_is_the_last_process_alone(weights, form, alpha, line):
    """The last process alone alarms at 1 / (w alpha) in the test form, and at 2 / (w alpha)
    in the detector form with several processes (Doob's inequality shares the run length)."""
    assert alarm_line(weights, form, alpha) == pytest.approx(line)
