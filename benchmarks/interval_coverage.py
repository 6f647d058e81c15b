"""Coverage of effect-interval methods for the energy distance theta, per shape and k.

``python -m benchmarks.interval_coverage [--quick] [--seed N]`` (or ``python -m benchmarks
interval``).

Every audit draws two arms of k outputs from a scenario of ``tests/stats/synthetic_effects``
(null, shift, spread, mixture, few_texts: d=384 unit embeddings of an answer space;
gauss_shift: two isotropic normal clouds in d=10 whose means differ along one axis, a shape
where every direction varies alike, with a closed-form theta), computes the unbiased U-statistic
``U`` and B=1000 within-arm bootstrap replicates of it exactly as ``dbpa.stats.effect_interval``
does, B=1000 random relabellings of the pooled outputs, and builds 90% intervals by several
methods from the *same* draws and replicates. Reported per method and cell: two-sided
coverage, lower-side coverage ``P(low <= theta)`` and upper-side coverage ``P(theta <= high)``
(each nominal 0.95), and the at-margin equivalence rate ``P(p <= 0.05 | theta = margin)``
(nominal <= 0.05), where ``p`` is the method's p-value of ``theta >= margin``: for replicate
methods ``(1 + #{r >= margin})/(1 + B)`` as in the product, for score methods the upper
side's test at ``theta_0 = margin``.
Bounds are clipped at 0 as in the product. At the null shape theta = 0 lies on the boundary:
the clipped upper bound always covers it, so two-sided coverage there equals lower-side
coverage, whose nominal value is 0.95 (not 0.90): ``low > 0`` is a one-sided test of
theta = 0 at 5%.

The variance of U (two-sample U-statistic of degree (2, 2); Hoeffding 1948) is

    Var U = 4/m Var psi_a + 4/n Var psi_b                                   (linear part)
          + 2 s_aa / (m(m-1)) + 2 s_bb / (n(n-1)) + 4 s_ab / (mn)          (degenerate part)

with ``psi`` the first-order projections and ``s`` the second moments of the doubly
centred distances. Variance estimators measured here:

* ``unbiased``: ``U^2`` minus the U-statistic of ``h(.)h(.)`` over disjoint index sets
  (exactly unbiased; checked against brute-force enumeration at start-up);
* ``deg``: the degenerate part from U-centred distance matrices (Szekely & Rizzo 2014,
  unbiased, very stable: relative sd 5% at k=40);
* ``deg+lin``: ``deg`` plus the projections' sample variance corrected for their
  degenerate noise, clipped at 0 (unbiased before clipping).

Findings (of runs at 400 audits per cell; the latest run's tables follow): no method is
within 2.5 SE of nominal on every cell, for the reasons measured here (1-3 below; 4-6
under the score-type intervals further down).

1. Where the degenerate part dominates (null, shift, spread: the linear part is ~0), the
   bootstrap variance is 2-3x Var U (its linear part counts the degenerate noise of the
   empirical projections again), so the percentile interval covers 0.985-1.0.
2. The linear part cannot be estimated per audit: the degenerate kernel has a low effective
   rank (a few answer types), so the noise of any projection-variance estimate does not
   shrink with k (sd about 1.7x the degenerate part at k=10 and at k=40). The exactly
   unbiased estimator is negative in 33-53% of audits; clipping inflates the variance
   1.6-2x where the linear part is 0.
3. On the mixture shape the linear part dominates and U is positively correlated with
   its variance estimate (a non-central, chi-square-like quadratic form), so every interval
   with a correctly scaled variance under-covers the upper side (0.86-0.93 for 0.95): the
   percentile interval's over-estimated variance is what keeps its upper side at 0.95.

The closest: the *permutation pivot* (``theta`` in ``U - q``, q the centred U of random
relabellings of the pooled outputs, i.e. the degenerate part's law when the arms are
exchangeable) is within 2.5 SE of nominal on both sides on every null, shift and spread
cell (two-sided 0.875-0.905, lower 0.930-0.958, upper 0.945-0.960, at-margin equivalence
0.040-0.055), but ignores the linear part and fails on the mixture (upper 0.65-0.75).
Adding a normal linear part (``deg+lin``) keeps the upper side of the first three shapes
but over-covers their lower side (0.998) and still under-covers the mixture's upper side
(0.80-0.86).

Score-type intervals (test inversion; measured 2026-11-24, root seeds 20261125 and 20261126).
As the Wilson (1927) interval evaluates the binomial variance at the hypothesised p rather
than at the estimate, the interval is the set of theta_0 that neither one-sided test of
``theta = theta_0`` rejects at 5% (Efron & Tibshirani 1993, ch. 12-14 on pivots and test
inversion), the bounds found by bisection and clipped at 0, with the law of U under theta_0
modelled as ``theta_0 + D + L``: D the degenerate part (Hoeffding decomposition; Serfling 1980,
ch. 5), its law the centred U of the relabellings, and L the linear part with a variance
``V_lin(theta_0)`` that follows the hypothesis. In kernel terms theta is the squared MMD of the
distance-induced kernel ``-d`` (Sejdinovic et al. 2013), ``U ~ |delta + eps|^2 - E|eps|^2``
with delta the difference of the arms' mean embeddings and eps its noise, so
``L = 2<delta, eps>`` has variance ``gamma theta`` with gamma 4x the Rayleigh quotient of
``Cov eps`` at delta (at most ``4 lambda_max``): linear in theta for a fixed direction, as
for a change of mixture weights. Variants (how gamma and L's law are estimated):

* ``score, joint``: ``L = 2 sqrt(theta_0) <delta^, eps_pi> / |delta^|`` from the same
  relabellings as D (for a one-dimensional effect the exact non-central chi-square);
* ``score, independent normal``: ``L ~ N(0, gamma theta_0)``, gamma the relabellings'
  ``4 Var <delta^, eps_pi> / |delta^|^2`` (Rayleigh quotient at the observed direction);
* ``score, joint, residuals``: ``score, joint`` relabelling the within-arm residuals (so
  ``Cov eps_pi`` leaves out the between-arm difference, which the pooled outputs add:
  ``4 V / N`` to gamma);
* ``score, residuals, gamma = lin/U``: gamma the unbiased linear part (``variance_parts``) over
  U, clipped to ``[0, gamma_max]``;
* ``score, one-step linear variance``: ``V_lin(theta_0) = lin + b (theta_0 - U)``, clipped at
  0, b the slope of ``lin`` on U across 200 relabellings (exact for a one-dimensional effect,
  where ``lin`` is proportional to U).

None is within 2.5 SE of nominal on every cell. The closest, ``score, independent normal``,
never under-covers by more than 2.5 SE on either seed and meets every null and mixture cell
(mixture two-sided 0.887-0.940, each side 0.940-0.970, at-margin equivalence 0.030-0.060;
null 0.953-0.965), but over-covers the shift (two-sided 0.968-0.998, all on the lower side)
and five of the six spread cells (upper 0.978-0.988; at k=40 on the second seed two-sided
0.968). Why (measured here and in a separate 150-audit check of the gamma estimates):

4. gamma cannot be estimated per audit either: it is a quadratic form in the same noisy
   delta^ as U. In the shift scenario the drift is orthogonal to every answer, the
   projections move by a constant, and the true gamma is ~0 (at most 0.001); yet the
   Rayleigh quotient at ``delta^ = delta + eps`` is 0.0097 at k=40 (0.0173 on the mixture,
   whose true gamma is 0.0166): eps lies in the high-variance answer-type directions. The
   shift's lower bound then carries a linear variance it does not have.
5. The debiased ``lin/U`` is right on average but its noise is of the order of gamma at
   k=10-20 (mixture k=10: sd 0.083 for gamma 0.063) and positively correlated with U, so the
   mixture's upper side under-covers again (0.81-0.82 at k=10). The one-step update removes
   that correlation with the relabellings' slope, which measures the noise's co-variation
   (about ``4 tr Sigma^3 / tr Sigma^2``), not that of the effect's direction: it
   over-corrects (mixture upper 0.98-0.99, lower 0.88-0.96) and adds linear variance to the
   shift and spread's upper bounds (0.99-1.0).
6. The independent-normal variant's fit on the mixture is partly luck: its gamma is shrunk
   towards the noise's eigenvalues (|delta^|^2 = V includes ``E|eps|^2``) and inflated by the
   pooled relabellings' ``4 V / N``; the residual relabellings remove the second and the
   mixture's upper side falls to 0.84-0.91. The joint (non-central) law has a lighter left
   tail than the normal, which lowers the upper bound (mixture upper 0.910-0.945).

The product since 2026-11-25 (``product: score lower (worst-case gamma), percentile upper``)
takes each side from the method that is valid on it: the upper bound and the equivalence
p-value stay the percentile bootstrap's; the lower bound is the score inversion with
``gamma = gamma_max``, the Cauchy-Schwarz bound, so the linear part is never under-stated
and at theta_0 = 0 the test is the relabelling test of no effect. The ``few_texts`` shape
(three nearly fixed answers whose shares change: the linear part dominates at a small
effect) is where a lower bound from the relabellings alone under-covers (0.82-0.91).

The lower bound's worst case is the sample's top eigenvalue, which noise inflates where
many directions vary alike (gauss_shift: gamma_max at k=20 about 2.7x the variance along the
top held-out direction). ``score lower (held-out gamma)`` replaces it with the variance of one
half of the outputs along the other half's top principal direction (``_held_out_gamma``,
measured 2026-11-25): the gauss_shift lower side falls from 0.965-0.978 to 0.920-0.948, i.e.
*below* nominal at k=20, 40 (the estimate's own noise, which the normal model ignores), and
the mixture's and few_texts' lower sides to 0.932-0.965; so the product keeps ``gamma_max``.

Since 2026-11-26 both of the product's bounds come from the least-favourable tests of
``dbpa.stats._boundary`` (``product: least-favourable lower and upper``): the upper bound
inverts the equivalence test (each arm's resampled residuals as the noise, the change put
along their top principal directions), the lower bound the mirror-image test on relabellings
of the pooled outputs. At 400 audits per cell every side covered at least 0.935 (nominal
0.95, 2.5 SE: 0.923); two-sided coverage was close to nominal where a few repeated answers
change shares and the lower side with no effect, conservative elsewhere (0.968-1.0). The
``two_texts`` shape (two nearly fixed answers whose shares change: all the noise along the
one direction a change can take) is where the bounds of 2026-11-25 fell below 2.5 SE on some
draws.

Run time (2026-11-25, 400 audits per cell, 18 cells): draws and replicates 9.5 min and the
methods about 8 min on 2 cores shared with another job (the one-step slope's 200
relabellings per audit are most of the first).
"""

