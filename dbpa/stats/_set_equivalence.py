"""Equivalence over a set of prompts: is the perturbation's mean effect shown below a margin?

Prompt i's effect is its energy distance ``theta_i = |delta_i|^2`` (``_interval``), the
squared length of the difference of the arms' mean embeddings in the kernel's feature
space. The set's effect is the mean ``theta_bar = sum_i theta_i / P``. Put the P feature
spaces side by side (their direct sum): the arms' differences form one vector
``delta = (delta_1, ..., delta_P)`` with ``|delta|^2 = P theta_bar``, the observed difference
is ``delta + e`` with ``e = (e_1, ..., e_P)`` the prompts' independent sampling noises, and
its squared length is the sum of the prompts' plug-in distances ``v = sum_i v_i``. So
``H0: theta_bar >= margin`` is the one-prompt equivalence test of ``_boundary`` in the direct
sum, against the margin ``P * margin``:

* the noise draws are the prompts' own bootstrap draws added up (draw j of every prompt:
  independent resamples of independent prompts, so their sum is a draw of ``|e|^2``);
* the noise's principal directions in the direct sum are the prompts' own (its covariance is
  block-diagonal), so delta is put along the ``N_DIRECTIONS`` directions, among every
  prompt's top ones, along which the summed noise varies most (largest variance of the draws'
  coordinates), or orthogonal to all: the least favourable configuration of ``_boundary``,
  where the whole excess sits in the one prompt and direction where it is likeliest to look
  small.

``p = (1 + max over s >= sqrt(P margin), directions of #{j : |s u + e*_j|^2 <= v}) / (1 + B)``.
Neither an intersection of per-prompt tests (each prompt below the margin: a stronger claim
that needs every prompt's own evidence) nor a normal approximation of the mean (its spread
depends on where the effect sits, which data at the scale of the noise do not show) is used.
The level at the margin is simulated in tests/stats/test_prompt_sets.py (4 prompts, k = 20,
two repeated answers changing shares: the least favourable one-prompt shape): "equivalent" in
0.033 of 1000 audits with every prompt at the margin, 0.013 and 0.033 of 150 with the whole
effect in one prompt and in half of them. Not covered by the candidates: a delta spread over
several prompts whose noises vary alike is as likely to look small as one along a single
direction, and the sum of their noises can have the longer tail; the simulations above are
that case and stay within alpha.

The one-prompt test adds a tilted bootstrap guard (``_tilted``) because its noise, learnt from
the arms' own samples, is too small where a sample under-represents its arm's variety (an arm
collapsing onto one answer). A set of one prompt is that test, guard included. Over two or
more prompts the guard is the joint one of ``_set_tilted``: every prompt's arms tilted
together onto the set's boundary at the likeliest split of the total margin, resampled
together; the p-value is the larger of the two tests'. Without it, where one prompt's
collapsing arms carry the whole noise of the set and the other prompts' answers never vary,
the pooled test alone showed "equivalent" in 0.08 of 2,800 audits at the margin
(``collapse_hard``, k = 10, one such prompt and two constant ones); with it, see the README's
"Set-level equivalence" for the measured level and what it costs in power (it needs each
prompt's distances: ``EffectInterval.distances``).

A margin calibrated from the model's own noise (``calibrate_set_margin``) is on the same scale:
each calibration pair j (two samples of one prompt's unperturbed model, or its original and a
control) is taken on every prompt, and the set-level distance of pair j is the mean over the
prompts of their plug-in distances; the margin is a quantile of these means, not a mean of
the prompts' own quantiles (typically larger: the mean of P noises varies less than each).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._boundary import N_DIRECTIONS, BoundaryDraws, boundary_bound, boundary_p_value
from ._equivalence import MarginCalibration, _as_margin, calibrate_margin
from ._interval import INTERVAL_OMEGAS, EffectInterval
from ._set_tilted import SetArms
from ._tilted import GRID_RATIO, GRID_SIZE, SMALLEST
from ._validation import RngLike, as_probability, as_rng, choose


@dataclass(frozen=True)
class SetEquivalence:
    """The equivalence test of a perturbation's mean effect over a set of prompts."""

    estimate: float
    """Mean over prompts of each prompt's unbiased effect (``EffectInterval.estimate``)."""
    upper: float
    """One-sided ``1 - alpha`` upper confidence bound for the mean effect."""
    p_value: float
    """p-value of H0 ``mean effect >= margin`` (least favourable over the boundary)."""
    equivalent: bool
    """``p_value <= alpha``: the mean effect is shown below the margin."""
    margin: float
    alpha: float
    omega: str
    """The distance of the effect (the intervals' omega)."""
    n_prompts: int


