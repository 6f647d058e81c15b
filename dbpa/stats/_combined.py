"""Non-parametric combination (Pesarin) of statistics evaluated on the same splits.

Each component statistic is evaluated on one shared set of splits: the observed split
(row 0) and either B uniformly random splits or every distinct split. Its value on a
split is turned into that split's permutation p-value among all rows,
``#{rows whose value is at least as large} / rows`` (with the engine's tie tolerance);
the combined statistic of a split is Fisher's ``-2 sum(log p)`` over the components, and
the combined p-value is the share of rows whose combined statistic is at least the
observed one. Under H0 the rows are exchangeable and every combined value is the same
symmetric function of all rows applied to one of them, so that share is a valid
permutation p-value: ``(1 + #{b : T_b >= T_obs}) / (1 + B)`` for random splits,
``#{T >= T_obs} / #splits`` when every split is enumerated.

Fisher rather than Tippett (the smallest p): on the power benchmark most changes move
both components a little (a reweighting or a shift moves P1 as well as the centroid),
and Fisher's product rewards two moderate p-values where Tippett waits for one small
one. Tippett is better only where one component is blind (a pure change of spread);
measured in benchmarks/README.md ("auto").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]
Counts = NDArray[np.int64]


@dataclass(frozen=True)
class ComponentResult:
    """One component of a combined test: its own permutation test on the shared splits."""

    omega: str
    """Name of the component statistic (a key of ``OMEGAS``)."""
    aspect: str
    """What a change in it points to, e.g. "location of the answers"."""
    statistic: float
    """Its value on the observed split."""
    p_value: float
    """Its own permutation p-value on the shared splits (what a run of this omega alone gives)."""
    null_mean: float
    """Mean of its values on the evaluated splits."""
    null_std: float
    """Standard deviation of those values."""
    effect: float
    """``statistic - null_mean``."""
    z: float
    """``effect / null_std`` (NaN when the null is degenerate)."""


@dataclass(frozen=True)
class Combination:
    """Combined statistic of every row and what it is made of."""

    combined: Vector
    """Fisher's ``-2 sum(log p)`` of every row; row 0 is the observed split."""
    p_value: float
    """Share of rows whose combined statistic is at least the observed one."""
    component_p: Vector
    """Each component's p-value on the observed split."""


LOG_TIE = 1e-9
"""Rows whose log product of counts is this close to the observed one are compared exactly."""


def at_least_counts(values: Vector, scale: float, rtol: float) -> Counts:
    """For every row j: #{rows i : values[i] >= values[j] - tol_j}.

    tol_j = rtol (|values[j]| + scale): the engine's tie rule applied to every row in
    turn; for row 0 (the observed split) it is the count behind the single-statistic
    p-value.
    """
    ordered = np.sort(values)
    tolerance = rtol * (np.abs(values) + scale)
    below = np.searchsorted(ordered, values - tolerance, side="left")
    counts: Counts = (values.size - below).astype(np.int64)
    return counts


def combine(values: Matrix, scales: Sequence[float], rtol: float) -> Combination:
    """Fisher combination of the (rows, components) ``values``; row 0 is the observed split.

    A row's component p-values are ``counts / rows``, so its combined statistic is at
    least the observed one exactly when the product of its counts is at most the
    observed product: decided in logarithms, and in integers where they are too close.
    """
    rows, n_components = values.shape
    counts = np.column_stack(
        [at_least_counts(values[:, c], scale, rtol) for c, scale in enumerate(scales)]
    )
    log_product = np.log(counts).sum(axis=1)
    gap = log_product - log_product[0]
    observed = math.prod(int(c) for c in counts[0])
    close = np.flatnonzero(np.abs(gap) <= LOG_TIE)
    ties = sum(math.prod(int(c) for c in counts[j]) <= observed for j in close)
    p_value = (np.count_nonzero(gap < -LOG_TIE) + ties) / rows
    return Combination(
        combined=2.0 * (n_components * math.log(rows) - log_product),
        p_value=float(p_value),
        component_p=counts[0] / rows,
    )


def component_result(
    omega: str, aspect: str, statistic: float, p_value: float, null: Vector
) -> ComponentResult:
    """A component's summary from its observed value, p-value and null values."""
    null_mean = float(null.mean())
    null_std = float(null.std(ddof=1)) if null.size > 1 else 0.0
    effect = statistic - null_mean
    return ComponentResult(
        omega=omega,
        aspect=aspect,
        statistic=statistic,
        p_value=p_value,
        null_mean=null_mean,
        null_std=null_std,
        effect=effect,
        z=effect / null_std if null_std > 0 else math.nan,
    )


def driver(components: Mapping[str, ComponentResult]) -> str | None:
    """The component with the smallest p-value (ties: the larger z, then the first listed).

    None when every component's p-value is 1: nothing departs from the null.
    """
    if all(c.p_value >= 1.0 for c in components.values()):
        return None

    def key(name: str) -> tuple[float, float]:
        c = components[name]
        return c.p_value, -c.z if math.isfinite(c.z) else math.inf

    return min(components, key=key)
