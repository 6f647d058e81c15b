"""litellm, imported lazily and once: every litellm import of dbpa goes through here."""

from __future__ import annotations

import functools
import importlib
import os
import warnings
from typing import Any

DROPPED_REQUEST = r"coroutine '\w+\.a\w+' was never awaited"
"""The warning of a provider coroutine litellm dropped unawaited (``quiet_dropped_requests``),
e.g. ``coroutine 'OpenAIChatCompletion.acompletion' was never awaited``."""


@functools.cache
def litellm() -> Any:
    """The configured ``litellm`` module (its import takes seconds, so only on first use).

    ``LITELLM_LOCAL_MODEL_COST_MAP`` is set first, else the import fetches the price map from
    the internet. litellm's own retries stay off (dbpa retries, see ``_retry``): calls pass
    ``num_retries=0, max_retries=0``, but litellm 1.106's OpenAI embedding path reads a 0 as
    "unset" and falls back to ``litellm.DEFAULT_MAX_RETRIES``, so that is 0 too. Its "give
    feedback" banners are silenced. The module litellm imports when it disposes of an HTTP
    handler is imported with it, and the warnings of requests it drops when they are
    cancelled are silenced (``quiet_dropped_requests``).
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as imported

    # litellm's async HTTP handler imports this module in its ``__del__``: an import run by
    # the garbage collector, at any moment and in any thread, which can wait forever for the
    # import lock (seen once: a run hung after its tests). Imported now, it is found at once.
    importlib.import_module("litellm.llms.custom_httpx.aiohttp_transport")
    module: Any = imported
    module.suppress_debug_info = True
    module.DEFAULT_MAX_RETRIES = 0
    quiet_dropped_requests()
    return module


def quiet_dropped_requests() -> None:
    """Ignore the warning of a provider coroutine litellm never awaited. Its ``acompletion``
    builds the provider's coroutine in an executor thread and awaits it once the thread
    returns; a request cancelled meanwhile (a run stopping, a connect budget running out)
    leaves it unawaited, and the garbage collector warns later, a stray line in the run's
    output. The request was cancelled on purpose. Only a method ``a...`` of a class matches
    (``DROPPED_REQUEST``), not dbpa's own coroutines."""
    warnings.filterwarnings("ignore", DROPPED_REQUEST, RuntimeWarning)