def pooled_draws(intervals: Sequence[EffectInterval]) -> BoundaryDraws:
    """The prompts' boundary draws as one test in the direct sum of their feature spaces:
    observed distances and noise draws added up, and the ``N_DIRECTIONS`` prompt directions
    whose coordinates vary most across the draws. One prompt's are its own, tilted guard
    included: a set of one is decided as an audit of that prompt alone."""
    if len(intervals) == 1:
        return intervals[0].boundary
    plug_in = float(sum(iv.boundary.plug_in for iv in intervals))
    noise = np.sum([iv.boundary.noise for iv in intervals], axis=0)
    coordinates = np.hstack([iv.boundary.directions for iv in intervals])
    top = np.sort(np.argsort(-coordinates.var(axis=0), kind="stable")[:N_DIRECTIONS])
    return BoundaryDraws(plug_in=plug_in, noise=noise, directions=coordinates[:, top])


def _set_equivalence_iv(
    intervals: Sequence[EffectInterval], margin: float, alpha: float
) -> tuple[list[EffectInterval], float, float]:
    if isinstance(intervals, EffectInterval) or not isinstance(intervals, Sequence):
        raise ValueError(
            "intervals: expected a sequence of EffectInterval, one per prompt, "
            f"got {type(intervals).__name__}"
        )
    items = list(intervals)
    if not items:
        raise ValueError("intervals: needs at least one prompt")
    for i, item in enumerate(items):
        if not isinstance(item, EffectInterval):
            raise ValueError(f"intervals: item {i} is a {type(item).__name__}, not EffectInterval")
        if item.omega != items[0].omega:
            raise ValueError(
                f"intervals: item {i} measures {item.omega!r}, item 0 {items[0].omega!r}; "
                "one distance for the set"
            )
        if len(items) > 1 and item.distances is None:
            raise ValueError(
                f"intervals: item {i} has no distances (an interval read from a record made "
                "before they were kept); compute it again with effect_interval"
            )
        if item.boundary.noise.size != items[0].boundary.noise.size:
            raise ValueError(
                f"intervals: item {i} has {item.boundary.noise.size} bootstrap draws, item 0 "
                f"{items[0].boundary.noise.size}; compute every prompt's with one n_bootstrap"
            )
    return items, _as_margin(margin), as_probability(alpha, "alpha")


def set_equivalence(
    intervals: Sequence[EffectInterval],
    margin: float,
    *,
    alpha: float = 0.05,
    rng: RngLike = None,
) -> SetEquivalence:
    """Is the mean effect over the prompts shown below ``margin``?

    ``intervals`` holds one ``effect_interval`` per prompt (the same omega and n_bootstrap);
    ``margin`` is on their scale (a per-prompt margin: the mean effect is compared with it).
    ``rng`` (a seed or Generator) draws the joint guard's resamples over two or more
    prompts.
    """
    items, delta, level = _set_equivalence_iv(intervals, margin, alpha)
    test = _SetTest(items, rng)
    n = len(items)
    p_value = test.p_value(n * delta)
    return SetEquivalence(
        estimate=float(np.mean([iv.estimate for iv in items])),
        upper=test.upper(level) / n,
        p_value=p_value,
        equivalent=p_value <= level,
        margin=delta,
        alpha=level,
        omega=items[0].omega,
        n_prompts=n,
    )


def set_equivalence_p_value(
    intervals: Sequence[EffectInterval], margin: float, *, rng: RngLike = None
) -> float:
    """``set_equivalence(intervals, margin, rng=rng).p_value`` without the upper bound (a
    search over margins)."""
    items, delta, _ = _set_equivalence_iv(intervals, margin, 0.05)
    return _SetTest(items, rng).p_value(len(items) * delta)


