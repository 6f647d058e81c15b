"""A drift monitor whose alarm is anytime-valid: testing by betting across ticks.

A scheduled audit samples an arm again at every tick. ``DriftMonitor`` turns the ticks into
one sequential two-sample test of the arm's answers against its baseline, by betting
(Shekhar & Ramdas 2023, IEEE Trans. Inf. Theory 70; Podkopaev et al., ICML 2023): a bettor
starts with wealth 1 and at every tick stakes a fraction of it on pairs ``(x, y)``, ``x`` an
output of the tick and ``y`` an output of the baseline, gaining ``lambda * g`` per unit with
the payoff ``g = (f(x) - f(y)) / 2 - tolerance``. The witness ``f`` (values in [-1, 1]) and
the stake ``lambda`` are chosen from earlier ticks only, and ``y`` is a baseline output that
nothing so far has looked at. With no change, ``x`` and ``y`` are two fresh draws of the
same distribution, the payoff has mean 0 whatever ``f`` is, and the wealth is a
nonnegative martingale: by Ville's inequality it ever reaches ``1 / alpha`` with
probability at most ``alpha``, over any number of ticks. That is the alarm.

**The baseline grows with the quiet ticks.** The baseline outputs ``y`` come from a queue of
fresh outputs: first the reference (every output of a reference not seen before), then a
share ``reserve`` of each tick's outputs, which are put aside unseen (FIFO); the tick's other
outputs are bet on now, each against one queued output. The queue grows by about
``k * reserve`` outputs per tick, so after a quiet period a change is bet against outputs
from before it, and every output bet on (tick and baseline) joins the data the witness is
learnt from. An output is either bet on or put aside, never both, so no output counts twice.

**The witness** is linear: the direction from the baseline outputs seen so far to the tick
outputs of the last ``window`` ticks, centred between them and scaled by their spread,
clipped to [-1, 1] (any bounded function chosen from the past keeps the martingale). Where
the outputs seen so far do not vary (answers that repeat exactly) it is 0: no bet, no
division by zero. **The stake** is aGRAPA (Waudby-Smith & Ramdas 2024, JRSS-B 86) on the
payoffs of the last ``STAKE_WINDOW`` pairs, their mean lowered by ``STAKE_CAUTION`` standard
errors, so that it is mostly 0 while nothing changes and grows within a few ticks of a
change, capped at ``0.8 / (1 + tolerance)``.

**Limits of betting alone.** A tick of k outputs bets about ``0.4 k`` of them, each against
one baseline output: about a quarter of what the same outputs would give against a known
baseline. A change already present at the first tick is bet against the reference's outputs
only (a few ticks of pairs); after them, ticks are bet against changed outputs.

**A second process that spends nothing** (``conformal="outputs"``; ``_conformal.py``): a
conformal test martingale on the tick outputs, whose p-value for each output ranks its
kernel density among all outputs so far, so that every quiet tick stays baseline for every
later one; with no change the p-values are independent U(0, 1) and a jumper's capital on
them is a test martingale. It cannot see a change present from the first tick (the reference
only sets its bandwidth) and has no tolerance. With ``tolerance = 0`` the monitor runs the
betting and the conformal processes and combines them by weighted e-Bonferroni (below); with
a tolerance the conformal processes are off and ``e_value`` is the betting wealth.

**A conformal process on whole ticks** (``conformal="ticks"`` or ``"both"``;
``_tick_conformal.py``): one permutation p-value per tick, of the tick's outputs against
every output before it, on a statistic that is a symmetric function of that pool (Hotelling's
statistic in the pool's leading principal components: it sees a change in the shares of
familiar answers, which the per-output process hardly does); the p-values are independent
U(0, 1) with no change, and a jumper bets on them. It spends no output either. One such
process runs per block length of ``blocks`` (default ``(1, 2)``: p-values of single ticks,
and of disjoint pairs of ticks, which see a change in shares sooner at small k).

**New kinds of answer, tick by tick** (``conformal="both"``, the default): a process on
single ticks of the same construction whose statistic is how rare the tick's outputs are in
the pool (their mean minus log kernel density among all outputs so far, the reference's
included) runs beside the per-output process. Its p-value ranks the tick among 1,999 random
subsets of the pool, so it can be far smaller than a single output's rank among a short
history's ``n`` outputs allows (at least ``1 / n``), and it sees a change present from the
first tick against the reference; but it is at least ``1 / 2000``, where at k = 10 or 20
after a long history the per-output process gathers the evidence of many small p-values in
one tick and alarms at the first changed tick, which the tick process alone cannot. So the
two share the new-kind weight. ``"both"`` runs the betting process, the per-output process,
the tick process on novelty and the tick processes on shares.

**Weighted e-Bonferroni.** The ``m`` processes share the alarm by weights ``w_i > 0``,
``sum w_i = 1`` (``weights``): ``e_value`` is the largest ``w_i E_i`` (``form="test"``), so
process ``i`` alarms alone at ``E_i >= 1 / (w_i alpha)``. By Ville's inequality each test
martingale, in its own filtration, ever reaches ``1 / (w_i alpha)`` with probability at most
``w_i alpha``, and by a union bound (whatever the dependence between the processes) some
process ever alarms with probability at most ``sum w_i alpha = alpha``; at a fixed tick
``max w_i E_i <= sum w_i E_i``, a weighted mean of e-values, is an e-value (Vovk & Wang
2021, Ann. Statist. 49). Equal weights ``1 / m`` are the plain e-Bonferroni (``"outputs"``:
the larger of two halved). The default of ``"both"`` (``BOTH_WEIGHTS``) gives the processes
on new kinds of answer 0.3 each (per output, and the tick process on novelty), the tick
processes on shares, which find a change in the shares of familiar answers, 0.3 between
them, and the betting process 0.1 (seldom the first to alarm without a tolerance, but the
only one with a tolerance): once shares change the tick processes' evidence grows
geometrically, so a smaller weight delays them little, where the new-kind processes' lines
set how soon a new kind of answer alarms. The 0.6 for new kinds was measured with the
per-output process alone in that place (docs/explanation/drift.md): as quick on new kinds
of answer as the betting and per-output processes at 1/2 each, and nearly as quick on
changed shares as four processes at 1/4 each; split between the two new-kind processes it
keeps the per-output process's first-tick alarms at k = 10 and 20 after a long history and
the novelty process's speed after a short one (measured against the novelty process alone
at 0.6, which was slower there). ``python -m benchmarks monitor``
(``benchmarks/results/monitor.json``) has the delays of each design against an oracle that
knows the change tick.

**With a tolerance the bets are on means** (issue 51): a change present from the first
tick can only be bet against the reference's outputs, and a pair of single outputs carries
little of the evidence one baseline output holds. So each queued baseline output ``y`` is
bet against the mean witness of a group of the tick's outputs, ``g = (mean f(x) - f(y)) / 2
- tolerance`` (every ``x`` and ``y`` bet once: the same martingale argument, as ``E mean
f(x) = E f(x)``); while the queue is short (fewer than ``SPEND_TICKS`` outputs, the
reference alone) one output a tick, against all of the tick's bet outputs, more (up to as
many as without a tolerance) as the quiet ticks fill it. The witness is ``_witness``'s
direction turned nearly into a classifier (half the normal log-likelihood ratio along it,
clipped): a tolerance is paid only by witnesses near the total-variation bound below. The
stake may reach ``0.95 / (1 + tolerance)``. Each baseline output then gains at most
``log(1 + 0.95 tolerance / (1 + tolerance))``: the monitor needs at least
``tolerance_reach(tolerance, alpha)`` of them to alarm on a change present from the first
tick (16 at 0.3, 13 at 0.4, 26 at 0.15, for alpha = 0.05), and more while its witness is
learnt; no test needs fewer than ``log(1 / alpha) / -log(1 - tolerance)`` for a change of
twice the tolerance (9, 6, 19: the likelihood ratio of a baseline with none of the new
kind against one with a share ``tolerance`` of it).

**Tolerance** (Richter et al., ICLR 2025): for any ``|f| <= 1``, ``E f(x) - E f(y) <= 2
TV``, so with ``g = (f(x) - f(y)) / 2 - tolerance`` the wealth stays a supermartingale while
the total-variation distance between the tick's and the baseline's answer distributions is
at most ``tolerance`` (the share of answers that changed, for answers that move to new
places): the monitor alarms only for larger changes. With several ticks after a change the
bound needs every two tick distributions within ``tolerance`` of each other, as with one
change (the queue may pair two ticks after it).

**Two forms.** ``form="test"`` (default) alarms when the wealth reaches ``1 / alpha``:
``P(ever alarm | no change) <= alpha``. ``form="detect"`` is the Shiryaev-Roberts e-detector
of Shin, Ramdas & Rinaldo (2023) on the same bets, a new bettor starting at every tick,
``M_t = (M_{t-1} + 1) * e_t``: it forgets the quiet ticks' losses, and its average run length
to a false alarm is at least ``1 / alpha`` ticks (``M_t - t`` is a martingale with no change),
so pick alpha as one over the run length wanted (1 / 3650 for ten years of daily ticks).
With several processes (``tolerance = 0``) each runs its Shiryaev-Roberts statistic (the
conformal ones on their per-tick factors) and ``e_value`` is the largest ``w_i M^i_t / 2``:
with no change ``E M^i_n = n``, so by Doob's maximal inequality for the nonnegative
submartingale ``M^i_t``, ``P(M^i_s >= 2 / (w_i alpha) for some s <= n) <= n w_i alpha / 2``
for each, the alarm comes by tick n with probability at most ``sum_i n w_i alpha / 2 = n
alpha / 2``, and the average run length ``sum_n P(no alarm by n) >= sum_{n <= 2 / alpha} (1 -
n alpha / 2) >= 1 / alpha``. Either alarm stays raised until ``reset``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._conformal import ConformalMartingale
from ._monitor_pool import alarm_factors
from ._tick_conformal import BLOCKS, TickConformalMartingale
from ._validation import (
    RngLike,
    as_embeddings,
    as_positive_int,
    as_probability,
    as_rng,
    as_weights,
    choose,
)

__all__ = ["BOTH_WEIGHTS", "CONFORMAL", "FORMS", "DriftMonitor", "MonitorState", "tolerance_reach"]

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]

FORMS = ("test", "detect")
"""``test``: Ville's alarm, ever false with probability <= alpha; ``detect``: the
Shiryaev-Roberts e-detector, average run length to a false alarm >= 1 / alpha ticks."""
CONFORMAL = ("outputs", "ticks", "both")
"""The conformal processes run beside the betting one (``tolerance = 0``): ``outputs`` one
p-value per output (``_conformal.py``), ``ticks`` one per block of ticks on the shares of the
pool's kinds of answer, a process per block length of ``blocks`` (``_tick_conformal.py``;
alone slow on answers of a new kind), ``both`` (the default) the per-output process, a tick
process on new kinds of answer (novelty) and the ``ticks`` ones."""
BOTH_WEIGHTS = (0.1, 0.3, 0.3, 0.3)
"""The default weights of ``conformal="both"`` in the alarm: the betting process, the two on
new kinds of answer (per output, and the tick process on novelty), and the tick processes on
shares together (equal shares of it per block length; module docstring, *Weighted
e-Bonferroni*)."""
STAKE_WINDOW = 20
"""Pairs whose payoffs set the next stake (aGRAPA)."""
STAKE_MIN_PAIRS = 2
"""No stake until this many pairs have been paid."""
STAKE_CAUTION = 0.5
"""Standard errors the recent mean payoff is lowered by before it sets the stake: while
nothing changes the recent mean is noise and the stake mostly 0."""
MAX_STAKE = 0.8
"""The largest stake with no tolerance (payoffs in [-1, 1]; the wealth keeps at least a
fifth of itself on the worst pair)."""
SPEND_TICKS = 40
"""With a tolerance, at most one queued baseline output per this many queued is bet at a
tick (``_baseline_per_tick``)."""
TOLERANT_STAKE = 0.95
"""With a tolerance, the largest stake times ``1 + tolerance`` (the wealth keeps a
twentieth of itself on the worst bet): each payoff is against a mean of tick outputs, seldom
near its worst, and each baseline output's gain is capped by it (``tolerance_reach``)."""
BASELINE_MEMORY = 400
"""Most recent baseline outputs the witness is learnt from."""
SPREAD_FLOOR = 1e-12
"""Relative spread below which outputs count as not varying (the witness is 0)."""


