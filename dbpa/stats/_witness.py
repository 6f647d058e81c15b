"""Which outputs characterise a change: the witness of the two-sample comparison.

For a similarity s, the witness at an output x is its mean similarity to the perturbed arm
minus its mean similarity to the original arm (the empirical witness function of the
kernel two-sample statistic, Gretton et al., 2012, with s as the kernel), each mean over the
other outputs of that arm (an output is never compared with itself). A perturbed output
with a large witness is *more typical after the perturbation*; an original output with a
very negative one is *more typical before*. The scores describe a change; they are no test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._similarity import pooled_similarity

Vector = NDArray[np.float64]


@dataclass(frozen=True)
class WitnessScores:
    """The witness at every output of both arms (larger: closer to the perturbed arm)."""

    original: Vector
    """(k_a,) scores of the original outputs, in their order."""
    perturbed: Vector
    """(k_b,) scores of the perturbed outputs, in their order."""
    similarity: str
    """The similarity the means are taken of."""


def witness_scores(a: ArrayLike, b: ArrayLike, *, similarity: str = "cosine") -> WitnessScores:
    """The witness of every output of arms ``a`` (original) and ``b`` (perturbed).

    ``a`` and ``b`` are (k_a, d) and (k_b, d) embeddings (k_a, k_b >= 2); ``similarity``
    is ``"cosine"``, ``"neg_l1"`` or ``"neg_l2"``.
    """
    matrix = pooled_similarity(a, b, similarity)
    k_a = len(np.asarray(a))
    n = matrix.shape[0]
    in_a = np.arange(n) < k_a
    diagonal = np.diag(matrix)
    to_a = matrix[:, :k_a].sum(axis=1) - np.where(in_a, diagonal, 0.0)
    to_b = matrix[:, k_a:].sum(axis=1) - np.where(in_a, 0.0, diagonal)
    scores = to_b / ((n - k_a) - (~in_a)) - to_a / (k_a - in_a)
    return WitnessScores(
        original=scores[:k_a].copy(), perturbed=scores[k_a:].copy(), similarity=similarity
    )