from __future__ import annotations

import argparse
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray
from scipy.linalg import eigh
from scipy.stats import norm

from benchmarks._results import ResultFile
from dbpa.stats._boundary import BoundaryDraws, boundary_bound, boundary_lower, boundary_p_value
from dbpa.stats._interval import _bootstrap, _relabelled, energy_u_statistic
from dbpa.stats._similarity import l2_distance
from tests.stats.synthetic_effects import scenario, true_effect

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]

CONFIDENCE = 0.90
ALPHA = 0.05
TAIL = (1.0 - CONFIDENCE) / 2.0
N_BOOTSTRAP = 1000
SHAPES = ("null", "shift", "spread", "mixture", "few_texts", "two_texts", "gauss_shift")
SPLITS = 8
"""Random halvings behind the held-out first-order variance (each used both ways)."""
KS = (10, 20, 40)
ROOT_SEED = 20261125


def _relabelled_u(distances: Matrix, m: int, labels: Matrix) -> Vector:
    """U of each relabelling of the pooled outputs: a row of ``labels`` is 1 on the
    outputs it puts in arm a, 0 on the rest."""
    n = distances.shape[0] - m
    rest = 1.0 - labels
    within_a = labels @ distances
    s_aa = np.einsum("ij,ij->i", within_a, labels)
    s_ab = np.einsum("ij,ij->i", within_a, rest)
    s_bb = np.einsum("ij,ij->i", rest @ distances, rest)
    u: Vector = 2.0 * s_ab / (m * n) - s_aa / (m * (m - 1)) - s_bb / (n * (n - 1))
    return u


