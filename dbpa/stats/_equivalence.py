"""Equivalence decisions: changed, equivalent or inconclusive, with a margin.

The effect theta (the energy distance of ``_interval``) is nonnegative, so the
equivalence region is ``[0, margin)`` and of Schuirmann's two one-sided tests (TOST,
1987) only the upper one is needed: H0 ``theta >= margin`` against H1 ``theta < margin``.
Its p-value is the bootstrap's from the arms tilted onto the boundary (``_tilted``: the
resampled estimate at the likeliest point of the boundary, valid also where an arm's
sample hides its spread), and below that test's grid of margins, where its p-value is large,
the least-favourable one over the boundary (``_boundary``: the observed plug-in distance
against bootstrap draws of the noise, each arm's resampled residuals, shifted to distance
``margin`` along the direction where that is likeliest to look small); "equivalent" at
alpha is the same claim as the upper bound of the ``1 - 2 alpha`` interval lying below the
margin.

A perturbation is

* **equivalent** when the equivalence test rejects at alpha, even if the permutation test
  also rejects: at large k, a difference far inside the margin is detected but is not a
  change the margin counts (the record keeps ``rejected`` to say so);
* **changed** when the permutation test rejects and equivalence is not shown;
* **inconclusive** otherwise.

In a family both sets of p-values are corrected by the same method (``correct``), each at
alpha. A test's two null hypotheses (theta = 0 for a change, theta >= margin for
equivalence) cannot both be true since margin > 0, so with Bonferroni the chance of any
false claim of either kind is at most alpha (at most m true nulls, each at alpha/m); with
Holm, BH or BY each kind of claim keeps its own guarantee at alpha.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._boundary import boundary_bound, boundary_p_value
from ._interval import INTERVAL_OMEGAS, EffectInterval, energy_u_statistic, energy_v_statistic
from ._multiplicity import CORRECTIONS, CorrectionResult, correct
from ._similarity import pool_arms
from ._validation import as_p_values, as_probability, choose

DecisionName = Literal["changed", "equivalent", "inconclusive"]


@dataclass(frozen=True)
class Decision:
    """The decision on one perturbation and what it rests on."""

    decision: DecisionName
    """``changed``, ``equivalent`` or ``inconclusive``."""
    rejected: bool
    """The permutation test rejected (change p-value <= its threshold)."""
    equivalent: bool
    """The equivalence test rejected ``theta >= margin``."""
    change_p_value: float
    """The permutation test's p-value (raw)."""
    equivalence_p_value: float
    """p-value of ``theta >= margin`` (raw; the tilted bootstrap's, ``_boundary``)."""
    margin: float
    """The equivalence margin, on the interval's scale."""
    alpha: float
    """Level of both tests (per test; adjusted p-values decide in a family)."""
    upper: float
    """Upper bound of the one-sided ``1 - alpha`` interval (the TOST bound)."""
    interval: EffectInterval
    """The effect's estimate and interval."""


@dataclass(frozen=True)
class FamilyDecision:
    """Decisions on a family of perturbations under one multiplicity correction."""

    decisions: tuple[DecisionName, ...]
    """Per perturbation, in the caller's order."""
    change: CorrectionResult
    """The correction of the change (permutation) p-values."""
    equivalence: CorrectionResult
    """The correction of the equivalence p-values."""
    margins: NDArray[np.float64]
    """The margin of every perturbation."""


@dataclass(frozen=True)
class MarginCalibration:
    """A margin from replicate arms: pairs of arms sampled from the same model and prompt."""

    margin: float
    """The ``quantile`` of ``distances``."""
    quantile: float
    """Which quantile of the replicate distances is the margin."""
    omega: str
    """The omega whose distance defines the scale (as in ``effect_interval``)."""
    distances: NDArray[np.float64]
    """Plug-in energy distance of every replicate pair: how far two samples of the same
    model lie apart at the replicate arms' size."""
    effects: NDArray[np.float64]
    """Unbiased effect (U-statistic) of every pair: about 0 when the replicates are
    exchangeable; a clearly positive mean says they are not (e.g. seeds that matter)."""
    k: tuple[int, ...]
    """Size of the replicate arms (the margin shrinks as they grow, like 1/k)."""


def _as_margin(value: object, name: str = "margin") -> float:
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"{name}: must be a positive number, got {value!r}") from None
    if not (np.isfinite(v) and v > 0.0):
        raise ValueError(f"{name}: must be a positive finite number, got {value!r}")
    return v


def _as_margins(margins: float | ArrayLike, m: int) -> NDArray[np.float64]:
    """One positive margin per test: a scalar for all, or m of them."""
    try:
        arr = np.asarray(margins, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"margins: not a number or a sequence of numbers: {margins!r}") from None
    if arr.ndim > 1 or (arr.ndim == 1 and arr.size != m):
        raise ValueError(f"margins: one number, or one per test ({m}); got shape {arr.shape}")
    deltas = np.broadcast_to(arr, (m,)).copy()
    for delta in deltas:
        _as_margin(delta, "margins")
    return deltas


