"""A conformal test martingale on whole ticks: one permutation p-value per tick (or per block
of ticks) against every earlier output, on a statistic learnt from all of them: the shares of
the answers' kinds (``statistic="shares"``), or how rare the tick's outputs are among them
(``"novelty"``).

**The p-values.** With no change the outputs of the reference and of the ticks are
independent draws of one distribution. Let ``bag_t`` be the multiset of every output so far
(the reference's rows, each reference's new rows, and the outputs of ticks ``1..t``) and
``X_t`` the tick's ``k`` outputs. Given ``bag_t`` (and everything after tick t), the
positions of ``X_t`` in it are a uniformly random ``k``-subset. The statistic ``T(A; bag)``
of a subset ``A`` is computed from ``A`` and the bag as a multiset only (below), so ``T(X_t)``
and ``T(A_1), ..., T(A_B)`` for ``B`` subsets ``A_b`` drawn uniformly from the bag (the
monitor's ``rng``) are exchangeable, and the smoothed rank

    p_t = (#{b: T_b > T_0} + U (1 + #{b: T_b = T_0})) / (B + 1),   U ~ U(0, 1)

is exactly U(0, 1) given ``bag_t`` and the later data. Every later p-value is a function of
``bag_t`` (as a multiset), the later outputs and independent draws, so ``p_t`` is independent
of ``p_{t+1}, p_{t+2}, ...``, for every t: the p-values are independent U(0, 1) (the argument
of Vovk, Gammerman & Shafer 2005, *Algorithmic Learning in a Random World*, ch. 7-8, for
smoothed conformal p-values, with a block of ``k`` outputs where they have one; Vovk 2021,
*Testing randomness online*, Statistical Science 36). Rows of a new reference join the bag
before the tick, with no p-value of their own (a block not tested). When the bag exceeds
``MAX_BAG`` rows, rows drawn at random (independently of their values) leave it: the later
p-values are then functions of ``bag_t``, the later outputs and independent draws, as before.

**Blocks of ticks.** With ``block = b`` the tested set is the outputs of ``b`` consecutive
ticks (disjoint blocks, fixed in advance: ticks ``1..b``, ``b+1..2b``, ...): the p-value of
a block, computed at its last tick against the bag then, is exactly U(0, 1) given that bag
and everything after, by the argument above with ``X_t`` the block's ``b k`` outputs, and
the blocks' p-values are independent; the factor is 1 at a block's other ticks. A block's
mean moves ``sqrt(b)`` times as many standard errors as one tick's for the same change in
shares, while Hotelling's statistic pays for its ``RANK`` directions once per block, not
once per tick: on a re-weighting at k = 5 a block of two ticks pays more than two single
ticks (``python -m benchmarks monitor``). The monitor runs one process per length of
``BLOCKS`` (each a test martingale in its own p-values' filtration) and takes the largest
by e-Bonferroni with its other processes.

**Why p-values, not permutation e-values.** ``T(X_t) / mean_b T(A_b)`` (Koning 2023,
*Post-hoc and anytime valid permutation and group invariance testing*) has mean 1 given
``bag_t``, but its distribution given the bag depends on the bag, so successive ones are not
independent: their product has mean 1 at a fixed tick only (a reverse martingale), not a
forward supermartingale that Ville's inequality covers at every tick. Exactly uniform
p-values are independent, so any bet on ``p_t`` chosen from ``p_1..p_{t-1}`` is fair.

**The shares** (``statistic="shares"``). The witness must be a symmetric function of the
bag: it cannot know which outputs came last (that would break the exchangeability above); it
learns the shape of the answers from every output so far instead. The outputs (projected on
``_bag.PROJECTION`` random directions drawn at the first update, when their dimension is higher)
are centred on the bag's mean and written in the bag's ``RANK`` leading principal
components, each scaled to unit variance; ``T(A)`` is the squared length of ``A``'s mean
there: Hotelling's statistic of ``A`` against the rest of the bag in the subspace where the
answer types differ, which a change in the shares of familiar answers moves. An answer of a
new kind lies mostly off that subspace, so this process alone is slow on such changes (a
statistic of the distance from it, combined by ranks, cost more on re-weighting than it
gained there); a process on novelty finds them (below), hence
``DriftMonitor(conformal="both")``. The bag is kept as a multiset (``_bag.py``): equal
outputs are one entry, projected once and scored once, so subsets with the same outputs
(answers that repeat exactly) tie exactly; statistics are rounded to ``TIE_DIGITS`` relative
digits, and ties are broken by ``U``. The mean and covariance are kept as sums over the rows
as they join and leave: a symmetric function of the multiset up to floating-point rounding,
far below those digits; components whose variance is rounding (below ``SPREAD_FLOOR`` of
the rows' mean square) are dropped.

**New kinds of answer** (``statistic="novelty"``). The rarity of a bag row is minus the log
of its Gaussian kernel density among all bag rows (itself included), and ``T(A)`` is the mean
rarity of ``A``'s rows: large when the tested outputs lie where the bag has few outputs, as
answers of a new kind do. The bandwidth (squared) is ``BANDWIDTH`` times the bag's mean
squared distance between two rows, rounded to the grid ``BANDWIDTH_STEP**j``: a symmetric
function of the bag, as the argument above needs (a bandwidth from the first reference
would not be, as the reference's rows are in the bag), and one that moves rarely, so the
densities are kept as rows join and leave and recomputed only when it does (a tick costs
``O(n k)`` kernel values, not ``O(n^2)``); where the bag does not vary (a spread below
``SPREAD_FLOOR`` of its rows' mean square) the bandwidth is 0 and the kernel flat. Equal
outputs are one entry of the bag and so have one density: at a small bandwidth, rounding
alone would otherwise rank equal outputs (``_bag.py``). Unlike a per-output conformal p-value
(``_conformal.py``), which ranks one output among the ``n`` so far and so is at least
``1 / n``, a tick's p-value ranks it among ``PERMUTATIONS`` random subsets: a tick with two
outputs of a new kind in a bag of 100 gets about ``1 / C(100, 2)``-small p-values, where each
output alone gets about ``1 / 100``. That is what makes this process quick after a short
history.

**Betting on the p-values.** ``z_t = Phi^{-1}(1 - p_t)`` is N(0, 1) with no change, and each
bettor ``delta`` of ``DELTAS`` multiplies its capital by ``exp(delta z_t - delta^2 / 2)``
(mean 1); a sleeping bettor keeps its capital, and after every tick a share ``JUMP`` of the
total is spread evenly over the bettors (Vovk et al. 2021, *Retrain or not retrain*, COPA,
PMLR 152: the Simple Jumper). The total is a test martingale in the p-values' filtration
(``P(sup_t M_t >= c) <= 1 / c``, Ville) whatever the starting split; the Shiryaev-Roberts
statistic on its per-tick factors is the change-detection form (Shin, Ramdas & Rinaldo 2023:
``R_t - t`` is a martingale with no change). The capital starts as a jump leaves it when all
of it sleeps (``JUMP / n`` on each of the ``n`` bettors, the rest on the sleeper), not
evenly: the process cannot see a change before quiet ticks are in the bag (a change present
from the first tick is the bag), so capital on the active bettors at the start could only be
lost over the first quiet ticks, and the test form's evidence after a change is what is left
of the total. The detector, which restarts at every tick, loses nothing to the first quiet
ticks and so gains nothing; it misses the even start's larger active shares, which last
some ten ticks (``python -m benchmarks monitor`` measures both forms).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import eigh
from scipy.special import ndtri

from ._bag import TIE_DIGITS, Bag, random_projection
from ._threads import blas_for

__all__ = ["BLOCKS", "STATISTICS", "TickConformalMartingale", "TickConformalStep"]

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]

BLOCKS = (1, 2)
"""Ticks per tested block of the monitor's tick processes, one process per length."""
PERMUTATIONS = 1999
"""Random subsets each tick's statistic is ranked among (smallest p about 1 / 2000 before
the smoothing: a block of ten outputs often reaches 1 / 1000)."""
RANK = 4
"""Principal components of the bag the shares are compared in."""
DELTAS = (0.5, 1.0, 1.5, 2.0, 2.5)
"""Normal-score bettors ``exp(delta z - delta^2 / 2)``."""
JUMP = 0.05
"""Share of the total capital spread again evenly over the bettors after every tick."""
MAX_BAG = 4000
"""Rows the bag keeps at most (random ones leave it beyond)."""
P_FLOOR = 1e-300
"""A p-value of exactly 0 counts as this (a finite score)."""
SPREAD_FLOOR = 1e-12
"""Variance, relative to the rows' mean square, below which the bag counts as not varying
(rounding): ``novelty``'s bandwidth is then 0 (a flat kernel), and ``shares`` drops
components of less variance."""
STATISTICS = ("shares", "novelty")
"""What a tick process compares: the shares of the bag's kinds of answer (Hotelling's
statistic), or how rare the tested outputs are in the bag (their kernel density)."""
BANDWIDTH = 0.15
"""``novelty``'s kernel bandwidth (squared), as a share of the bag's mean squared distance
between two rows."""
BANDWIDTH_STEP = 2.0**0.25
"""Ratio of the grid the bandwidth is rounded to (the densities are kept as rows join and
leave while the bag's grid point stays)."""