def _gamma_max(distances: Matrix, m: int) -> float:
    """Largest first-order variance of U per unit theta: ``4 lambda_max`` of the relabelled
    mean difference's covariance, ``(1/m + 1/n) (-J D J) / (N - 1)`` (J centres)."""
    size = distances.shape[0]
    centred = distances - distances.mean(0) - distances.mean(1)[:, None] + distances.mean()
    top = float(eigh(-centred, eigvals_only=True, subset_by_index=[size - 1, size - 1])[0])
    return float(4.0 * (1.0 / m + 1.0 / (size - m)) * max(top, 0.0) / (size - 1))


def _bisect(accept: Callable[[float], bool], inside: float, outside: float) -> float:
    """The boundary between ``inside`` (accepted) and ``outside`` (rejected), to 2^-50 of
    their distance; the accepted end is returned."""
    for _ in range(50):
        middle = 0.5 * (inside + outside)
        if accept(middle):
            inside = middle
        else:
            outside = middle
    return inside


def unbiased_variance(distances: Matrix, m: int) -> float:
    """Exactly unbiased Var U: ``U^2`` minus the unbiased estimate of ``theta^2`` (products
    of the kernel over disjoint index sets, by inclusion-exclusion in O(k^2))."""
    n = distances.shape[0] - m
    a, b, c = distances[:m, :m], distances[m:, m:], distances[:m, m:]
    ra, rb, rc, kc = a.sum(1), b.sum(1), c.sum(1), c.sum(0)
    ta, tb, tc = ra.sum(), rb.sum(), rc.sum()
    a_bar, b_bar = ta / (m * (m - 1)), tb / (n * (n - 1))
    u = 2 * tc / (m * n) - a_bar - b_bar
    aa = (ta**2 - 4 * ra @ ra + 2 * (a * a).sum()) / (m * (m - 1) * (m - 2) * (m - 3))
    bb = (tb**2 - 4 * rb @ rb + 2 * (b * b).sum()) / (n * (n - 1) * (n - 2) * (n - 3))
    cc = (tc**2 - rc @ rc - kc @ kc + (c * c).sum()) / (m * (m - 1) * n * (n - 1))
    ca = rc @ (ta - 2 * ra) / (n * m * (m - 1) * (m - 2))
    cb = kc @ (tb - 2 * rb) / (m * n * (n - 1) * (n - 2))
    theta2 = 4 * cc + aa + bb - 4 * ca - 4 * cb + 2 * a_bar * b_bar
    return float(u * u - theta2)


