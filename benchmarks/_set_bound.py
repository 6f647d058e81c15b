"""The most power any combination of per-prompt p-values can reach, where m of n prompts move.

A test that treats the prompts alike (its decision does not depend on which prompts moved)
has the same power whichever m prompts moved, so its power is its power against the mixture
of all C(n, m) choices, and by the Neyman-Pearson lemma no such test beats the likelihood
ratio of that mixture: with r the density ratio of a moved prompt's p-value to a null one's,
``T = e_m(r(p_1), ..., r(p_n))`` (the m-th elementary symmetric polynomial, the sum over the
choices of the product of their ratios). The bound here is that test's power where the moved
prompts' p-values follow their measured law and the others are uniform on the permutation
grid ``{1, ..., B + 1} / (B + 1)``; prompts are independent (each has its own outputs and
its own relabellings). Given the law, T knows m and r exactly, which no real test does: the
bound is generous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EDGES = np.append(np.arange(0.0, 3.01, 0.25), np.inf)
"""Bins of -log10 p in which the moved prompts' p-value law is measured."""


@dataclass(frozen=True)
class SetBound:
    """The bound and, on the same simulated sets, per-prompt Holm's power (a check that the
    model of independent prompts reproduces Holm's measured power)."""

    power: float
    holm: float


def _bin_of(p: np.ndarray) -> np.ndarray:
    return np.clip(np.digitize(-np.log10(p), EDGES) - 1, 0, len(EDGES) - 2)


def _elementary(r: np.ndarray, m: int) -> np.ndarray:
    """``e_m`` of each row of ``r`` (rows x n), by the recursion over the columns."""
    e = np.zeros((r.shape[0], m + 1))
    e[:, 0] = 1.0
    for column in r.T:
        e[:, 1:] = e[:, 1:] + e[:, :-1] * column[:, None]
    return e[:, m]


def set_bound(
    moved_p: np.ndarray,
    n_prompts: int,
    moved: int,
    b: int,
    alpha: float,
    rng: np.random.Generator,
    draws: int = 100_000,
) -> SetBound:
    """The bound where ``moved`` of ``n_prompts`` prompts have p-values drawn from
    ``moved_p`` (measured p-values of moved prompts, B = ``b`` relabellings)."""
    grid = np.arange(1, b + 2) / (b + 1)
    null_mass = np.bincount(_bin_of(grid), minlength=len(EDGES) - 1) / grid.size
    moved_mass = np.bincount(_bin_of(moved_p), minlength=len(EDGES) - 1) / moved_p.size
    # Bins no grid p-value falls in (at B = 999, -log10 p in (2.75, 3)) hold none: ratio 0.
    ratio = np.divide(moved_mass, null_mass, out=np.zeros_like(moved_mass), where=null_mass > 0)
    null_sets = rng.choice(grid, size=(draws, n_prompts))
    alt_sets = rng.choice(grid, size=(draws, n_prompts))
    alt_sets[:, :moved] = rng.choice(moved_p, size=(draws, moved))
    null_t = _elementary(ratio[_bin_of(null_sets)], moved)
    alt_t = _elementary(ratio[_bin_of(alt_sets)], moved)
    # The randomised NP test at exactly alpha: reject above c, at c with the share that
    # brings the null rate to alpha (T is discrete).
    c = np.quantile(null_t, 1 - alpha, method="higher")
    above, at = float(np.mean(null_t > c)), float(np.mean(null_t == c))
    share = (alpha - above) / at if at else 0.0
    power = float(np.mean(alt_t > c) + share * np.mean(alt_t == c))
    # Holm rejects some prompt exactly when its first step does: the smallest p <= alpha / n.
    holm = float(np.mean(alt_sets.min(axis=1) <= alpha / n_prompts))
    return SetBound(power=power, holm=holm)
