"""The equivalence test: the bootstrap from arms tilted onto the boundary.

The least-favourable test (``_boundary``) learns the noise from each arm's own outputs. Where
an arm's sample happens to show less variety than the arm has (a perturbed arm collapsing
onto one answer, an original arm whose sample over-represents that answer), the noise it
learns is too small exactly when the observed distance is small: the Wald-at-the-boundary
problem of proportions, which made "equivalent" come out in up to 0.11 of audits at the
margin for a nominal 0.05. Score tests fix it by evaluating the spread at the point of the
null hypothesis that fits the data best (Farrington & Manning 1990); the nonparametric
analogue is the biased (tilted) bootstrap (Efron 1981; Hall & Presnell 1999, JRSS-B 61):
reweight each arm as little as possible so that the arms lie exactly ``margin`` apart, and
resample from the reweighted arms.

Here each arm's distribution is put on the pooled outputs (its own outputs, with one
pseudo-output spread over all pooled outputs: an answer seen only in the other arm can then
be given weight, as a constrained maximum likelihood would) and exponentially tilted along a
direction of the kernel's feature space, the original arm one way and the perturbed arm the
other, each by ``lambda / k`` (``exp.tilt`` of Davison & Hinkley's ``boot``), until the
arms' energy distance is ``margin``. Directions: the observed difference and the pooled
outputs' top two principal directions, each way; of these candidate points of the boundary
the one under which the observed outputs are likeliest is taken (the constrained maximum of
the empirical likelihood among them). The p-value is the share of resamples from it whose
unbiased estimate (``_interval``'s U-statistic, whose mean under the tilted arms is, to
first order, the constrained distance) is at most the observed one, ``(1 + #) / (1 + B)``;
with no candidate (the outputs cannot lie ``margin`` apart however they are weighted) it
is 1.

This is the bootstrap at the constrained estimate that equivalence tests of curves use
(Dette et al., JASA 2018: data generated from the estimate projected onto the boundary of
the null; Wellek, *Testing Statistical Hypotheses of Equivalence and Noninferiority*, 2010,
on resampling at the boundary), with the empirical likelihood choosing the point. Where it
is evaluated it decides alone (``_boundary.boundary_p_value``, since 2026-12-06). From
2026-11-27 the equivalence p-value was the larger of the least-favourable test's and this
one's, as a guard (valid where either is); but at no effect the two disagree often enough
that the larger lost much of the power of either alone (0.33 of unchanged audits shown
equivalent at the calibrated margin at k = 40, where the least-favourable test alone showed
0.53 and this test alone 0.47; 0.20 at k = 10, where this test showed 0.61), while this test
alone holds the level at the margin on every shape measured, the collapses included
(``benchmarks/README.md``, "equivalence"; ``tests/stats/test_boundary.py``).

So that any margin can be tested later from the record, it is evaluated at interval time on
a geometric grid of margins, from the least-favourable test's 50% bound (or a tenth of its
5% bound where that is larger; below the start that test's p-value exceeds 0.5, or 0.05,
and decides: ``_interval.GUARD_START``) until its p-value reaches 1 / (1 + B), and kept as a
step function: a margin between two grid points takes the p-value of the lower one, made
non-increasing, which only errs towards "not shown". The grid's ratio is 1.05 where the
p-value is at most ``FINE_BELOW`` (1.15, that of every grid margin until 2026-12-06, cost a
sixth of the power at no effect) and every third margin is evaluated above it.
"""

from __future__ import annotations

import itertools
import math
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from ._boundary import NO_GUARD, TIE_RTOL, TiltedSteps, principal_axes

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]

PSEUDO_OUTPUTS = 1.0
"""Weight of the pooled outputs in each arm's base distribution, in outputs."""
GRID_RATIO = 1.05
"""Ratio of consecutive grid margins."""
GRID_SIZE = 120
"""Most grid margins (the grid stops earlier once the p-value reaches 1 / (1 + B))."""
COARSE = 3
"""Grid margins stepped over at a time while the p-value exceeds ``FINE_BELOW`` (no level
decides there): ratio ``GRID_RATIO**COARSE``, about 1.16."""
FINE_BELOW = 0.2
"""From the first p-value at most this on, every grid margin is evaluated."""
SMALLEST = 1e-9
"""The grid starts at least at this share of the largest distance (where the least
favourable test's 50% bound is 0: outputs that do not vary)."""
BUCKETS_PER_OUTPUT = 16
"""Grid buckets per output of ``_InverseCdf`` (few buckets hold a cumulative weight)."""
CHUNK = 16384
"""Draws counted per step (small temporaries: fresh large arrays cost page faults)."""
_PATH = np.concatenate([[0.0], np.geomspace(1e-3, 1e4, 400)])
"""Tilts tried along each direction, in units of 1 / the spread of the scores."""


