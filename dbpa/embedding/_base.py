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
