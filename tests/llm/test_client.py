"""The configured litellm: the warning of a provider coroutine it drops when a request is
cancelled (seen once as a stray line in ``dbpa run``'s output when a connect budget ran out)
is silenced, and no other coroutine's."""

from __future__ import annotations

import gc
import warnings
from collections.abc import Callable, Coroutine
from typing import Any

from dbpa.llm._client import quiet_dropped_requests


class OpenAIChatCompletion:
    """Named as the litellm handler whose coroutine was dropped."""

    async def acompletion(self) -> None:
        """A provider request."""


class _Arm:
    """Named as dbpa's sampler."""

    async def _request(self) -> None:
        """dbpa's own coroutine."""

    def attempt(self) -> Coroutine[Any, Any, None]:
        """dbpa's own, nested as the sampler's ``attempt`` (its name starts with an a)."""

        async def attempt() -> None:
            pass

        return attempt()


def _warned(make: Callable[[], Coroutine[Any, Any, None]]) -> list[str]:
    """The runtime warnings of a coroutine made by ``make`` and dropped unawaited."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("default")
        quiet_dropped_requests()
        make()  # dropped at once
        gc.collect()
    return [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]


def test_a_coroutine_litellm_drops_is_not_warned_about_but_dbpas_are():
    assert _warned(OpenAIChatCompletion().acompletion) == []
    assert _warned(_Arm()._request) == ["coroutine '_Arm._request' was never awaited"]
    assert _warned(_Arm().attempt) == [
        "coroutine '_Arm.attempt.<locals>.attempt' was never awaited"
    ]
