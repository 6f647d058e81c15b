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
    share: float = 1.0
    """Share of perturbed outputs drawn from pilot b (the rest from pilot a)."""


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
    replace: bool = False,
    confidence: float = 0.95,
    share: float = 1.0,
    rng: RngLike = None,
    **omega_options: Any,
) -> PowerResult:
    """Power of the test at ``k`` outputs per arm, resampling pilot embeddings.

    Each simulation draws k rows from pilot ``a`` and k from pilot ``b`` without
    replacement, runs ``permutation_test`` and records whether p <= alpha. With ``a`` and
    ``b`` from the same arm it estimates the type-I error instead.

    A k beyond a pilot is an error, not a quiet switch to drawing with replacement: drawn
    with replacement, each arm repeats rows of its own finite pilot, and the test then tells
    two pilots of one population apart (``plan_k``'s docstring has the measurement).
    ``replace=True`` asks for it explicitly (e.g. when the pilots are the populations).

    ``share`` < 1 weakens the pilot's effect: each perturbed output comes from pilot
    ``b`` with probability ``share`` and otherwise from pilot ``a`` (drawn together with
    the original arm, so without replacement no row is in both arms): a change in that
    share of the outputs.
    """
    from scipy.stats import binomtest

    pool_arms(a, b)
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    k = as_positive_int(k, "k", minimum=2)
    alpha = as_probability(alpha, "alpha")
    n_sims = as_positive_int(n_simulations, "n_simulations")
    confidence = as_probability(confidence, "confidence")
    share = _as_share(share)
    # Rows of pilot a one simulation may need: k, and up to k more when share < 1.
    need_a = k if share == 1.0 else 2 * k
    replace = bool(replace)
    if not replace and k > min(len(x), len(y)):
        raise ValueError(
            f"k: {k} exceeds the smaller pilot ({min(len(x), len(y))} rows), and arms are "
            "drawn without replacement; use more pilot outputs (or replace=True, which makes "
            "two pilots of one population look different)"
        )
    if not replace and need_a > len(x):
        raise ValueError(
            f"k: with share < 1 a simulation draws up to 2k = {need_a} rows of pilot a, which "
            f"has {len(x)}; use replace=True or more pilot outputs"
        )
    gen = as_rng(rng)
    rejections = 0
    for _ in range(n_sims):
        if share == 1.0:
            xa = x[gen.choice(len(x), size=k, replace=replace)]
            yb = y[gen.choice(len(y), size=k, replace=replace)]
        else:
            unchanged = gen.random(k) >= share
            rows_a = gen.choice(len(x), size=k + int(unchanged.sum()), replace=replace)
            xa = x[rows_a[:k]]
            yb = y[gen.choice(len(y), size=k, replace=replace)]
            yb[unchanged] = x[rows_a[k:]]
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
        replace=replace,
        share=share,
    )


def _as_share(value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"share: must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < v <= 1.0:
        raise ValueError(f"share: must be in (0, 1], got {value!r}")
    return v