def tilted_steps(
    distances: Matrix,
    k_a: int,
    start: float,
    n_draws: int,
    rng: np.random.Generator,
    *,
    ratio: float = GRID_RATIO,
    size: int = GRID_SIZE,
    coarse: int = COARSE,
) -> TiltedSteps:
    """The guard's p-value at ``start * ratio**g`` (module docstring), from ``n_draws``
    resamples per grid margin evaluated: every ``coarse``-th one while the p-value exceeds
    ``FINE_BELOW``, then every one."""
    if not math.isfinite(start):
        return NO_GUARD
    start = max(start, SMALLEST * float(distances.max()))
    arms = _Arms(distances, k_a)
    margins = [start * ratio**g for g in range(size)]
    points = arms.likeliest_at(margins)  # every grid margin's at once: numpy calls are few
    evaluated: list[float] = []
    p_values: list[float] = []
    floor = 1.0 / (1.0 + n_draws)
    g = 0
    while g < size:
        evaluated.append(margins[g])
        p_values.append(arms.p_value_at(margins[g], points[g], n_draws, rng))
        if p_values[-1] <= floor or arms.out_of_reach:
            break  # the last p-value holds beyond: the floor, or 1 out of reach
        g += coarse if p_values[-1] > FINE_BELOW else 1
    envelope = np.maximum.accumulate(np.asarray(p_values)[::-1])[::-1]
    return TiltedSteps(_read_only(np.asarray(evaluated)), _read_only(envelope))


