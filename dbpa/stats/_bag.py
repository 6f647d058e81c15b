"""The outputs seen so far as a multiset: each distinct output once, with its multiplicity.

A conformal p-value ranks a statistic of the newest outputs among those of others in the
bag, ties broken at random, and it is exactly uniform only where the statistic is a function
of the bag as a multiset: equal outputs must get equal values. Computed row by row they need
not. A matrix product rounds a row by its place in the matrix, so a random projection of two
equal embeddings differs in the last digits, and a kernel sum at a small bandwidth (a bag of
answers that hardly vary) turns those digits into differences that rounding the densities to
``TIE_DIGITS`` does not hide: the ranks are then decided by where the rounding fell. Until
2026-12-08 the default monitor of an arm whose answers never vary alarmed in 5 of 20 runs of
100 quiet ticks at alpha = 0.05, and one of answers that repeat exactly, a tenth of them with
embeddings 1e-7 off, now and then (``tests/stats/test_repeats.py``).

Here an output is one entry however often it comes (keyed by a digest of its bytes),
projected once by a product of its own, and each statistic is computed once per entry:
equal outputs tie exactly. The bag keeps the count, sum and sum of outer products of its
rows (its mean, covariance and spread without a pass over it; sums are symmetric functions
of the multiset up to rounding far below the digits compared) and, given a bandwidth, each
entry's Gaussian kernel density among all rows, itself included, as rows join and leave.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["PROJECTION", "TIE_DIGITS", "Bag", "random_projection"]

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]
Entries = NDArray[np.intp]

TIE_DIGITS = 9
"""Relative digits densities and statistics are compared at."""
PROJECTION = 64
"""Outputs of a higher dimension are projected to this many random directions."""
CHUNK = 512
"""Entries whose kernel sums are computed at a time when the bandwidth moves."""
ROOM = 256
"""Entries and positions the bag has room for at first (it doubles when full)."""


def random_projection(rng: np.random.Generator, d: int) -> Matrix:
    """The map of outputs of dimension ``d`` into a bag: ``PROJECTION`` random Gaussian
    directions where ``d`` is higher, else the identity."""
    if d > PROJECTION:
        projection: Matrix = rng.normal(size=(d, PROJECTION)) / math.sqrt(PROJECTION)
        return projection
    return np.eye(d)


class Bag:
    """Distinct outputs (projected by ``projection``), their counts, the entry at each
    position in arrival order (``ids``), the rows' moments (unless ``moments`` is False)
    and, given a ``bandwidth`` (squared; 0 or NaN: a flat kernel; None: no densities kept),
    each entry's kernel density."""

    def __init__(
        self, projection: Matrix, *, bandwidth: float | None = None, moments: bool = True
    ) -> None:
        width = projection.shape[1]
        self._projection = projection
        self._keys: dict[bytes, int] = {}
        self._entry_keys: list[bytes] = []
        self._u = self._n = 0  # entries, positions
        self._rows = np.zeros((ROOM, width))
        self._norms = np.zeros(ROOM)
        self._counts = np.zeros(ROOM)
        self._sums = np.zeros(ROOM)
        self._ids: Entries = np.zeros(ROOM, dtype=np.intp)
        self._total = np.zeros(width)
        self._outer = np.zeros((width, width))
        self._densities = bandwidth is not None
        self._moments = moments
        self.bandwidth = math.nan if bandwidth is None else bandwidth

    def __len__(self) -> int:
        return self._n

    @property
    def rows(self) -> Matrix:
        """The distinct outputs, projected: a row per entry."""
        return self._rows[: self._u]

    @property
    def counts(self) -> Vector:
        """How many times each entry is in the bag (0: one whose rows all left, kept until
        such entries are most of them)."""
        return self._counts[: self._u]

    @property
    def ids(self) -> Entries:
        """The entry of each position of the bag, in arrival order."""
        return self._ids[: self._n]

    def add(self, outputs: Matrix) -> Entries:
        """Add ``outputs`` (n, d) at the end; their entries."""
        known = self._u
        entries = np.empty(len(outputs), dtype=np.intp)
        for i, output in enumerate(outputs):
            key = _key(output)
            entry = self._keys.get(key)
            if entry is None:
                entry = self._keys[key] = self._u
                self._entry_keys.append(key)
                self._room_for(self._u + 1)
                row = output @ self._projection  # alone: equal outputs, equal rows
                self._rows[entry], self._norms[entry] = row, float(row @ row)
                self._counts[entry] = self._sums[entry] = 0.0
                self._u += 1
            entries[i] = entry
        self._ids = _room(self._ids, self._n + len(entries))
        self._ids[self._n : self._n + len(entries)] = entries
        self._n += len(entries)
        self._change(entries, 1.0, known)
        return entries

    def _room_for(self, entries: int) -> None:
        self._rows, self._norms = _room(self._rows, entries), _room(self._norms, entries)
        self._counts, self._sums = _room(self._counts, entries), _room(self._sums, entries)

    def keep(self, positions: NDArray[np.intp]) -> None:
        """Keep the rows at ``positions`` (sorted); the others leave. Entries left with no
        row stay (an output that comes again takes its entry back) until they are most of
        the bag's entries."""
        gone = np.ones(self._n, dtype=bool)
        gone[positions] = False
        self._change(self.ids[gone], -1.0, self._u)
        kept = self.ids[positions]
        self._n = len(kept)
        self._ids[: self._n] = kept
        alive = self.counts > 0
        u = int(alive.sum())
        if 2 * u >= self._u:
            return
        renumber = np.cumsum(alive) - 1
        for array in (self._rows, self._norms, self._counts, self._sums):
            array[:u] = array[: self._u][alive]
        self._u = u
        self._entry_keys = [key for key, a in zip(self._entry_keys, alive, strict=True) if a]
        self._keys = {key: i for i, key in enumerate(self._entry_keys)}
        self._ids[: self._n] = renumber[kept]

    def _change(self, entries: Entries, sign: float, known: int) -> None:
        """Count ``entries`` in (``sign`` 1) or out (-1): counts, moments and densities;
        entries from ``known`` on are new (their densities start from the rows before)."""
        if len(entries) == 1:
            changed, weights = entries, np.array([sign])
        else:
            changed, times = np.unique(entries, return_counts=True)
            weights = sign * times.astype(np.float64)
        if self._densities:
            kernel = self._kernel(slice(0, self._u), changed)
            new = changed >= known
            if new.any():
                self._sums[changed[new]] = self._counts[:known] @ kernel[:known, new]
            self._sums[: self._u] += kernel @ weights
        self._counts[changed] += weights
        if self._moments:
            rows = self._rows[changed]
            self._total += weights @ rows
            self._outer += (rows * weights[:, None]).T @ rows

    def mean(self) -> Vector:
        """The rows' mean."""
        mean: Vector = self._total / self._n
        return mean

    def covariance(self) -> Matrix:
        """The rows' covariance (divided by their number)."""
        mean = self.mean()
        covariance: Matrix = self._outer / self._n - np.outer(mean, mean)
        return covariance

    def spread(self) -> tuple[float, float]:
        """Twice the rows' mean squared distance from their mean (the mean squared distance
        between two rows), and their mean squared length."""
        square = float(np.trace(self._outer)) / self._n
        mean = self.mean()
        return 2.0 * (square - float(mean @ mean)), square

    def densities(self, bandwidth: float | None = None) -> Vector:
        """Each entry's kernel density among the rows, rounded to ``TIE_DIGITS`` relative
        digits, at ``bandwidth`` (squared; None: the bag's), the sums taken again where it
        moved."""
        if bandwidth is not None and bandwidth != self.bandwidth:
            self.bandwidth = bandwidth
            every = slice(0, self._u)
            for i in range(0, self._u, CHUNK):
                chunk = slice(i, min(i + CHUNK, self._u))
                self._sums[chunk] = self._kernel(chunk, every) @ self.counts
        unit = 10.0**TIE_DIGITS / self._n  # densities lie in [1, n]
        rounded: Vector = np.round(self._sums[: self._u] * unit) / unit
        return rounded

    def _kernel(self, a: Entries | slice, b: Entries | slice) -> Matrix:
        """The Gaussian kernel between entries ``a`` and ``b`` at the bag's bandwidth."""
        rows_a, rows_b = self._rows[a], self._rows[b]
        if not math.isfinite(self.bandwidth) or self.bandwidth <= 0.0:
            return np.ones((len(rows_a), len(rows_b)))
        dist = self._norms[a][:, None] + self._norms[b][None, :] - 2.0 * (rows_a @ rows_b.T)
        kernel: Matrix = np.exp(-np.maximum(dist, 0.0) / self.bandwidth)
        return kernel


def _key(output: Vector) -> bytes:
    """An output's key: a 128-bit digest of its bytes (-0.0 counted as 0.0), so that the
    bag keeps 16 bytes per entry, not the output (3 KB at d = 384)."""
    return hashlib.blake2b((output + 0.0).tobytes(), digest_size=16).digest()


def _room(array: NDArray[Any], size: int) -> NDArray[Any]:
    """``array``, or a copy twice as long, so that it has at least ``size`` rows."""
    if size <= len(array):
        return array
    grown = np.zeros((max(size, 2 * len(array)), *array.shape[1:]), dtype=array.dtype)
    grown[: len(array)] = array
    return grown
