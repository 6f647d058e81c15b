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

Where ``COARSE`` grid margins in a row are out of reach, a walk that reaches them ends at 1
and makes every step 1 (no margin is ever shown). From ``SCREEN_FROM`` draws per margin on,
the margins below them are first drawn for a few at a time, from the top: once each has one
draw at or below the observed estimate (or one in which an arm repeats one output), none can
stop the walk at the floor, which then surely ends at 1, and the steps are that 1 from the
first grid margin, without the walk (``_first_draws``, since 2026-12-06: at k = 8 and
B = 9,999, 2-5.5 times faster on shapes whose audits mostly end so, collapses among them;
``python -m benchmarks stats``). Otherwise the walk is taken with those draws as each
margin's first: the decisions have the walk's law exactly.
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
SCREEN_FIRST = 16
"""Draws per grid margin in the first round of ``_first_draws``."""
SCREEN_GROWTH = 4
"""Factor by which a grid margin's draws grow from one round of ``_first_draws`` to the
next."""
SCREEN_FROM = 2000
"""Draws per grid margin from which ``_first_draws`` looks for a walk that surely ends at 1
(below, the walk's cost is mostly the numpy calls of each margin's few draws, which the
look does not save)."""
SCREEN_MARGINS = 8
"""Grid margins drawn for at a time in ``_first_draws`` (the highest still without a draw
that keeps them above the floor), while they have fewer than ``SCREEN_ALONE`` draws."""
SCREEN_ALONE = 64
"""Draws beyond which only the highest such margin is drawn for (a margin with none at or
below the observed estimate in as many may be past where the walk stops at the floor: its
draws would then be lost, and so would the others')."""
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
    ends_at_1, first = _first_draws(arms, margins, points, n_draws, rng, coarse)
    if ends_at_1:  # the walk surely ends out of reach, at 1: so does every step
        return TiltedSteps(_read_only(np.asarray(margins[:1])), _read_only(np.ones(1)))
    return _walk(arms, margins, points, n_draws, rng, coarse, first)


def _walk(
    arms: _Arms,
    margins: list[float],
    points: list[tuple[float, Vector, Vector] | None],
    n_draws: int,
    rng: np.random.Generator,
    coarse: int,
    first: dict[int, Vector],
) -> TiltedSteps:
    """The walk of ``tilted_steps`` over the grid, each margin's first draws ``first``'s."""
    evaluated: list[float] = []
    p_values: list[float] = []
    floor = 1.0 / (1.0 + n_draws)
    g = 0
    while g < len(margins):
        evaluated.append(margins[g])
        drawn = first.get(g, np.empty(0))
        p_values.append(arms.p_value_at(margins[g], points[g], n_draws, rng, drawn))
        if p_values[-1] <= floor or arms.out_of_reach:
            break  # the last p-value holds beyond: the floor, or 1 out of reach
        g += coarse if p_values[-1] > FINE_BELOW else 1
    envelope = np.maximum.accumulate(np.asarray(p_values)[::-1])[::-1]
    return TiltedSteps(_read_only(np.asarray(evaluated)), _read_only(envelope))


