"""The difference between the effects of one perturbation in two independent runs.

Each run's effect (the energy distance of ``_interval``) comes with bootstrap replicates
drawn within its own arms. When the two runs sampled independently (two models, two dates,
two configs with arms of their own), a draw of each run's replicates is a draw of the
bootstrap distribution of the two estimates together, so the differences of replicates
paired by index are bootstrap replicates of ``theta_a - theta_b``: the interval is their
percentile interval (Efron & Tibshirani 1993, ch. 13). Runs that share an arm (the same
original outputs) have positively correlated estimates in general; treating them as
independent then overstates the difference's variance: the interval is conservative.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ._validation import as_finite, as_probability

__all__ = ["EffectDifference", "effect_difference"]

MIN_REPLICATES = 100
"""Fewest replicates of each run the interval uses."""


@dataclass(frozen=True)
class EffectDifference:
    """``theta_a - theta_b``: the difference of one perturbation's effect in two runs."""

    estimate: float
    """Run a's estimate minus run b's."""
    low: float
    """Lower bound (percentile bootstrap; not clipped: the difference can be negative)."""
    high: float
    confidence: float
    """Two-sided level of ``[low, high]``."""
    n_bootstrap: int
    """Replicate pairs used (the smaller of the two runs' counts)."""


def _replicates(values: ArrayLike, name: str) -> np.ndarray:
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: not a sequence of numbers") from None
    if arr.ndim != 1 or arr.size < MIN_REPLICATES:
        raise ValueError(
            f"{name}: needs a flat sequence of at least {MIN_REPLICATES} bootstrap replicates, "
            f"got shape {arr.shape}"
        )
    if not np.isfinite(arr).all():
        raise ValueError(f"{name}: replicates must be finite numbers")
    return arr


def effect_difference(
    estimate_a: float,
    replicates_a: ArrayLike,
    estimate_b: float,
    replicates_b: ArrayLike,
    *,
    confidence: float = 0.90,
) -> EffectDifference:
    """Estimate and percentile interval of ``theta_a - theta_b`` from each run's effect
    estimate and bootstrap replicates (``EffectInterval.estimate`` and ``.bootstrap``)."""
    est_a, est_b = as_finite(estimate_a, "estimate_a"), as_finite(estimate_b, "estimate_b")
    rep_a = _replicates(replicates_a, "replicates_a")
    rep_b = _replicates(replicates_b, "replicates_b")
    level = as_probability(confidence, "confidence")
    n = min(rep_a.size, rep_b.size)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(rep_a[:n] - rep_b[:n], [tail, 1.0 - tail])
    return EffectDifference(
        estimate=est_a - est_b, low=float(low), high=float(high), confidence=level, n_bootstrap=n
    )
