"""Tests of ``theta >= margin`` at the least favourable point of the boundary.

theta is the energy distance of ``_interval``: the squared distance ``|delta|^2`` between
the arms' mean embeddings in the feature space of the kernel ``-d``. The arms' observed
difference is ``delta + e``, e the sampling noise (each arm's mean residual, the
difference of the two), and its squared length is the plug-in (V-) statistic
``v = |delta + e|^2``. Under H0 ``theta >= margin`` an equivalence claim errs when ``v``
comes out small although ``|delta|^2 >= margin``; how often depends on the direction of
delta, which data at the scale of the noise cannot tell apart.

The test therefore takes the largest probability over the boundary. The noise's law comes
from the bootstrap of each arm's residuals (its outputs minus its mean, in the feature
space, scaled by ``sqrt(k / (k - 1))`` so the variance is unbiased): ``e*_j`` is the
difference of the arms' resampled mean residuals, whatever delta is and whatever each arm's
own spread. delta is put at length ``s >= sqrt(margin)`` along each of the top principal
directions of the residuals (either sign) or orthogonal to all of them:

    p(margin) = (1 + max over s >= sqrt(margin), directions u of
                     #{j : |s u + e*_j|^2 <= v}) / (1 + B).

``|s u + e|^2 = s^2 + 2 s <u, e> + |e|^2`` is exact algebra in the feature space, so for
each draw the s that count form an interval, and the maximum over s is an exact sweep over
their ends. The least favourable direction of a small ``v`` is the one along which the
noise varies most (the ball ``|s u + e| <= sqrt(v)`` then holds the most of the noise's
mass): that is what the top directions are for. This is the score-test idea (the spread
evaluated at the hypothesis, as in Farrington & Manning's non-inferiority test, and the
bootstrap at the boundary of the null, as in Dette et al.'s equivalence tests of curves,
JASA 2018) with the nuisance, the direction, at its least favourable value, which is what
makes the level hold whatever the direction (Lehmann & Romano, *Testing Statistical
Hypotheses*, 3.8). The percentile bootstrap test it replaces evaluated the spread at the
estimate and erred at 0.07-0.10 for alpha 0.05 where a few answers change shares.

The noise is learnt from the arms' own samples, and where a sample shows less variety than
its arm has (a perturbed arm collapsing onto one answer, an original arm whose sample
over-represents it) it is too small exactly when ``v`` is: on such shapes this test alone
showed "equivalent" in up to 0.09 of audits at the margin for alpha 0.05 (measured
2026-11-27). The equivalence p-value is therefore, since 2026-12-06, the bootstrap from arms
tilted onto the boundary (``_tilted``), kept in ``BoundaryDraws.guard`` as a step function
of the margin; this test decides only below that function's grid, where its p-value is
large (from 2026-11-27 the larger of the two p-values decided, at a third of the power);
the bound inverts the p-value.

The plug-in ``v`` rather than the unbiased U is what makes the shift exact: U subtracts
within-arm terms that the shift does not move but the resample does, and with a few
repeated answers those terms decide the ties. Residuals rather than relabellings of the
pooled outputs: a relabelling counts the arms' difference itself as noise, so a clear
difference below a wide margin could never be shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import eigh

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]

N_DIRECTIONS = 2
"""Top principal directions of the residuals along which delta is put (each sign)."""


@dataclass(frozen=True, repr=False)
class TiltedSteps:
    """The guard's p-value (``_tilted``) as a step function of the margin."""

    margins: Vector
    """Increasing grid margins (read-only); empty: no guard."""
    p_values: Vector
    """Non-increasing p-value of ``theta >= margin`` for margins from each grid margin to
    the next (read-only); the last one holds beyond the grid, and below the grid the guard
    does not decide (the least-favourable test's p-value exceeds 0.5 there)."""


NO_GUARD = TiltedSteps(np.empty(0), np.empty(0))
"""No grid: the least-favourable test decides alone."""


@dataclass(frozen=True, repr=False)
class BoundaryDraws:
    """The observed squared distance between the arms and its bootstrapped noise: everything
    a test of ``theta >= margin`` needs, for any margin."""

    plug_in: float
    """``v``: the plug-in energy distance of the observed arms (self-pairs included)."""
    noise: Vector
    """``|e*_j|^2``: the squared length of each bootstrap draw of the noise (read-only)."""
    directions: Matrix
    """``<u_r, e*_j>``: each draw's coordinate along the top principal directions of the
    residuals in the kernel's feature space, shape (B, ``N_DIRECTIONS``) (read-only)."""
    guard: TiltedSteps = NO_GUARD
    """The tilted bootstrap's p-value on a grid of margins (``_tilted``): the equivalence
    p-value from the grid's first margin on."""


