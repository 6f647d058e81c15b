"""A literal, slow implementation of the paper's Algorithm 1, the reference of tests and benchmarks.

Every permutation re-splits the pooled embeddings, recomputes the cosine similarities
from the embeddings and bins P0 and P1 with ``numpy.histogram``; the JSD is
``scipy.spatial.distance.jensenshannon(..., base=2) ** 2`` (the divergence in bits), or
``scipy.stats.energy_distance`` of P0 and P1 (omega ``energy``).
Nothing here shares code with ``dbpa.stats``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import energy_distance


def cosine_matrix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Cosine similarities between the rows of x and of y."""
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    yn = y / np.linalg.norm(y, axis=1, keepdims=True)
    return xn @ yn.T


def p0_p1(original: np.ndarray, perturbed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """P0: similarities within ``original`` (i < j); P1: original x perturbed."""
    within = cosine_matrix(original, original)
    iu = np.triu_indices(len(original), 1)
    return within[iu], cosine_matrix(original, perturbed).ravel()


def pooled_edges(z: np.ndarray, bins: int) -> np.ndarray:
    """Edges spanning every pairwise similarity of the pooled outputs (split-independent)."""
    sims = cosine_matrix(z, z)[np.triu_indices(len(z), 1)]
    return np.linspace(sims.min(), sims.max(), bins + 1)


def jsd_bits(p0: np.ndarray, p1: np.ndarray, edges: np.ndarray) -> float:
    """JS divergence (log base 2) of the two histograms on shared edges.

    Values outside the edges are clipped into the end bins (for fixed edges such as (-1, 1)).
    """
    lo, hi = edges[0], edges[-1]
    h0, _ = np.histogram(np.clip(p0, lo, hi), bins=edges)
    h1, _ = np.histogram(np.clip(p1, lo, hi), bins=edges)
    return float(jensenshannon(h0 / h0.sum(), h1 / h1.sum(), base=2) ** 2)


def algorithm1(
    a: np.ndarray,
    b: np.ndarray,
    n_permutations: int,
    rng: np.random.Generator,
    bins: int = 30,
    edges: Sequence[float] | None = None,
    omega: str = "jsd",
) -> tuple[float, float, np.ndarray]:
    """(T_obs, p, null) by Algorithm 1 with a random size-k_a subset per permutation;
    ``omega`` ``"jsd"`` (``bins``, ``edges``) or ``"energy"``."""
    z = np.vstack([a, b])
    k = len(a)
    e = pooled_edges(z, bins) if edges is None else np.linspace(edges[0], edges[1], bins + 1)

    def statistic(p0: np.ndarray, p1: np.ndarray) -> float:
        return jsd_bits(p0, p1, e) if omega == "jsd" else float(energy_distance(p0, p1))

    t_obs = statistic(*p0_p1(a, b))
    null = np.empty(n_permutations)
    for i in range(n_permutations):
        chosen = rng.choice(len(z), size=k, replace=False)
        rest = np.setdiff1d(np.arange(len(z)), chosen)
        null[i] = statistic(*p0_p1(z[chosen], z[rest]))
    p = (1 + np.count_nonzero(null >= t_obs)) / (1 + n_permutations)
    return t_obs, float(p), null
