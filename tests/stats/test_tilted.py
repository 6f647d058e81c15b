"""The tilted-bootstrap guard of the equivalence test: its step function, and its p-value
against the exact binomial one where an arm's sample hides the arm's spread."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.stats import binom

from dbpa.stats import BoundaryDraws, TiltedSteps, effect_interval, equivalence_p_value
from dbpa.stats._boundary import (
    NO_GUARD,
    boundary_bound,
    boundary_p_value,
    guard_bound,
    guard_p_value,
    least_favourable_bound,
    least_favourable_p_value,
)
from dbpa.stats._tilted import COARSE, FINE_BELOW, GRID_RATIO

STEPS = TiltedSteps(np.array([0.1, 0.2, 0.4]), np.array([0.5, 0.04, 0.001]))


def test_a_margin_takes_the_p_value_of_the_grid_margin_below_it():
    assert guard_p_value(STEPS, 0.05) == 0.0  # below the grid the guard does not decide
    assert guard_p_value(STEPS, 0.1) == 0.5
    assert guard_p_value(STEPS, 0.199) == 0.5
    assert guard_p_value(STEPS, 0.2) == 0.04
    assert guard_p_value(STEPS, 10.0) == 0.001  # the last one holds beyond the grid
    assert guard_bound(STEPS, 0.05) == 0.2
    assert guard_bound(STEPS, 0.0001) == math.inf
    assert guard_bound(NO_GUARD, 0.05) == 0.0


def _draws(noise: float, guard: TiltedSteps) -> BoundaryDraws:
    """An observed distance of 1, 100 noise draws all of squared length ``noise`` and no
    direction along the noise: the least-favourable p-value is 1 at every margin up to
    ``1 - noise`` and 1/101 beyond."""
    return BoundaryDraws(1.0, np.full(100, noise), np.zeros((100, 2)), guard)


def test_on_its_grid_the_tilted_bootstrap_decides_alone():
    """From the grid's first margin on, the p-value is the tilted bootstrap's, also where
    the least-favourable test's is larger (until 2026-12-06 the larger of the two decided)."""
    draws = _draws(0.0, STEPS)
    assert least_favourable_p_value(draws, 0.2) == 1.0
    assert boundary_p_value(draws, 0.2) == 0.04
    assert boundary_p_value(draws, 0.5) == 0.001
    assert boundary_bound(draws, 0.05) == 0.2
    assert boundary_bound(draws, 0.0001) == math.inf


def test_below_the_grid_the_least_favourable_test_decides_no_lower_than_the_first_step():
    shown = _draws(0.99, STEPS)  # the least-favourable test alone rejects every margin
    assert least_favourable_p_value(shown, 0.05) == pytest.approx(1 / 101)
    assert boundary_p_value(shown, 0.05) == 0.5  # the first step: never rising with the margin
    assert boundary_bound(shown, 0.05) == 0.2
    early = TiltedSteps(STEPS.margins, np.array([0.04, 0.01, 0.001]))
    low = least_favourable_bound(_draws(0.99, early), 0.05)
    assert low < 0.1
    assert boundary_p_value(_draws(0.99, early), 0.05) == 0.04
    assert boundary_bound(_draws(0.99, early), 0.05) == low
    assert boundary_p_value(_draws(0.99, NO_GUARD), 0.05) == pytest.approx(1 / 101)


def test_the_grid_is_fine_where_a_level_can_decide(rng):
    """Every ``COARSE``-th grid margin is evaluated while the p-value exceeds ``FINE_BELOW``
    (no level decides there), every one after: the step function's margins are then
    ``GRID_RATIO`` apart, so a margin between two takes a p-value at most 5% of margin
    too high."""
    from tests.stats.synthetic_effects import scenario

    a, b = scenario("null").draw(rng, 20)
    steps = effect_interval(a, b, n_bootstrap=500, rng=rng).boundary.guard
    ratios = steps.margins[1:] / steps.margins[:-1]
    fine = steps.p_values[:-1] <= FINE_BELOW
    assert fine.any()
    assert (~fine).any()
    np.testing.assert_allclose(ratios[fine], GRID_RATIO, rtol=1e-9)
    assert np.all(
        np.isclose(ratios, GRID_RATIO, rtol=1e-9)
        | np.isclose(ratios, GRID_RATIO**COARSE, rtol=1e-9)
    )
    assert np.isclose(ratios[0], GRID_RATIO**COARSE, rtol=1e-9)


