"""The pooled test's statistics for many prompts at once.

A set of hundreds of prompts, each with a few outputs per arm, spent most of its time in
the per-prompt overhead of building and calling one kernel per prompt and component
(``_omega``). Prompts are stacked here instead (padded to the largest pooled size of the
stack), and their jsd (on cosine similarities), energy_cosine and spread
(``_prompt_sets._SpreadKernel``) evaluated for all of them in one pass. The values are the
per-prompt kernels' to the last bit: the same similarities, merged ties, edges and bins,
jsd from the same integer bin counts, and the sums of distances of a padded stack taken
prompt by prompt on its own outputs (a padded product would round differently).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._omega import TIE_ATOL, _jsd_from_counts, _mixture_table, _xlogx_table

Stack = NDArray[np.float64]
Vector = NDArray[np.float64]
Counts = NDArray[np.intp]
Masks = NDArray[np.bool_]

STACKABLE = frozenset({"jsd", "energy_cosine"})
"""Components the stacked evaluation computes (jsd on cosine similarities)."""


def merged_ties_stacked(matrices: Stack) -> Stack:
    """``_omega.merged_ties`` of every (n, n) matrix of a (P, n, n) stack: each run of
    values within ``TIE_ATOL`` of the next (relative to the matrix's largest magnitude, at
    least 1) set to the run's smallest."""
    flat = matrices.reshape(matrices.shape[0], -1)
    order = np.argsort(flat, axis=1, kind="stable")
    values = np.take_along_axis(flat, order, axis=1)
    scale = np.maximum(1.0, np.abs(values).max(axis=1, keepdims=True))
    starts = np.ones(values.shape, dtype=bool)
    starts[:, 1:] = np.diff(values, axis=1) > TIE_ATOL * scale
    first = np.maximum.accumulate(np.where(starts, np.arange(values.shape[1]), 0), axis=1)
    merged = np.empty_like(flat)
    np.put_along_axis(merged, order, np.take_along_axis(values, first, axis=1), axis=1)
    out: Stack = merged.reshape(matrices.shape)
    return out


def cosine_similarity_stacked(z: Stack) -> Stack:
    """``_similarity._cosine_similarity`` of every (n, d) item of a (P, n, d) stack (rows
    already checked nonzero)."""
    unit = z / np.linalg.norm(z, axis=2)[:, :, None]
    s: Stack = np.clip(unit @ unit.transpose(0, 2, 1), -1.0, 1.0)
    s[:, np.arange(z.shape[1]), np.arange(z.shape[1])] = 1.0
    return s