class _Arms:
    """The pooled outputs, each arm's base distribution on them, and the tilt directions."""

    def __init__(self, distances: Matrix, k_a: int) -> None:
        size = distances.shape[0]
        self.d, self.k_a, self.k_b = distances, k_a, size - k_a
        own_a = np.arange(size) < k_a
        pool = PSEUDO_OUTPUTS / size
        self.log_a = np.log((own_a + pool) / (k_a + PSEUDO_OUTPUTS))
        self.log_b = np.log((~own_a + pool) / (self.k_b + PSEUDO_OUTPUTS))
        self.own_a = own_a
        in_a: Matrix = own_a[None, :].astype(np.float64)
        self.observed = float(_u_statistics(distances, in_a, 1.0 - in_a, k_a, self.k_b)[0])
        signs = np.where(own_a, 1.0 / k_a, -1.0 / self.k_b)
        scores = [-(distances @ signs), *principal_axes(distances).T]
        self.directions = [s - s.mean() for s in scores if np.ptp(s) > 0.0]
        self.out_of_reach = False
        self._kept: dict[str, Matrix] = {}

    def _scratch(self, name: str, rows: int) -> Matrix:
        """A (rows, pooled outputs) array kept from one resampling to the next: a fresh one
        at every grid margin costs more in page faults than filling it."""
        kept = self._kept.get(name)
        if kept is None or kept.shape[0] != rows:
            kept = self._kept[name] = np.empty((rows, self.d.shape[0]))
        return kept

    def weights(self, scores: Matrix, tilts: Vector) -> tuple[Matrix, Matrix]:
        """The arms' weights tilted by each of ``tilts`` along ``scores`` (a row per tilt;
        ``scores`` one row, or a row per tilt)."""
        return (
            _normalized(self.log_a + (tilts / self.k_a)[:, None] * scores),
            _normalized(self.log_b - (tilts / self.k_b)[:, None] * scores),
        )

    def likelihood(self, w_a: Matrix, w_b: Matrix) -> Vector:
        """Log-likelihood of the observed outputs under each row's tilted arms."""
        with np.errstate(divide="ignore"):
            fit: Vector = np.log(w_a[:, self.own_a]).sum(1) + np.log(w_b[:, ~self.own_a]).sum(1)
        return fit

    @cached_property
    def paths(self) -> list[tuple[Vector, Vector, Vector, Vector]]:
        """Per direction and way: the scores, the tilts of ``_PATH`` (in units of the
        scores' spread), the distance between the arms tilted by each and the observed
        outputs' log-likelihood under them."""
        found: list[tuple[Vector, Vector, Vector, Vector]] = []
        for scores in self.directions:
            for sign in (1.0, -1.0):
                tilts = _PATH * sign / float(np.std(scores))
                w_a, w_b = self.weights(scores, tilts)
                found.append((scores, tilts, _thetas(self.d, w_a, w_b), self.likelihood(w_a, w_b)))
        return found

    @cached_property
    def _stacked(self) -> tuple[Matrix, Matrix, Matrix]:
        """The paths' scores, tilts and distances, a row per path."""
        scores, tilts, thetas, _ = zip(*self.paths, strict=True)
        return np.vstack(scores), np.vstack(tilts), np.vstack(thetas)

    @cached_property
    def untilted(self) -> tuple[Vector, Vector]:
        """The arms' weights before any tilt."""
        return _normalized(self.log_a), _normalized(self.log_b)

    @cached_property
    def base(self) -> tuple[float, float]:
        """The untilted arms' distance and the observed outputs' log-likelihood under them."""
        w_a, w_b = (w[None, :] for w in self.untilted)
        return float(_thetas(self.d, w_a, w_b)[0]), float(self.likelihood(w_a, w_b)[0])

    def likeliest(self, margin: float) -> tuple[float, Vector, Vector] | None:
        """The likeliest of the candidate boundary points at ``margin``: its log-likelihood
        and the arms' weights; None where no tilt puts the arms ``margin`` apart."""
        return self.likeliest_at([margin])[0]

    def likeliest_at(self, margins: list[float]) -> list[tuple[float, Vector, Vector] | None]:
        """``likeliest`` of each of ``margins``, from one evaluation of them all (each row's
        arithmetic is the same as alone)."""
        if not self.paths:
            return [None] * len(margins)
        scores, tilts, thetas = self._stacked
        which, rows, tilt = _boundary_points(tilts, thetas, np.asarray(margins))
        w_a, w_b = self.weights(scores[rows], tilt)
        fit = self.likelihood(w_a, w_b)
        bounds = np.searchsorted(which, np.arange(len(margins) + 1))
        found: list[tuple[float, Vector, Vector] | None] = []
        for low, high in itertools.pairwise(bounds.tolist()):
            if low == high:
                found.append(None)
                continue
            best = low + int(np.argmax(fit[low:high]))  # the first of the likeliest
            found.append((float(fit[best]), w_a[best], w_b[best]))
        return found

    def resampled(self, w_a: Vector, w_b: Vector, n_draws: int, rng: np.random.Generator) -> Vector:
        """The U-statistic of ``n_draws`` resamples of the arms weighted ``w_a`` and ``w_b``
        (NaN where an arm's resample repeats one output)."""
        counts_a = _resample(rng, w_a, self.k_a, self._scratch("counts_a", n_draws))
        counts_b = _resample(rng, w_b, self.k_b, self._scratch("counts_b", n_draws))
        products = (self._scratch("d_a", n_draws), self._scratch("d_b", n_draws))
        return _u_statistics(self.d, counts_a, counts_b, self.k_a, self.k_b, products)

    def p_value(self, margin: float, n_draws: int, rng: np.random.Generator) -> float:
        """The guard's p-value at ``margin`` from ``n_draws`` resamples."""
        return self.p_value_at(margin, self.likeliest(margin), n_draws, rng)

    def p_value_at(
        self,
        margin: float,
        best: tuple[float, Vector, Vector] | None,
        n_draws: int,
        rng: np.random.Generator,
    ) -> float:
        """``p_value`` from the likeliest boundary point at ``margin``, ``best``."""
        if best is None:  # no reweighting puts the arms margin apart
            self.out_of_reach = self.observed < margin  # nor any larger margin then
            return 1.0
        _, w_a, w_b = best
        return resampled_p_value(self.resampled(w_a, w_b, n_draws, rng), self.observed)


def resampled_p_value(resampled: Vector, observed: float) -> float:
    """``(1 + #{resampled <= observed}) / (1 + n)`` over the finite resampled estimates
    (ties within ``TIE_RTOL`` of their mean size count), 1 when none is finite."""
    finite = resampled[np.isfinite(resampled)]
    if finite.size == 0:
        return 1.0
    tie = TIE_RTOL * float(np.mean(np.abs(finite)))
    inside = int(np.count_nonzero(finite <= observed + tie))
    return (1.0 + inside) / (1.0 + finite.size)


def _boundary_points(
    tilts: Matrix, thetas: Matrix, margins: Vector
) -> tuple[NDArray[np.intp], NDArray[np.intp], Vector]:
    """Per margin and path (a row of ``tilts`` and of their distances ``thetas``), the first
    tilt from 0 at which the distance crosses the margin (linear between the path's tilts; a
    tilt so far that an arm keeps one output, where the distance is NaN, does not cross):
    for each pair that crosses, by margin and then path, the margin's index, the path's row
    and the tilt."""
    above = thetas[None, :, :] >= margins[:, None, None]
    crossed = (above[:, :, 1:] != above[:, :, :1]) & ~np.isnan(thetas[None, :, 1:])
    which, rows = np.nonzero(crossed.any(axis=2))
    j = np.argmax(crossed[which, rows], axis=1)
    low, high = thetas[rows, j], thetas[rows, j + 1]
    share = (margins[which] - low) / (high - low)
    tilt: Vector = tilts[rows, j] + share * (tilts[rows, j + 1] - tilts[rows, j])
    return which, rows, tilt


