"""From a ModelSpec to litellm call arguments: provider, choices per request, seed, key.

Choices per request (``n``): ``ModelSpec.max_n`` when set (refused for providers litellm
knows take no ``n``), else :data:`KNOWN_MAX_N` for the provider's own endpoint, else 1 (an
unknown OpenAI-compatible server may ignore ``n`` or cap it). A seed is sent when litellm
lists ``seed`` among the provider's parameters.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from dbpa.specs import ModelSpec

from ._client import litellm
from ._errors import PermanentModelError, describe
from ._local import local_model, local_server

KNOWN_MAX_N: Mapping[str, int] = MappingProxyType({"openai": 16, "azure": 16, "anthropic": 1})
"""Choices per request by default on a provider's own endpoint. OpenAI accepts up to 128; 16
keeps a request short and a failed request cheap. Anthropic has no ``n``."""

USAGE_SUMS_CHOICES = frozenset({"openai", "azure"})
"""Providers whose ``usage.completion_tokens`` covers every choice of a request (xllamacpp's
counts only the first one; other servers are not known)."""

KEYLESS_PLACEHOLDER = "sk-no-key"
"""Sent to servers that check no key (the local one, keyless OpenAI-compatible ones):
litellm's OpenAI client insists on some key."""

_RESERVED_PARAMS = {
    "seed": "it is set per request from the arm's seed",
    "timeout": "set ModelSpec.timeout_s instead",
    "num_retries": "set ModelSpec.max_retries instead",
    "max_retries": "set ModelSpec.max_retries instead",
}


@dataclass(frozen=True)
class Route:
    """How requests for one ModelSpec are sent."""

    kwargs: Mapping[str, Any] = field(repr=False)
    """litellm arguments except messages, n and seed (may hold the key: never log this)."""
    choices: int
    """Choices per request (n_eff)."""
    sends_seed: bool
    usage_sums_choices: bool
    is_local: bool
    secrets: tuple[str, ...] = field(repr=False)
    auth_hint: str


@dataclass(frozen=True)
class _Provider:
    name: str
    params: frozenset[str]
    first_party: bool
    """The provider's own endpoint (not an OpenAI-compatible server behind ``openai/``)."""


def choices_per_request(model: ModelSpec) -> int:
    """n_eff: choices asked per request for ``model`` (a function of the spec alone)."""
    if model.is_local:
        return model.max_n or local_model(model.model).max_n
    provider = _provider(model.model, model.api_base)
    if model.max_n is not None:
        if model.max_n > 1 and "n" not in provider.params:
            raise PermanentModelError(
                model.label,
                f"max_n={model.max_n}: {provider.name} models take no n (one choice per "
                f"request); set max_n to 1 or leave it unset",
            )
        return model.max_n
    if "n" not in provider.params or not provider.first_party:
        return 1
    return KNOWN_MAX_N.get(provider.name, 1)


def route_for(model: ModelSpec) -> Route:
    """The route of ``model``; starts the local server of a local model (blocking)."""
    for name, why in _RESERVED_PARAMS.items():
        if name in model.params:
            raise PermanentModelError(model.label, f"params: remove {name!r}: {why}")
    choices = choices_per_request(model)
    common = {"timeout": model.timeout_s, "num_retries": 0, "max_retries": 0}
    if model.is_local:
        entry = local_model(model.model)
        server = local_server(model.model)
        kwargs = {
            "model": f"openai/{entry.alias}",
            "api_base": server.api_base,
            "api_key": KEYLESS_PLACEHOLDER,
            **entry.default_params,
            **model.params,
            **common,
        }
        return Route(
            kwargs=kwargs,
            choices=choices,
            sends_seed=True,
            usage_sums_choices=False,  # xllamacpp counts the first choice only
            is_local=True,
            secrets=(),
            auth_hint="",
        )
    provider = _provider(model.model, model.api_base)
    key = api_key(model.label, model.api_key_env, provider.name)
    kwargs = {"model": model.model, **model.params, **common}
    if model.api_base is not None:
        kwargs["api_base"] = model.api_base
    if key is not None:
        kwargs["api_key"] = key
    hint = f" (the key comes from ${model.api_key_env})" if model.api_key_env else ""
    return Route(
        kwargs=kwargs,
        choices=choices,
        sends_seed="seed" in provider.params,
        usage_sums_choices=provider.first_party and provider.name in USAGE_SUMS_CHOICES,
        is_local=False,
        secrets=(key,) if key and key != KEYLESS_PLACEHOLDER else (),
        auth_hint=hint,
    )


def api_key(label: str, api_key_env: str | None, provider: str) -> str | None:
    """The key to send: the value of ``$api_key_env``, else None (litellm's own default)."""
    if api_key_env is None:
        if provider == "openai" and not os.environ.get("OPENAI_API_KEY"):
            # A keyless OpenAI-compatible server (vLLM, llama.cpp, ...) still needs some key
            # in the client, or litellm fails with a misleading 500; OpenAI itself says 401.
            return KEYLESS_PLACEHOLDER
        return None
    key = os.environ.get(api_key_env, "")
    if not key:
        raise PermanentModelError(
            label, f"api_key_env: environment variable ${api_key_env} is not set"
        )
    return key


def provider_name(model: str, api_base: str | None) -> str:
    """litellm's provider of ``model`` (``openai``, ``anthropic``, ...); unknown: permanent."""
    return _provider(model, api_base).name


@functools.lru_cache(maxsize=256)
def _provider(model: str, api_base: str | None) -> _Provider:
    lib = litellm()
    try:
        name_in_provider, provider, _, _ = lib.get_llm_provider(model, api_base=api_base)
        params = lib.get_supported_openai_params(
            model=name_in_provider, custom_llm_provider=provider
        )
    except Exception as exc:  # litellm raises BadRequestError or plain errors
        raise PermanentModelError(model, f"unknown model: {describe(exc, ())}") from None
    first_party = provider != "openai" or api_base is None or "api.openai.com" in api_base
    return _Provider(provider, frozenset(params or ()), first_party)