def _u_centred(d: Matrix) -> Matrix:
    m = d.shape[0]
    r = d.sum(1)
    out: Matrix = d - r[:, None] / (m - 2) - r[None, :] / (m - 2) + r.sum() / ((m - 1) * (m - 2))
    np.fill_diagonal(out, 0.0)
    return out


def variance_parts(distances: Matrix, m: int) -> tuple[float, float]:
    """(degenerate part, linear part) of Var U; the linear part is unbiased but unclipped."""
    n = distances.shape[0] - m
    a, b, c = distances[:m, :m], distances[m:, m:], distances[:m, m:]
    s_aa = float((_u_centred(a) ** 2).sum()) / (m * (m - 3))
    s_bb = float((_u_centred(b) ** 2).sum()) / (n * (n - 3))
    cc = c - c.mean(1, keepdims=True) - c.mean(0, keepdims=True) + c.mean()
    s_ab = float((cc**2).sum()) / ((m - 1) * (n - 1))
    degenerate = 2 * s_aa / (m * (m - 1)) + 2 * s_bb / (n * (n - 1)) + 4 * s_ab / (m * n)
    psi_a = c.mean(1) - a.sum(1) / (m - 2)
    psi_b = c.mean(0) - b.sum(1) / (n - 2)
    lin_a = psi_a.var(ddof=1) - s_ab / n - s_aa / (m - 2)
    lin_b = psi_b.var(ddof=1) - s_ab / m - s_bb / (n - 2)
    return degenerate, float(4 * lin_a / m + 4 * lin_b / n)


@dataclass(frozen=True)
class Audit:
    """One audit's estimate, bootstrap deviations and variance estimates."""

    u: float
    deviations: Vector
    unbiased: float
    degenerate: float
    linear: float
    permuted: Vector
    """U over random relabellings of the pooled outputs, centred: the degenerate part's law
    where the arms are exchangeable."""
    normal: Vector
    """Standard normal draws, one per permutation (for the linear part's noise)."""
    cross: Vector
    """Per relabelling, ``<delta, eps> / |delta|``: the observed difference of the arms' mean
    embeddings (kernel ``-d``) against the relabelling's, as a unit direction."""
    residual: Vector
    """As ``permuted``, relabelling the outputs' within-arm residuals (same labels)."""
    cross_residual: Vector
    """As ``cross``, for the within-arm residuals."""
    slope: float
    """Regression slope of the linear-part estimate on U over 200 relabellings."""
    gamma_max: float
    """``4 lambda_max`` of the relabellings' covariance of ``eps``: the largest linear
    variance per unit theta (Cauchy-Schwarz: ``Var 2<delta, eps> <= 4 lambda_max |delta|^2``)."""
    gamma_held_out: float
    """As ``gamma_max``, the top eigenvalue replaced by the variance of one half of the pooled
    outputs along the other half's top principal direction (``_held_out_gamma``)."""
    boundary: BoundaryDraws
    """The product's noise draws for its least-favourable upper bound (``_boundary``), from
    the same resamples as ``deviations``."""
    relabelled: BoundaryDraws
    """The product's relabellings for its least-favourable lower bound."""


