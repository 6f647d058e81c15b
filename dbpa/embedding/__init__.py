"""Embedders: output texts -> vectors.

``get_embedder(spec)`` returns one embedder per spec per process (models load once).
Backends: sentence-transformers (default: the packaged all-MiniLM-L6-v2, offline) and
hosted embedding APIs through ``litellm.embedding``.
"""

from ._protocol import Embedder
from ._registry import embedder_key, get_embedder

__all__ = ["Embedder", "embedder_key", "get_embedder"]
