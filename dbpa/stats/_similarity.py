"""Pairwise similarities and distances between output embeddings.

A similarity is larger for outputs that mean the same: cosine (default), or the
negated L1 / L2 distance. The embedding-level statistics use distances and the
Gram matrix instead; all of them are computed once on the pooled arms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._validation import as_embeddings, as_pooled_matrix, choose

Matrix = NDArray[np.float64]


def _unit_rows(x: Matrix, name: str) -> Matrix:
    norms = np.linalg.norm(x, axis=1)
    zero = np.flatnonzero(norms == 0.0)
    if zero.size:
        raise ValueError(
            f"{name}: row {int(zero[0])} is a zero vector; cosine similarity is undefined for it"
        )
    unit: Matrix = x / norms[:, None]
    return unit


def _cosine_similarity(x: Matrix, name: str) -> Matrix:
    u = _unit_rows(x, name)
    s: Matrix = np.clip(u @ u.T, -1.0, 1.0)
    np.fill_diagonal(s, 1.0)
    return s


def _neg_l1(x: Matrix, name: str) -> Matrix:
    return -l1_distance(x)


def _neg_l2(x: Matrix, name: str) -> Matrix:
    return -l2_distance(x)


SIMILARITIES: dict[str, Callable[[Matrix, str], Matrix]] = {
    "cosine": _cosine_similarity,
    "neg_l1": _neg_l1,
    "neg_l2": _neg_l2,
}
"""Similarity name -> function of the stacked embeddings returning the (n, n) matrix."""


def pool_arms(a: ArrayLike, b: ArrayLike, *, nonzero: bool = False) -> Matrix:
    """Validate both arms and stack them, ``a`` first.

    ``nonzero`` rejects zero rows (needed by anything built on cosine).
    """
    x = as_embeddings(a, "a")
    y = as_embeddings(b, "b")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"b: embedding dimension {y.shape[1]} does not match a's {x.shape[1]}")
    if nonzero:
        _unit_rows(x, "a")
        _unit_rows(y, "b")
    return np.vstack([x, y])


def pooled_similarity(a: ArrayLike, b: ArrayLike, similarity: str = "cosine") -> Matrix:
    """The (k_a + k_b) square similarity matrix of the pooled arms (``a`` first)."""
    fn = SIMILARITIES[choose(similarity, "similarity", SIMILARITIES)]
    return fn(pool_arms(a, b, nonzero=similarity == "cosine"), "a or b")


def cosine_distance(z: Matrix) -> Matrix:
    """1 - cosine similarity; zero on the diagonal."""
    d: Matrix = 1.0 - _cosine_similarity(z, "a or b")
    np.fill_diagonal(d, 0.0)
    return d


def l1_distance(z: Matrix) -> Matrix:
    """Pairwise L1 (city-block) distances."""
    from scipy.spatial.distance import cdist  # here: scipy.spatial takes a tenth of a second

    d: Matrix = cdist(z, z, metric="cityblock")
    return d


def l2_distance(z: Matrix) -> Matrix:
    """Pairwise Euclidean distances."""
    from scipy.spatial.distance import cdist  # here: scipy.spatial takes a tenth of a second

    d: Matrix = cdist(z, z, metric="euclidean")
    return d


def centered_gram(z: Matrix) -> Matrix:
    """Inner products of the embeddings after removing the pooled mean.

    Centring leaves every difference of centroids unchanged and avoids the
    cancellation of large common components.
    """
    c = z - z.mean(axis=0)
    g: Matrix = c @ c.T
    return g


@dataclass(frozen=True)
class SimilaritySplit:
    """P0 and P1 of the observed split of a pooled similarity matrix."""

    p0: NDArray[np.float64]
    """Similarities within the original arm (pairs i < j)."""
    p1: NDArray[np.float64]
    """Similarities between the original and the perturbed arm."""


def split_similarities(matrix: ArrayLike, k_a: int) -> SimilaritySplit:
    """P0 and P1 when the first ``k_a`` rows are the original arm."""
    s, k = as_pooled_matrix(matrix, k_a)
    iu = np.triu_indices(k, 1)
    return SimilaritySplit(p0=s[:k, :k][iu], p1=s[:k, k:].ravel())