# method -> (audit -> replicates standing for U's sampling distribution, or None for a
# normal interval) and, for a normal interval, its variance
Replicates = Callable[[Audit], Vector]


def _rescaled(variance: Callable[[Audit], float], reflect: bool) -> Replicates:
    def replicates(audit: Audit) -> Vector:
        scale = math.sqrt(max(variance(audit), 0.0) / audit.deviations.var())
        sign = -1.0 if reflect else 1.0
        out: Vector = audit.u + sign * scale * audit.deviations
        return out

    return replicates


def _normal(variance: Callable[[Audit], float]) -> Replicates:
    """Normal interval as replicates: U + sd * (normal quantiles of B evenly spaced levels)."""

    def replicates(audit: Audit) -> Vector:
        levels = (np.arange(N_BOOTSTRAP) + 0.5) / N_BOOTSTRAP
        out: Vector = audit.u + math.sqrt(max(variance(audit), 0.0)) * norm.ppf(levels)
        return out

    return replicates


def _deg_lin(audit: Audit) -> float:
    return audit.degenerate + max(audit.linear, 0.0)


def _permutation_pivot(audit: Audit) -> Vector:
    out: Vector = audit.u - audit.permuted
    return out


def _permutation_pivot_linear(audit: Audit) -> Vector:
    out: Vector = audit.u - audit.permuted - math.sqrt(max(audit.linear, 0.0)) * audit.normal
    return out


def _labels(size: int, m: int, count: int, rng: np.random.Generator) -> Matrix:
    """``count`` random splits of ``size`` pooled outputs into m (1) and the rest (0)."""
    labels = np.zeros((count, size))
    labels[:, :m] = 1.0
    out: Matrix = rng.permuted(labels, axis=1)
    return out


def _permuted_u(distances: Matrix, m: int, labels: Matrix) -> Vector:
    """Centred U of each relabelling (a row of ``labels``) of the pooled outputs."""
    u = _relabelled_u(distances, m, labels)
    centred: Vector = u - u.mean()
    return centred


def _cross(distances: Matrix, m: int, labels: Matrix, centring: Matrix | None = None) -> Vector:
    """``<delta, eps> / |delta|`` per relabelling.

    With the kernel ``-d`` (distance-induced: theta is its squared MMD; Sejdinovic et al.
    2013) ``delta`` is the observed difference of the arms' mean embeddings (weights ``w``:
    1/m on a, -1/n on b) and ``eps`` a relabelling's (weights ``w_pi``, of the within-arm
    residuals if ``centring`` is given): ``<delta, eps> = -w'D w_pi`` and ``|delta|^2 = -w'Dw``.
    """
    n = distances.shape[0] - m
    w = np.concatenate([np.full(m, 1.0 / m), np.full(n, -1.0 / n)])
    w_pi = labels / m - (1.0 - labels) / n
    if centring is not None:
        w_pi = w_pi @ centring
    dw = distances @ w
    norm = math.sqrt(max(-float(w @ dw), 0.0))
    if norm == 0.0:
        return np.zeros(labels.shape[0])
    out: Vector = -(w_pi @ dw) / norm
    return out


def _residual_distances(distances: Matrix, m: int) -> tuple[Matrix, Matrix]:
    """``(I - A) D (I - A)`` with A the within-arm averaging (the residuals' kernel, as ``-d``;
    diagonal zeroed as U excludes it) and ``I - A``."""
    size = distances.shape[0]
    arm = np.arange(size) < m
    same = arm[:, None] == arm[None, :]
    centring = np.eye(size) - same / np.where(arm, m, size - m)[None, :]
    out: Matrix = centring @ distances @ centring
    np.fill_diagonal(out, 0.0)
    return out, centring


def _held_out_gamma(distances: Matrix, m: int, rng: np.random.Generator) -> float:
    """``4 (1/m + 1/n)`` times the variance of one half of the pooled outputs along the other
    half's top principal direction (kernel ``-d``), averaged over ``SPLITS`` random halvings
    used both ways: the held-out half does not share the fitted half's noise, so, unlike the
    whole sample's top eigenvalue, it is not inflated where many directions vary alike."""
    size = distances.shape[0]
    gram = -(distances - distances.mean(0) - distances.mean(1)[:, None] + distances.mean())
    half = size // 2
    variances = []
    for _ in range(SPLITS):
        order = rng.permutation(size)
        for fit, held in ((order[:half], order[half:]), (order[half:], order[:half])):
            block = gram[np.ix_(fit, fit)]
            block = block - block.mean(0) - block.mean(1)[:, None] + block.mean()
            top, vector = np.linalg.eigh(block)
            if top[-1] <= 0.0:
                variances.append(0.0)
                continue
            cross = gram[np.ix_(held, fit)]
            scores = (cross - cross.mean(1)[:, None]) @ vector[:, -1] / math.sqrt(top[-1])
            variances.append(float(scores.var(ddof=1)))
    return 4.0 * (1.0 / m + 1.0 / (size - m)) * float(np.mean(variances))