def _first_draws(
    arms: _Arms,
    margins: list[float],
    points: list[tuple[float, Vector, Vector] | None],
    n_draws: int,
    rng: np.random.Generator,
    coarse: int,
) -> tuple[bool, dict[int, Vector]]:
    """Whether the walk surely ends out of reach (its p-values then all 1), and the
    resampled estimates drawn to find out, per grid margin: the first of its ``n_draws``.

    The walk stops at the first margin whose p-value is at most ``1 / (1 + n_draws)``,
    which takes every one of its draws finite and above the observed estimate, or at a
    margin out of reach (p-value 1). Where ``coarse`` margins in a row are out of reach
    (the walk, stepping at most ``coarse`` margins, cannot step over them) and every margin
    below them has a draw at or below the observed estimate, or one in which an arm repeats
    one output, no margin can stop the walk at the floor: it ends at 1, and the envelope of
    its p-values is 1 at every margin. The margins are drawn for from the top down, their
    draws growing by ``SCREEN_GROWTH`` a round, until each has such a draw (most have one
    in the first few) or one has ``n_draws`` without (a margin past where the walk would
    stop at the floor, typically the first looked at when it would). The walk is then
    taken, each margin's first draws being these and the rest drawn fresh: its
    ``n_draws`` are independent draws from its boundary point all the same (the look stops
    on what it has drawn, but the walk always completes them), so the decisions have the
    walk's law, draw for draw the same where the look concludes."""
    out = [point is None and arms.observed < m for m, point in zip(margins, points, strict=True)]
    reach = next((g for g in range(len(out) - coarse + 1) if all(out[g : g + coarse])), None)
    if reach is None or n_draws < SCREEN_FROM:  # no reach: the walk may step over a margin
        return False, {}  # out of reach, or end at the grid's end
    drawn: dict[int, Vector] = {}
    pending = [g for g in reversed(range(reach)) if points[g] is not None]  # from the top
    while pending:
        window = pending[:1] + [
            g for g in pending[1:SCREEN_MARGINS] if drawn.get(g, np.empty(0)).size < SCREEN_ALONE
        ]
        have = [drawn.get(g, np.empty(0)) for g in window]
        counts = [min(max(SCREEN_FIRST, SCREEN_GROWTH * h.size), n_draws) - h.size for h in have]
        more = arms.resampled_many([points[g] for g in window], counts, rng)  # type: ignore[misc]
        for g, h, m in zip(window, have, more, strict=True):
            drawn[g] = np.concatenate([h, m])
        hit = {g for g in window if _stops_short(drawn[g], arms.observed)}
        if any(drawn[g].size >= n_draws for g in window if g not in hit):
            return False, drawn  # a margin that may stop the walk at the floor: walk
        pending = [g for g in pending if g not in hit]
    return True, drawn


def _stops_short(resampled: Vector, observed: float) -> bool:
    """Whether these draws already keep a margin's p-value above the floor: one is NaN
    (an arm repeating one output) or at most ``observed`` (then inside whatever the tie)."""
    return bool(np.any(~(resampled > observed)))


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

    def resampled_many(
        self,
        points: list[tuple[float, Vector, Vector]],
        counts: list[int],
        rng: np.random.Generator,
    ) -> list[Vector]:
        """``resampled`` from each of ``points``' weights, as many times as each of
        ``counts`` says, in one product for them all."""
        rows = sum(counts)
        found = []
        for arm, k in ((1, self.k_a), (2, self.k_b)):
            picks = []
            for point, count in zip(points, counts, strict=True):
                cumulative = np.cumsum(point[arm])
                values = rng.random((count, k)) * cumulative[-1]
                picks.append(_InverseCdf(cumulative)(values))
            stacked = np.vstack(picks)
            size = self.d.shape[0]
            stacked += size * np.arange(rows)[:, None]
            tally = np.bincount(stacked.ravel(), minlength=rows * size)
            found.append(tally.reshape(rows, size).astype(np.float64))
        u = _u_statistics(self.d, found[0], found[1], self.k_a, self.k_b)
        return np.split(u, np.cumsum(counts)[:-1])

    def p_value(self, margin: float, n_draws: int, rng: np.random.Generator) -> float:
        """The guard's p-value at ``margin`` from ``n_draws`` resamples."""
        return self.p_value_at(margin, self.likeliest(margin), n_draws, rng)

    def p_value_at(
        self,
        margin: float,
        best: tuple[float, Vector, Vector] | None,
        n_draws: int,
        rng: np.random.Generator,
        drawn: Vector | None = None,
    ) -> float:
        """``p_value`` from the likeliest boundary point at ``margin``, ``best``; the first
        of the ``n_draws`` resampled estimates ``drawn`` already, if given."""
        if best is None:  # no reweighting puts the arms margin apart
            self.out_of_reach = self.observed < margin  # nor any larger margin then
            return 1.0
        _, w_a, w_b = best
        have = np.empty(0) if drawn is None else drawn
        if have.size < n_draws:
            have = np.concatenate([have, self.resampled(w_a, w_b, n_draws - have.size, rng)])
        return resampled_p_value(have, self.observed)


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