def _thetas(d: Matrix, w_a: Matrix, w_b: Matrix) -> Vector:
    """``2 E d(X, Y) - E d(X, X') - E d(Y, Y')`` over pairs of distinct pooled outputs, for
    arms weighted by each row of ``w_a`` and ``w_b`` (rows summing to 1): the mean of the
    U-statistic of resamples from them (to first order)."""
    return _u_statistics(d, w_a, w_b, 1.0, 1.0)


def _u_statistics(
    d: Matrix,
    c_a: Matrix,
    c_b: Matrix,
    k_a: float,
    k_b: float,
    products: tuple[Matrix, Matrix] | None = None,
) -> Vector:
    """The U-statistic of each resample (rows of counts over the pooled outputs), over pairs
    of distinct pooled outputs (``_interval._weighted_u`` on the pooled index); NaN where an
    arm has a single distinct output. ``products``: arrays shaped as the counts for
    ``c_a @ d`` and ``c_b @ d``."""
    out_a, out_b = (np.empty_like(c_a), np.empty_like(c_b)) if products is None else products
    da, db = np.matmul(c_a, d, out=out_a), np.matmul(c_b, d, out=out_b)
    s_ab = np.einsum("ij,ij->i", da, c_b)
    s_aa = np.einsum("ij,ij->i", da, c_a)
    s_bb = np.einsum("ij,ij->i", db, c_b)
    pairs_a = k_a**2 - np.einsum("ij,ij->i", c_a, c_a)
    pairs_b = k_b**2 - np.einsum("ij,ij->i", c_b, c_b)
    with np.errstate(divide="ignore", invalid="ignore"):
        u: Vector = 2.0 * s_ab / (k_a * k_b) - s_aa / pairs_a - s_bb / pairs_b
    u[(pairs_a <= 0) | (pairs_b <= 0)] = np.nan
    return u


def _normalized(logs: Matrix) -> Matrix:
    """``exp(logs)`` scaled to sum to 1 along the last axis."""
    w: Matrix = np.exp(logs - logs.max(axis=-1, keepdims=True))
    normalized: Matrix = w / w.sum(axis=-1, keepdims=True)
    return normalized


def _resample(rng: np.random.Generator, w: Vector, k: int, counts: Matrix) -> Matrix:
    """``counts`` (n, ``w.size``) filled with ``n`` resamples of ``k`` outputs drawn with
    probabilities ``w``, as counts per output (a row per resample)."""
    cumulative = np.cumsum(w)
    values = rng.random((counts.shape[0], k))
    values *= cumulative[-1]
    inverse_cdf = _InverseCdf(cumulative)
    rows = max(1, CHUNK // k)
    for start in range(0, values.shape[0], rows):
        part = values[start : start + rows]
        picks = inverse_cdf(part)
        picks += w.size * np.arange(part.shape[0])[:, None]
        found = np.bincount(picks.ravel(), minlength=part.shape[0] * w.size)
        counts[start : start + rows] = found.reshape(-1, w.size)
    return counts


class _InverseCdf:
    """``np.searchsorted(cumulative, values, side="right")`` (values in ``[0,
    cumulative[-1]]``) capped at the last index, the same indices, faster: each value's
    bucket of a uniform grid over ``[0, cumulative[-1]]`` gives its index wherever no
    cumulative weight falls in the bucket (widened by far more than the rounding of the
    bucket's number); only the values of the other buckets, and of the bucket past the end
    (a value rounded to the end), are searched."""

    def __init__(self, cumulative: Vector) -> None:
        self.cumulative, total = cumulative, float(cumulative[-1])
        m = BUCKETS_PER_OUTPUT * cumulative.size
        self.scale = m / total
        edges = np.arange(m + 1) * (total / m)
        slack = 1e-6 * (total / m)
        first = np.searchsorted(cumulative, edges[:-1] - slack, side="right")
        last = np.searchsorted(cumulative, edges[1:] + slack, side="right")
        known = np.where(first == last, np.minimum(first, cumulative.size - 1), -1)
        self.known = np.append(known, -1)

    def __call__(self, values: Matrix) -> NDArray[np.intp]:
        picks: NDArray[np.intp] = self.known[(values * self.scale).astype(np.intp)]
        flat, searched = picks.reshape(-1), values.reshape(-1)
        unsure = np.flatnonzero(flat < 0)
        found = np.searchsorted(self.cumulative, searched[unsure], side="right")
        flat[unsure] = np.minimum(found, self.cumulative.size - 1)
        return picks


def _read_only(values: Vector) -> Vector:
    out = np.asarray(values, dtype=np.float64)
    out.setflags(write=False)
    return out
