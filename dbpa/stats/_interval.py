"""A confidence interval for the effect of a perturbation, from the two arms' embeddings.

The scale is the population energy distance between the arms' output distributions,
``theta = 2 E d(X, Y) - E d(X, X') - E d(Y, Y')`` (Szekely & Rizzo), with the distance
``d`` of an embedding-level omega: Euclidean (``energy_l2``, the default: zero exactly
when the two distributions are equal, so it sees location and spread), L1
(``energy_l1``), cosine (``energy_cosine``, equal to the squared distance between the
mean unit embeddings) or half the squared Euclidean distance (``centroid``: the squared
distance between the arm centroids). theta is 0 when nothing changed and is in the
units of the distance.

The estimate is the two-sample U-statistic (within-arm means over distinct pairs), which
is *exactly* unbiased at every k, so it needs no permutation-null correction: it is the
unbiased version of the test's bias-corrected ``effect`` for these omegas.

Each bound is a one-sided confidence bound at ``(1 + confidence) / 2``, so the pair covers
with probability at least ``confidence``.

The **upper bound** is the smallest margin that the equivalence test of
``theta >= margin`` (``_boundary``) rejects at ``(1 - confidence) / 2``: the bootstrap from
the arms tilted onto the boundary (``_tilted``: each arm reweighted, on the pooled outputs,
as little as the margin needs), so that an arm whose sample shows less variety than it has
does not make the noise look small; below that test's grid of margins the observed plug-in
distance against bootstrap draws of the noise (each arm's resampled residuals) shifted to
the least favourable point of the boundary. Where a change moves the answers along a
direction in which they vary little (a drift of every answer alike, a change of spread), it
is conservative.

The same resamples give a percentile bootstrap (Efron & Tibshirani, *An Introduction to
the Bootstrap*, 1993, ch. 13), kept as ``bootstrap`` for the difference of two runs'
effects (``_difference``). A resample repeats rows, and a repeated
row paired with itself has distance 0: counted as a pair it would shrink the within-arm
means and push every replicate up. Each replicate is therefore the U-statistic of the
resample over pairs of *distinct original* outputs (the counts ``c`` weight the pairs:
``c'Dc / (k^2 - sum c^2)``), whose bootstrap expectation is the estimate itself. It was the
upper bound until 2026-11-26: it evaluates the spread at the estimate, not at the margin,
and erred at 0.07-0.10 for a nominal 0.05 where a few answers change shares.

The **lower bound** is the largest theta_0 that the test of ``theta <= theta_0`` rejects at
``(1 - confidence) / 2``: the observed plug-in distance against random relabellings of the
pooled outputs, shifted by every delta with ``|delta|^2 <= theta_0`` along their top
principal directions (or orthogonal to them), the largest probability of a distance at
least the observed one taken (``_boundary.boundary_lower``). At ``theta_0 = 0`` that is the
permutation test of no effect on the plug-in energy distance (the ``energy_*`` omegas'
statistic), so the interval excludes 0 exactly when that test rejects at
``(1 - confidence) / 2``. Relabellings rather than resamples on this side: they are exact
when nothing changed, and where the arms differ they count the difference as noise too,
which only widens the law against which the observed distance must look large.

Measured by simulation (``python -m benchmarks interval``, tests/stats/test_interval.py,
tests/stats/test_boundary.py): each side covers at least its nominal level on every shape
measured, about nominally where a few repeated answers change shares (the least favourable
case) and with no effect (the lower side), conservatively elsewhere (up to 0.995 where a
drift moves every answer alike).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._boundary import (
    BoundaryDraws,
    boundary_bound,
    boundary_lower,
    noise_coefficients,
    principal_axes,
    quadratic_forms,
)
from ._omega import merged_ties
from ._permutation import _random_splits
from ._similarity import cosine_distance, l1_distance, l2_distance, pool_arms
from ._threads import blas_for
from ._tilted import tilted_steps
from ._validation import RngLike, as_positive_int, as_probability, as_rng, choose

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]

MIN_ROWS = 5
"""Outputs per arm the bootstrap needs (a resample of one repeated row has no pair)."""
CHUNK = 256
"""Bootstrap replicates (or relabellings) evaluated per vectorized step."""
METHOD = (
    "test inversion; lower: least-favourable test on the plug-in statistic, relabellings of "
    "the pooled outputs shifted along their top principal directions; upper: the bootstrap "
    "from arms tilted onto the boundary (below its grid the least-favourable test, within-arm "
    "bootstrap of residuals shifted along theirs)"
)
GUARD_START = 0.5
"""The tilted-bootstrap guard is evaluated for margins from the least-favourable test's
bound at this tail on (below it that test's p-value exceeds it and decides alone), and from
a tenth of its 5% bound where that is larger (the 50% bound is 0 when the arms' plug-in
distance is below the noise: every margin at which the test rejects at 0.05 or less is
above the 5% bound)."""
"""How ``effect_interval`` computes its bounds (stored with every interval)."""


def _half_squared_l2(z: Matrix) -> Matrix:
    d: Matrix = 0.5 * l2_distance(z) ** 2
    return d


INTERVAL_OMEGAS: dict[str, Callable[[Matrix], Matrix]] = {
    "energy_l2": l2_distance,
    "energy_l1": l1_distance,
    "energy_cosine": cosine_distance,
    "centroid": _half_squared_l2,
}
"""Omegas with an effect interval -> the distance d of their energy distance."""


@dataclass(frozen=True, repr=False)
class EffectInterval:
    """A confidence interval for the energy distance theta between two arms."""

    estimate: float
    """Unbiased U-statistic estimate of theta (can be slightly negative when theta ~ 0)."""
    low: float
    """Lower bound: the largest effect the test of ``theta <= theta_0`` rejects at
    ``(1 - confidence) / 2`` (0 unless the permutation test of no effect on the plug-in
    distance rejects there), at most ``high``."""
    high: float
    """Upper bound: the smallest margin the equivalence test rejects at
    ``(1 - confidence) / 2`` (``_boundary``: the tilted bootstrap); a margin above it is
    shown; ``inf`` where no margin can be (outputs that never vary)."""
    confidence: float
    """Two-sided confidence level of ``[low, high]``."""
    omega: str
    """The omega whose distance defines theta (a key of ``INTERVAL_OMEGAS``)."""
    method: str
    """How the interval was computed."""
    n_bootstrap: int
    """Bootstrap replicates used (draws with a single distinct row per arm are dropped)."""
    bootstrap: Vector
    """Percentile-bootstrap replicates of the estimate (read-only), for the difference of
    two runs' effects (``effect_difference``)."""
    boundary: BoundaryDraws
    """The observed plug-in distance and the bootstrap draws of its noise: the equivalence
    test of any margin (``equivalence_p_value``)."""
    k_a: int
    """Outputs in the original arm."""
    k_b: int
    """Outputs in the perturbed arm."""
    distances: Matrix | None = None
    """(k_a + k_b, k_a + k_b): the distances between the pooled outputs, original arm first,
    equal outputs 0 apart (read-only): the set-level guard's tilts (``set_equivalence``);
    None in an interval read from a record made before they were kept."""

    def __repr__(self) -> str:
        return (
            f"EffectInterval(omega={self.omega!r}, estimate={self.estimate:.6g}, "
            f"low={self.low:.6g}, high={self.high:.6g}, confidence={self.confidence}, "
            f"n_bootstrap={self.n_bootstrap}, k_a={self.k_a}, k_b={self.k_b})"
        )


def _effect_interval_iv(
    a: ArrayLike, b: ArrayLike, omega: str, confidence: float, n_bootstrap: int
) -> tuple[Matrix, int, Callable[[Matrix], Matrix], float, int]:
    name = choose(omega, "omega", INTERVAL_OMEGAS)
    z = pool_arms(a, b, nonzero=name == "energy_cosine")
    k_a = len(np.asarray(a))
    for arg, k in (("a", k_a), ("b", z.shape[0] - k_a)):
        if k < MIN_ROWS:
            raise ValueError(f"{arg}: the bootstrap needs at least {MIN_ROWS} outputs, got {k}")
    level = as_probability(confidence, "confidence")
    n_boot = as_positive_int(n_bootstrap, "n_bootstrap", minimum=100)
    needed = math.ceil(2.0 / (1.0 - level) - 1.0 - 1e-9)
    if n_boot < needed:
        raise ValueError(
            f"n_bootstrap: a {level:g} interval's upper bound needs at least {needed} "
            f"resamples (one beyond its tail), got {n_boot}"
        )
    return z, k_a, INTERVAL_OMEGAS[name], level, n_boot


def energy_u_statistic(distances: Matrix, k_a: int) -> float:
    """Unbiased two-sample energy distance on a pooled distance matrix (``a`` first)."""
    ones = np.ones((1, distances.shape[0]))
    return float(_weighted_u(distances, k_a, ones)[0])


def energy_v_statistic(distances: Matrix, k_a: int) -> float:
    """The plug-in energy distance between the two empirical distributions (self-pairs
    included, as the test's ``energy_*`` statistics); always >= 0."""
    k_b = distances.shape[0] - k_a
    s_aa = distances[:k_a, :k_a].sum()
    s_bb = distances[k_a:, k_a:].sum()
    s_ab = distances[:k_a, k_a:].sum()
    return float(max(2.0 * s_ab / (k_a * k_b) - s_aa / k_a**2 - s_bb / k_b**2, 0.0))


def _weighted_u(distances: Matrix, k_a: int, counts: Matrix) -> Vector:
    """The U-statistic of each resample given by a row of ``counts`` (multiplicity of every
    pooled row), over pairs of distinct original rows; NaN where an arm has a single one."""
    k_b = distances.shape[0] - k_a
    c_a, c_b = counts[:, :k_a], counts[:, k_a:]
    s_aa = np.einsum("ij,ij->i", c_a @ distances[:k_a, :k_a], c_a)
    s_bb = np.einsum("ij,ij->i", c_b @ distances[k_a:, k_a:], c_b)
    s_ab = np.einsum("ij,ij->i", c_a @ distances[:k_a, k_a:], c_b)
    pairs_a = k_a**2 - np.einsum("ij,ij->i", c_a, c_a)
    pairs_b = k_b**2 - np.einsum("ij,ij->i", c_b, c_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        u: Vector = 2.0 * s_ab / (k_a * k_b) - s_aa / pairs_a - s_bb / pairs_b
    u[(pairs_a == 0) | (pairs_b == 0)] = np.nan
    return u


def _bootstrap(
    distances: Matrix, k_a: int, n_bootstrap: int, rng: np.random.Generator
) -> tuple[Vector, BoundaryDraws]:
    """From the same resamples of each arm: the percentile bootstrap's replicates of U (NaN
    draws, an arm with a single distinct row, dropped) and the noise draws of the
    equivalence test (``_boundary``), kept as float32 values since they are stored so."""
    k_b = distances.shape[0] - k_a
    axes = principal_axes(distances, k_a)
    replicates, squared, coordinates = [], [], []
    for start in range(0, n_bootstrap, CHUNK):
        size = min(CHUNK, n_bootstrap - start)
        counts = np.hstack(
            [
                rng.multinomial(k_a, np.full(k_a, 1.0 / k_a), size=size),
                rng.multinomial(k_b, np.full(k_b, 1.0 / k_b), size=size),
            ]
        ).astype(np.float64)
        replicates.append(_weighted_u(distances, k_a, counts))
        noise = noise_coefficients(counts, k_a)
        squared.append(quadratic_forms(distances, noise))
        coordinates.append(noise @ axes)
    draws = BoundaryDraws(
        plug_in=_plug_in(distances, k_a),
        noise=_float32(np.concatenate(squared)),
        directions=_float32(np.vstack(coordinates)),
    )
    out = np.concatenate(replicates)
    kept: Vector = out[np.isfinite(out)]
    return kept, draws


def _float32(values: Matrix) -> Matrix:
    rounded: Matrix = values.astype(np.float32).astype(np.float64)
    rounded.setflags(write=False)
    return rounded


def _relabelled(distances: Matrix, k_a: int, n: int, rng: np.random.Generator) -> BoundaryDraws:
    """``n`` random relabellings of the pooled outputs (the permutation engine's random
    splits): the plug-in distance of each and its coordinates along the pooled outputs' top
    principal directions; exchangeable arms make them the exact law of the noise."""
    size = distances.shape[0]
    k_b = size - k_a
    axes = principal_axes(distances)
    squared, coordinates = [], []
    for masks in _random_splits(size, k_a, n, CHUNK, rng):
        labels = masks.astype(np.float64)
        coefficients = labels / k_a - (1.0 - labels) / k_b
        squared.append(quadratic_forms(distances, coefficients))
        coordinates.append(coefficients @ axes)
    return BoundaryDraws(
        plug_in=_plug_in(distances, k_a),
        noise=np.concatenate(squared),
        directions=np.vstack(coordinates),
    )


def _plug_in(distances: Matrix, k_a: int) -> float:
    """The squared length of the observed arms' mean difference (the plug-in distance)."""
    k_b = distances.shape[0] - k_a
    ones = np.concatenate([np.full(k_a, 1.0 / k_a), np.full(k_b, -1.0 / k_b)])
    return float(quadratic_forms(distances, ones[None, :])[0])


def effect_interval(
    a: ArrayLike,
    b: ArrayLike,
    *,
    omega: str = "energy_l2",
    confidence: float = 0.95,
    n_bootstrap: int = 2000,
    rng: RngLike = None,
) -> EffectInterval:
    """Estimate and confidence interval of the energy distance between two arms.

    Parameters
    ----------
    a, b
        (k_a, d) and (k_b, d) embeddings of the original and perturbed outputs (at least
        5 each).
    omega
        Which distance defines the effect: ``"energy_l2"`` (default), ``"energy_l1"``,
        ``"energy_cosine"`` or ``"centroid"`` (see ``INTERVAL_OMEGAS``). Any test's omega
        (``jsd``, ``auto``, ...) can be paired with it: the interval is about the
        distributions, not about the test statistic.
    confidence
        Two-sided level; an equivalence test at alpha reads the ``1 - 2 alpha`` interval.
    n_bootstrap
        Resamples of each arm, and random relabellings of the pooled outputs (>= 100, and
        enough resamples for the upper bound's tail: ``(1 - confidence) / 2 * (B + 1) >= 1``).
    rng
        Seed or ``numpy.random.Generator``.
    """
    z, k_a, distance, level, n_boot = _effect_interval_iv(a, b, omega, confidence, n_bootstrap)
    with blas_for(z.shape[0]):
        return _effect_interval(z, k_a, distance, omega, level, n_boot, as_rng(rng))


def _effect_interval(
    z: Matrix,
    k_a: int,
    distance: Callable[[Matrix], Matrix],
    omega: str,
    level: float,
    n_boot: int,
    gen: np.random.Generator,
) -> EffectInterval:
    distances = merged_ties(distance(z))  # equal outputs: 0 apart, not rounding noise
    estimate = energy_u_statistic(distances, k_a)
    replicates, boundary = _bootstrap(distances, k_a, n_boot, gen)
    tail = (1.0 - level) / 2.0
    low = boundary_lower(_relabelled(distances, k_a, n_boot, gen), tail)
    start = max(boundary_bound(boundary, GUARD_START), boundary_bound(boundary, 0.05) / 10.0)
    boundary = replace(boundary, guard=tilted_steps(distances, k_a, start, n_boot, gen))
    high = boundary_bound(boundary, tail)
    replicates.setflags(write=False)
    distances.setflags(write=False)
    return EffectInterval(
        estimate=estimate,
        low=min(low, high),
        high=high,
        confidence=level,
        omega=omega,
        method=METHOD,
        n_bootstrap=int(replicates.size),
        bootstrap=replicates,
        boundary=boundary,
        k_a=k_a,
        k_b=z.shape[0] - k_a,
        distances=distances,
    )
