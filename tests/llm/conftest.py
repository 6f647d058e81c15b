"""Fixtures: scripted providers on 127.0.0.1 and model specs pointing at them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from dbpa.llm import RetryPolicy, sample
from dbpa.specs import Message, ModelSpec
from tests.support.scripted_server import ScriptedServer

SECRET = "sk-test-Zq81vXw0secretvalue"
KEY_ENV = "DBPA_TEST_PROVIDER_KEY"
FAST_RETRY = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
MESSAGES = (Message(role="user", content="Should I see a doctor about my flu?"),)


@pytest.fixture(scope="session", autouse=True)
def _litellm_warm() -> None:
    """Import litellm and make one call up front (its first call imports more), so timings
    in tests measure calls, not imports."""
    with ScriptedServer() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, SECRET)
        sample(spec_for(server), MESSAGES, [0], seed=0)


@pytest.fixture
def make_server() -> Iterator[Callable[..., ScriptedServer]]:
    """Start scripted servers (``ScriptedServer`` arguments); all stop after the test."""
    servers: list[ScriptedServer] = []

    def make(**kwargs: Any) -> ScriptedServer:
        server = ScriptedServer(**kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        server.close()


@pytest.fixture
def server(make_server: Callable[..., ScriptedServer]) -> ScriptedServer:
    """A scripted server with the default two-answer rule."""
    return make_server()


@pytest.fixture
def key_in_env(monkeypatch: pytest.MonkeyPatch) -> str:
    """The provider key, set in the environment variable the specs name."""
    monkeypatch.setenv(KEY_ENV, SECRET)
    return SECRET


def spec_for(server: ScriptedServer, **overrides: Any) -> ModelSpec:
    """A ModelSpec reaching ``server`` through litellm's OpenAI client, key from KEY_ENV."""
    fields: dict[str, Any] = {
        "model": "openai/scripted",
        "api_base": server.api_base,
        "api_key_env": KEY_ENV,
        "timeout_s": 5.0,
        "max_retries": 3,
    }
    return ModelSpec(**(fields | overrides))
