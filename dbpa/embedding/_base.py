"""The embedder protocol and the per-process registry."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from dbpa.specs import EmbedderSpec, EmbeddingBatch


class Embedder(Protocol):
    """Turns texts into vectors; identical texts in one call are embedded once."""

    name: str
    """Stable identifier stored with every vector (backend and model)."""
    dimension: int
    max_tokens: int | None
    """The model's window in tokens; longer texts are truncated by the model."""

    def embed(self, texts: Sequence[str]) -> EmbeddingBatch: ...


@functools.cache
def get_embedder(spec: EmbedderSpec) -> Embedder:
    """The embedder for ``spec``, created (and its model loaded) once per process."""
    if spec.backend == "sentence-transformers":
        from ._sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(spec)
    from ._litellm import LiteLLMEmbedder

    return LiteLLMEmbedder(spec)
