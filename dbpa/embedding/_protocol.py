"""The embedder protocol every backend implements."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from dbpa.specs import EmbeddingBatch


class Embedder(Protocol):
    """Turns texts into vectors; identical texts in one call are embedded once."""

    name: str
    """Stable identifier stored with every vector (backend and model)."""
    dimension: int
    max_tokens: int | None
    """The model's window in tokens; longer texts are truncated by the model."""

    def embed(self, texts: Sequence[str]) -> EmbeddingBatch: ...