@dataclass(frozen=True)
class MonitorState:
    """The monitor after a tick: its evidence, whether it alarmed, and what it bet on."""

    ticks: int
    """Ticks seen since the start or the last reset."""
    e_value: float
    """The evidence: with ``tolerance = 0`` the largest of the m processes' evidences (the
    betting and the conformal ones) each times its weight (``form="test"``) or half its
    weight (``form="detect"``), weighted e-Bonferroni of them; with a tolerance the betting
    evidence alone. Each process's evidence is its wealth (test) or its Shiryaev-Roberts
    statistic (detect). The alarm line is ``threshold``."""
    log_e_value: float
    """Natural log of ``e_value`` (for the evidence chart; finite where ``e_value``
    underflows)."""
    threshold: float
    """``1 / alpha``: the alarm is raised when ``e_value`` first reaches it."""
    alarm: bool
    """Raised at some tick so far (it stays raised until ``reset``)."""
    alarm_tick: int | None
    """The tick (1-based, since the start or last reset) at which the alarm was raised."""
    pairs: int
    """Pairs (tick output, baseline output) bet on at this tick; with a tolerance, baseline
    outputs bet on, each against the mean of a group of the tick's outputs."""
    stake: float
    """The fraction of wealth staked per pair at this tick."""
    payoff: float
    """Mean payoff of this tick's pairs (0 without pairs); positive: the tick's outputs
    lie further along the witness than the baseline's."""
    baseline_left: int
    """Fresh baseline outputs queued for later ticks."""
    log_e_betting: float
    """Natural log of the betting process's evidence (wealth or Shiryaev-Roberts)."""
    log_e_conformal: float
    """Natural log of the conformal processes' evidence (each one's martingale or Shiryaev-
    Roberts statistic, the larger of them with ``conformal="both"``; ``_conformal.py``,
    ``_tick_conformal.py``); 0 with a tolerance (they are off)."""
    log_martingales: tuple[float, ...] = ()
    """Natural log of each process's test martingale whatever the form: the betting wealth,
    then each conformal process's (the per-output one, the tick process on novelty, then the
    tick processes on shares by block: those the design runs).
    The pieces ``pool_evidence`` multiplies across independent arms
    (``_monitor_pool.py``)."""
    weights: tuple[float, ...] = ()
    """Each process's weight in the alarm, in ``log_martingales``' order (``(1.0,)`` with a
    tolerance), summing to 1."""