def _one_answer_unlike_the_rest():
    """Original: 19 outputs of one text and 1 of another; perturbed: 20 of the first. A
    margin m is the energy distance of a share q = sqrt(m / (2 d)) of the second text, d the
    texts' distance; in a sample of 20 the arm showed one."""
    first, second = np.eye(8)[0], np.eye(8)[1]
    original = np.vstack([np.tile(first, (19, 1)), second])
    return original, np.tile(first, (20, 1)), float(np.linalg.norm(first - second))


@pytest.mark.parametrize("margin", [0.05, 0.1, 0.2])
def test_the_guard_is_the_exact_binomial_test_at_the_share_the_margin_needs(margin):
    """The closest point of the boundary gives the original arm the share q of the second
    text; a sample showing at most the one observed then has probability P(Bin(20, q) <= 1),
    the exact p-value the guard must reproduce (within its Monte Carlo error). The
    least-favourable test alone, which learns the noise from a sample with a single second
    text, gives far less (it showed the margin 0.1 at alpha 0.05)."""
    original, perturbed, distance = _one_answer_unlike_the_rest()
    interval = effect_interval(original, perturbed, n_bootstrap=2000, rng=1)
    exact = binom.cdf(1, 20, math.sqrt(margin / (2.0 * distance)))
    assert equivalence_p_value(interval, margin) == pytest.approx(exact, abs=0.03)
    alone = boundary_p_value(replace(interval.boundary, guard=NO_GUARD), margin)
    assert alone < exact / 2


def test_outputs_that_never_vary_show_no_margin():
    """Both arms one repeated text: no reweighting of the outputs puts the arms any distance
    apart, so nothing is shown equivalent (the least-favourable test alone showed every
    margin: its noise draws are all 0)."""
    same = np.tile(np.eye(8)[0], (12, 1))
    interval = effect_interval(same, same.copy(), n_bootstrap=500, rng=2)
    for margin in (1e-6, 0.01, 1.0):
        assert equivalence_p_value(interval, margin) == 1.0
    assert interval.high == math.inf
    alone = replace(interval.boundary, guard=NO_GUARD)
    assert boundary_p_value(alone, 0.01) < 0.05
    assert boundary_bound(interval.boundary, 0.05) == math.inf


def test_the_guard_p_value_never_rises_with_the_margin(rng):
    from tests.stats.synthetic_effects import scenario

    for name in ("collapse_hard", "mixture"):
        a, b = scenario(name).draw(rng, 15)
        steps = effect_interval(a, b, n_bootstrap=500, rng=rng).boundary.guard
        assert steps.margins.size >= 1
        assert np.all(np.diff(steps.margins) > 0)
        assert np.all(np.diff(steps.p_values) <= 0)


def _likeliest_one_path_at_a_time(arms, margin):
    """The likeliest boundary point at ``margin`` (``_tilted`` module docstring), path by
    path in plain Python: each path's first crossing of the margin, linear between its tilts,
    and the first of the likeliest over the paths; None where no path crosses."""
    best = None
    for scores, tilts, thetas, _ in arms.paths:
        above = [bool(t >= margin) for t in thetas]  # a NaN distance is never at or above
        crossing = next(
            (
                j
                for j in range(len(thetas) - 1)
                if above[j + 1] != above[0] and not math.isnan(thetas[j + 1])
            ),
            None,
        )
        if crossing is None:
            continue
        low, high = thetas[crossing], thetas[crossing + 1]
        tilt = tilts[crossing] + (margin - low) / (high - low) * (
            tilts[crossing + 1] - tilts[crossing]
        )
        w_a, w_b = arms.weights(scores, np.array([tilt]))
        fit = float(arms.likelihood(w_a, w_b)[0])
        if best is None or fit > best[0]:
            best = (fit, w_a[0], w_b[0])
    return best


@pytest.mark.parametrize("name", ["collapse_hard", "few_texts", "mixture"])
def test_the_grid_margins_boundary_points_are_each_margins_own(rng, name):
    """``tilted_steps`` finds the boundary points of all its grid margins in one evaluation:
    each is the point found for its margin alone, path by path."""
    from scipy.spatial.distance import cdist

    from dbpa.stats._tilted import _Arms
    from tests.stats.synthetic_effects import scenario

    a, b = scenario(name).draw(rng, 12)
    z = np.vstack([a, b])
    distances = cdist(z, z)
    arms = _Arms(distances, len(a))
    largest = float(distances.max())
    margins = np.geomspace(1e-4 * largest, 1e2 * largest, 40).tolist()  # some out of reach
    found = arms.likeliest_at(margins)
    assert any(f is None for f in found)
    assert any(f is not None for f in found)
    for margin, point in zip(margins, found, strict=True):
        alone = _likeliest_one_path_at_a_time(arms, margin)
        assert (point is None) == (alone is None), margin
        if point is not None:
            np.testing.assert_allclose(point[0], alone[0], rtol=1e-12)
            np.testing.assert_allclose(point[1], alone[1], rtol=1e-12)
            np.testing.assert_allclose(point[2], alone[2], rtol=1e-12)


