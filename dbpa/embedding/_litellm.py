"""Hosted embedding models through ``litellm.embedding`` (OpenAI, Azure, Cohere, any
OpenAI-compatible server).

Identical texts in one call are embedded once; the unique texts go out in batches of
``spec.batch_size``. Errors follow the sampler's policy: transient ones are retried with
backoff (``spec.max_retries``), then :class:`~dbpa.llm.TransientModelError`; failed
connections for ``spec.connect_budget_s``, then :class:`~dbpa.llm.UnreachableModelError`;
permanent ones raise :class:`~dbpa.llm.PermanentModelError` at once; no message contains
the key. The
dimension is learnt from the first response (or from a one-word probe when asked before any).
No provider reports truncation: ``truncated`` is all False.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from dbpa.llm import (
    DEFAULT_RETRY,
    KEYLESS_PLACEHOLDER,
    PermanentModelError,
    Retrier,
    api_key,
    endpoint_for,
    litellm,
    provider_name,
)
from dbpa.specs import EmbedderSpec, EmbeddingBatch

from ._distinct import embed_distinct

_PROBE = "dimension"


class LiteLLMEmbedder:
    """An embedding API reached through litellm."""

    def __init__(self, spec: EmbedderSpec) -> None:
        self.name = f"litellm/{spec.model}"
        self.max_tokens: int | None = None
        self._spec = spec
        self._dimension: int | None = None
        key = api_key(self.name, spec.api_key_env, provider_name(spec.model, spec.api_base))
        self._kwargs: dict[str, Any] = {
            "model": spec.model,
            "timeout": spec.timeout_s,
            "num_retries": 0,
            "max_retries": 0,
        }
        if spec.api_base is not None:
            self._kwargs["api_base"] = spec.api_base
        if key is not None:
            self._kwargs["api_key"] = key
        self._retrier = Retrier(
            model=self.name,
            max_retries=spec.max_retries,
            policy=DEFAULT_RETRY,
            rng=random.Random(),
            secrets=(key,) if key and key != KEYLESS_PLACEHOLDER else (),
            auth_hint=f" (the key comes from ${spec.api_key_env})" if spec.api_key_env else "",
            connect_budget_s=spec.connect_budget_s,
            address=spec.api_base,
            endpoint=endpoint_for(self.name, spec.api_base, spec.api_key_env),
        )

    @property
    def dimension(self) -> int:
        """Length of the vectors (embeds a probe word when nothing was embedded yet)."""
        if self._dimension is None:
            return int(self._request([_PROBE]).shape[1])
        return self._dimension

    @dimension.setter
    def dimension(self, value: int) -> None:
        """Declare the dimension up front (the Embedder protocol's attribute is settable);
        responses of another length then raise PermanentModelError."""
        self._dimension = value

    def embed(self, texts: Sequence[str]) -> EmbeddingBatch:
        """Vectors (n, d) float32 in the order of ``texts``."""
        return embed_distinct(self, texts, self._encode)

    def _encode(self, unique: list[str]) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        size = self._spec.batch_size
        vectors = np.concatenate(
            [self._request(unique[i : i + size]) for i in range(0, len(unique), size)]
        )
        return vectors, np.zeros(len(unique), dtype=np.bool_)  # the API does not say

    def _request(self, batch: list[str]) -> NDArray[np.float32]:
        embedding = litellm().embedding
        response = self._retrier.call(lambda: embedding(input=batch, **self._kwargs))
        rows = sorted(response.data, key=lambda item: _field(item, "index"))
        if len(rows) != len(batch):
            raise PermanentModelError(
                self.name, f"sent {len(batch)} texts, got {len(rows)} vectors back"
            )
        vectors = np.asarray([_field(row, "embedding") for row in rows], dtype=np.float32)
        if self._dimension is None:
            self._dimension = int(vectors.shape[1])
        elif vectors.shape[1] != self._dimension:
            raise PermanentModelError(
                self.name, f"vectors changed length from {self._dimension} to {vectors.shape[1]}"
            )
        return vectors


def _field(item: Any, name: str) -> Any:
    """litellm returns embedding rows as dicts or as objects, depending on the provider."""
    return item[name] if isinstance(item, dict) else getattr(item, name)