class StackedKernels:
    """The components' statistics (and the spread) of P prompts, padded to n outputs.

    ``pooled`` holds each prompt's (n_i, d) pooled outputs (original arm first), ``k_a``
    (P,) its original arm; a prompt with fewer than n outputs is padded with outputs in
    neither group, whose distances are 0 and similarities 1 (values every matrix holds on
    its diagonal, so its merged ties are unchanged) and whose pairs are in no bin.
    ``components`` names each component (``STACKABLE``); ``jsd_options`` are jsd's bins and
    range. ``scales`` is (P, columns): each kernel's tie scale, as the per-prompt kernels'.
    """

    def __init__(
        self,
        pooled: list[Stack],
        k_a: NDArray[np.int64],
        components: tuple[str, ...],
        jsd_options: Mapping[str, Any],
        spread: bool,
    ) -> None:
        sizes = np.array([x.shape[0] for x in pooled])
        n = int(sizes.max())
        self.n, self.sizes, self.k_a, self.k_b = n, sizes, k_a, sizes - k_a
        self.components, self.spread = components, spread
        real = np.arange(n)[None, :] < sizes[:, None]
        self._same_size = bool(np.all(sizes == n))
        if self._same_size:
            similarity = cosine_similarity_stacked(np.stack(pooled))
        else:  # each prompt's own, as its unpadded outputs give them, padded with 1
            similarity = np.ones((len(pooled), n, n))
            for p, x in enumerate(pooled):
                similarity[p, : len(x), : len(x)] = cosine_similarity_stacked(x[None])[0]
        self._distance: Stack | None = None
        scales = []
        if "energy_cosine" in components or spread:
            distance = 1.0 - similarity
            distance[:, np.arange(n), np.arange(n)] = 0.0
            self._distance = merged_ties_stacked(distance)
            if self._same_size:
                self._rowsum = self._distance.sum(axis=2)
                self._total = self._rowsum.sum(axis=1)
            else:  # each prompt's own sums, as its unpadded matrix gives them
                self._rowsum = np.zeros((len(pooled), n))
                self._total = np.empty(len(pooled))
                for p, size in enumerate(sizes):
                    self._rowsum[p, :size] = self._distance[p, :size, :size].sum(axis=1)
                    self._total[p] = self._rowsum[p, :size].sum()
            distance_scale = np.abs(self._distance).max(axis=(1, 2))
        bins = 0
        if "jsd" in components:
            bins = int(jsd_options["bins"])
            merged = merged_ties_stacked(similarity)
            self._jsd_setup(merged, real, bins, jsd_options["range"])
        for name in components:
            scales.append(np.ones(len(pooled)) if name == "jsd" else distance_scale)
        if spread:
            scales.append(distance_scale)
        self.scales = np.column_stack(scales)
        self.bytes_per_split = 4 * (bins + 2) * n + 40 * bins + 24 * n

    def _jsd_setup(
        self, similarity: Stack, real: NDArray[np.bool_], bins: int, value_range: Any
    ) -> None:
        """Each prompt's pairs by bin, as ``_omega._JSDKernel`` lays them out: column block c
        of ``_stacked[p]`` is the 0/1 matrix of the pairs of prompt p in bin c (pairs with a
        padded output in none)."""
        n_prompts, n = similarity.shape[0], self.n
        first, second = np.triu_indices(n, 1)
        pairs = similarity[:, first, second]
        in_prompt = real[:, first] & real[:, second]
        if isinstance(value_range, str):
            lo = np.where(in_prompt, pairs, np.inf).min(axis=1)
            hi = np.where(in_prompt, pairs, -np.inf).max(axis=1)
        else:
            lo, hi = (np.full(n_prompts, float(v)) for v in value_range)
        same = lo == hi
        lo, hi = np.where(same, lo - 0.5, lo), np.where(same, hi + 0.5, hi)
        edges = np.linspace(lo, hi, bins + 1, axis=1)
        rows, cols = np.nonzero(~np.eye(n, dtype=bool))
        values = similarity[:, rows, cols]
        below = np.count_nonzero(values[:, :, None] >= edges[:, None, :], axis=2)
        bin_of_pair = np.clip(below - 1, 0, bins - 1)
        keep = real[:, rows] & real[:, cols]
        prompt = np.repeat(np.arange(n_prompts), rows.size)[keep.ravel()]
        row = np.tile(rows, n_prompts)[keep.ravel()]
        column = (bin_of_pair * n + cols)[keep]
        self._stacked = np.zeros((n_prompts, n, bins * n), dtype=np.float32)
        self._stacked[prompt, row, column] = 1.0
        self._rowcounts = self._stacked.reshape(n_prompts, n, bins, n).sum(axis=3)
        self._bins = bins
        self._n0 = self.k_a * (self.k_a - 1) // 2
        self._n1 = self.k_a * self.k_b
        self._xlogx = _xlogx_table(int(max(self._n0.max(), self._n1.max())))

    def __call__(self, masks: Masks, prompts: slice) -> Stack:
        """(P', rows, columns): each column's statistic of the prompts ``prompts`` of the
        stack on their (rows, n) masks (``masks`` is (P', rows, n))."""
        out = np.empty((*masks.shape[:2], self.scales.shape[1]))
        k_a, k_b = self.k_a[prompts, None], self.k_b[prompts, None]
        if self._distance is not None:
            s_aa, x_row = self._sums(masks, prompts)
            s_ab = x_row - s_aa
            s_bb = self._total[prompts, None] - 2.0 * x_row + s_aa
        for c, name in enumerate(self.components):
            if name == "jsd":
                out[:, :, c] = self._jsd(masks, prompts)
            else:
                energy = 2.0 * s_ab / (k_a * k_b) - s_aa / k_a**2 - s_bb / k_b**2
                out[:, :, c] = np.maximum(energy, 0.0)
        if self.spread:
            out[:, :, -1] = s_aa / (k_a * (k_a - 1)) - s_bb / (k_b * (k_b - 1))
        return out

    def _sums(self, masks: Masks, prompts: slice) -> tuple[Stack, Stack]:
        """Each row's sum of distances within group a and to every output
        (``_omega._QuadraticSums``); padded prompts one by one on their own outputs, so that
        the sums are the unpadded ones to the last bit."""
        distance = self._distance
        assert distance is not None, "no distance component"
        if self._same_size:
            x = masks.astype(np.float64)
            s_aa = np.einsum("pij,pij->pi", x @ distance[prompts], x)
            return s_aa, (x @ self._rowsum[prompts, :, None])[:, :, 0]
        s_aa, x_row = np.empty(masks.shape[:2]), np.empty(masks.shape[:2])
        for j, p in enumerate(range(*prompts.indices(len(self.sizes)))):
            size = self.sizes[p]
            x = masks[j, :, :size].astype(np.float64)
            s_aa[j] = np.einsum("ij,ij->i", x @ distance[p, :size, :size], x)
            x_row[j] = x @ self._rowsum[p, :size]
        return s_aa, x_row

    def _jsd(self, masks: Masks, prompts: slice) -> Stack:
        """jsd of P0 (pairs inside the first group) against P1 (pairs across) from their
        exact integer bin counts (``_omega._JSDKernel``)."""
        x = masks.astype(np.float32)
        size, rows, n = x.shape
        y = (x @ self._stacked[prompts]).reshape(size, rows, self._bins, n)
        within2 = (y @ x[:, :, :, None])[:, :, :, 0]  # 2 * h0
        h0 = (0.5 * within2).astype(np.intp)
        h1 = (x @ self._rowcounts[prompts] - within2).astype(np.intp)
        js = _jsd_from_counts(
            h0.reshape(-1, self._bins),
            h1.reshape(-1, self._bins),
            np.repeat(self._n0[prompts], rows),
            np.repeat(self._n1[prompts], rows),
            self._xlogx,
            self._neg_h_m(h0, h1, prompts),
        )
        out: Stack = js.reshape(size, rows)
        return out

    def _neg_h_m(self, h0: Counts, h1: Counts, prompts: slice) -> Vector | None:
        """Each row's sum over bins of ``xlogy(m, m)`` (``_jsd_from_counts``), read from a
        table of every (h0, h1) a prompt can have where the tables are smaller than the
        (P', rows, bins) counts (the same float operations on the same counts: the direct
        sums to the last bit); None (computed there) otherwise."""
        n0, n1 = self._n0[prompts], self._n1[prompts]
        entries = (n0 + 1) * (n1 + 1)
        if entries.sum() > h0.size:
            return None
        tables = [_mixture_table(a, b) for a, b in zip(n0.tolist(), n1.tolist(), strict=True)]
        index = h0 * (n1 + 1)[:, None, None] + h1 + (np.cumsum(entries) - entries)[:, None, None]
        sums: Vector = np.concatenate(tables)[index.reshape(-1, self._bins)].sum(axis=1)
        return sums


def stackable(components: tuple[str, ...], similarity: str) -> bool:
    """Whether every component is stacked (jsd only on cosine similarities)."""
    return set(components) <= STACKABLE and ("jsd" not in components or similarity == "cosine")