class _SetTest:
    """The pooled least-favourable test and, over two or more prompts, the joint guard (its
    seed one draw of ``rng``; none drawn for one prompt, whose guard is its interval's)."""

    def __init__(self, items: list[EffectInterval], rng: RngLike) -> None:
        gen = as_rng(rng)
        self.draws = pooled_draws(items)
        self.arms: SetArms | None = None
        self.seed = 0
        if len(items) > 1:  # _set_equivalence_iv has checked that each has distances
            pairs = [(iv.distances, iv.k_a) for iv in items if iv.distances is not None]
            self.arms, self.seed = SetArms(pairs), int(gen.integers(2**63))

    def p_value(self, total: float) -> float:
        """p-value of H0 ``sum_i theta_i >= total``: the larger of the two tests'."""
        least_favourable = boundary_p_value(self.draws, total)
        if self.arms is None:
            return least_favourable
        return max(least_favourable, self._guard(self.arms, total))

    def upper(self, level: float) -> float:
        """The smallest total margin the test rejects at ``level``: the least-favourable
        test's bound, raised on a grid of ratio ``GRID_RATIO`` until the joint guard rejects
        too."""
        bound = boundary_bound(self.draws, level)
        if self.arms is None or not math.isfinite(bound):
            return bound
        bound = max(bound, SMALLEST * self.arms.largest)
        for g in range(GRID_SIZE):
            total = bound * GRID_RATIO**g
            if self._guard(self.arms, total) <= level:
                return total
        return math.inf

    def _guard(self, arms: SetArms, total: float) -> float:
        return arms.p_value(total, self.draws.noise.size, self.seed)


@dataclass(frozen=True)
class SetMarginCalibration(MarginCalibration):
    """A set-level margin from the model's own noise: the same pairs of samples on every
    prompt. ``distances`` and ``effects`` are per pair the mean over the prompts (the set's
    scale); ``k`` the sizes of the calibration arms."""

    prompt_distances: NDArray[np.float64]
    """(prompts, pairs): each prompt's plug-in distance of each pair."""
    n_prompts: int


def _calibrate_set_margin_iv(
    prompts: Sequence[Sequence[tuple[ArrayLike, ArrayLike]]], omega: str, quantile: float
) -> tuple[list[list[tuple[ArrayLike, ArrayLike]]], str, float]:
    if not isinstance(prompts, Sequence) or isinstance(prompts, str):
        raise ValueError(
            "prompts: expected a sequence with one sequence of pairs (a, b) per prompt, "
            f"got {type(prompts).__name__}"
        )
    items = []
    for i, pairs in enumerate(prompts):
        if not isinstance(pairs, Sequence) or isinstance(pairs, str):
            raise ValueError(
                f"prompts: item {i} is not a sequence of pairs (got {type(pairs).__name__})"
            )
        items.append(list(pairs))
    if not items:
        raise ValueError("prompts: needs at least one prompt")
    if not items[0]:
        raise ValueError("prompts: item 0 has no pair; every prompt needs one per set-level pair")
    for i, pairs in enumerate(items):
        if len(pairs) != len(items[0]):
            raise ValueError(
                f"prompts: item {i} has {len(pairs)} pairs, item 0 {len(items[0])}; pair j of "
                "every prompt makes the set's j-th distance"
            )
    return items, choose(omega, "omega", INTERVAL_OMEGAS), as_probability(quantile, "quantile")


def calibrate_set_margin(
    prompts: Sequence[Sequence[tuple[ArrayLike, ArrayLike]]],
    *,
    omega: str = "energy_l2",
    quantile: float = 0.95,
) -> SetMarginCalibration:
    """A margin for ``set_equivalence`` from the model's own noise.

    ``prompts[i][j]`` is the j-th pair of arms of prompt i (two samples of its unperturbed
    model under other seeds, or its original and a control), the same pair j on every
    prompt. The set-level distance of pair j is the mean over the prompts of its plug-in
    energy distance (each prompt's as in ``calibrate_margin``); the margin is its
    ``quantile`` over the pairs: how far two samples of the unperturbed model lie apart on
    average over the set, the scale of the mean effect ``set_equivalence`` tests. One prompt
    gives ``calibrate_margin``'s margin.
    """
    items, name, q = _calibrate_set_margin_iv(prompts, omega, quantile)
    per_prompt = []
    for i, pairs in enumerate(items):
        try:
            per_prompt.append(calibrate_margin(pairs, omega=name, quantile=q))
        except ValueError as exc:
            raise ValueError(f"prompts: item {i}: {exc}") from None
    prompt_distances = np.vstack([c.distances for c in per_prompt])
    distances = prompt_distances.mean(axis=0)
    return SetMarginCalibration(
        margin=float(np.quantile(distances, q)),
        quantile=q,
        omega=name,
        distances=distances,
        prompt_distances=prompt_distances,
        effects=np.vstack([c.effects for c in per_prompt]).mean(axis=0),
        k=tuple(sorted({size for c in per_prompt for size in c.k})),
        n_prompts=len(items),
    )