@dataclass(frozen=True)
class TickConformalStep:
    """One tick of the martingale."""

    p_value: float
    """The block's permutation p-value against the bag (U(0, 1) with no change), at the
    block's last tick; NaN at its other ticks (no bet: factor 1)."""
    log_factor: float
    """Log of the tick's factor ``M_t / M_{t-1}``."""
    log_martingale: float
    log_detector: float
    """Log of the Shiryaev-Roberts statistic on the same factors."""


class TickConformalMartingale:
    """Jumper over normal-score bettors on one permutation p-value per tick (module
    docstring). ``rng``: a numpy Generator; ``block``: ticks per tested block;
    ``statistic``: one of ``STATISTICS``. The caller validates the inputs."""

    def __init__(self, rng: np.random.Generator, block: int = 1, statistic: str = "shares") -> None:
        self._rng = rng
        self.block = block
        self.statistic = statistic
        self._pending: list[Matrix] = []
        self._deltas = np.asarray(DELTAS)
        bettors = self._deltas.size + 1  # the last one sleeps
        self._capital = np.full(bettors, JUMP / bettors)  # as a jump leaves it, all asleep
        self._capital[-1] += 1.0 - JUMP
        self._bag: Bag | None = None
        self._reference: Matrix | None = None
        self._log_total = 0.0
        self._log_detector = -math.inf

    def update(self, reference: Matrix, tick: Matrix) -> TickConformalStep:
        """Add a reference's new rows (when ``reference`` differs from the last one), then
        test the tick's outputs (k, d) against the bag and add them."""
        if self._bag is None:
            projection = random_projection(self._rng, reference.shape[1])
            self._bag = Bag(projection, bandwidth=math.nan if self.statistic == "novelty" else None)
        bag = self._bag
        if self._reference is None or not np.array_equal(reference, self._reference):
            self._reference = reference
            bag.add(reference)
            self._thin(bag)
        self._pending.append(tick)
        if len(self._pending) < self.block:
            self._log_detector = float(np.logaddexp(self._log_detector, 0.0))
            return TickConformalStep(math.nan, 0.0, self._log_total, self._log_detector)
        tested = np.concatenate(self._pending)
        self._pending = []
        bag.add(tested)
        with blas_for(len(bag)):
            scores = _shares(bag) if self.statistic == "shares" else _novelty(bag)
            p = max(self._p_value(scores[bag.ids], len(tested)), P_FLOOR)
        self._thin(bag)
        z = float(ndtri(1.0 - p)) if p < 1.0 else -math.inf
        gain = np.append(np.exp(np.minimum(self._deltas * z - self._deltas**2 / 2.0, 700.0)), 1.0)
        grown = self._capital * gain
        total = float(grown.sum())
        self._capital = (1.0 - JUMP) * grown / total + JUMP / grown.size
        log_factor = math.log(total)
        self._log_total += log_factor
        self._log_detector = log_factor + float(np.logaddexp(self._log_detector, 0.0))
        return TickConformalStep(p, log_factor, self._log_total, self._log_detector)

    def _thin(self, bag: Bag) -> None:
        """Random rows (drawn independently of their values) leave a bag of more than
        ``MAX_BAG``."""
        if len(bag) > MAX_BAG:
            bag.keep(np.sort(self._rng.choice(len(bag), MAX_BAG, replace=False)))

    def _p_value(self, scores: Matrix, k: int) -> float:
        """The smoothed permutation p-value of the last ``k`` rows of the bag, on their
        ``scores`` (a row per bag row): the squared length of a subset's mean score for
        ``shares``, the mean itself for ``novelty``."""
        n = len(scores)
        subsets = np.empty((PERMUTATIONS + 1, k), dtype=np.int64)
        subsets[0] = np.arange(n - k, n)
        subsets[1:] = _subsets(self._rng, n, k, PERMUTATIONS)
        means = _subset_means(scores, subsets)
        values = (means * means).sum(axis=1) if self.statistic == "shares" else means[:, 0]
        statistic = _rounded(values)
        greater = int(np.count_nonzero(statistic[1:] > statistic[0]))
        tied = int(np.count_nonzero(statistic[1:] == statistic[0]))
        return (greater + float(self._rng.uniform()) * (1 + tied)) / (PERMUTATIONS + 1)


