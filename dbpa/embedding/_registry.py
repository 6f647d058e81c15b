"""From an ``EmbedderSpec`` to its backend: the vectors' key, and one embedder per process."""

from __future__ import annotations

import threading

from dbpa.specs import EmbedderSpec

from ._litellm import LiteLLMEmbedder
from ._protocol import Embedder
from ._sentence_transformers import SentenceTransformerEmbedder, resolve_model


def embedder_key(spec: EmbedderSpec) -> str:
    """Identity of the vectors ``spec`` produces (the embedding cache key), without loading it.

    Two spellings of one model give one key (``all-MiniLM-L6-v2`` and
    ``sentence-transformers/all-MiniLM-L6-v2``); a local directory is keyed by its resolved
    path; a hosted model by its model string and endpoint. ValueError when the model cannot
    be found offline.
    """
    if spec.backend == "sentence-transformers":
        try:
            return f"sentence-transformers:{resolve_model(spec.model)[1]}"
        except FileNotFoundError as exc:
            raise ValueError(f"embedder.model: {exc}") from None
    endpoint = f"@{spec.api_base}" if spec.api_base else ""
    return f"litellm:{spec.model}{endpoint}"


_EMBEDDERS: dict[EmbedderSpec, Embedder] = {}
_LOCK = threading.Lock()


def get_embedder(spec: EmbedderSpec) -> Embedder:
    """The embedder for ``spec``, created (and its model loaded) once per process, also when
    threads ask at once (``dbpa run`` loads it in the background while a task may ask)."""
    with _LOCK:
        if spec not in _EMBEDDERS:
            if spec.backend == "sentence-transformers":
                _EMBEDDERS[spec] = SentenceTransformerEmbedder(spec)
            else:
                _EMBEDDERS[spec] = LiteLLMEmbedder(spec)
        return _EMBEDDERS[spec]
