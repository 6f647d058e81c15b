"""Synthetic output embeddings that behave like sentence embeddings of LLM answers.

An answer is ``common * c + type_scale * t_j + detail * D z / sqrt(r) + noise * g / sqrt(d)``,
normalized to unit length: ``c`` is the component every answer to the prompt shares,
``t_j`` the direction of its answer type j (drawn from the arm's mixture weights),
``D`` an r-dimensional subspace of wording and detail (so cosines vary within a type
as they do for real embeddings, not only by O(1/sqrt(d))), ``g`` isotropic noise.
A perturbed arm may add ``drift * u`` along a direction no original answer uses.
All directions are orthonormal. Every function takes an explicit numpy Generator.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

Matrix = NDArray[np.float64]
Vector = NDArray[np.float64]


@dataclass(frozen=True)
class AnswerSpace:
    """Orthonormal directions of a synthetic embedding space."""

    common: Vector
    """Shared by every answer to the prompt."""
    types: Matrix
    """(n_types, d): one direction per answer type."""
    detail: Matrix
    """(rank, d): within-type variation (wording, details)."""
    drift: Vector
    """A direction no original answer uses: where a perturbation can move an arm."""


@dataclass(frozen=True)
class Arm:
    """How the answers of one arm are drawn (component scales before normalization)."""

    weights: tuple[float, ...]
    """Mixture of answer types (normalized when sampling)."""
    common: float = 0.7
    type_scale: float = 0.6
    detail: float = 0.45
    noise: float = 0.2
    drift: float = 0.0


def answer_space(
    rng: np.random.Generator, *, d: int = 384, n_types: int = 8, rank: int = 8
) -> AnswerSpace:
    """Random orthonormal directions for ``n_types`` answer types in dimension ``d``."""
    q, _ = np.linalg.qr(rng.normal(size=(d, n_types + rank + 2)))
    q = q.T
    return AnswerSpace(
        common=q[0],
        types=q[1 : 1 + n_types],
        detail=q[1 + n_types : 1 + n_types + rank],
        drift=q[-1],
    )


def sample(rng: np.random.Generator, space: AnswerSpace, arm: Arm, k: int) -> Matrix:
    """``k`` unit-norm answer embeddings of ``arm``, shape (k, d)."""
    weights = np.asarray(arm.weights, dtype=np.float64)
    kinds = rng.choice(weights.size, size=k, p=weights / weights.sum())
    rank, d = space.detail.shape
    x = (
        arm.common * space.common
        + arm.type_scale * space.types[kinds]
        + arm.detail * rng.normal(size=(k, rank)) @ space.detail / np.sqrt(rank)
        + arm.noise * rng.normal(size=(k, d)) / np.sqrt(d)
        + arm.drift * space.drift
    )
    unit: Matrix = x / np.linalg.norm(x, axis=1, keepdims=True)
    return unit


def cosine_range(x: Matrix) -> tuple[float, float]:
    """(1st, 99th) percentile of the pairwise cosines of unit rows ``x``."""
    sims = (x @ x.T)[np.triu_indices(len(x), 1)]
    lo, hi = np.percentile(sims, [1, 99])
    return float(lo), float(hi)
