"""Fixtures: model specs pointing at scripted providers (``tests.support.providers``)."""

from __future__ import annotations

from typing import Any

import pytest

from dbpa.llm import RetryPolicy, sample
from dbpa.specs import Message, ModelSpec
from tests.support.providers import KEY_ENV, SECRET
from tests.support.scripted_server import ScriptedServer

FAST_RETRY = RetryPolicy(base_delay_s=0.01, max_delay_s=0.05)
MESSAGES = (Message(role="user", content="Should I see a doctor about my flu?"),)


@pytest.fixture(scope="session", autouse=True)
def _litellm_warm() -> None:
    """Import litellm and make one call up front (its first call imports more), so timings
    in tests measure calls, not imports."""
    with ScriptedServer() as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, SECRET)
        sample(spec_for(server), MESSAGES, [0], seed=0)


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
