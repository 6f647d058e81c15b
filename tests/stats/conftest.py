"""Synthetic embeddings for the statistics tests."""

from __future__ import annotations

import numpy as np
import pytest


def clustered(
    rng: np.random.Generator,
    k: int,
    d: int = 16,
    weights=(0.5, 0.5),
    spread=0.3,
    centres: np.ndarray | None = None,
) -> np.ndarray:
    """k embeddings drawn around answer-type centres with the given mixture weights."""
    if centres is None:
        centres = np.eye(len(weights), d) * 3.0 + 1.0
    cdf = np.cumsum(np.asarray(weights) / np.sum(weights))
    kinds = (cdf / cdf[-1]).searchsorted(rng.random(k), side="right")  # as rng.choice draws it
    return centres[kinds] + spread * rng.normal(size=(k, d))


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20251121)
