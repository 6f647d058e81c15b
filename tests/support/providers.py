"""Scripted providers on 127.0.0.1 for the tests of litellm callers, and the key they check.

Registered for every test package in ``tests/conftest.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.scripted_server import ScriptedServer

SECRET = "sk-test-Zq81vXw0secretvalue"
KEY_ENV = "DBPA_TEST_PROVIDER_KEY"


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
