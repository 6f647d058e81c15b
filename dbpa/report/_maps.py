"""The output maps: each family's embeddings projected on their first two principal
components, so that both arms of every test are drawn in one frame per family."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from ._data import MapView

__all__ = ["Projection", "map_view"]

PAD = 0.05
"""Margin around the family's points, as a share of their range."""


class Projection:
    """The first two principal components of a family's embeddings, and the family's frame."""

    def __init__(self, vectors: Sequence[NDArray[np.float32]]) -> None:
        pooled = np.vstack([np.asarray(v, dtype=np.float64) for v in vectors])
        self.mean = pooled.mean(axis=0)
        _, singular, rows = np.linalg.svd(pooled - self.mean, full_matrices=False)
        basis = rows[:2].T if rows.shape[0] >= 2 else np.eye(pooled.shape[1], 2)
        # A deterministic sign: each axis's largest loading is positive.
        signs = np.sign(basis[np.argmax(np.abs(basis), axis=0), [0, 1]])
        self.basis = basis * np.where(signs == 0, 1.0, signs)
        variance = singular**2
        total = float(variance.sum())
        share = variance[:2] / total if total > 0 else np.zeros(2)
        self.explained = (float(share[0]), float(share[1]) if share.size > 1 else 0.0)
        points = self(pooled)
        lo, hi = points.min(axis=0), points.max(axis=0)
        span = np.where(hi > lo, hi - lo, 1.0)
        lo, hi = lo - PAD * span, hi + PAD * span
        self.frame = (float(lo[0]), float(hi[0]), float(lo[1]), float(hi[1]))

    def __call__(self, vectors: NDArray[np.floating]) -> NDArray[np.float64]:
        centred = np.asarray(vectors, dtype=np.float64) - self.mean
        projected: NDArray[np.float64] = centred @ self.basis
        return projected


def map_view(
    projection: Projection, original: NDArray[np.float32], perturbed: NDArray[np.float32]
) -> MapView:
    """Both arms of one test on their family's map."""

    def points(v: NDArray[np.float32]) -> tuple[tuple[float, float], ...]:
        return tuple((float(x), float(y)) for x, y in projection(v))

    def centroid(v: NDArray[np.float32]) -> tuple[float, float]:
        x, y = projection(np.asarray(v, dtype=np.float64).mean(axis=0, keepdims=True))[0]
        return float(x), float(y)

    return MapView(
        original=points(original),
        perturbed=points(perturbed),
        original_centroid=centroid(original),
        perturbed_centroid=centroid(perturbed),
        frame=projection.frame,
        explained=projection.explained,
    )
