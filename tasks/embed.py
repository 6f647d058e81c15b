"""Embed output texts (compute only: the flow stores the vectors, so this can run anywhere)."""

from __future__ import annotations

from typing import Any

from prefect import task

from dbpa.embedding import embedder_key, get_embedder
from dbpa.specs import EmbedderSpec, EmbeddingBatch, text_hash
from tasks._cache import content_key


def _describe(parameters: dict[str, Any]) -> Any:
    return [embedder_key(parameters["embedder"]), [text_hash(t) for t in parameters["texts"]]]


@task(
    name="embed",
    task_run_name="embed {label}",
    cache_key_fn=content_key(_describe),
)
def embed_texts(texts: list[str], embedder: EmbedderSpec, label: str) -> EmbeddingBatch:
    """Vectors of ``texts`` (the model is loaded once per process)."""
    return get_embedder(embedder).embed(texts)