def _shares(bag: Bag) -> Matrix:
    """Each entry of the bag in its ``RANK`` leading principal components, scaled to unit
    variance (components with a variance below ``SPREAD_FLOOR`` of the rows' mean square,
    rounding, dropped): a subset's squared mean there is Hotelling's statistic."""
    covariance = bag.covariance()
    width = len(covariance)
    top, basis = eigh(covariance, subset_by_index=[max(width - RANK, 0), width - 1])
    top, basis = top[::-1], basis[:, ::-1]  # the largest first
    keep = top > max(1e-9 * float(top[0]), SPREAD_FLOOR * bag.spread()[1], 0.0)
    basis, top = basis[:, keep], top[keep]
    whitened: Matrix = (bag.rows @ basis - bag.mean() @ basis) / np.sqrt(top)
    return whitened


def _novelty(bag: Bag) -> Matrix:
    """Each entry's rarity, minus the log of its kernel density in the bag (one column): a
    subset's mean of it is how unlike the bag its outputs are."""
    rarity: Matrix = -np.log(bag.densities(_bandwidth(bag)))[:, None]
    return rarity


def _bandwidth(bag: Bag) -> float:
    """``BANDWIDTH`` times the mean squared distance between two rows of the bag (twice
    their mean squared distance from the bag's mean), on the grid ``BANDWIDTH_STEP**j``;
    0 for rows that do not vary (a spread below ``SPREAD_FLOOR`` of their mean square)."""
    spread, scale = bag.spread()
    if spread <= SPREAD_FLOOR * scale:
        return 0.0
    step = round(math.log(BANDWIDTH * spread) / math.log(BANDWIDTH_STEP))
    return float(BANDWIDTH_STEP**step)


