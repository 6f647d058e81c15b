"""A pooled test that reads the embeddings across prompts: do the prompts move one way?

Where a change moves every prompt's answers along one shared direction (a tone, a preamble),
the sum over the prompts of the arms' mean differences grows with the number of prompts,
whatever each prompt's own evidence. The statistic is the cross terms of that sum,
``T = sum_{i != j} d_i . d_j`` with ``d_i`` the perturbed minus the original mean embedding of
prompt ``i``; its null law comes from relabelling the outputs within each prompt, and
``p = (1 + #{T_b >= T}) / (1 + B)``. A benchmark baseline: the product's per-prompt statistics
do not see a shared direction.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _cross(d: np.ndarray) -> np.ndarray:
    """``sum_{i != j} d_i . d_j`` over the prompt axis (-2) of ``d`` (..., prompts, dim)."""
    total = d.sum(axis=-2)
    return (total * total).sum(axis=-1) - (d * d).sum(axis=(-1, -2))


def shared_direction_p(
    originals: Sequence[np.ndarray],
    perturbed: Sequence[np.ndarray],
    b: int,
    rng: np.random.Generator,
) -> float:
    """The p-value of ``T`` over ``b`` relabellings within each prompt."""
    observed, relabelled = [], []
    for x, y in zip(originals, perturbed, strict=True):
        pooled = np.vstack([x, y])
        n, m = len(x), len(y)
        observed.append(y.mean(axis=0) - x.mean(axis=0))
        weights = np.full((b, n + m), -1.0 / n)
        chosen = np.argsort(rng.random((b, n + m)), axis=1)[:, :m]
        np.put_along_axis(weights, chosen, 1.0 / m, axis=1)
        relabelled.append(weights @ pooled)
    t = _cross(np.array(observed))
    null = _cross(np.stack(relabelled, axis=1))
    return float((1 + np.count_nonzero(null >= t)) / (1 + b))