@dataclass
class _Book:
    """The monitor's mutable record (private; ``MonitorState`` is what callers see)."""

    queue: deque[Vector]
    recent_ticks: deque[Matrix]
    payoffs: deque[float]
    seen_baseline: Matrix | None = None
    """The last ``BASELINE_MEMORY`` baseline outputs bet on."""
    reference: Matrix | None = None
    span: float = 1.0
    """The largest absolute coordinate seen (at least 1): the scale of "does not vary"."""
    ticks: int = 0
    log_wealth: float = 0.0
    log_detector: float = -math.inf
    alarm_tick: int | None = None


class DriftMonitor:
    """Anytime-valid drift monitor of one arm against its baseline (module docstring).

    ``alpha`` in (0, 1): the alarm line is ``1 / alpha``. ``tolerance`` in [0, 1): total-
    variation distance below which a change is not alarmed. ``form``: ``"test"`` or
    ``"detect"`` (``FORMS``); with ``tolerance = 0`` the conformal process runs too (module
    docstring); ``conformal``: which (``CONFORMAL``). ``weights``: each process's share of the
    alarm (the betting, the per-output, the tick process on novelty, then the tick processes
    on shares by block: those ``conformal`` runs), positive and
    summing to 1; None: ``BOTH_WEIGHTS`` for ``"both"``, equal otherwise; not used with a
    tolerance (the betting process alone). ``reserve`` in (0, 1): share of each
    tick's outputs put aside as fresh baseline for later ticks. ``window``: ticks whose
    outputs the witness is learnt from. ``blocks``: ticks per tested block of the tick
    processes, one process per length (``_tick_conformal.BLOCKS``). ``rng``: seed or
    Generator (which outputs are bet on and which put aside).
    """

    def __init__(
        self,
        alpha: float = 0.05,
        tolerance: float = 0.0,
        *,
        form: str = "test",
        conformal: str = "both",
        weights: Sequence[float] | None = None,
        reserve: float = 0.2,
        window: int = 5,
        blocks: Sequence[int] = BLOCKS,
        rng: RngLike = None,
    ) -> None:
        self.alpha, self.tolerance = _monitor_iv(alpha, tolerance, reserve)
        self.form = choose(form, "form", FORMS)
        self.conformal = choose(conformal, "conformal", CONFORMAL)
        self.reserve = float(reserve)
        self.window = as_positive_int(window, "window")
        self.blocks = _blocks_iv(blocks)
        self.weights = _weights_iv(weights, self.conformal, self.blocks, self.tolerance)
        self._rng = as_rng(rng)
        self._book = _new_book(self.window)
        self._conformal = self._new_conformal()

    @property
    def max_stake(self) -> float:
        """The largest stake: the wealth stays positive for every payoff in its range."""
        if self.tolerance > 0.0:
            return TOLERANT_STAKE / (1.0 + self.tolerance)
        return MAX_STAKE / (1.0 + self.tolerance)

    def reset(self) -> None:
        """Start again: a new baseline (the next ``update``'s reference), no evidence, no
        alarm (after an intended change)."""
        self._book = _new_book(self.window)
        self._conformal = self._new_conformal()

    def _new_conformal(self) -> list[ConformalMartingale | TickConformalMartingale]:
        """The conformal processes, each on a child of the monitor's rng (spawning leaves
        the parent's stream, and so the betting process, as it was)."""
        if self.tolerance > 0.0:
            return []
        return [
            ConformalMartingale(self._rng.spawn(1)[0])
            if statistic == "outputs"
            else TickConformalMartingale(self._rng.spawn(1)[0], block, statistic)
            for statistic, block in _conformal_processes(self.conformal, self.blocks)
        ]

    def update(self, reference: ArrayLike, tick: ArrayLike) -> MonitorState:
        """Bet on one tick: ``reference`` (k_r, d) outputs of the baseline (the same array
        every tick, or a fresh sample of the baseline, whose outputs join the queue), and
        ``tick`` (k, d) this tick's outputs of the arm, k_r, k >= 2."""
        ref, current = _update_iv(reference, tick, self._book.reference)
        book = self._book
        steps = [process.update(ref, current) for process in self._conformal]
        book.span = max(book.span, float(np.abs(ref).max()), float(np.abs(current).max()))
        if book.reference is None or not np.array_equal(ref, book.reference):
            book.reference = ref
            for row in ref[self._rng.permutation(len(ref))][::-1]:
                book.queue.appendleft(row)  # fresh baseline is used first
        current = current[self._rng.permutation(len(current))]
        if self.tolerance > 0.0:
            x, y, payoffs, stake = self._bet_on_means(current)
            n_pairs = len(y)
        else:
            n_pairs = min(_pairs_per_tick(len(current), self.reserve), len(book.queue))
            x = current[:n_pairs]
            y = np.array([book.queue.popleft() for _ in range(n_pairs)]).reshape(n_pairs, -1)
            book.queue.extend(current[n_pairs:])
            stake = self._stake()
            payoffs = np.zeros(0)
            if n_pairs:
                witness = _witness(book)
                payoffs = (witness(x) - witness(y)) / 2.0 - self.tolerance
            book.payoffs.extend(payoffs.tolist())
        log_e = float(np.log1p(stake * payoffs).sum())
        book.ticks += 1
        book.log_wealth += log_e
        book.log_detector = log_e + float(np.logaddexp(book.log_detector, 0.0))
        seen = y if book.seen_baseline is None else np.concatenate([book.seen_baseline, y])
        book.seen_baseline = seen[-BASELINE_MEMORY:]
        book.recent_ticks.append(x)
        betting = book.log_wealth if self.form == "test" else book.log_detector
        others = [s.log_martingale if self.form == "test" else s.log_detector for s in steps]
        factors = alarm_factors(self.weights, self.form)
        evidence = max(e + math.log(f) for e, f in zip([betting, *others], factors, strict=True))
        if book.alarm_tick is None and evidence >= -math.log(self.alpha):
            book.alarm_tick = book.ticks
        return MonitorState(
            ticks=book.ticks,
            e_value=math.exp(min(evidence, 700.0)),
            log_e_value=evidence,
            threshold=1.0 / self.alpha,
            alarm=book.alarm_tick is not None,
            alarm_tick=book.alarm_tick,
            pairs=n_pairs,
            stake=stake,
            payoff=float(payoffs.mean()) if n_pairs else 0.0,
            baseline_left=len(book.queue),
            log_e_betting=betting,
            log_e_conformal=max(others) if steps else 0.0,
            log_martingales=(book.log_wealth, *(s.log_martingale for s in steps)),
            weights=self.weights,
        )

    def _bet_on_means(self, current: Matrix) -> tuple[Matrix, Matrix, Vector, float]:
        """The tolerance's bets (module docstring, *With a tolerance*): ``m`` queued
        baseline outputs, each against the mean witness of its own group of this tick's
        outputs; the tick's bet outputs, the baseline outputs, the payoffs, the stake."""
        book = self._book
        growth = len(current) - 2 * _pairs_per_tick(len(current), self.reserve)
        m = _baseline_per_tick(len(current), self.reserve, len(book.queue))
        x = current[: len(current) - growth - m] if m else current[:0]
        y = np.array([book.queue.popleft() for _ in range(m)]).reshape(m, current.shape[1])
        book.queue.extend(current[len(x) :])
        stake = self._stake()
        witness = _likelihood_witness(book)
        payoffs = np.full(m, -self.tolerance)
        if witness is not _zero and m:
            on_x = witness(x)
            means = np.array([group.mean() for group in np.array_split(on_x, m)])
            payoffs = (means - witness(y)) / 2.0 - self.tolerance
            book.payoffs.extend(payoffs.tolist())  # bets without a witness say nothing
        return x, y, payoffs, stake

    def _stake(self) -> float:
        """aGRAPA on the last ``STAKE_WINDOW`` payoffs, with the mean lowered by
        ``STAKE_CAUTION`` standard errors: ``(mean - c se) / (mean of squares)``, in
        [0, max_stake]; 0 before ``STAKE_MIN_PAIRS`` pairs (one with a tolerance, whose
        payoffs are counted only once a witness was learnt)."""
        past = self._book.payoffs
        n = len(past)
        if n < (1 if self.tolerance > 0.0 else STAKE_MIN_PAIRS):
            return 0.0
        mean = sum(past) / n
        second = sum(g * g for g in past) / n
        error = math.sqrt(max(second - mean * mean, 0.0) / n)
        edge = mean - STAKE_CAUTION * error
        if edge <= 0.0 or second <= 0.0:
            return 0.0
        return min(edge / second, self.max_stake)


