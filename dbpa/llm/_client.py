"""litellm, imported lazily and once: every litellm import of dbpa goes through here."""

from __future__ import annotations

import functools
import importlib
import os
from typing import Any


@functools.cache
def litellm() -> Any:
    """The configured ``litellm`` module (its import takes seconds, so only on first use).

    ``LITELLM_LOCAL_MODEL_COST_MAP`` is set first, else the import fetches the price map from
    the internet. litellm's own retries stay off (dbpa retries, see ``_retry``): calls pass
    ``num_retries=0, max_retries=0``, but litellm 1.106's OpenAI embedding path reads a 0 as
    "unset" and falls back to ``litellm.DEFAULT_MAX_RETRIES``, so that is 0 too. Its "give
    feedback" banners are silenced. The module litellm imports when it disposes of an HTTP
    handler is imported with it.
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
    return module
