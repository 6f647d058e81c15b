"""Discrepancies omega: the test statistics, evaluated for many splits at once.

Each statistic is a *kernel* built once from the pooled (n, n) matrix and the size
``k_a`` of the first ("original") group; calling it with a boolean (c, n) array of
group memberships returns the c statistics. Permutations therefore only index the
pooled matrix, never the embeddings (Algorithm 1 without its O(B k^2 d) cost).

Two families:

* similarity-distribution statistics compare P0 (similarities within the original
  group, i < j) with P1 (similarities across the groups) on the pooled *similarity*
  matrix: ``jsd`` (the paper's default), ``energy``, ``wasserstein``, ``ks``,
  ``mean_diff``;
* embedding statistics compare the two groups of embeddings directly, on a pooled
  *distance* (``energy_cosine``, ``energy_l1``, ``energy_l2``) or centred Gram
  (``centroid``) matrix;
* ``auto`` combines one of each family on the same splits (see ``_combined``), so that
  each covers the other's blind spot.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np
from numpy.typing import NDArray

from ._similarity import centered_gram, cosine_distance, l1_distance, l2_distance
from ._validation import as_positive_int

Matrix = NDArray[np.float64]
Masks = NDArray[np.bool_]
Vector = NDArray[np.float64]


class Kernel(Protocol):
    """A statistic bound to one pooled matrix."""

    bytes_per_split: int
    """Working memory per evaluated split, for chunking."""
    scale: float
    """Typical magnitude of the terms behind the statistic, for the tie tolerance."""

    def __call__(self, masks: Masks) -> Vector: ...


# --------------------------------------------------------------------------- helpers


def histogram_edges(values: Vector, bins: int, value_range: Any = "pooled") -> Vector:
    """Bin edges shared by P0 and P1.

    ``"pooled"`` spans all pooled pairwise similarities (so the edges do not depend on
    the split); a pair ``(lo, hi)`` fixes them, e.g. ``(-1, 1)`` for cosine. As in
    ``numpy.histogram``, a degenerate range is widened by 0.5 on each side.
    """
    if isinstance(value_range, str):
        lo, hi = float(np.min(values)), float(np.max(values))
    else:
        lo, hi = (float(v) for v in value_range)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, bins + 1)


TIE_ATOL = 1e-9
"""Pairwise values closer than this share of their largest magnitude are one value."""


def merged_ties(matrix: Matrix) -> Matrix:
    """``matrix`` with every run of values within ``TIE_ATOL`` of the next (relative to the
    largest magnitude, at least 1) set to the run's smallest. Equal outputs have equal
    similarities, but computed as sums of products they differ in the last bits, and by the
    outputs' positions in the pooled matrix: statistics of the ordering of the values (the
    jsd's bins, the CDFs) then read the arms' layout as a difference, and sums of distances
    that are all noise tie only within a tolerance scaled by that noise (identical outputs
    in both arms were rejected in 30 of 30 null tests by jsd, ks and auto, and by
    energy_cosine on vectors of norm other than 1). A symmetric matrix of at least
    ``SYMMETRIC_FROM`` rows is merged on its upper triangle and mirrored (the same values,
    3x faster at 100 rows)."""
    n = matrix.shape[0]
    if n >= SYMMETRIC_FROM and matrix.shape == (n, n) and np.array_equal(matrix, matrix.T):
        first, second = _upper_triangle(n)
        values, inverse = np.unique(matrix[first, second], return_inverse=True)
        if values.size < 2:
            return matrix
        merged: Matrix = np.empty_like(matrix)
        merged[first, second] = _run_starts(values)[inverse]
        merged[second, first] = merged[first, second]
        return merged
    values = np.unique(matrix)
    if values.size < 2:
        return matrix
    out: Matrix = _run_starts(values)[np.searchsorted(values, matrix)]
    return out


SYMMETRIC_FROM = 40
"""Rows from which ``merged_ties`` merges a symmetric matrix on its upper triangle."""


@functools.lru_cache(maxsize=64)
def _upper_triangle(n: int) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
    """Row and column of every entry on or above the diagonal of an (n, n) matrix."""
    first, second = np.triu_indices(n)
    first.setflags(write=False)
    second.setflags(write=False)
    return first, second


def _run_starts(values: Vector) -> Vector:
    """Each of the sorted distinct ``values``' run's smallest (runs within ``TIE_ATOL``)."""
    scale = max(1.0, float(np.max(np.abs(values))))
    starts = np.r_[True, np.diff(values) > TIE_ATOL * scale]
    representative: Vector = values[starts][np.cumsum(starts) - 1]
    return representative


def bin_index(values: NDArray[np.float64], edges: Vector) -> NDArray[np.intp]:
    """Bin of each value: [e_i, e_{i+1}), the last bin closed; values outside clip to the ends."""
    idx = np.searchsorted(edges, values, side="right") - 1
    return np.clip(idx, 0, edges.size - 2)


def _xlogx_table(size: int) -> Vector:
    """c * log(c) for the integer counts c = 0..size (0 log 0 = 0)."""
    from scipy.special import xlogy  # here: importing scipy.special takes a quarter second

    c = np.arange(size + 1, dtype=np.float64)
    table: Vector = xlogy(c, c)
    return table


def _jsd_from_counts(
    h0: NDArray[np.intp],
    h1: NDArray[np.intp],
    n0: Any,
    n1: Any,
    xlogx: Vector,
    neg_h_m: Vector | None = None,
) -> Vector:
    """JS divergence in bits between rows of bin counts summing to n0 and n1 (ints, or an
    int array of one per row).

    JSD = H(M) - H(P)/2 - H(Q)/2, and sum p log p = (sum h log h)/n0 - log n0: the integer
    parts come from a table, so only the mixture M needs logarithms (``neg_h_m``, each
    row's sum of ``xlogy(m, m)``, when the caller has it from a table of its own).
    """
    from scipy.special import xlogy

    neg_h_p = xlogx[h0].sum(axis=1) / n0 - _log(n0)
    neg_h_q = xlogx[h1].sum(axis=1) / n1 - _log(n1)
    if neg_h_m is None:
        m = _mixture(h0, _per_row(n0), h1, _per_row(n1))
        neg_h_m = xlogy(m, m).sum(axis=1)
    js: Vector = (0.5 * (neg_h_p + neg_h_q) - neg_h_m) / math.log(2.0)
    return np.clip(js, 0.0, 1.0)


MIXTURE_TABLE_ENTRIES = 2**18
"""Largest table of the mixture's ``xlogy(m, m)`` (``_mixture_table``, 2 MiB) a jsd kernel
reads instead of computing it: up to k = 27 per arm. A simulation's many tests at one k
share it; at k = 20 and 400 splits of 30 bins the JS divergences took 0.14 ms instead of
0.34 (2026-11-28)."""


def _mixture(h0: Any, n0: Any, h1: Any, n1: Any) -> Any:
    """The mixture's share of a bin with counts h0 of n0 and h1 of n1."""
    return 0.5 * (h0 / n0 + h1 / n1)


@functools.lru_cache(maxsize=64)
def _mixture_table(n0: int, n1: int) -> Vector:
    """``xlogy(m, m)`` of the mixture share of every bin count pair (h0, h1), h0 <= n0 and
    h1 <= n1, at flat index ``h0 * (n1 + 1) + h1`` (read-only)."""
    from scipy.special import xlogy  # here: as ``_xlogx_table``

    m = _mixture(np.arange(n0 + 1)[:, None], n0, np.arange(n1 + 1), n1)
    table: Vector = xlogy(m, m).ravel()
    table.setflags(write=False)
    return table


def _log(n: Any) -> Any:
    """``math.log`` of an int, or of every entry of a non-empty int array (once per run of
    equal entries: the stacked kernels repeat each prompt's count over its rows)."""
    if np.ndim(n) == 0:
        return math.log(n)
    starts = np.flatnonzero(np.diff(n, prepend=n[0] - 1))
    logs = np.array([math.log(v) for v in n[starts].tolist()])
    return np.repeat(logs, np.diff(starts, append=n.size))


def _per_row(n: Any) -> Any:
    """An int, or an array of one per row as a column."""
    return n if np.ndim(n) == 0 else np.asarray(n)[:, None]


def _group_sizes(n: int, k_a: int) -> tuple[int, int]:
    """Sizes of P0 (pairs inside the first group) and P1 (cross pairs)."""
    return k_a * (k_a - 1) // 2, k_a * (n - k_a)


class _QuadraticSums:
    """Sums of a symmetric matrix over within-A, cross and within-B index pairs (ordered)."""

    def __init__(self, matrix: Matrix) -> None:
        matrix = merged_ties(matrix)  # distances of equal outputs: 0, not rounding noise
        self.matrix = matrix
        self.rowsum = matrix.sum(axis=1)
        self.total = float(self.rowsum.sum())
        self.scale = float(np.max(np.abs(matrix)))

    def __call__(self, masks: Masks) -> tuple[Vector, Vector, Vector]:
        x = masks.astype(np.float64)
        s_aa: Vector = np.einsum("ij,ij->i", x @ self.matrix, x)
        x_row = x @ self.rowsum
        s_ab = x_row - s_aa
        s_bb = self.total - 2.0 * x_row + s_aa
        return s_aa, s_ab, s_bb


# --------------------------------------------------------------------------- kernels


class _JSDKernel:
    """Histogram JSD of P0 vs P1 with fixed shared edges.

    With U_c the 0/1 matrix of pairs i < j whose similarity falls in bin c and x the
    indicator of the first group, the bin counts of P0 are h0_c = x'U_c x, and those of P0
    and P1 together are 2 h0_c + h1_c = x'E_c 1 (E_c = U_c + U_c': every ordered pair), so
    all bins of a chunk of splits come from one matrix product. Several bins share one column
    of that product as the digits of one mixed-radix integer (``_BinColumns``): bin c can
    hold at most ``cap_c`` pairs of the first group (its pooled pairs, and no more than
    k_a (k_a - 1) / 2), so it is a digit of radix ``cap_c + 1`` and a column's integer stays
    below 2^24 (float32; float64 and 2^53 from 4,096 pooled rows). Every partial sum of the
    product is a non-negative integer no larger than the column's total, exact whatever the
    order of summation, so the counts are those of one column per bin, from a product that
    is a few columns wide where most pairs fall in few bins (k = 50 per arm, random
    embeddings: 8 columns for 30 bins; 3 where the outputs are a few kinds of answer).
    """

    def __init__(self, matrix: Matrix, k_a: int, *, bins: int, range: Any) -> None:
        n = matrix.shape[0]
        matrix = merged_ties(matrix)
        iu = np.triu_indices(n, 1)
        self.edges = histogram_edges(matrix[iu], bins, range)
        rows, cols = np.nonzero(~np.eye(n, dtype=bool))
        bin_of_pair = bin_index(matrix[rows, cols], self.edges)
        dtype = np.float32 if n < 4096 else np.float64  # counts stay exact integers
        upper = rows < cols
        caps = np.minimum(np.bincount(bin_of_pair[upper], minlength=bins), k_a * (k_a - 1) // 2)
        self._columns = _BinColumns(caps, 2 ** (np.finfo(dtype).nmant + 1))
        column, weight = self._columns.place(bin_of_pair[upper])
        width = self._columns.count
        self._stacked: NDArray[np.floating[Any]] = np.zeros((n, width * n), dtype=dtype)
        self._stacked[rows[upper], column * n + cols[upper]] = weight
        counts = np.bincount(rows * bins + bin_of_pair, minlength=n * bins)
        self._rowcounts: NDArray[np.floating[Any]] = counts.reshape(n, bins).astype(dtype)
        self._dtype = dtype
        self._n, self._bins = n, bins
        self._n0, self._n1 = _group_sizes(n, k_a)
        self._xlogx = _xlogx_table(max(self._n0, self._n1))
        self._mixtures = (self._n0 + 1) * (self._n1 + 1) <= MIXTURE_TABLE_ENTRIES
        self.bytes_per_split = (width + 2) * n * np.dtype(dtype).itemsize + 16 * bins
        self.scale = 1.0

    def __call__(self, masks: Masks) -> Vector:
        return self.jsd(*self.counts(masks))

    def jsd(self, h0: NDArray[np.intp], h1: NDArray[np.intp]) -> Vector:
        """The JS divergence of each row of bin counts of P0 and of P1 (``counts``)."""
        neg_h_m = None
        if self._mixtures:
            table = _mixture_table(self._n0, self._n1)
            neg_h_m = table[h0 * (self._n1 + 1) + h1].sum(axis=1)
        return _jsd_from_counts(h0, h1, self._n0, self._n1, self._xlogx, neg_h_m)

    def counts(self, masks: Masks) -> tuple[NDArray[np.intp], NDArray[np.intp]]:
        """(splits, bins) bin counts of P0 and of P1."""
        x: NDArray[np.floating[Any]] = masks.astype(self._dtype)
        y = (x @ self._stacked).reshape(len(x), self._columns.count, self._n)
        packed = np.matmul(y, x[:, :, None])[:, :, 0]
        h0 = self._columns.unpacked(packed.astype(np.int64), self._bins)
        h1 = (x @ self._rowcounts).astype(np.intp)  # 2 h0 + h1
        h1 -= h0
        h1 -= h0
        return h0, h1


class _BinColumns:
    """Bins packed as mixed-radix digits into as few columns as fit below ``limit``.

    Bin c is a digit of radix ``caps[c] + 1``; the bins are placed largest radix first into
    the first column whose radices' product stays at most ``limit`` (first-fit decreasing);
    bins that can hold nothing (cap 0) get no column and always count 0.
    """

    def __init__(self, caps: NDArray[np.intp], limit: int) -> None:
        placed: list[tuple[int, list[int]]] = []  # (radix product, bins) per column
        for c in sorted(np.flatnonzero(caps).tolist(), key=lambda c: -int(caps[c])):
            radix = int(caps[c]) + 1
            slot = next((i for i, (p, _) in enumerate(placed) if p * radix <= limit), None)
            if slot is None:
                placed.append((radix, [c]))
            else:
                product, members = placed[slot]
                placed[slot] = (product * radix, [*members, c])
        self.count = max(1, len(placed))
        depth = max([len(members) for _, members in placed], default=1)
        self._radix = np.ones((depth, self.count), dtype=np.int64)
        self._bin = np.full((depth, self.count), -1, dtype=np.intp)
        self._column = np.zeros(caps.size, dtype=np.intp)
        self._weight = np.zeros(caps.size)
        for g, (_, members) in enumerate(placed):
            weight = 1
            for digit, c in enumerate(members):
                self._radix[digit, g], self._bin[digit, g] = int(caps[c]) + 1, c
                self._column[c], self._weight[c] = g, float(weight)
                weight *= int(caps[c]) + 1

    def place(self, bins: NDArray[np.intp]) -> tuple[NDArray[np.intp], Vector]:
        """Column of each of ``bins``, and the weight of its digit there."""
        return self._column[bins], self._weight[bins]

    def unpacked(self, packed: NDArray[np.int64], bins: int) -> NDArray[np.intp]:
        """(splits, bins) counts from the (splits, columns) integers."""
        counts = np.zeros((len(packed), bins), dtype=np.intp)
        for radix, where in zip(self._radix, self._bin, strict=True):
            packed, digit = np.divmod(packed, radix)
            used = where >= 0
            counts[:, where[used]] = digit[:, used]
        return counts


class _CDFKernel:
    """Statistics of the two empirical CDFs of P0 and P1 (energy, Wasserstein-1, KS).

    All pairwise similarities are sorted once; for a split each sorted pair is in P0
    (both ends in the first group), P1 (one end each) or neither, so both CDFs at every
    pooled value are cumulative sums of those labels.
    """

    def __init__(self, matrix: Matrix, k_a: int, *, statistic: str) -> None:
        n = matrix.shape[0]
        iu, ju = np.triu_indices(n, 1)
        values = merged_ties(matrix)[iu, ju]
        order = np.argsort(values, kind="stable")
        self._i, self._j = iu[order], ju[order]
        sorted_values = values[order]
        self._widths = np.diff(sorted_values)
        # KS: evaluate each CDF only after the last of a run of equal values.
        self._run_ends = np.r_[sorted_values[1:] != sorted_values[:-1], True]
        self._n0, self._n1 = _group_sizes(n, k_a)
        largest = self._n0 * (self._n0 + self._n1)
        self._int = np.int32 if largest < 2**31 else np.int64
        self._statistic = statistic
        self.bytes_per_split = 40 * values.size
        spread = float(sorted_values[-1] - sorted_values[0])
        self.scale = {"ks": 1.0, "wasserstein": spread, "energy": math.sqrt(spread)}[statistic]

    def __call__(self, masks: Masks) -> Vector:
        x = masks.view(np.uint8)
        xi, xj = x[:, self._i], x[:, self._j]
        # n0 n1 (F0 - F1) as one exact integer cumulative sum: a pair in P0 adds n1, a
        # cross pair (in P1) subtracts n0: -n0 per end in the first group, and n1 + 2 n0
        # more for both ends in.
        cumulative = np.add(xi, xj, dtype=self._int)
        cumulative *= -self._n0
        cumulative += np.multiply(xi & xj, self._n1 + 2 * self._n0, dtype=self._int)
        np.cumsum(cumulative, axis=1, out=cumulative)
        scale = 1.0 / (self._n0 * self._n1)
        if self._statistic == "ks":  # scaled after the max: rounding is monotone, the same sup
            sup: Vector = np.abs(cumulative[:, self._run_ends]).max(axis=1) * scale
            return sup
        inner = cumulative[:, :-1] * scale
        if self._statistic == "wasserstein":
            return np.abs(inner, out=inner) @ self._widths
        # scipy.stats.energy_distance: sqrt(2 * integral (F - G)^2)
        return np.sqrt(2.0 * (np.multiply(inner, inner, out=inner) @ self._widths))


class _MeanDiffKernel:
    """|mean(P0) - mean(P1)| from quadratic forms of the similarity matrix."""

    def __init__(self, matrix: Matrix, k_a: int) -> None:
        s = matrix.copy()
        np.fill_diagonal(s, 0.0)
        self._sums = _QuadraticSums(s)
        self._n0, self._n1 = _group_sizes(s.shape[0], k_a)
        self.bytes_per_split = 24 * s.shape[0]
        self.scale = self._sums.scale

    def __call__(self, masks: Masks) -> Vector:
        s_aa, s_ab, _ = self._sums(masks)
        return np.abs(0.5 * s_aa / self._n0 - s_ab / self._n1)


class _EnergyKernel:
    """Two-sample energy distance (V-statistic) on a pooled distance matrix.

    E = 2 mean d(a, b) - mean d(a, a') - mean d(b, b') (Szekely & Rizzo).
    """

    def __init__(self, matrix: Matrix, k_a: int) -> None:
        self._sums = _QuadraticSums(matrix)
        self._ka, self._kb = k_a, matrix.shape[0] - k_a
        self.bytes_per_split = 24 * matrix.shape[0]
        self.scale = self._sums.scale

    def __call__(self, masks: Masks) -> Vector:
        s_aa, s_ab, s_bb = self._sums(masks)
        ka, kb = self._ka, self._kb
        energy: Vector = np.maximum(2.0 * s_ab / (ka * kb) - s_aa / ka**2 - s_bb / kb**2, 0.0)
        return energy


class _CentroidKernel:
    """Squared distance between the group centroids, from a (centred) Gram matrix."""

    def __init__(self, matrix: Matrix, k_a: int) -> None:
        self._sums = _QuadraticSums(matrix)
        self._ka, self._kb = k_a, matrix.shape[0] - k_a
        self.bytes_per_split = 24 * matrix.shape[0]
        self.scale = self._sums.scale

    def __call__(self, masks: Masks) -> Vector:
        s_aa, s_ab, s_bb = self._sums(masks)
        ka, kb = self._ka, self._kb
        squared: Vector = np.maximum(s_aa / ka**2 + s_bb / kb**2 - 2.0 * s_ab / (ka * kb), 0.0)
        return squared


# --------------------------------------------------------------------------- registry


def _bins_option(value: Any) -> int:
    return as_positive_int(value, "bins")


def _range_option(value: Any) -> Any:
    if isinstance(value, str):
        if value != "pooled":
            raise ValueError(f"range: expected 'pooled' or a (low, high) pair, got {value!r}")
        return value
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"range: expected 'pooled' or a (low, high) pair, got {value!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"range: needs finite low < high, got {value!r}")
    return (lo, hi)


@dataclass(frozen=True)
class Omega:
    """A registered discrepancy: how to build its pooled matrix and its kernel."""

    name: str
    level: Literal["similarity", "embedding", "combined"]
    """``similarity``: a function of P0 and P1; ``embedding``: of the embeddings themselves;
    ``combined``: a non-parametric combination of other omegas on the same splits."""
    summary: str
    matrix: str
    """What the pooled matrix handed to the kernel holds."""
    kernel: Callable[..., Kernel] | None
    """Builds the kernel from the pooled matrix and k_a; None for a combined omega."""
    defaults: Mapping[str, Any] = field(default_factory=dict)
    validators: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    from_embeddings: Callable[[Matrix], Matrix] | None = None
    """For embedding-level statistics: the stacked embeddings -> pooled matrix."""
    aspect: str = ""
    """What a change in this statistic points to, e.g. "location of the answers"."""
    components: tuple[str, ...] = ()
    """For a combined omega: the omegas it combines (each with its default options)."""

    def build(self, matrix: Matrix, k_a: int, options: Mapping[str, Any]) -> Kernel:
        """This single statistic's kernel on a pooled matrix (a combined omega has none)."""
        assert self.kernel is not None, f"omega {self.name!r} is combined: build its components"
        return self.kernel(matrix, k_a, **options)

    def resolve_options(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Defaults overridden by ``options``; unknown names and bad values raise."""
        unknown = sorted(set(options) - set(self.defaults))
        if unknown:
            allowed = ", ".join(self.defaults) or "none"
            raise ValueError(
                f"{unknown[0]}: not an option of omega {self.name!r} (its options: {allowed})"
            )
        resolved = dict(self.defaults)
        for key, value in options.items():
            resolved[key] = self.validators[key](value)
        return resolved


SPREAD = "spread/similarity structure of the answers"
"""What the P0-vs-P1 statistics see: how the answers resemble each other and the originals."""
LOCATION = "location of the answers"
"""What the embedding-level statistics see: where the answers sit in embedding space."""


def _cdf(statistic: str) -> Callable[..., Kernel]:
    def build(matrix: Matrix, k_a: int) -> Kernel:
        return _CDFKernel(matrix, k_a, statistic=statistic)

    return build


OMEGAS: dict[str, Omega] = {
    o.name: o
    for o in [
        Omega(
            "jsd",
            "similarity",
            "Jensen-Shannon divergence (bits) between the histograms of P0 and P1 "
            "on shared edges (the paper's default)",
            "similarity",
            _JSDKernel,
            {"bins": 30, "range": "pooled"},
            {"bins": _bins_option, "range": _range_option},
            aspect=SPREAD,
        ),
        Omega(
            "energy",
            "similarity",
            "energy distance between P0 and P1 (as scipy.stats.energy_distance)",
            "similarity",
            _cdf("energy"),
            aspect=SPREAD,
        ),
        Omega(
            "wasserstein",
            "similarity",
            "Wasserstein-1 distance between P0 and P1",
            "similarity",
            _cdf("wasserstein"),
            aspect=SPREAD,
        ),
        Omega(
            "ks",
            "similarity",
            "Kolmogorov-Smirnov statistic between P0 and P1",
            "similarity",
            _cdf("ks"),
            aspect=SPREAD,
        ),
        Omega(
            "mean_diff",
            "similarity",
            "|mean(P0) - mean(P1)|",
            "similarity",
            _MeanDiffKernel,
            aspect=SPREAD,
        ),
        Omega(
            "energy_cosine",
            "embedding",
            "energy distance between the arms' embeddings, cosine distance; since "
            "1 - cos(u, v) = |u - v|^2 / 2 for unit vectors, this is the centroid statistic "
            "of the normalized embeddings (blind to changes of spread alone)",
            "cosine distance",
            _EnergyKernel,
            from_embeddings=cosine_distance,
            aspect=LOCATION,
        ),
        Omega(
            "energy_l1",
            "embedding",
            "energy distance between the arms' embeddings, L1 distance",
            "L1 distance",
            _EnergyKernel,
            from_embeddings=l1_distance,
            aspect=LOCATION,
        ),
        Omega(
            "energy_l2",
            "embedding",
            "energy distance between the arms' embeddings, Euclidean distance",
            "Euclidean distance",
            _EnergyKernel,
            from_embeddings=l2_distance,
            aspect=LOCATION,
        ),
        Omega(
            "centroid",
            "embedding",
            "squared Euclidean distance between the arms' centroids",
            "centred Gram (inner products)",
            _CentroidKernel,
            from_embeddings=centered_gram,
            aspect=LOCATION,
        ),
        Omega(
            "auto",
            "combined",
            "jsd (P0 vs P1: spread and similarity structure) and energy_cosine (the "
            "embeddings: location) on the same splits, their permutation p-values combined "
            "by Tippett's minimum (non-parametric combination; ties broken by the other "
            "p-value); the statistic is -log of the smaller p-value",
            "one pooled matrix per component: similarity (jsd), cosine distance (energy_cosine)",
            None,
            components=("jsd", "energy_cosine"),
        ),
    ]
}
"""Every discrepancy by name."""