def _slope(distances: Matrix, m: int, labels: Matrix) -> float:
    """Slope of ``variance_parts``' linear part on U across relabellings."""
    pairs = []
    for row in labels:
        order = np.argsort(-row, kind="stable")
        d = distances[np.ix_(order, order)]
        pairs.append((energy_u_statistic(d, m), variance_parts(d, m)[1]))
    u, linear = np.array(pairs).T
    return float(np.cov(u, linear)[0, 1] / u.var(ddof=1))


Spread = Callable[[float], float]


def _score(
    u: float, permuted: Vector, linear: Vector, spread: Spread
) -> tuple[Callable[[float], float], Callable[[float], float]]:
    """p-values of theta = theta_0 against theta > theta_0 and against theta < theta_0.

    Under theta_0 the estimate is modelled as ``theta_0 + permuted + spread(theta_0) linear``;
    with ``spread = sqrt`` and ``linear = 2 cross`` that is ``|delta_0 + eps|^2 - E|eps|^2``
    for a mean difference ``delta_0`` of norm sqrt(theta_0) in the observed direction.
    """
    size = permuted.size

    def replicates(theta0: float) -> Vector:
        out: Vector = theta0 + permuted + spread(theta0) * linear
        return out

    def above(theta0: float) -> float:
        return (1 + int(np.count_nonzero(replicates(theta0) >= u))) / (1 + size)

    def below(theta0: float) -> float:
        return (1 + int(np.count_nonzero(replicates(theta0) <= u))) / (1 + size)

    return above, below


def score_interval(
    u: float, permuted: Vector, linear: Vector, tail: float, spread: Spread = math.sqrt
) -> tuple[float, float, Callable[[float], float]]:
    """(low, high) by inverting the two one-sided score tests at ``tail`` each, clipped at 0,
    and the p-value of ``theta >= theta_0`` (equivalence at margin theta_0)."""
    above, below = _score(u, permuted, linear, spread)
    scale = math.sqrt(float(permuted.var())) + spread(max(u, 0.0)) * float(np.abs(linear).max())
    start = max(u, 0.0)
    low = 0.0 if above(0.0) > tail else _bisect(lambda t: above(t) > tail, start, 0.0)
    if below(0.0) <= tail:
        high = 0.0
    else:
        outside = start + scale
        while below(outside) > tail:
            outside = 2.0 * outside
        high = _bisect(lambda t: below(t) > tail, start, outside)
    return low, high, below


Interval = Callable[[Audit, float], tuple[float, float, float]]
"""audit, theta_0 -> (low, high, equivalence p-value at margin theta_0), bounds clipped at 0."""


def _from_replicates(replicates: Replicates) -> Interval:
    """The replicates' (0.05, 0.95) quantiles; the p-value counts them at or above the margin,
    as the product does."""

    def interval(audit: Audit, margin: float) -> tuple[float, float, float]:
        r = replicates(audit)
        low, high = (max(float(q), 0.0) for q in np.quantile(r, [TAIL, 1.0 - TAIL]))
        return low, high, (1 + int(np.count_nonzero(r >= margin))) / (1 + r.size)

    return interval


def _score_method(parts: Callable[[Audit], tuple[Vector, Vector]]) -> Interval:
    def interval(audit: Audit, margin: float) -> tuple[float, float, float]:
        low, high, p_value = score_interval(audit.u, *parts(audit), TAIL)
        return low, high, p_value(margin)

    return interval


def _one_step(audit: Audit, margin: float) -> tuple[float, float, float]:
    """Linear variance at theta_0: ``linear + slope (theta_0 - U)``, clipped at 0."""

    def spread(theta0: float) -> float:
        return math.sqrt(max(audit.linear + audit.slope * (theta0 - audit.u), 0.0))

    low, high, p_value = score_interval(audit.u, audit.permuted, audit.normal, TAIL, spread)
    return low, high, p_value(margin)


def _scaled(noise: Vector, gamma: float) -> Vector:
    out: Vector = math.sqrt(gamma) * noise / noise.std()
    return out