def _guard_start(a, b, n_bootstrap):
    interval = effect_interval(a, b, n_bootstrap=n_bootstrap, rng=0)
    return interval.distances, float(interval.boundary.guard.margins[0])


@pytest.mark.parametrize("name", ["collapse_hard", "few_texts", "null"])
def test_below_the_look_the_walk_is_the_plain_walk_draw_for_draw(rng, name):
    """With fewer than ``SCREEN_FROM`` draws per margin nothing is looked at before the walk:
    the steps are those of the walk margin by margin (``benchmarks._plain_walk``), draw for
    draw."""
    from benchmarks._plain_walk import plain_tilted_steps
    from dbpa.stats._tilted import SCREEN_FROM, tilted_steps
    from tests.stats.synthetic_effects import scenario

    n_draws = SCREEN_FROM - 1
    for seed in range(3):
        distances, start = _guard_start(*scenario(name).draw(rng, 8), n_draws)
        now = tilted_steps(distances, 8, start, n_draws, np.random.default_rng(seed))
        plain = plain_tilted_steps(distances, 8, start, n_draws, np.random.default_rng(seed))
        np.testing.assert_array_equal(now.margins, plain.margins)
        np.testing.assert_array_equal(now.p_values, plain.p_values)


def test_a_walk_the_look_finds_ending_at_1_ends_at_1_from_its_draws():
    """Collapses at k = 8, B = 2,000: where the look (``_first_draws``) finds that the walk
    surely ends at 1, the walk taken from the look's draws (each margin's first) does end
    at 1 at every margin, and ``tilted_steps`` is that 1 from the first grid margin; where
    it does not, ``tilted_steps`` is the walk from those draws, draw for draw."""
    from dbpa.stats._tilted import (
        COARSE,
        GRID_SIZE,
        SCREEN_FROM,
        _Arms,
        _first_draws,
        _walk,
        tilted_steps,
    )
    from tests.stats.synthetic_effects import scenario

    rng = np.random.default_rng(11)
    concluded = walked = 0
    for seed in range(10):
        distances, start = _guard_start(*scenario("collapse").draw(rng, 8), SCREEN_FROM)
        arms = _Arms(distances, 8)
        margins = [start * GRID_RATIO**g for g in range(GRID_SIZE)]
        points = arms.likeliest_at(margins)
        look = np.random.default_rng(seed)
        ends, first = _first_draws(arms, margins, points, SCREEN_FROM, look, COARSE)
        steps = _walk(arms, margins, points, SCREEN_FROM, look, COARSE, first)
        now = tilted_steps(distances, 8, start, SCREEN_FROM, np.random.default_rng(seed))
        if ends:
            concluded += 1
            assert np.all(steps.p_values == 1.0), seed
            np.testing.assert_array_equal(now.margins, margins[:1])
            np.testing.assert_array_equal(now.p_values, [1.0])
        else:
            walked += 1
            np.testing.assert_array_equal(now.p_values, steps.p_values)
    assert concluded >= 3
    assert walked >= 1


def test_a_margins_first_draws_are_its_first():
    """``p_value_at`` completes the draws given to ``n_draws`` and counts them all: given
    every draw, the p-value is theirs (1 inside of 3 here)."""
    from dbpa.stats._tilted import _Arms

    distances = np.abs(np.subtract.outer(np.arange(10.0), np.arange(10.0)))
    arms = _Arms(distances, 5)
    point = arms.likeliest(arms.observed * 2.0)
    assert point is not None
    drawn = np.array([arms.observed - 1.0, arms.observed + 1.0, arms.observed + 2.0])
    p = arms.p_value_at(arms.observed * 2.0, point, 3, np.random.default_rng(0), drawn)
    assert p == pytest.approx((1 + 1) / (1 + 3))
    more = arms.p_value_at(arms.observed * 2.0, point, 50, np.random.default_rng(0), drawn)
    assert more != p
