"""A conformal test martingale over a monitor's tick outputs: the pooled history, unspent.

With no change, the outputs of the ticks ``z_1, z_2, ...`` (in tick order; any order within
a tick) are independent draws of one distribution, so exchangeable. For each new output
``z_n`` the bag ``{z_1, ..., z_n}`` gets nonconformity scores computed symmetrically from
the bag: here minus a Gaussian kernel density of each output among all of them (an output
unlike the others has a low density). The smoothed conformal p-value

    p_n = (#{i <= n: d_i < d_n} + theta_n #{i <= n: d_i = d_n}) / n,   theta_n ~ U(0, 1)

(``d`` the densities, ``theta`` from the monitor's ``rng``) is then exactly uniform, and
``p_1, p_2, ...`` are independent (Vovk, Gammerman & Shafer, *Algorithmic Learning in a
Random World*, 2005, ch. 7-8, the smoothed conformal p-values of exchangeable data; Vovk
2021, *Testing randomness online*, Statistical Science 36). Every output counts in the bag
of every later one: no output is spent. Ties (answers that repeat exactly) are broken by
``theta`` alone, which keeps ``p`` uniform: equal outputs are one entry of the bag
(``_bag.py``), so their densities are equal exactly, as the symmetry the p-values need asks
(rounding alone ranked them until 2026-12-08), and densities are compared at ``TIE_DIGITS``
relative digits.

The bandwidth is ``BANDWIDTH`` times the median squared distance between the outputs of
the first reference, and outputs of dimension above ``_bag.PROJECTION`` are first mapped by one
random Gaussian projection drawn at the first update: both fixed before any tick output is
seen, so the score stays a symmetric function of the bag (the reference is not one of the
exchangeable outputs; a change already present at the first tick is the betting process's
to find).

**Betting on the p-values.** Each bettor ``(lambda, kappa)`` of the grid ``LAMBDAS x
KAPPAS`` multiplies its capital per output by ``1 - lambda + lambda kappa p^(kappa - 1)``
(a power calibrator, mean 1 under U(0, 1), mixed with cash); a sleeping bettor keeps its
capital. After every tick a share ``JUMP`` of the total capital is spread again evenly over
the bettors: the redistribution of Vovk's Simple Jumper (Vovk, Petej, Nouretdinov,
Ahlberg, Carlsson & Gammerman 2021, *Retrain or not retrain: conformal test martingales for
change-point detection*, COPA, PMLR 152), over power calibrators instead of its three
linear betting functions. The split over the bettors depends on past p-values only and
each factor has mean 1 given them, so the total capital is a test martingale in the
p-values' filtration: ``P(sup_t M_t >= c) <= 1 / c`` (Ville). The jumps let a bettor that
lost during quiet ticks get capital back, so a change after many quiet ticks is bet on
within a tick or two. The Shiryaev-Roberts statistic on the same per-tick factors ``F_t =
M_t / M_{t-1}``, ``R_t = (R_{t-1} + 1) F_t``, is the change-detection form (``R_t - t`` is a
martingale with no change).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ._bag import Bag, random_projection

__all__ = ["ConformalMartingale", "ConformalStep"]

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]

LAMBDAS = (0.02, 0.05, 0.1, 0.2)
"""Shares of capital a bettor stakes on its calibrator per output."""
KAPPAS = (0.05, 0.1, 0.2, 0.4)
"""Exponents of the power calibrators ``kappa p^(kappa - 1)``: small ones pay most for
very small p-values."""
JUMP = 0.01
"""Share of the total capital spread again evenly over the bettors after every tick."""
BANDWIDTH = 0.15
"""Kernel bandwidth (squared) as a share of the first reference's median squared distance."""
P_FLOOR = 1e-300
"""A p-value of exactly 0 (``theta = 0``, probability 2^-53) counts as this: a finite
payoff, and a p-value only ever raised stays valid."""


@dataclass(frozen=True)
class ConformalStep:
    """One tick of the conformal martingale."""

    p_values: tuple[float, ...]
    """The tick's outputs' smoothed conformal p-values (independent U(0, 1) with no change)."""
    log_factor: float
    """Log of the tick's factor ``M_t / M_{t-1}`` (a conditional e-value)."""
    log_martingale: float
    """Log of the test martingale ``M_t``."""
    log_detector: float
    """Log of the Shiryaev-Roberts statistic on the same factors."""


class ConformalMartingale:
    """A jumper over power calibrators on conformal p-values of the tick outputs (module docstring).

    ``rng``: a numpy Generator (the projection and the tie-breaking ``theta``); the caller
    validates the inputs (``DriftMonitor.update``)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        lam, kap = np.meshgrid(LAMBDAS, KAPPAS, indexing="ij")
        self._lam, self._kap = lam.ravel(), kap.ravel()
        bettors = self._lam.size + 1  # the last one sleeps
        self._capital = np.full(bettors, 1.0 / bettors)
        self._bag: Bag | None = None
        self._log_total = 0.0
        self._log_detector = -math.inf

    def update(self, reference: Matrix, tick: Matrix) -> ConformalStep:
        """Add one tick's outputs (k, d); ``reference`` sets the bandwidth at the first
        update and is otherwise unused."""
        if self._bag is None:
            self._bag = self._start(reference)
        p = np.array([self._p_value(self._bag, row) for row in tick])
        log_gain = np.log1p(
            self._lam[:, None] * (self._kap[:, None] * p[None, :] ** (self._kap[:, None] - 1) - 1)
        ).sum(axis=1)
        logs = np.log(self._capital) + np.append(log_gain, 0.0)  # capital sums to 1
        top = float(logs.max())
        grown = np.exp(logs - top)
        log_factor = top + math.log(float(grown.sum()))
        self._capital = (1.0 - JUMP) * grown / grown.sum() + JUMP / grown.size
        self._log_total += log_factor
        self._log_detector = log_factor + float(np.logaddexp(self._log_detector, 0.0))
        return ConformalStep(tuple(p.tolist()), log_factor, self._log_total, self._log_detector)

    def _start(self, reference: Matrix) -> Bag:
        """The bag, its projection and bandwidth fixed by the first reference."""
        projection = random_projection(self._rng, reference.shape[1])
        ref = reference @ projection
        sq = (ref * ref).sum(axis=1)
        dist = np.maximum(sq[:, None] + sq[None, :] - 2.0 * ref @ ref.T, 0.0)
        pairs = dist[np.triu_indices(len(ref), 1)]
        positive = pairs[pairs > 1e-12 * max(float(sq.max()), 1e-300)]
        scale = float(np.median(positive)) if positive.size else float(sq.mean())
        return Bag(projection, bandwidth=BANDWIDTH * scale if scale > 0.0 else 1.0, moments=False)

    def _p_value(self, bag: Bag, output: Vector) -> float:
        """Add ``output`` to the bag; its smoothed conformal p-value."""
        entry = int(bag.add(output[None, :])[0])
        density = bag.densities()
        own = density[entry]
        below = float(bag.counts @ (density < own))
        tied = float(bag.counts @ (density == own))
        p = (below + float(self._rng.uniform()) * tied) / len(bag)
        return max(p, P_FLOOR)
