"""The tilted guard's walk as ``dbpa.stats._tilted.tilted_steps`` took it until 2026-12-06:
every margin on its path from fresh draws, with no look for a walk that surely ends at 1.
The baseline of the guard's benchmark rows, and the reference its tests compare with."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import NDArray

from dbpa.stats._boundary import NO_GUARD, TiltedSteps
from dbpa.stats._tilted import COARSE, FINE_BELOW, GRID_RATIO, GRID_SIZE, SMALLEST, _Arms

Matrix = NDArray[np.float64]


def plain_tilted_steps(
    distances: Matrix, k_a: int, start: float, n_draws: int, rng: np.random.Generator
) -> TiltedSteps:
    """``tilted_steps`` without ``_first_draws``: the walk, margin by margin."""
    if not math.isfinite(start):
        return NO_GUARD
    start = max(start, SMALLEST * float(distances.max()))
    arms = _Arms(distances, k_a)
    margins = [start * GRID_RATIO**g for g in range(GRID_SIZE)]
    points = arms.likeliest_at(margins)
    evaluated: list[float] = []
    p_values: list[float] = []
    floor = 1.0 / (1.0 + n_draws)
    g = 0
    while g < GRID_SIZE:
        evaluated.append(margins[g])
        p_values.append(arms.p_value_at(margins[g], points[g], n_draws, rng))
        if p_values[-1] <= floor or arms.out_of_reach:
            break
        g += COARSE if p_values[-1] > FINE_BELOW else 1
    envelope = np.maximum.accumulate(np.asarray(p_values)[::-1])[::-1]
    return TiltedSteps(np.asarray(evaluated), envelope)