def tolerance_reach(tolerance: float, alpha: float) -> int:
    """The fewest baseline outputs with which a monitor with ``tolerance`` > 0 can alarm at
    ``1 / alpha`` on a change present from its first tick (of twice the tolerance, or any
    size): each baseline output is bet once, gaining at most ``log(1 + TOLERANT_STAKE
    tolerance / (1 + tolerance))`` even with a perfect witness (module docstring). Learning
    the witness costs more; any test at all needs ``log(1 / alpha) / -log(1 - tolerance)``
    for a change of twice the tolerance."""
    level = as_probability(alpha, "alpha")
    tol = _monitor_iv(level, tolerance, 0.5)[1]
    if tol <= 0.0:
        raise ValueError(f"tolerance: the reach is of a tolerance > 0, got {tolerance!r}")
    gain = math.log1p(TOLERANT_STAKE * tol / (1.0 + tol))
    return math.ceil(-math.log(level) / gain - 1e-9)


def _pairs_per_tick(k: int, reserve: float) -> int:
    """Outputs of a tick of ``k`` bet on now (each against one queued output): at least
    one, and ``k * reserve`` more are put aside than are taken from the queue."""
    return max(1, int(k * (1.0 - reserve) / 2.0))


def _baseline_per_tick(k: int, reserve: float, queued: int) -> int:
    """Queued baseline outputs bet on at a tick of ``k`` with a tolerance: one per
    ``SPEND_TICKS`` queued, at least one and at most as many as without a tolerance
    (``_pairs_per_tick``), so that a short baseline (the reference alone) is bet one output
    a tick, each against the mean of the tick's other bet outputs, and a long one (quiet
    ticks put aside) as fast as without a tolerance."""
    return min(queued, _pairs_per_tick(k, reserve), max(1, queued // SPEND_TICKS))


def _new_book(window: int) -> _Book:
    return _Book(
        queue=deque(),
        recent_ticks=deque(maxlen=window),
        payoffs=deque(maxlen=STAKE_WINDOW),
    )


def _witness(book: _Book) -> Any:
    """The clipped linear witness learnt from the outputs bet on before this tick: from
    the baseline outputs seen towards the recent tick outputs; 0 where they do not vary or
    nothing was seen yet."""
    if book.seen_baseline is None or not book.recent_ticks:
        return _zero
    base = book.seen_baseline
    ticks = np.concatenate(book.recent_ticks)
    base_mean, ticks_mean = base.mean(axis=0), ticks.mean(axis=0)
    direction = ticks_mean - base_mean
    size = math.sqrt(float(direction @ direction))
    floor = SPREAD_FLOOR * book.span
    if size <= floor:
        return _zero
    direction /= size
    on_base = (base - base_mean) @ direction
    on_ticks = (ticks - ticks_mean) @ direction
    spread = math.sqrt(
        (float(on_base @ on_base) + float(on_ticks @ on_ticks)) / (len(base) + len(ticks))
    )
    scale = max(2.0 * spread, size / 2.0)
    if scale <= floor:
        return _zero
    centre = float((base_mean + ticks_mean) @ direction) / 2.0

    def witness(z: Matrix) -> Vector:
        values: Vector = np.minimum(1.0, np.maximum(-1.0, (z @ direction - centre) / scale))
        return values

    return witness


def _likelihood_witness(book: _Book) -> Any:
    """The tolerance's witness, from the outputs bet on before this tick: on ``_witness``'s
    direction and centre, half the log-likelihood ratio of two normals with the recent tick
    outputs' and the baseline's means and their pooled spread, clipped to [-1, 1]. Where the
    two are far apart for their spread it is a classifier (+1 and -1, the witness of the
    total-variation bound ``E f(x) - E f(y) <= 2 TV``, which a tolerance needs to pay); 0
    where ``_witness`` is."""
    if _witness(book) is _zero:
        return _zero
    assert book.seen_baseline is not None
    base = book.seen_baseline
    ticks = np.concatenate(book.recent_ticks)
    base_mean, ticks_mean = base.mean(axis=0), ticks.mean(axis=0)
    direction = ticks_mean - base_mean
    size = math.sqrt(float(direction @ direction))
    direction /= size
    on_base = (base - base_mean) @ direction
    on_ticks = (ticks - ticks_mean) @ direction
    variance = (float(on_base @ on_base) + float(on_ticks @ on_ticks)) / (len(base) + len(ticks))
    scale = max(2.0 * variance / size, SPREAD_FLOOR * book.span)
    centre = float((base_mean + ticks_mean) @ direction) / 2.0

    def witness(z: Matrix) -> Vector:
        values: Vector = np.clip((z @ direction - centre) / scale, -1.0, 1.0)
        return values

    return witness


def _zero(z: Matrix) -> Vector:
    return np.zeros(len(z))


def _monitor_iv(alpha: Any, tolerance: Any, reserve: Any) -> tuple[float, float]:
    level = as_probability(alpha, "alpha")
    try:
        tol = float(tolerance)
    except (TypeError, ValueError):
        raise ValueError(f"tolerance: must be a number in [0, 1), got {tolerance!r}") from None
    if not 0.0 <= tol < 1.0:
        raise ValueError(f"tolerance: a total-variation distance in [0, 1), got {tolerance!r}")
    as_probability(reserve, "reserve")
    return level, tol


def _blocks_iv(blocks: Any) -> tuple[int, ...]:
    try:
        lengths = tuple(as_positive_int(b, "blocks") for b in blocks)
    except TypeError:
        raise ValueError(f"blocks: a sequence of tick counts, got {blocks!r}") from None
    if not lengths or len(set(lengths)) < len(lengths):
        raise ValueError(f"blocks: distinct positive tick counts, at least one, got {blocks!r}")
    return lengths


def _conformal_processes(conformal: str, blocks: tuple[int, ...]) -> tuple[tuple[str, int], ...]:
    """The conformal processes of ``conformal``, in ``log_martingales``' order: ``("outputs",
    0)`` for the per-output one, ``(statistic, block)`` for a tick process."""
    outputs = (("outputs", 0),) if conformal in ("outputs", "both") else ()
    novelty = (("novelty", 1),) if conformal == "both" else ()
    shares = tuple(("shares", b) for b in blocks) if conformal in ("ticks", "both") else ()
    return outputs + novelty + shares


def _weights_iv(
    weights: Any, conformal: str, blocks: tuple[int, ...], tolerance: float
) -> tuple[float, ...]:
    """The processes' weights (``DriftMonitor``): given, or the design's default."""
    m = 1 + len(_conformal_processes(conformal, blocks))
    if weights is None:
        if tolerance > 0.0:
            return (1.0,)
        if conformal != "both":
            return (1.0 / m,) * m
        betting, outputs, novelty, ticks = BOTH_WEIGHTS
        return (betting, outputs, novelty, *(ticks / len(blocks),) * len(blocks))
    given = as_weights(
        weights, m, "weights", f"the betting one, then the {conformal!r} conformal ones"
    )
    return (1.0,) if tolerance > 0.0 else given


def _update_iv(
    reference: ArrayLike, tick: ArrayLike, previous: Matrix | None
) -> tuple[Matrix, Matrix]:
    ref = as_embeddings(reference, "reference")
    current = as_embeddings(tick, "tick")
    if current.shape[1] != ref.shape[1]:
        raise ValueError(
            f"tick: embeddings of dimension {current.shape[1]}, the reference's are {ref.shape[1]}"
        )
    if previous is not None and ref.shape[1] != previous.shape[1]:
        raise ValueError(
            f"reference: embeddings of dimension {ref.shape[1]}, the monitor's are "
            f"{previous.shape[1]} (reset the monitor for a new embedder)"
        )
    return ref, current
