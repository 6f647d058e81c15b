"""Model strings checked offline, without litellm: what ``dbpa validate`` can know.

A string litellm could not route fails here at validation instead of at the first request:
empty or with spaces, ``/`` with nothing before or after it, ``local/`` with a name not in
:data:`LOCAL_MODELS`, or a ``provider/`` prefix litellm does not know (unless ``api_base`` is
an endpoint litellm recognizes). A string without ``/`` (``gpt-4o-mini``) passes: litellm
resolves those through its model map, which only its import can read.
"""

from __future__ import annotations

import difflib
from urllib.parse import urlparse

from dbpa.specs import LOCAL_MODEL_PREFIX

from ._local import LOCAL_MODELS
from ._provider_names import LITELLM_ENDPOINT_HOSTS, LITELLM_PROVIDERS

PROVIDER_EXAMPLES = ("openai", "anthropic", "azure", "gemini", "bedrock", "mistral", "ollama")
"""Named in the message about an unknown provider (the full list is litellm's page)."""
PROVIDERS_PAGE = "https://docs.litellm.ai/docs/providers"


def check_model_string(model: str, api_base: str | None = None, *, local: bool = True) -> None:
    """ValueError naming ``model`` and what was expected when litellm cannot route it;
    ``local``: whether ``local/<name>`` (the embedded models) is allowed."""
    if not model.strip():
        raise ValueError("empty; give a litellm model string such as openai/gpt-4o-mini")
    if any(c.isspace() or not c.isprintable() for c in model):
        raise ValueError(
            f"{model!r} contains spaces or control characters; a model string has none "
            "(e.g. openai/gpt-4o-mini)"
        )
    if "/" not in model:
        return
    prefix, _, name = model.partition("/")
    if not prefix:
        raise ValueError(f"{model!r} has no provider before '/'; expected provider/model")
    if local and model.startswith(LOCAL_MODEL_PREFIX):
        if model not in LOCAL_MODELS:
            known = ", ".join(sorted(LOCAL_MODELS))
            raise ValueError(f"unknown local model {model!r}; known: {known}")
        return
    if prefix in LITELLM_PROVIDERS:
        if not name.strip("/"):
            raise ValueError(f"{model!r} names no model after {prefix}/")
        return
    if api_base is not None and _host(api_base) in LITELLM_ENDPOINT_HOSTS:
        return  # litellm picks the provider from the endpoint
    raise ValueError(_unknown_provider(model, prefix, api_base, local))


def _unknown_provider(model: str, prefix: str, api_base: str | None, local: bool) -> str:
    examples = ", ".join(f"{p}/" for p in PROVIDER_EXAMPLES)
    message = (
        f"{model!r}: unknown provider {prefix!r}; expected a litellm provider ({examples}, ... "
        f"{len(LITELLM_PROVIDERS)} in all: {PROVIDERS_PAGE})"
    )
    if local:
        message += f" or {LOCAL_MODEL_PREFIX} for the embedded models"
    close = difflib.get_close_matches(prefix.lower(), sorted(LITELLM_PROVIDERS), n=1)
    if close:
        message += f"; did you mean {close[0]}/?"
    if api_base is not None:
        message += f"; for an OpenAI-compatible server at api_base, write openai/{model}"
    return message


def _host(url: str) -> str:
    try:
        return (urlparse(url if "://" in url else f"https://{url}").hostname or "").lower()
    except ValueError:  # a malformed URL, e.g. an unclosed [ in the host
        return ""
