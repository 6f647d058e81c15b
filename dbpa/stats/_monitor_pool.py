"""Drift evidence pooled over independent arms: one test per perturbation over a set's prompts.

A prompt set of ``n`` prompts under ``P`` perturbations (and the original) has ``n (P + 1)``
arms per model, each with its own ``DriftMonitor``. E-Bonferroni over every arm puts each
arm's alarm line at ``n (P + 1) / alpha``, so a change spread over the prompts needs one
prompt to carry it alone. ``pool_evidence`` multiplies instead the arms of one pool (a
perturbation, or the original, of one model over the set's prompts):

**Product of independent test martingales.** Each arm's monitor runs ``m`` processes (the
betting one and one or two conformal ones), each a test martingale ``M^j_i`` in its own
filtration (``_monitor.py``). The outputs of different arms are independent draws given the
model, and each arm's monitor has its own random generator, so the arms' filtrations are
independent: given the pooled past ``G_{t-1}`` (every arm's filtration), arm ``j``'s next
factor ``F^j_t = M^j_t / M^j_{t-1}`` depends on arm ``j``'s data only, has conditional mean
at most 1, and is independent of the other arms' factors, so ``E[prod_j F^j_t | G_{t-1}] =
prod_j E[F^j_t | G^j_{t-1}] <= 1``: the product ``prod_j M^j_i`` is a test martingale in
the pooled filtration (Vovk & Wang 2021, *E-values: calibration, combination and
applications*, Ann. Statist. 49, on products of independent e-values; Ramdas, Grünwald,
Vovk & Shafer 2023, *Game-theoretic statistics and safe anytime-valid inference*, Statist.
Sci. 38, on products of test martingales). An arm not sampled at a tick keeps its last value
(its martingale stopped there), one joining later starts at 1. Each process is pooled
alone: the betting and conformal processes live in different filtrations, so their product
would not be a martingale.

**Evidence and the promise.** ``form="test"``: the pool's evidence is the largest of its
``m`` pooled processes each times its weight ``w_i`` (the arms' ``MonitorState.weights``,
summing to 1; equal by default), so by Ville's inequality for each (process ``i`` crosses
``1 / (w_i alpha)`` with probability at most ``w_i alpha``) and a union bound the pool
alarms at ``1 / alpha`` with probability at most ``alpha`` when no arm of it changed, over
any number of ticks. ``form="detect"``: each pooled process's Shiryaev-Roberts statistic on
its per-tick factors (Shin, Ramdas & Rinaldo 2023), the largest times ``w_i / 2`` (times 1
when ``m = 1``), as ``DriftMonitor`` does for one arm. With
``G`` pools each at ``alpha / G`` (e-Bonferroni over pools only), the chance that any pool
none of whose arms changed ever alarms is at most ``alpha`` (test form); with the detector
each such pool's statistic ``R_t`` has ``E R_n <= n`` so, by Doob's maximal inequality and
the same union bound, some such pool alarms by tick ``n`` with probability at most ``n
alpha`` (``n alpha / 2`` with ``m > 1``). A change spread over the prompts adds up: ``n``
arms each gaining log evidence ``g`` give the pool ``n g``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import as_probability, as_weights, choose

__all__ = ["PooledEvidence", "alarm_factors", "pool_evidence"]

FORMS = ("test", "detect")


@dataclass(frozen=True)
class PooledEvidence:
    """A pool's evidence over its ticks."""

    log_e_value: NDArray[np.float64]
    """(T,) natural log of the pool's evidence after each tick (the largest process times
    its ``weights``)."""
    log_processes: NDArray[np.float64]
    """(T, m) each pooled process's log evidence: its log martingale (test) or log
    Shiryaev-Roberts statistic (detect), before its weight."""
    threshold: float
    """``1 / alpha``: the alarm line of the evidence."""
    weights: tuple[float, ...]
    """The weighted e-Bonferroni's factor of each process: its weight (test), half of it
    (detect, ``m > 1``); process ``i`` alone alarms at ``threshold / weights[i]``."""
    alarm_tick: int | None
    """The first tick (1-based) whose evidence reached ``threshold``; None without alarm."""

    @property
    def e_value(self) -> NDArray[np.float64]:
        """The evidence as e-values (overflow capped)."""
        values: NDArray[np.float64] = np.exp(np.minimum(self.log_e_value, 700.0))
        return values


def alarm_factors(weights: ArrayLike, form: str) -> NDArray[np.float64]:
    """Each process's factor in the weighted e-Bonferroni (module docstring): its weight
    (``test``), half of it (``detect`` with more than one process); one arm's monitor and a
    pool apply the same."""
    shares = np.asarray(weights, dtype=np.float64)
    return shares / (2.0 if form == "detect" and shares.size > 1 else 1.0)


def pool_evidence(
    log_martingales: ArrayLike,
    alpha: float,
    *,
    form: str = "test",
    weights: ArrayLike | None = None,
) -> PooledEvidence:
    """The pooled evidence of ``log_martingales`` (T ticks, n arms, m processes): at tick
    ``t``, arm ``j``'s log test martingale of process ``i`` (module docstring), each arm's
    ``MonitorState.log_martingales`` carried forward over ticks it missed and 0 before its
    first. ``alpha`` in (0, 1): the pool's level; ``form``: ``test`` or ``detect``;
    ``weights``: the m processes' weights, positive and summing to 1 (the arms'
    ``MonitorState.weights``; None: equal)."""
    logs, level, form, shares = _pool_iv(log_martingales, alpha, form, weights)
    pooled = logs.sum(axis=1)
    if form == "detect":
        factors = np.diff(pooled, axis=0, prepend=np.zeros((1, pooled.shape[1])))
        detector = np.empty_like(pooled)
        running = np.full(pooled.shape[1], -np.inf)
        for t, step in enumerate(factors):
            running = step + np.logaddexp(running, 0.0)
            detector[t] = running
        pooled = detector
    factors = alarm_factors(shares, form)
    evidence = (pooled + np.log(factors)).max(axis=1)
    crossed = np.flatnonzero(evidence >= -math.log(level))
    return PooledEvidence(
        log_e_value=evidence,
        log_processes=pooled,
        threshold=1.0 / level,
        weights=tuple(float(f) for f in factors),
        alarm_tick=int(crossed[0]) + 1 if crossed.size else None,
    )


def _pool_iv(
    log_martingales: Any, alpha: Any, form: Any, weights: Any
) -> tuple[NDArray[np.float64], float, str, NDArray[np.float64]]:
    level = as_probability(alpha, "alpha")
    chosen = choose(form, "form", FORMS)
    try:
        logs = np.asarray(log_martingales, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("log_martingales: must be a (ticks, arms, processes) array") from None
    if logs.ndim != 3 or 0 in logs.shape:
        raise ValueError(
            f"log_martingales: a (ticks, arms, processes) array with none empty, got shape "
            f"{logs.shape}"
        )
    if not np.isfinite(logs).all():
        raise ValueError("log_martingales: NaN or infinite values (logs of positive wealth)")
    m = logs.shape[2]
    if weights is None:
        return logs, level, chosen, np.full(m, 1.0 / m)
    shares = np.asarray(as_weights(weights, m, "weights"))
    return logs, level, chosen, shares