def _bounded_ratio(linear: float, audit: Audit) -> float:
    """``linear / U`` clipped to ``[0, gamma_max]`` (``gamma_max`` if U <= 0 < linear)."""
    if linear <= 0.0:
        return 0.0
    if linear >= audit.gamma_max * audit.u:
        return audit.gamma_max
    return linear / audit.u


def _gamma_lin(audit: Audit) -> float:
    return _bounded_ratio(audit.linear, audit)


def _product(audit: Audit, margin: float) -> tuple[float, float, float]:
    """The product since 2026-11-26: both bounds and the p-value from the least-favourable
    tests (``dbpa.stats._boundary``)."""
    high = boundary_bound(audit.boundary, TAIL)
    low = boundary_lower(audit.relabelled, TAIL)
    return min(low, high), high, boundary_p_value(audit.boundary, margin)


def _score_lower_percentile_upper(gamma: Callable[[Audit], float]) -> Interval:
    """The score lower bound with linear variance ``gamma(audit) theta_0``, the percentile
    upper bound and p-value (as the product)."""

    def interval(audit: Audit, margin: float) -> tuple[float, float, float]:
        g = gamma(audit)
        low = score_interval(
            audit.u, audit.permuted, audit.normal, TAIL, lambda t: math.sqrt(g * t)
        )[0]
        _, high, p_value = _from_replicates(lambda a: a.u + a.deviations)(audit, margin)
        return min(low, high), high, p_value

    return interval


METHODS: dict[str, Interval] = {
    name: _from_replicates(replicates)
    for name, replicates in {
        "percentile (product until 2026-11-25)": lambda audit: audit.u + audit.deviations,
        "normal, unbiased var": _normal(lambda audit: audit.unbiased),
        "rescaled pct, unbiased var": _rescaled(lambda audit: audit.unbiased, reflect=False),
        "normal, deg+lin var": _normal(_deg_lin),
        "rescaled pct, deg+lin var": _rescaled(_deg_lin, reflect=False),
        "rescaled basic, deg+lin var": _rescaled(_deg_lin, reflect=True),
        "rescaled pct, deg var only": _rescaled(lambda audit: audit.degenerate, reflect=False),
        "rescaled basic, deg var only": _rescaled(lambda audit: audit.degenerate, reflect=True),
        "permutation pivot": _permutation_pivot,
        "permutation pivot + linear": _permutation_pivot_linear,
    }.items()
} | {
    "score, joint": _score_method(lambda audit: (audit.permuted, 2 * audit.cross)),
    "score, independent normal": _score_method(
        lambda audit: (audit.permuted, 2 * float(audit.cross.std()) * audit.normal)
    ),
    "score, joint, residuals": _score_method(
        lambda audit: (audit.residual, 2 * audit.cross_residual)
    ),
    "score, one-step linear variance": _one_step,
    "score, residuals, gamma = lin/U": _score_method(
        lambda audit: (audit.residual, _scaled(audit.cross_residual, _gamma_lin(audit)))
    ),
    # the product from 2026-11-25 to 2026-11-26
    "score lower (worst-case gamma), percentile upper": _score_lower_percentile_upper(
        lambda audit: audit.gamma_max
    ),
    "product: least-favourable lower and upper": _product,
    "score lower (held-out gamma), percentile upper": _score_lower_percentile_upper(
        lambda audit: min(audit.gamma_held_out, audit.gamma_max)
    ),
}


def _audits(name: str, k: int, sims: int, rng: np.random.Generator) -> list[Audit]:
    s = scenario(name)
    out = []
    for _ in range(sims):
        a, b = s.draw(rng, k)
        distances = l2_distance(np.vstack([a, b]))
        u = energy_u_statistic(distances, k)
        replicates, boundary = _bootstrap(distances, k, N_BOOTSTRAP, rng)
        deviations = replicates - u
        degenerate, linear = variance_parts(distances, k)
        labels = _labels(2 * k, k, N_BOOTSTRAP, rng)
        residual_distances, centring = _residual_distances(distances, k)
        out.append(
            Audit(
                u,
                deviations,
                unbiased_variance(distances, k),
                degenerate,
                linear,
                _permuted_u(distances, k, labels),
                rng.standard_normal(N_BOOTSTRAP),
                _cross(distances, k, labels),
                _permuted_u(residual_distances, k, labels),
                _cross(distances, k, labels, centring),
                _slope(distances, k, labels[:200]),
                _gamma_max(distances, k),
                _held_out_gamma(distances, k, rng),
                boundary,
                _relabelled(distances, k, N_BOOTSTRAP, rng),
            )
        )
    return out


