"""Embedding each distinct text once, shared by the backends."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from dbpa.specs import EmbeddingBatch

from ._protocol import Embedder

Encode = Callable[[list[str]], tuple[NDArray[np.float32], NDArray[np.bool_]]]
"""Vectors and truncation flags of a list of distinct texts."""


def embed_distinct(embedder: Embedder, texts: Sequence[str], encode: Encode) -> EmbeddingBatch:
    """``texts`` embedded by ``encode`` once per distinct text, rows back in the given order."""
    unique = list(dict.fromkeys(texts))
    if not unique:
        return EmbeddingBatch(
            np.empty((0, embedder.dimension), np.float32), np.empty(0, dtype=np.bool_)
        )
    position = {text: i for i, text in enumerate(unique)}
    where = np.fromiter((position[t] for t in texts), dtype=np.intp, count=len(texts))
    vectors, truncated = encode(unique)
    return EmbeddingBatch(np.asarray(vectors, dtype=np.float32)[where], truncated[where])