def principal_axes(distances: Matrix, k_a: int | None = None, count: int = N_DIRECTIONS) -> Matrix:
    """(N, count): ``sqrt(lambda_r) u_r`` of the top eigenpairs of ``-P D P``, P centring
    each arm (``k_a`` given: the residuals) or the pooled outputs (``k_a`` None), so that
    coefficients ``c`` summing to 0 (within each arm) have coordinate ``c @ axes`` along
    each principal direction of the kernel ``-d``'s feature space."""
    size = distances.shape[0]
    count = min(count, size)
    centred = distances.copy()
    groups = [slice(0, size)] if k_a is None else [slice(0, k_a), slice(k_a, size)]
    for group in groups:
        centred[group] -= centred[group].mean(0)
        centred[:, group] -= centred[:, group].mean(1)[:, None]
    values, vectors = eigh(-centred, subset_by_index=[size - count, size - 1])
    axes: Matrix = vectors * np.sqrt(np.clip(values, 0.0, None))
    return axes


def noise_coefficients(counts: Matrix, k_a: int) -> Matrix:
    """Each bootstrap draw's noise ``e*`` as coefficients of the pooled outputs, from the
    resample counts (a row per draw): ``sqrt(k/(k-1)) (n_i - 1) / k`` in arm a, minus that
    in arm b (each arm's mean residual, rescaled so its variance is unbiased)."""
    k_b = counts.shape[1] - k_a
    scale_a = math.sqrt(k_a / (k_a - 1)) / k_a
    scale_b = math.sqrt(k_b / (k_b - 1)) / k_b
    coefficients: Matrix = np.hstack(
        [(counts[:, :k_a] - 1.0) * scale_a, (1.0 - counts[:, k_a:]) * scale_b]
    )
    return coefficients


def quadratic_forms(distances: Matrix, coefficients: Matrix) -> Vector:
    """``|sum_i c_i phi(z_i)|^2 = -c' D c`` for each row c of ``coefficients`` (rows sum
    to 0): the squared length of a difference of weighted means in the feature space."""
    forms: Vector = -np.einsum("ij,ij->i", coefficients @ distances, coefficients)
    return forms


def boundary_p_value(draws: BoundaryDraws, margin: float) -> float:
    """p-value of H0 ``theta >= margin`` (``margin`` > 0): on the tilted bootstrap's grid
    (``draws.guard``, ``_tilted``) its p-value; below the grid, or without one, the least
    favourable test's, ``(1 + max count) / (1 + B)`` (module docstring), no lower than the
    guard's first step (so the p-value never rises with the margin)."""
    steps = draws.guard
    if steps.margins.size and margin >= steps.margins[0]:
        return guard_p_value(steps, margin)
    first = float(steps.p_values[0]) if steps.margins.size else 0.0
    return max(least_favourable_p_value(draws, margin), first)


def least_favourable_p_value(draws: BoundaryDraws, margin: float) -> float:
    """The least-favourable test's p-value of ``theta >= margin`` alone (module docstring)."""
    root = math.sqrt(margin)
    count = 0
    for lo, hi in _inside(draws):
        lo = np.maximum(lo, root)
        keep = hi >= lo
        count = max(count, _deepest(lo[keep], hi[keep]))
    return (1.0 + count) / (1.0 + draws.noise.size)


def boundary_bound(draws: BoundaryDraws, tail: float) -> float:
    """The smallest margin whose p-value (``boundary_p_value``) is at most ``tail``: the
    one-sided ``1 - tail`` upper confidence bound for theta; ``inf`` when B draws are too
    few for ``tail``."""
    steps = draws.guard
    below = least_favourable_bound(draws, tail)
    if steps.margins.size and not (below < steps.margins[0] and steps.p_values[0] <= tail):
        return guard_bound(steps, tail)
    return below


def least_favourable_bound(draws: BoundaryDraws, tail: float) -> float:
    """The smallest margin whose least-favourable p-value alone is at most ``tail``."""
    allowed = _allowed(draws, tail)
    if allowed < 0:
        return math.inf
    reach = 0.0
    for lo, hi in _inside(draws):
        reach = max(reach, _last_deeper(np.maximum(lo, 0.0), hi, allowed))
    return reach * reach