def equivalence_p_value(interval: EffectInterval, margin: float) -> float:
    """p-value of H0 ``theta >= margin``: the tilted bootstrap's (``dbpa.stats._tilted``:
    the share of resamples from the arms tilted onto the boundary whose estimate is at most
    the observed one), below its grid the least-favourable test's (``dbpa.stats._boundary``,
    ``boundary_p_value``)."""
    if not isinstance(interval, EffectInterval):
        raise ValueError(f"interval: expected an EffectInterval, got {type(interval).__name__}")
    return boundary_p_value(interval.boundary, _as_margin(margin))


def decide(
    change_p_value: float,
    interval: EffectInterval,
    margin: float,
    *,
    alpha: float = 0.05,
) -> Decision:
    """Changed, equivalent or inconclusive for one perturbation.

    ``change_p_value`` is the permutation test's (``PermutationTestResult.p_value``),
    ``interval`` the effect's (``effect_interval`` on the same arms), ``margin`` on its
    scale. For a family use ``decide_family``.
    """
    p_change = float(as_p_values([change_p_value], "change_p_value")[0])
    if not isinstance(interval, EffectInterval):
        raise ValueError(f"interval: expected an EffectInterval, got {type(interval).__name__}")
    delta = _as_margin(margin)
    level = as_probability(alpha, "alpha")
    p_equiv = equivalence_p_value(interval, delta)
    rejected, equivalent = p_change <= level, p_equiv <= level
    return Decision(
        decision=_name(rejected, equivalent),
        rejected=rejected,
        equivalent=equivalent,
        change_p_value=p_change,
        equivalence_p_value=p_equiv,
        margin=delta,
        alpha=level,
        upper=boundary_bound(interval.boundary, level),
        interval=interval,
    )


def decide_family(
    change_p_values: ArrayLike,
    intervals: Sequence[EffectInterval],
    margins: float | ArrayLike,
    *,
    alpha: float = 0.05,
    method: str = "holm",
) -> FamilyDecision:
    """Decisions on m perturbations: both kinds of p-values corrected by ``method``."""
    p_change = as_p_values(change_p_values, "change_p_values")
    items = list(intervals)
    if len(items) != p_change.size:
        raise ValueError(
            f"intervals: {len(items)} given for {p_change.size} change p-values; one per test"
        )
    for i, item in enumerate(items):
        if not isinstance(item, EffectInterval):
            raise ValueError(f"intervals: item {i} is a {type(item).__name__}, not EffectInterval")
    deltas = _as_margins(margins, p_change.size)
    method = choose(method, "method", CORRECTIONS)
    level = as_probability(alpha, "alpha")
    p_equiv = np.array([equivalence_p_value(i, d) for i, d in zip(items, deltas, strict=True)])
    change = correct(p_change, method=method, alpha=level)
    equivalence = correct(p_equiv, method=method, alpha=level)
    decisions = tuple(
        _name(bool(r), bool(e)) for r, e in zip(change.reject, equivalence.reject, strict=True)
    )
    return FamilyDecision(decisions, change, equivalence, deltas)


def _name(rejected: bool, equivalent: bool) -> DecisionName:
    if equivalent:
        return "equivalent"
    return "changed" if rejected else "inconclusive"


def calibrate_margin(
    replicates: Sequence[tuple[ArrayLike, ArrayLike]],
    *,
    omega: str = "energy_l2",
    quantile: float = 0.95,
) -> MarginCalibration:
    """A margin from the model's own noise: how far two samples of it lie apart.

    ``replicates`` are pairs of arms sampled from the same model and prompt under other
    seeds. For each pair the plug-in energy distance between the two samples (what the
    test's ``energy_*`` statistic reports) is computed; the margin is its ``quantile``
    over the pairs. The claim "equivalent" then reads: the perturbation moves the output
    distribution by less than two samples of the replicates' size of the unperturbed
    model typically lie apart. Use replicate arms of the audit's k.
    """
    pairs = list(replicates)
    if not pairs:
        raise ValueError("replicates: needs at least one pair of arms")
    name = choose(omega, "omega", INTERVAL_OMEGAS)
    q = as_probability(quantile, "quantile")
    distance = INTERVAL_OMEGAS[name]
    v, u, sizes = [], [], []
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2):
            raise ValueError(f"replicates: item {i} is not a pair (a, b) of arms")
        z = pool_arms(pair[0], pair[1], nonzero=name == "energy_cosine")
        k_a = len(np.asarray(pair[0]))
        d = distance(z)
        v.append(energy_v_statistic(d, k_a))
        u.append(energy_u_statistic(d, k_a))
        sizes.extend([k_a, z.shape[0] - k_a])
    distances = np.asarray(v)
    return MarginCalibration(
        margin=float(np.quantile(distances, q)),
        quantile=q,
        omega=name,
        distances=distances,
        effects=np.asarray(u),
        k=tuple(sorted(set(sizes))),
    )
