"""Non-parametric combination (Pesarin) of statistics evaluated on the same splits.

Each component statistic is evaluated on one shared set of splits: the observed split
(row 0) and either B uniformly random splits or every distinct split. Its value on a
split is turned into that split's permutation p-value among all rows,
``#{rows whose value is at least as large} / rows`` (with the engine's tie tolerance).
The combined statistic of a split is Tippett's ``-log`` of its smallest component
p-value; splits with the same smallest p-value are ordered by the next smallest, and
so on (the sorted p-values compared lexicographically). The combined p-value is the
share of rows at least as extreme as the observed one. Under H0 the rows are
exchangeable and every row is ranked by the same symmetric function of all rows, so
that share is a valid permutation p-value: ``(1 + #{b at least as extreme}) / (1 + B)``
for random splits, ``#{at least as extreme} / #splits`` when every split is enumerated.

Why Tippett, not Fisher's product: at alpha = 0.05 with B = 199 Fisher is slightly
more powerful on average (most changes move both components a little), but at the
levels of a corrected family, near the floor 1/(B+1), its product is capped by the
component that saw nothing: one p-value at the floor with the other uniform gives a
combined p-value of about f (1 + ln(1/f)), f = 1/(B+1), so Fisher loses up to 0.76 of
power where Tippett's loss stays bounded. The tie-break by the next smallest p-value
keeps the floor 1/(B+1) reachable and recovers part of what the coarse minimum loses.
Measured by ``python -m benchmarks power`` and the design study in benchmarks/README.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypedDict

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
    """Tippett's ``-log(min p)`` of every row; row 0 is the observed split."""
    p_value: float
    """Share of rows at least as extreme as the observed one (ties in the smallest p-value
    broken by the next smallest)."""
    component_p: Vector
    """Each component's p-value on the observed split."""


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


def at_least_counts_columns(values: Matrix, scales: Vector, rtol: float) -> Counts:
    """``at_least_counts`` of every column of ``values`` with its own scale, in one search:
    each column's sorted values are keyed by (column, value) as complex numbers, which numpy
    orders by real part, then imaginary part; the queries are searched in the same order
    (each column's query is nondecreasing in its value), which keeps the search short."""
    rows, columns = values.shape
    column = np.arange(columns, dtype=np.float64)
    order = np.argsort(values, axis=0, kind="stable").T
    ordered = np.take_along_axis(values.T, order, axis=1)
    keys = np.empty((columns, rows), dtype=np.complex128)
    keys.real = column[:, None]
    keys.imag = ordered
    queries = np.empty((columns, rows), dtype=np.complex128)
    queries.real = column[:, None]
    queries.imag = ordered - rtol * (np.abs(ordered) + scales[:, None])
    below = np.searchsorted(keys.ravel(), queries.ravel(), side="left").reshape(columns, rows)
    counts = np.empty((columns, rows), dtype=np.int64)
    np.put_along_axis(counts, order, rows * (1 + np.arange(columns))[:, None] - below, axis=1)
    out: Counts = np.ascontiguousarray(counts.T)
    return out


def combine(values: Matrix, scales: Sequence[float], rtol: float) -> Combination:
    """Tippett combination of the (rows, components) ``values``; row 0 is the observed split.

    A row's component p-values are ``counts / rows``: rows are compared by their sorted
    counts, lexicographically, in integers (no tolerance of their own).
    """
    counts = np.column_stack(
        [at_least_counts(values[:, c], scale, rtol) for c, scale in enumerate(scales)]
    )
    return combine_counts(counts)


def combine_counts(counts: Counts) -> Combination:
    """Tippett combination from the (rows, components) at-least counts of ``combine``."""
    rows = counts.shape[0]
    ordered = np.sort(counts, axis=1)
    observed = ordered[0]
    smaller = np.zeros(rows, dtype=bool)
    equal = np.ones(rows, dtype=bool)
    for c in range(ordered.shape[1]):
        smaller |= equal & (ordered[:, c] < observed[c])
        equal &= ordered[:, c] == observed[c]
    p_value = np.count_nonzero(smaller | equal) / rows
    return Combination(
        combined=-np.log(ordered[:, 0] / rows),
        p_value=float(p_value),
        component_p=counts[0] / rows,
    )


def component_result(
    omega: str, aspect: str, statistic: float, p_value: float, null: Vector
) -> ComponentResult:
    """A component's summary from its observed value, p-value and null values."""
    return ComponentResult(
        omega=omega,
        aspect=aspect,
        statistic=statistic,
        p_value=p_value,
        **null_summary(statistic, null),
    )


class NullSummary(TypedDict):
    """What a permutation null says about an observed statistic."""

    null_mean: float
    null_std: float
    effect: float
    z: float


def null_summary(statistic: float, null: Vector) -> NullSummary:
    """``null_mean``, ``null_std`` (ddof 1; 0 for one value), the bias-corrected ``effect``
    (statistic minus the null mean) and ``z`` (effect / null_std, NaN when degenerate)."""
    null_mean = float(null.mean())
    null_std = float(null.std(ddof=1)) if null.size > 1 else 0.0
    effect = statistic - null_mean
    return NullSummary(
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
