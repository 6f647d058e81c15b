"""The set-level equivalence test's guard: every prompt's arms tilted jointly onto the set's
boundary.

One prompt's guard (``_tilted``) resamples from the arms reweighted as little as possible so
that they lie ``margin`` apart. The set's null hypothesis is ``sum_i theta_i >= P margin``,
and its boundary has one point per split of the total over the prompts. The guard takes the
likeliest split: each prompt's candidate boundary points (``_tilted._Arms.paths``: the first
crossing of each distance along each tilt direction) give its log-likelihood cost of moving
its arms' distance from the untilted arms' to any other value, and the prompts are tilted
jointly so that their distances sum to the total at the least summed cost. That is the
Lagrangian problem of the empirical likelihood under one constraint on a sum (Owen,
*Empirical Likelihood*, 2001, 3.5; Hall & Presnell's biased bootstrap), solved on the
candidates: at a price per unit of distance every prompt takes its move of least cost minus
price times length, and the price is bisected until the moves add up to the total (the
prompts whose move changes at that price share the rest).

A prompt whose outputs never vary cannot move and keeps its distance. Every prompt is then
resampled from its weights at its share, independently, and the p-value is the share of
draws whose sum of the prompts' unbiased estimates is at most the observed sum,
``(1 + #) / (1 + B)`` (a draw in which some prompt's arm repeats one output has no estimate
and is dropped, as in one prompt's guard); with no split (the arms cannot be tilted that far
apart, or that close) it is 1.

Where one prompt carries the set's whole noise (its arms collapsing onto one answer, the
others never varying) the split puts the whole total on it and the guard is that prompt's
own at ``P margin``: the case the pooled least-favourable test alone let through in 0.08
of audits at the margin (``_set_equivalence``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ._tilted import _Arms, resampled_p_value

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]

_FAR = 1e15
"""A price (log-likelihood per unit of distance) beyond any move's."""
_BISECTIONS = 200
"""Halvings of the price interval (to the resolution of a double)."""


class SetArms:
    """Every prompt's pooled outputs and candidate tilts, for the guard at any margin."""

    def __init__(self, prompts: Sequence[tuple[Matrix, int]]) -> None:
        self.arms = [_Arms(distances, k_a) for distances, k_a in prompts]
        self.observed = float(sum(a.observed for a in self.arms))
        self.largest = max(float(distances.max()) for distances, _ in prompts)

    def p_value(self, total: float, n_draws: int, seed: int) -> float:
        """p-value of ``sum_i theta_i >= total`` from ``n_draws`` joint resamples; ``seed``
        fixes them (the same seed at every total: common random numbers)."""
        targets = _split(self.arms, total)
        if targets is None:
            return 1.0
        rng = np.random.default_rng(seed)
        summed = np.zeros(n_draws)
        for arms, target in zip(self.arms, targets, strict=True):
            weights = _weights(arms, target)
            if weights is None:
                return 1.0
            summed += arms.resampled(*weights, n_draws, rng)
        return resampled_p_value(summed, self.observed)


def _weights(arms: _Arms, target: float) -> tuple[Vector, Vector] | None:
    """The arms' weights at distance ``target``: untilted at their own distance, else the
    likeliest candidate boundary point."""
    theta, _ = arms.base
    if target == theta:
        return arms.untilted
    best = arms.likeliest(target)
    return None if best is None else (best[1], best[2])


def _split(arms: Sequence[_Arms], total: float) -> list[float] | None:
    """Each prompt's distance at the likeliest split of ``total`` (module docstring); None
    where the prompts cannot reach it together."""
    start = np.array([a.base[0] for a in arms])
    need = total - float(start.sum())
    if need == 0.0:
        return [float(t) for t in start]
    sign = 1.0 if need > 0 else -1.0
    moves = _Moves([_moves(a, sign) for a in arms])
    moved = moves.sharing(abs(need))
    if moved is None:
        return None
    return [float(t) for t in start + sign * moved]


class _Moves:
    """Every prompt's candidate moves (a row each, padded with unreachable ones), with the
    move (0, 0) of staying put."""

    def __init__(self, found: list[tuple[Vector, Vector]]) -> None:
        width = 1 + max(lengths.size for lengths, _ in found)
        self.lengths = np.zeros((len(found), width))
        self.costs = np.full((len(found), width), np.inf)
        self.costs[:, 0] = 0.0
        for i, (lengths, costs) in enumerate(found):
            self.lengths[i, 1 : 1 + lengths.size] = lengths
            self.costs[i, 1 : 1 + lengths.size] = costs
        self.rows = np.arange(len(found))

    def at(self, price: float) -> Vector:
        """Each prompt's move minimising cost - price * length (ties: the longest). The
        lengths and the price are finite and the costs finite or inf, so no value is NaN."""
        value = self.costs - price * self.lengths
        best = value.min(axis=1, keepdims=True)
        longest = np.where(value == best, self.lengths, -1.0)
        chosen: Vector = self.lengths[self.rows, longest.argmax(axis=1)]
        return chosen

    def sharing(self, need: float) -> Vector | None:
        """The moves, summing to ``need``, of the price at which the prompts' cheapest moves
        first add up to it (bisection on the price; the prompts whose move changes at that
        price take the rest in turn); None beyond the longest moves."""
        if self.at(_FAR).sum() < need:
            return None
        low, high = -_FAR, _FAR  # no move is taken at -_FAR (costs are losses, >= 0)
        for _ in range(_BISECTIONS):
            middle = 0.5 * (low + high)
            if not low < middle < high:
                break  # adjacent doubles: every later halving leaves them as they are
            if self.at(middle).sum() >= need:
                high = middle
            else:
                low = middle
        short, long = self.at(low), self.at(high)
        moved = short.copy()
        left = need - float(short.sum())
        for i in np.flatnonzero(long > short):
            step = min(float(long[i] - short[i]), left)
            moved[i] += step
            left -= step
            if left <= 0.0:
                break
        return moved


def _moves(arms: _Arms, sign: float) -> tuple[Vector, Vector]:
    """How far each candidate boundary point moves the arms' distance in direction ``sign``
    (> 0), and its log-likelihood cost, over every tilt path's first crossings."""
    theta, fit = arms.base
    lengths, costs = [], []
    for _, _, path, path_fit in arms.paths:
        ahead = sign * (path - theta)
        record = ahead > np.fmax.accumulate(np.concatenate([[0.0], ahead[:-1]]))
        lengths.append(ahead[record])
        costs.append(fit - path_fit[record])
    if not lengths:
        return np.empty(0), np.empty(0)
    return np.concatenate(lengths), np.concatenate(costs)
