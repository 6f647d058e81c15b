"""Independent reference statistics (scipy/numpy, no dbpa code) for the engine's tests."""

from __future__ import annotations

import itertools

import numpy as np
from scipy import stats
from scipy.spatial.distance import cdist

from tests.support.literal_dbpa import jsd_bits

SIMILARITY_METRIC = {"cosine": "cosine", "neg_l1": "cityblock", "neg_l2": "euclidean"}


def similarities(x: np.ndarray, y: np.ndarray, similarity: str) -> np.ndarray:
    d = cdist(x, y, metric=SIMILARITY_METRIC[similarity])
    return 1.0 - d if similarity == "cosine" else -d


def p0_p1(a: np.ndarray, b: np.ndarray, similarity: str) -> tuple[np.ndarray, np.ndarray]:
    within = similarities(a, a, similarity)[np.triu_indices(len(a), 1)]
    return within, similarities(a, b, similarity).ravel()


def jsd_edges(z: np.ndarray, similarity: str, bins: int = 30) -> np.ndarray:
    pooled = similarities(z, z, similarity)[np.triu_indices(len(z), 1)]
    lo, hi = pooled.min(), pooled.max()
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return np.linspace(lo, hi, bins + 1)


def _energy(a: np.ndarray, b: np.ndarray, metric: str) -> float:
    return float(
        2 * cdist(a, b, metric).mean() - cdist(a, a, metric).mean() - cdist(b, b, metric).mean()
    )


def statistic(
    omega: str,
    a: np.ndarray,
    b: np.ndarray,
    similarity: str = "cosine",
    edges: np.ndarray | None = None,
) -> float:
    """omega for arms a (original) and b, computed the textbook way."""
    if omega == "energy_cosine":
        return _energy(a, b, "cosine")
    if omega == "energy_l1":
        return _energy(a, b, "cityblock")
    if omega == "energy_l2":
        return _energy(a, b, "euclidean")
    if omega == "centroid":
        return float(np.sum((a.mean(0) - b.mean(0)) ** 2))
    p0, p1 = p0_p1(a, b, similarity)
    if omega == "jsd":
        assert edges is not None
        return jsd_bits(p0, p1, edges)
    if omega == "energy":
        return float(stats.energy_distance(p0, p1))
    if omega == "wasserstein":
        return float(stats.wasserstein_distance(p0, p1))
    if omega == "ks":
        return float(stats.ks_2samp(p0, p1).statistic)
    if omega == "mean_diff":
        return float(abs(p0.mean() - p1.mean()))
    raise AssertionError(omega)


def exact_test(omega: str, a: np.ndarray, b: np.ndarray, similarity: str = "cosine"):
    """(T_obs, p, null) by enumerating every subset of size k_a of the pooled outputs."""
    z = np.vstack([a, b])
    n, k = len(z), len(a)
    edges = jsd_edges(z, similarity) if omega == "jsd" else None
    t_obs = statistic(omega, a, b, similarity, edges)
    null = []
    for chosen in itertools.combinations(range(n), k):
        rest = [i for i in range(n) if i not in chosen]
        null.append(statistic(omega, z[list(chosen)], z[rest], similarity, edges))
    null = np.array(null)
    tol = 1e-9 * (abs(t_obs) + max(1.0, np.abs(null).max()))
    return t_obs, float(np.mean(null >= t_obs - tol)), null
