"""The permutation engine of Algorithm 1.

The pooled matrix is computed once; every split of the pooled outputs into a first
group of size ``k_a`` and a second of size ``k_b`` is a boolean mask that only
indexes it. Splits are evaluated vectorized in chunks bounded by a memory budget;
when there are no more distinct splits than permutations asked for, all of them are
enumerated and the p-value is exact. A combined omega (``auto``) evaluates all its
components on the same splits and combines them (``_combined``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._combined import (
    ComponentResult,
    at_least_counts,
    combine,
    component_result,
    driver,
    null_summary,
)
from ._omega import OMEGAS, Kernel, Omega
from ._similarity import SIMILARITIES, pool_arms, pooled_similarity
from ._threads import blas_for
from ._validation import RngLike, as_pooled_matrix, as_positive_int, as_rng, choose

MEMORY_BUDGET_BYTES = 4 * 2**20
"""Working memory of one chunk of splits: small enough for the cache, large enough to vectorize."""

TIE_RTOL = 1e-9
"""Null statistics within this relative distance of the observed one count as ties (>=)."""


@dataclass(frozen=True, repr=False)
class PermutationTestResult:
    """Outcome of a DBPA permutation test of arm ``a`` (original) against arm ``b``."""

    statistic: float
    """Observed discrepancy omega on the observed split (the effect size of the paper)."""
    p_value: float
    """(1 + #{T_b >= T_obs}) / (1 + B) for random splits; #{T >= T_obs} / #splits when exact."""
    null_distribution: NDArray[np.float64]
    """Statistic of every evaluated split (read-only)."""
    null_mean: float
    """Mean of the null distribution: omega's expected value under H0 (its bias at this k)."""
    null_std: float
    """Standard deviation of the null distribution."""
    effect: float
    """Bias-corrected effect: ``statistic - null_mean``."""
    z: float
    """Standardized effect: ``effect / null_std`` (NaN when the null is degenerate)."""
    n_permutations: int
    """B as asked: the number of random splits to draw."""
    evaluated: int
    """Number of splits evaluated: B, or every distinct split (fewer than B) when ``exact``."""
    exact: bool
    """True when every distinct split was enumerated."""
    k_a: int
    """Outputs in the original arm."""
    k_b: int
    """Outputs in the perturbed arm."""
    omega: str
    """Name of the discrepancy."""
    similarity: str | None
    """Similarity behind P0/P1; None for embedding-level statistics or a user matrix."""
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Resolved options of the discrepancy (e.g. ``bins``, ``range`` for jsd)."""
    components: Mapping[str, ComponentResult] = field(default_factory=lambda: MappingProxyType({}))
    """Combined omega (``auto``): each component's own test on the same splits, by name;
    empty for a single omega."""
    driver: str | None = None
    """Combined omega: the component with the smallest p-value, the first hint of *what*
    changed (its ``aspect``, e.g. "location of the answers"); None for a single omega or
    when every component's p-value is 1."""

    def __repr__(self) -> str:
        return (
            f"PermutationTestResult(omega={self.omega!r}, statistic={self.statistic:.6g}, "
            f"p_value={self.p_value:.6g}, effect={self.effect:.6g}, z={self.z:.3g}, "
            f"n_permutations={self.n_permutations}, evaluated={self.evaluated}, "
            f"exact={self.exact}, "
            f"k_a={self.k_a}, k_b={self.k_b})"
        )


def _omega_iv(omega: Any, options: Mapping[str, Any]) -> tuple[Omega, dict[str, Any]]:
    spec = OMEGAS[choose(omega, "omega", OMEGAS)]
    return spec, spec.resolve_options(options)


def permutation_test(
    a: ArrayLike,
    b: ArrayLike,
    *,
    similarity: str = "cosine",
    omega: str = "jsd",
    n_permutations: int = 1000,
    rng: RngLike = None,
    **omega_options: Any,
) -> PermutationTestResult:
    """Test whether arms ``a`` and ``b`` come from the same output distribution.

    Parameters
    ----------
    a, b
        (k_a, d) and (k_b, d) embeddings of the original and the perturbed outputs
        (k_a, k_b >= 2; the arms may differ in size).
    similarity
        ``"cosine"`` (default), ``"neg_l1"`` or ``"neg_l2"``: the pairwise similarity
        behind P0 and P1. Embedding-level omegas define their own distance and accept
        only the default here.
    omega
        The discrepancy (see ``OMEGAS``): ``"jsd"`` (default), ``"energy"``,
        ``"wasserstein"``, ``"ks"``, ``"mean_diff"``, ``"energy_cosine"``,
        ``"energy_l1"``, ``"energy_l2"``, ``"centroid"``, or ``"auto"``: its components
        combined on the same splits (``similarity`` then applies to its P0/P1 component;
        the result's ``components`` and ``driver`` say which one drove the decision).
    n_permutations
        B, the number of random splits; all splits are enumerated instead when there
        are at most B of them.
    rng
        Seed or ``numpy.random.Generator``; the same seed gives the same result.
    **omega_options
        Options of the discrepancy, e.g. ``bins=30`` and ``range="pooled"`` (or
        ``(-1, 1)``) for jsd.
    """
    spec, options = _omega_iv(omega, omega_options)
    n_perm = as_positive_int(n_permutations, "n_permutations")
    gen = as_rng(rng)
    with blas_for(len(np.asarray(a)) + len(np.asarray(b))):
        if spec.components:
            return _run_combined(a, b, spec, similarity, n_perm, gen)
        matrix = _single_matrix(a, b, spec, similarity)
        used_similarity = similarity if spec.from_embeddings is None else None
        k_a = len(np.asarray(a))
        return _run(matrix, k_a, spec, options, n_perm, gen, used_similarity)


def _single_matrix(a: ArrayLike, b: ArrayLike, spec: Omega, similarity: str) -> NDArray[np.float64]:
    """The pooled matrix a single omega's kernel reads."""
    if spec.from_embeddings is None:
        return pooled_similarity(a, b, similarity)
    if similarity != "cosine":
        raise ValueError(
            f"similarity: omega {spec.name!r} is computed on the embeddings with its own "
            f"distance ({spec.matrix}); similarity {similarity!r} does not apply"
        )
    return spec.from_embeddings(pool_arms(a, b, nonzero=spec.name == "energy_cosine"))


def _component_kernels(
    a: ArrayLike, b: ArrayLike, spec: Omega, similarity: str
) -> tuple[list[Omega], list[Kernel], int, int]:
    """(components, their kernels, k_a, n) of a combined omega, each pooled matrix built once."""
    parts = [OMEGAS[name] for name in spec.components]
    similarity_fn = SIMILARITIES[choose(similarity, "similarity", SIMILARITIES)]
    nonzero = similarity == "cosine" or "energy_cosine" in spec.components
    z = pool_arms(a, b, nonzero=nonzero)
    similarities = similarity_fn(z, "a or b")
    kernels = [
        part.build(
            similarities if part.from_embeddings is None else part.from_embeddings(z),
            len(np.asarray(a)),
            part.defaults,
        )
        for part in parts
    ]
    return parts, kernels, len(np.asarray(a)), z.shape[0]


def permutation_test_matrix(
    matrix: ArrayLike,
    k_a: int,
    *,
    omega: str = "jsd",
    n_permutations: int = 1000,
    rng: RngLike = None,
    **omega_options: Any,
) -> PermutationTestResult:
    """The permutation test on a precomputed pooled (n, n) matrix.

    Rows and columns ``0..k_a-1`` belong to the original arm, the rest to the perturbed
    arm. The matrix holds similarities for the similarity-distribution omegas,
    distances for ``energy_*`` and inner products for ``centroid``. A combined omega
    (``auto``) needs one matrix per component: use ``permutation_test`` on the embeddings.
    """
    spec, options = _omega_iv(omega, omega_options)
    if spec.components:
        raise ValueError(
            f"omega: {spec.name!r} combines {' and '.join(spec.components)}, which need "
            f"different pooled matrices ({spec.matrix}); it needs the embeddings: "
            f"use permutation_test(a, b, omega={spec.name!r})"
        )
    arr, k = as_pooled_matrix(matrix, k_a)
    n_perm = as_positive_int(n_permutations, "n_permutations")
    gen = as_rng(rng)
    with blas_for(arr.shape[0]):
        return _run(arr, k, spec, options, n_perm, gen, None)


@dataclass(frozen=True)
class SplitStatistics:
    """An omega on given splits of two pooled arms (``split_statistics``)."""

    values: NDArray[np.float64]
    """The statistic of every split, in the order given; larger is more extreme."""
    tolerances: NDArray[np.float64]
    """Each value's tie tolerance: another split's value ``v`` counts as at least as extreme
    as ``values[i]`` when ``v >= values[i] - tolerances[i]`` (the engine's rule)."""


def split_statistics(
    a: ArrayLike,
    b: ArrayLike,
    splits: ArrayLike,
    *,
    similarity: str = "cosine",
    omega: str = "auto",
    **omega_options: Any,
) -> SplitStatistics:
    """Omega on each of ``splits``: (S, k_a + k_b) boolean masks over the pooled rows (``a``'s
    then ``b``'s), True for the rows put in the first group, ``k_a`` per mask.

    For a single omega the values are its statistic on each split, as ``permutation_test``
    computes it. For a combined omega (``auto``) a split's value is its rank among the given
    splits by the combination's ordering (``_combined``: the sorted component p-values among
    these splits, compared lexicographically; larger is more extreme, equal ranks tie, the
    tolerances are 0): a symmetric function of the set of splits, so a rule that ranks
    exchangeable splits by it keeps their exchangeability.
    """
    spec, options = _omega_iv(omega, omega_options)
    k_a = len(np.asarray(a))
    masks = np.asarray(splits)
    n = k_a + len(np.asarray(b))
    if masks.dtype != np.bool_ or masks.ndim != 2 or masks.shape[1] != n:
        raise ValueError(
            f"splits: expected (S, {n}) boolean masks over the pooled rows, got "
            f"{masks.dtype} of shape {masks.shape}"
        )
    if masks.shape[0] == 0 or (np.count_nonzero(masks, axis=1) != k_a).any():
        raise ValueError(f"splits: every mask must put k_a = {k_a} rows in the first group")
    with blas_for(n):
        return _split_statistics(a, b, masks, spec, options, similarity)


def _split_statistics(
    a: ArrayLike,
    b: ArrayLike,
    masks: NDArray[np.bool_],
    spec: Omega,
    options: dict[str, Any],
    similarity: str,
) -> SplitStatistics:
    k_a = len(np.asarray(a))
    if not spec.components:
        kernel = spec.build(_single_matrix(a, b, spec, similarity), k_a, options)
        values = _in_chunks(kernel, masks, kernel.bytes_per_split)
        return SplitStatistics(values, TIE_RTOL * (np.abs(values) + kernel.scale))
    _, kernels, _, _ = _component_kernels(a, b, spec, similarity)
    per_component = [_in_chunks(k, masks, k.bytes_per_split) for k in kernels]
    counts = np.column_stack(
        [
            at_least_counts(values, kernel.scale, TIE_RTOL)
            for values, kernel in zip(per_component, kernels, strict=True)
        ]
    )
    # fewer splits at least as extreme, compared lexicographically on the sorted counts, is
    # more extreme: np.unique orders the distinct rows so, the most extreme first
    _, order = np.unique(np.sort(counts, axis=1), axis=0, return_inverse=True)
    ranks = (order.max() - order.ravel()).astype(np.float64)
    return SplitStatistics(ranks, np.zeros_like(ranks))


def _in_chunks(
    kernel: Kernel, masks: NDArray[np.bool_], bytes_per_split: int
) -> NDArray[np.float64]:
    chunk = max(1, MEMORY_BUDGET_BYTES // bytes_per_split)
    return np.concatenate([kernel(masks[i : i + chunk]) for i in range(0, len(masks), chunk)])


def _run(
    matrix: NDArray[np.float64],
    k_a: int,
    spec: Omega,
    options: dict[str, Any],
    n_permutations: int,
    rng: np.random.Generator,
    similarity: str | None,
) -> PermutationTestResult:
    n = matrix.shape[0]
    kernel: Kernel = spec.build(matrix, k_a, options)
    observed = np.zeros((1, n), dtype=bool)
    observed[0, :k_a] = True
    statistic = float(kernel(observed)[0])
    exact, splits = _splits(n, k_a, n_permutations, kernel.bytes_per_split, rng)
    null = np.concatenate([kernel(masks) for masks in splits])

    tolerance = TIE_RTOL * (abs(statistic) + kernel.scale)
    count = int(np.count_nonzero(null >= statistic - tolerance))
    # Exact: the observed split is one of the enumerated ones, so count >= 1.
    p_value = count / null.size if exact else (1 + count) / (1 + null.size)

    return _result(
        statistic,
        float(p_value),
        null,
        n_permutations=n_permutations,
        exact=exact,
        k_a=k_a,
        k_b=n - k_a,
        omega=spec.name,
        similarity=similarity,
        options=MappingProxyType(options),
    )


def _result(
    statistic: float, p_value: float, null: NDArray[np.float64], **fields: Any
) -> PermutationTestResult:
    """The result with its null summaries (mean, sd, bias-corrected effect, z); the null is
    made read-only."""
    null.setflags(write=False)
    return PermutationTestResult(
        statistic=statistic,
        p_value=p_value,
        null_distribution=null,
        **null_summary(statistic, null),
        evaluated=int(null.size),
        **fields,
    )


def _splits(
    n: int,
    k_a: int,
    n_permutations: int,
    bytes_per_split: int,
    rng: np.random.Generator,
    first_chunk: int | None = None,
) -> tuple[bool, Iterator[NDArray[np.bool_]]]:
    """(exact, chunks of splits): all splits when there are at most B of them, else B random.

    With ``first_chunk`` the chunks start at that size and double up to the memory budget's;
    the splits and their order do not depend on the chunk sizes."""
    chunk = max(1, MEMORY_BUDGET_BYTES // bytes_per_split)
    total = math.comb(n, k_a)
    if total <= n_permutations:
        return True, _all_splits(n, k_a, _sizes(total, chunk, first_chunk))
    return False, _random_splits(n, k_a, n_permutations, chunk, rng, first_chunk)


def _sizes(total: int, chunk: int, first: int | None = None) -> Iterator[int]:
    """Chunk sizes that add up to ``total``: ``chunk`` each, or from ``first`` doubling to it."""
    size = chunk if first is None else min(first, chunk)
    done = 0
    while done < total:
        step = min(size, total - done)
        yield step
        done += step
        size = min(2 * size, chunk)


def _run_combined(
    a: ArrayLike,
    b: ArrayLike,
    spec: Omega,
    similarity: str,
    n_permutations: int,
    rng: np.random.Generator,
) -> PermutationTestResult:
    """Every component of a combined omega on the same splits, combined by ``_combined``.

    Each pooled matrix is built once from the embeddings. The statistic is the combined
    one (Tippett's ``-log`` of the smallest component p-value) and the null distribution
    its values on the evaluated splits, so ``effect``, ``null_mean`` and ``z`` describe
    the combined evidence, not an effect size; each component's own statistic, p-value
    and bias-corrected effect are in ``components``.
    """
    parts, kernels, k_a, n = _component_kernels(a, b, spec, similarity)
    bytes_per_split = sum(kernel.bytes_per_split for kernel in kernels)
    exact, splits = _splits(n, k_a, n_permutations, bytes_per_split, rng)
    values = np.concatenate([np.column_stack([k(masks) for k in kernels]) for masks in splits])
    if not exact:  # when exact, the first enumerated split is the observed one
        values = np.vstack([_observed_values(kernels, n, k_a), values])
    combination = combine(values, [kernel.scale for kernel in kernels], TIE_RTOL)

    evaluated = slice(0, None) if exact else slice(1, None)
    components = {
        part.name: component_result(
            part.name,
            part.aspect,
            float(values[0, c]),
            float(combination.component_p[c]),
            values[evaluated, c],
        )
        for c, part in enumerate(parts)
    }
    return _result(
        float(combination.combined[0]),
        combination.p_value,
        combination.combined[evaluated].copy(),
        n_permutations=n_permutations,
        exact=exact,
        k_a=k_a,
        k_b=n - k_a,
        omega=spec.name,
        similarity=similarity,
        components=MappingProxyType(components),
        driver=driver(components),
    )


def _observed_values(kernels: list[Kernel], n: int, k_a: int) -> NDArray[np.float64]:
    """(1, components) values of the observed split."""
    observed = np.zeros((1, n), dtype=bool)
    observed[0, :k_a] = True
    return np.column_stack([k(observed) for k in kernels])


CAPPED_CHUNK = 100
"""First chunk of ``capped_p_value``; the chunks double from it (so checks are cheap)."""


def capped_p_value(
    a: ArrayLike,
    b: ArrayLike,
    *,
    cap: float,
    similarity: str = "cosine",
    omega: str = "jsd",
    n_permutations: int = 1000,
    rng: RngLike = None,
    **omega_options: Any,
) -> float:
    """``permutation_test(a, b, ...).p_value`` where it is at most ``cap``; 1.0 where it is not.

    The same splits are drawn in the same order, in chunks from ``CAPPED_CHUNK`` doubling,
    and the drawing stops as soon as the splits seen force the p-value above ``cap``
    whatever the rest hold: for a single omega, those at least as extreme as the observed
    one; for a combined omega, the fewest, over its components, that exceed the observed
    split's value in that component beyond the tie tolerance (each of those ranks strictly
    better in that component, so those of the component the observed split ranks best in
    are all more extreme combined). A decision at any level up to ``cap`` is the full
    test's; a null pair stops after about cap/p of the B splits. Arguments as
    ``permutation_test``; ``cap`` in (0, 1].
    """
    spec, options = _omega_iv(omega, omega_options)
    n_perm = as_positive_int(n_permutations, "n_permutations")
    if not 0.0 < cap <= 1.0:
        raise ValueError(f"cap: must be in (0, 1], got {cap!r}")
    gen = as_rng(rng)
    if spec.components:
        _, kernels, k_a, n = _component_kernels(a, b, spec, similarity)
    else:
        matrix = _single_matrix(a, b, spec, similarity)
        k_a, n = len(np.asarray(a)), matrix.shape[0]
        kernels = [spec.build(matrix, k_a, options)]
    observed = _observed_values(kernels, n, k_a)[0]
    scales = np.array([kernel.scale for kernel in kernels])
    bytes_per_split = sum(kernel.bytes_per_split for kernel in kernels)
    exact, splits = _splits(n, k_a, n_perm, bytes_per_split, gen, CAPPED_CHUNK)
    total = math.comb(n, k_a) if exact else n_perm + 1
    # Lower bound of the p-value's numerator so far. Single omega: the observed split (drawn
    # among the enumerated ones when exact) and every split at least as extreme. Combined:
    # the observed split and, per component, the splits beyond it.
    count = 0 if exact and not spec.components else 1
    beyond = np.zeros(len(kernels), dtype=np.int64)
    blocks = []
    for masks in splits:
        block = np.column_stack([k(masks) for k in kernels])
        if spec.components:
            blocks.append(block)
            beyond += np.count_nonzero(
                block - TIE_RTOL * (np.abs(block) + scales) > observed, axis=0
            )
            bound = 1 + int(beyond.min())
        else:
            count += int(np.count_nonzero(block >= observed - TIE_RTOL * (abs(observed) + scales)))
            bound = count
        if bound > cap * total:
            return 1.0
    if not spec.components:
        return count / total
    values = np.concatenate(blocks)
    if not exact:
        values = np.vstack([observed, values])
    return combine(values, list(scales), TIE_RTOL).p_value


def _all_splits(n: int, k_a: int, sizes: Iterator[int]) -> Iterator[NDArray[np.bool_]]:
    """Every subset of size k_a as a boolean mask, in chunks of the given sizes; the first is
    the observed split."""
    combos = itertools.combinations(range(n), k_a)
    for size in sizes:
        block = list(itertools.islice(combos, size))
        masks = np.zeros((len(block), n), dtype=bool)
        np.put_along_axis(masks, np.array(block), True, axis=1)
        yield masks


def _random_splits(
    n: int,
    k_a: int,
    count: int,
    chunk: int,
    rng: np.random.Generator,
    first_chunk: int | None = None,
) -> Iterator[NDArray[np.bool_]]:
    """``count`` uniformly random subsets of size k_a (independent draws), in chunks
    (``_sizes``).

    Each split takes the k_a smallest of n uniforms, so the random stream, and with it
    the result, does not depend on the chunk size. A row whose k_a-th and (k_a+1)-th
    smallest uniforms tie (float64: practically never) takes its k_a smallest by
    ``argpartition``, which is also how every row could be computed, only slower.
    """
    for size in _sizes(count, chunk, first_chunk):
        uniforms = rng.random((size, n))
        kth = np.partition(uniforms, k_a - 1, axis=1)[:, k_a - 1 : k_a]
        masks = uniforms <= kth
        for row in np.flatnonzero(np.count_nonzero(masks, axis=1) != k_a):
            masks[row] = False
            masks[row, np.argpartition(uniforms[row], k_a - 1)[:k_a]] = True
        yield masks