def guard_p_value(steps: TiltedSteps, margin: float) -> float:
    """The guard's p-value at ``margin``: that of the largest grid margin at most
    ``margin``; 0 below the grid or without one (where it does not decide)."""
    index = int(np.searchsorted(steps.margins, margin, "right")) - 1
    return 0.0 if index < 0 else float(steps.p_values[index])


def guard_bound(steps: TiltedSteps, tail: float) -> float:
    """The smallest margin whose guard p-value is at most ``tail`` (0 without a grid,
    ``inf`` when no grid margin's is)."""
    if steps.margins.size == 0:
        return 0.0
    shown = np.flatnonzero(steps.p_values <= tail)
    return float(steps.margins[shown[0]]) if shown.size else math.inf


def boundary_lower(draws: BoundaryDraws, tail: float) -> float:
    """The one-sided ``1 - tail`` lower confidence bound for theta: the largest theta_0 whose
    H0 ``theta <= theta_0`` is rejected at ``tail``, i.e. that no delta with ``|delta|^2 <=
    theta_0`` along the draws' directions (or orthogonal to them) puts more than the allowed
    draws at or beyond the observed distance. 0 when theta_0 = 0 is not rejected; at 0 this
    is the test of no effect on ``v`` against the draws (exact for relabellings)."""
    allowed = _allowed(draws, tail)
    if allowed < 0:
        return 0.0
    need = draws.noise.size - allowed
    first = math.inf
    for lo, hi in _inside(draws, strict=True):
        starts, ends = np.sort(lo), np.sort(hi)
        if _depth(starts, ends, 0.0, closed=False) < need:
            return 0.0
        candidates = ends[ends >= 0.0]
        failing = candidates[_depth(starts, ends, candidates, closed=False) < need]
        if failing.size:
            first = min(first, float(failing.min()))
    return first * first


TIE_RTOL = 1e-6
"""Distances within this share of the draws' mean squared length count as ties: stored
draws are float32, and with repeated answers exact ties are common."""


def _allowed(draws: BoundaryDraws, tail: float) -> int:
    """How many draws may lie beyond the observed distance for a p-value at most ``tail``."""
    return math.floor(tail * (1.0 + draws.noise.size) - 1.0 + 1e-9)


def _inside(draws: BoundaryDraws, *, strict: bool = False) -> list[tuple[Vector, Vector]]:
    """Per direction and sign (and orthogonal to all), the lengths s at which each draw has
    ``s^2 + 2 s w_j + |e*_j|^2 <= v`` (a tie counts as inside), or ``< v`` with ``strict``
    (a tie counts as outside): the intervals' ends, for the draws where that set is not
    empty; the ends may be negative."""
    squared = draws.noise
    tie = TIE_RTOL * float(squared.mean()) if squared.size else 0.0
    v = draws.plug_in - tie if strict else draws.plug_in + tie
    found = []
    for w in [np.zeros_like(squared), *draws.directions.T, *(-draws.directions.T)]:
        disc = w * w - squared + v
        ok = disc > 0.0 if strict else disc >= 0.0
        half = np.sqrt(disc[ok])
        found.append((-w[ok] - half, -w[ok] + half))
    return found


def _deepest(lo: Vector, hi: Vector) -> int:
    """Most of the closed intervals ``[lo, hi]`` that share a point (0 for none)."""
    if lo.size == 0:
        return 0
    starts, ends = np.sort(lo), np.sort(hi)
    return int(_depth(starts, ends, starts).max())


def _last_deeper(lo: Vector, hi: Vector, allowed: int) -> float:
    """The largest point shared by more than ``allowed`` of the intervals (0 for none)."""
    if lo.size <= allowed:
        return 0.0
    keep = hi >= lo
    starts, ends = np.sort(lo[keep]), np.sort(hi[keep])
    deeper = ends[_depth(starts, ends, ends) > allowed]
    return float(deeper.max()) if deeper.size else 0.0


def _depth(
    starts: Vector, ends: Vector, points: Vector | float, *, closed: bool = True
) -> NDArray[np.intp] | np.intp:
    """How many intervals (their ``starts`` and ``ends``, each sorted) hold each point:
    ``[lo, hi]`` closed, or ``(lo, hi)`` open."""
    if closed:
        return np.searchsorted(starts, points, "right") - np.searchsorted(ends, points)
    return np.searchsorted(starts, points) - np.searchsorted(ends, points, "right")
