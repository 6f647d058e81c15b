"""The embedder protocol and the per-process registry."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from dbpa.specs import EmbedderSpec, EmbeddingBatch


class Embedder(Protocol):
    """Turns texts into vectors; identical texts in one call are embedded once."""

    name: str
    """Stable identifier stored with every vector (backend and model)."""
    dimension: int
    max_tokens: int | None
    """The model's window in tokens; longer texts are truncated by the model."""

    def embed(self, texts: Sequence[str]) -> EmbeddingBatch: ...


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


def embedder_key(spec: EmbedderSpec) -> str:
    """Identity of the vectors ``spec`` produces (the embedding cache key), without loading it.

    Two spellings of one model give one key (``all-MiniLM-L6-v2`` and
    ``sentence-transformers/all-MiniLM-L6-v2``); a local directory is keyed by its resolved
    path; a hosted model by its model string and endpoint. ValueError when the model cannot
    be found offline.
    """
    if spec.backend == "sentence-transformers":
        from ._sentence_transformers import resolve_model

        try:
            return f"sentence-transformers:{resolve_model(spec.model)[1]}"
        except FileNotFoundError as exc:
            raise ValueError(f"embedder.model: {exc}") from None
    endpoint = f"@{spec.api_base}" if spec.api_base else ""
    return f"litellm:{spec.model}{endpoint}"


@functools.cache
def get_embedder(spec: EmbedderSpec) -> Embedder:
    """The embedder for ``spec``, created (and its model loaded) once per process."""
    if spec.backend == "sentence-transformers":
        from ._sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(spec)
    from ._litellm import LiteLLMEmbedder

    return LiteLLMEmbedder(spec)