def _cell(audits: list[Audit], truth: float, method: Interval) -> tuple[float, ...]:
    lower = upper = both = equivalent = 0
    for audit in audits:
        low, high, p_value = method(audit, truth)
        lower += low <= truth
        upper += truth <= high
        both += low <= truth <= high
        equivalent += p_value <= ALPHA
    n = len(audits)
    return both / n, lower / n, upper / n, equivalent / n


def _check_unbiased_variance(rng: np.random.Generator) -> None:
    """The O(k^2) formula against enumeration of every pair of disjoint index sets."""
    m, n = 5, 6
    x = rng.normal(size=(m + n, 3))
    distances = l2_distance(x)
    a, b, c = distances[:m, :m], distances[m:, m:], distances[:m, m:]

    def h(i: tuple[int, ...], j: tuple[int, ...]) -> float:
        cross = c[i[0], j[0]] + c[i[0], j[1]] + c[i[1], j[0]] + c[i[1], j[1]]
        return float(cross / 2 - a[i[0], i[1]] - b[j[0], j[1]])

    products = [
        h(i[:2], j[:2]) * h(i[2:], j[2:])
        for i in itertools.permutations(range(m), 4)
        for j in itertools.permutations(range(n), 4)
    ]
    u = energy_u_statistic(distances, m)
    expected = u * u - float(np.mean(products))
    assert math.isclose(unbiased_variance(distances, m), expected, rel_tol=1e-9, abs_tol=1e-12)


def main(quick: bool = False, root_seed: int = ROOT_SEED) -> None:
    sims = 60 if quick else 400
    result_file = ResultFile("interval", quick)
    root = np.random.SeedSequence(root_seed)
    _check_unbiased_variance(np.random.default_rng(root.spawn(1)[0]))
    se_two = math.sqrt(CONFIDENCE * (1 - CONFIDENCE) / sims)
    side = 1 - (1 - CONFIDENCE) / 2
    se_side = math.sqrt(side * (1 - side) / sims)
    cells = list(itertools.product(SHAPES, KS))
    start = time.perf_counter()
    data, variances = {}, []
    for (name, k), seed in zip(cells, root.spawn(len(cells)), strict=True):
        audits = _audits(name, k, sims, np.random.default_rng(seed))
        data[name, k] = audits
        us = np.array([a.u for a in audits])
        var_u = float(us.var(ddof=1))
        variances.append(
            (
                name,
                k,
                f"{var_u:.3g}",
                *(
                    f"{np.mean([f(a) for a in audits]) / var_u:.2f}"
                    for f in (
                        lambda a: a.deviations.var(),
                        lambda a: a.unbiased,
                        lambda a: a.degenerate,
                        _deg_lin,
                    )
                ),
                f"{np.mean([a.unbiased < 0 for a in audits]):.2f}",
            )
        )
    result_file.note(
        f"interval_coverage: {sims} audits per cell, root seed {root_seed}, B={N_BOOTSTRAP}, "
        "90% intervals; "
        f"draws and bootstraps took {time.perf_counter() - start:.0f} s"
    )
    result_file.table(
        "Variance estimators: mean estimate / Var U over the audits (Var U itself has a "
        f"relative SE of about {math.sqrt(2 / sims):.0%})",
        ["shape", "k", "Var U", "bootstrap", "unbiased", "deg", "deg+lin", "unbiased < 0"],
        variances,
    )
    for method, interval in METHODS.items():
        rows = []
        for name, k in cells:
            truth = max(true_effect(name), 0.0)
            both, lower, upper, equivalent = _cell(data[name, k], truth, interval)
            rows.append(
                (
                    name,
                    k,
                    f"{both:.3f}",
                    f"{lower:.3f}",
                    f"{upper:.3f}",
                    "-" if truth == 0.0 else f"{equivalent:.3f}",
                )
            )
        result_file.table(
            f"{method}: coverage (SE two-sided {se_two:.3f}, one side {se_side:.3f}); "
            f"at the null two-sided = lower side, nominal 0.95",
            ["shape", "k", "two-sided", "lower", "upper", "P(equiv | theta = margin)"],
            rows,
        )
    result_file.write()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m benchmarks.interval_coverage")
    parser.add_argument("--quick", action="store_true", help="60 audits per cell")
    parser.add_argument("--seed", type=int, default=ROOT_SEED, help="root seed of the draws")
    args = parser.parse_args()
    main(quick=args.quick, root_seed=args.seed)