def _subsets(rng: np.random.Generator, n: int, k: int, count: int) -> NDArray[np.int64]:
    """``count`` uniform ``k``-subsets of ``range(n)`` (Floyd's algorithm, row-wise)."""
    out = np.empty((count, k), dtype=np.int64)
    for column, j in enumerate(range(n - k, n)):
        draw = rng.integers(0, j + 1, size=count)
        taken = np.zeros(count, dtype=bool)
        for earlier in out.T[:column]:
            taken |= earlier == draw
        out[:, column] = np.where(taken, j, draw)
    return out


def _subset_means(rows: Matrix, subsets: NDArray[np.int64]) -> Matrix:
    """The mean of each subset's ``rows`` (a row per subset): ``rows[subsets].mean(axis=1)``
    to the last bit (numpy adds along that axis in order too), without the (count, k, r)
    array."""
    total = rows[subsets[:, 0]]
    for column in subsets.T[1:]:
        total += rows[column]
    means: Matrix = total / subsets.shape[1]
    return means


def _rounded(values: Vector) -> Vector:
    """``values`` at ``TIE_DIGITS`` relative digits of their largest magnitude."""
    scale = float(np.abs(values).max())
    if scale == 0.0 or not math.isfinite(scale):
        return np.zeros_like(values)
    rounded: Vector = np.round(values / scale * 10.0**TIE_DIGITS)
    return rounded
