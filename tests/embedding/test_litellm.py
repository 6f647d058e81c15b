"""LiteLLMEmbedder against the scripted /v1/embeddings."""

from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from dbpa.embedding import get_embedder
from dbpa.embedding._litellm import LiteLLMEmbedder
from dbpa.llm import PermanentModelError, TransientModelError, UnreachableModelError, litellm
from dbpa.specs import EmbedderSpec
from tests.support.providers import KEY_ENV
from tests.support.scripted_server import Fault, ScriptedServer

pytestmark = pytest.mark.usefixtures("key_in_env")


def _spec(server: ScriptedServer, **overrides: object) -> EmbedderSpec:
    fields = {
        "backend": "litellm",
        "model": "openai/scripted-embed",
        "api_base": server.api_base,
        "api_key_env": KEY_ENV,
        "batch_size": 3,
        "max_retries": 2,
        "timeout_s": 5.0,
    }
    return EmbedderSpec(**(fields | overrides))


def test_vectors_are_the_servers_in_input_order(make_server) -> None:
    server = make_server(embedding_dimension=12)
    texts = ["alpha", "beta", "gamma", "delta", "epsilon"]
    batch = LiteLLMEmbedder(_spec(server)).embed(texts)
    expected = np.asarray([server.vector(t) for t in texts], dtype=np.float32)
    assert batch.vectors.dtype == np.float32
    assert batch.vectors.shape == (5, 12)
    np.testing.assert_allclose(batch.vectors, expected, rtol=1e-6)
    assert batch.truncated.tolist() == [False] * 5


def test_duplicates_are_embedded_once_in_batches(server: ScriptedServer) -> None:
    texts = ["a", "b", "a", "c", "d", "b", "e", "a"]
    batch = LiteLLMEmbedder(_spec(server, batch_size=2)).embed(texts)
    assert sorted(server.counts.embedded_texts) == ["a", "b", "c", "d", "e"]
    assert server.counts.by_endpoint["/v1/embeddings"] == 3  # 5 unique texts, 2 per request
    np.testing.assert_array_equal(batch.vectors[0], batch.vectors[2])
    np.testing.assert_array_equal(batch.vectors[1], batch.vectors[5])


def test_name_and_dimension(make_server) -> None:
    server = make_server(embedding_dimension=7)
    embedder = LiteLLMEmbedder(_spec(server))
    assert embedder.name == "litellm/openai/scripted-embed"
    assert embedder.max_tokens is None
    assert server.counts.total == 0  # nothing asked yet
    assert embedder.dimension == 7  # a probe
    assert server.counts.total == 1
    embedder.embed(["x"])
    assert embedder.dimension == 7
    assert server.counts.total == 2


def test_an_empty_list_gives_an_empty_batch(make_server) -> None:
    server = make_server(embedding_dimension=5)
    batch = LiteLLMEmbedder(_spec(server)).embed([])
    assert batch.vectors.shape == (0, 5)
    assert batch.truncated.shape == (0,)


def test_a_declared_dimension_is_checked(make_server) -> None:
    server = make_server(embedding_dimension=5)
    embedder = LiteLLMEmbedder(_spec(server))
    embedder.dimension = 6
    with pytest.raises(
        PermanentModelError,
        match=r"^model 'litellm/openai/scripted-embed': vectors changed length from 6 to 5$",
    ):
        embedder.embed(["x"])


def test_transient_errors_are_retried(server: ScriptedServer) -> None:
    server.push_faults(Fault("500"), Fault("429", retry_after=0.1))
    batch = LiteLLMEmbedder(_spec(server)).embed(["x", "y"])
    assert batch.vectors.shape == (2, 8)
    assert server.counts.by_endpoint["/v1/embeddings"] == 3


def test_retries_run_out(server: ScriptedServer) -> None:
    server.push_faults(*[Fault("503")] * 5)
    with pytest.raises(TransientModelError, match="still failing after 2 retries"):
        LiteLLMEmbedder(_spec(server)).embed(["x"])


def test_a_refused_connection_is_retried_for_the_connect_budget_then_named() -> None:
    with ScriptedServer() as gone:  # closed at once: its port refuses connections
        spec = _spec(gone, connect_budget_s=1.0)
    start = time.perf_counter()
    with pytest.raises(UnreachableModelError) as info:
        LiteLLMEmbedder(spec).embed(["x"])
    assert 1.0 <= time.perf_counter() - start < 3.0
    assert str(info.value) == (
        f"model 'litellm/openai/scripted-embed': connection refused by {gone.api_base}; "
        "gave up after 1 s (connect_budget_s)"
    )


def test_401_is_permanent_and_keeps_the_key_out(server: ScriptedServer, key_in_env: str) -> None:
    server.push_faults(Fault("401"))
    with pytest.raises(PermanentModelError) as info:
        LiteLLMEmbedder(_spec(server)).embed(["x"])
    assert server.counts.total == 1
    assert "model 'litellm/openai/scripted-embed'" in str(info.value)
    assert f"${KEY_ENV}" in str(info.value)
    assert key_in_env not in str(info.value)


def test_missing_key_variable(server: ScriptedServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(
        PermanentModelError,
        match=rf"^model 'litellm/openai/scripted-embed': api_key_env: environment variable "
        rf"\${KEY_ENV} is not set$",
    ):
        LiteLLMEmbedder(_spec(server))


def test_registry_builds_it(server: ScriptedServer) -> None:
    spec = _spec(server)
    embedder = get_embedder(spec)
    assert isinstance(embedder, LiteLLMEmbedder)
    assert get_embedder(spec) is embedder


def test_a_response_missing_vectors_is_a_permanent_error(
    server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def one_vector_only(**kwargs: object) -> SimpleNamespace:
        return SimpleNamespace(data=[{"index": 0, "embedding": [1.0, 0.0]}])

    monkeypatch.setattr(litellm(), "embedding", one_vector_only)
    with pytest.raises(
        PermanentModelError,
        match=r"^model 'litellm/openai/scripted-embed': sent 2 texts, got 1 vectors back$",
    ):
        LiteLLMEmbedder(_spec(server)).embed(["x", "y"])
