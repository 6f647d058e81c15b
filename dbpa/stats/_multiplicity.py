"""Multiplicity corrections for a family of perturbation tests.

Family-wise error: Bonferroni (the paper's), Holm (uniformly more powerful, same
guarantee). False discovery rate: Benjamini-Hochberg, Benjamini-Yekutieli (the latter
valid under any dependence). Bonferroni, Holm and BY hold when one original sample is
shared by every test of the family; BH needs positive dependence.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import as_p_values, as_positive_int, as_probability, choose

Vector = NDArray[np.float64]


class PermutationBudgetWarning(UserWarning):
    """Too few permutations for any test of the family ever to be rejected."""


def _bonferroni(p: Vector) -> Vector:
    return np.minimum(p * p.size, 1.0)


def _holm(p: Vector) -> Vector:
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def _bh(p: Vector) -> Vector:
    from scipy.stats import false_discovery_control

    return np.asarray(false_discovery_control(p, method="bh"), dtype=np.float64)


def _by(p: Vector) -> Vector:
    from scipy.stats import false_discovery_control

    return np.asarray(false_discovery_control(p, method="by"), dtype=np.float64)


CORRECTIONS: dict[str, Callable[[Vector], Vector]] = {
    "bonferroni": _bonferroni,
    "holm": _holm,
    "bh": _bh,
    "by": _by,
}
"""Correction name -> adjusted p-values (reject where adjusted <= alpha)."""


@dataclass(frozen=True)
class CorrectionResult:
    """Adjusted p-values and decisions for a family of m tests."""

    p_values: Vector
    """The raw p-values, in the caller's order."""
    adjusted: Vector
    """Adjusted p-values, same order."""
    reject: NDArray[np.bool_]
    """Decisions: ``adjusted <= alpha``."""
    method: str
    alpha: float
    min_permutations: int
    """Smallest B at which one p-value at its floor 1/(B+1) can be rejected in this family."""


def lone_threshold(m: int, alpha: float, method: str) -> float:
    """The raw p-value a test must reach to be rejected when it is the only one of m that is.

    alpha/m for Bonferroni, Holm and BH (their first step); alpha/(m * H_m) for BY, H_m
    the m-th harmonic number. Arguments are assumed validated.
    """
    threshold = alpha / m
    if method == "by":
        threshold /= float(np.sum(1.0 / np.arange(1, m + 1)))
    return threshold


def loosest_threshold(m: int, alpha: float, method: str) -> float:
    """The largest raw p-value at which some test of m can be rejected: alpha/m for
    Bonferroni and Holm (a first step must pass it), alpha for BH (when every test reaches
    it), alpha/H_m for BY. Arguments are assumed validated."""
    if method in ("bonferroni", "holm"):
        return alpha / m
    if method == "by":
        return alpha / float(np.sum(1.0 / np.arange(1, m + 1)))
    return alpha


def rejected_together(p: float, m: int, alpha: float, method: str) -> int | None:
    """The fewest tests of m at p-value ``p`` that the correction rejects (with the others
    above it): 1 where ``p`` passes the lone threshold; BH and BY reject j tests at p when
    p <= j alpha / m (alpha / (m H_m) for BY), so a floor above alpha/m still rejects once
    enough tests reach it; None where no number of tests at ``p`` is ever rejected.
    Arguments are assumed validated."""
    lone = lone_threshold(m, alpha, method)
    if p <= lone * (1.0 + 1e-12):
        return 1
    if method in ("bonferroni", "holm") or p > loosest_threshold(m, alpha, method) * (1 + 1e-12):
        return None
    return min(m, math.ceil(p / lone - 1e-9))


def min_permutations(m: int, alpha: float, method: str = "bonferroni") -> int:
    """Smallest B for which a single p-value of 1/(B+1) survives the correction of m tests.

    Bonferroni, Holm and BH need 1/(B+1) <= alpha/m, i.e. B >= m/alpha - 1;
    BY needs alpha/(m * H_m), H_m the m-th harmonic number.
    """
    m = as_positive_int(m, "m")
    alpha = as_probability(alpha, "alpha")
    method = choose(method, "method", CORRECTIONS)
    threshold = lone_threshold(m, alpha, method)
    return max(1, math.ceil(1.0 / threshold - 1.0 - 1e-9))


def correct(
    p_values: ArrayLike,
    *,
    method: str = "holm",
    alpha: float = 0.05,
    n_permutations: int | None = None,
) -> CorrectionResult:
    """Adjust a family of p-values and decide at level ``alpha``.

    With ``n_permutations`` (the B behind permutation p-values) a
    ``PermutationBudgetWarning`` says when B is too small for any rejection.
    """
    p = as_p_values(p_values)
    method = choose(method, "method", CORRECTIONS)
    alpha = as_probability(alpha, "alpha")
    if n_permutations is not None:
        n_permutations = as_positive_int(n_permutations, "n_permutations")
    needed = min_permutations(p.size, alpha, method)
    if n_permutations is not None:
        floor = 1.0 / (n_permutations + 1)
        together = rejected_together(floor, p.size, alpha, method)
        if together is None:
            warnings.warn(
                f"n_permutations={n_permutations} is too small for {method} over {p.size} "
                f"tests at alpha={alpha}: the smallest permutation p-value 1/(B+1)="
                f"{floor:.3g} cannot pass; use B >= {needed}",
                PermutationBudgetWarning,
                stacklevel=2,
            )
    adjusted = CORRECTIONS[method](p)
    return CorrectionResult(
        p_values=p,
        adjusted=adjusted,
        reject=adjusted <= alpha,
        method=method,
        alpha=alpha,
        min_permutations=needed,
    )
