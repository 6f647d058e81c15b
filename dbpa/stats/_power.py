"""How many outputs per arm: the paper's normal approximation and a simulation from pilots."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ._permutation import permutation_test
from ._similarity import pool_arms
from ._validation import RngLike, as_positive_int, as_probability, as_rng


def sample_size(effect: float, *, alpha: float = 0.05, power: float = 0.8, m: int = 1) -> int:
    """Outputs per arm by the paper's normal approximation.

    k = ceil(((z_{1 - alpha/(2m)} + z_{power}) / effect)^2), with ``effect`` a
    standardized effect (shift in units of the per-output standard deviation) and m
    the family size (Bonferroni). It is a planning guide: ``simulate_power`` measures
    the power of the actual permutation test from pilot outputs.
    """
    from scipy.stats import norm

    try:
        d = float(effect)
    except (TypeError, ValueError):
        raise ValueError(f"effect: must be a positive number, got {effect!r}") from None
    if not (math.isfinite(d) and d > 0):
        raise ValueError(f"effect: must be a positive number, got {effect!r}")
    alpha = as_probability(alpha, "alpha")
    power = as_probability(power, "power")
    m = as_positive_int(m, "m")
    z = float(norm.ppf(1.0 - alpha / (2 * m)) + norm.ppf(power))
    return max(2, math.ceil((z / d) ** 2))


@dataclass(frozen=True)
class PowerResult:
    """Estimated rejection rate of the permutation test at arm size k."""

    power: float
    """Share of simulated audits that rejected at ``alpha``."""
    ci_low: float
    """Lower end of the Clopper-Pearson interval for the power."""
    ci_high: float
    """Upper end of the interval."""
    confidence: float
    rejections: int
    n_simulations: int
    k: int
    """Outputs per arm in each simulated audit."""
    alpha: float
    omega: str
    replace: bool
    """Whether arms were drawn from the pilots with replacement."""


def simulate_power(
    a: ArrayLike,
    b: ArrayLike,
    *,
    k: int,
    alpha: float = 0.05,
    n_simulations: int = 200,
    n_permutations: int = 200,
    similarity: str = "cosine",
    omega: str = "jsd",
    replace: bool | None = None,
    confidence: float = 0.95,
    rng: RngLike = None,
    **omega_options: Any,
) -> PowerResult:
    """Power of the test at ``k`` outputs per arm, resampling pilot embeddings.

    Each simulation draws k rows from pilot ``a`` and k from pilot ``b`` (without
    replacement when the pilots are large enough, unless ``replace`` says otherwise),
    runs ``permutation_test`` and records whether p <= alpha. With ``a`` and ``b``
    from the same arm it estimates the type-I error instead.
    """
    from scipy.stats import binomtest

    pool_arms(a, b)
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    k = as_positive_int(k, "k", minimum=2)
    alpha = as_probability(alpha, "alpha")
    n_sims = as_positive_int(n_simulations, "n_simulations")
    confidence = as_probability(confidence, "confidence")
    if replace is None:
        replace = k > min(len(x), len(y))
    elif not replace and k > min(len(x), len(y)):
        raise ValueError(
            f"k: {k} exceeds the smaller pilot ({min(len(x), len(y))} rows); "
            "use replace=True or more pilot outputs"
        )
    gen = as_rng(rng)
    rejections = 0
    for _ in range(n_sims):
        xa = x[gen.choice(len(x), size=k, replace=replace)]
        yb = y[gen.choice(len(y), size=k, replace=replace)]
        result = permutation_test(
            xa,
            yb,
            similarity=similarity,
            omega=omega,
            n_permutations=n_permutations,
            rng=gen,
            **omega_options,
        )
        rejections += result.p_value <= alpha
    ci = binomtest(rejections, n_sims).proportion_ci(confidence_level=confidence)
    return PowerResult(
        power=rejections / n_sims,
        ci_low=float(ci.low),
        ci_high=float(ci.high),
        confidence=confidence,
        rejections=rejections,
        n_simulations=n_sims,
        k=k,
        alpha=alpha,
        omega=omega,
        replace=bool(replace),
    )
