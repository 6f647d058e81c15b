"""One load of the packaged model for the whole session, with the network blocked."""

from __future__ import annotations

import pytest

from dbpa.embedding._sentence_transformers import SentenceTransformerEmbedder
from dbpa.specs import EmbedderSpec
from tests.support.network import loopback_only


@pytest.fixture(scope="session")
def network_attempts() -> list[str]:
    """Hosts that code tried to reach while the session embedder was loaded."""
    return []


@pytest.fixture(scope="session")
def embedder(network_attempts: list[str]) -> SentenceTransformerEmbedder:
    """The default embedder, loaded once, with every non-loopback connection refused."""
    with pytest.MonkeyPatch.context() as patch:
        attempts = loopback_only(patch)
        loaded = SentenceTransformerEmbedder(EmbedderSpec())
        loaded.embed(["warm-up text"])
    network_attempts.extend(attempts)
    return loaded
