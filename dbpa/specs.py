"""The vocabulary shared by sampling, embedding, storage and flows.

Configuration pieces are pydantic models (validated, frozen, unknown keys refused);
records produced at run time are frozen dataclasses.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

LOCAL_MODEL_PREFIX = "local/"
"""Models named with this prefix run on the embedded in-process server (``local/smollm2-135m``)."""
DEFAULT_CONNECT_BUDGET_S = 60.0
"""Seconds an endpoint may refuse connections before its model fails, unless a spec says."""


class Spec(BaseModel):
    """Base of every configuration model: frozen, strict about unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)


class _Endpoint(Spec):
    """A spec of a model behind an HTTP endpoint: its connect budget."""

    connect_budget_s: float = Field(default=DEFAULT_CONNECT_BUDGET_S, ge=0, allow_inf_nan=False)
    """Seconds the endpoint may refuse connections (or be unreachable), counted from the
    first failed connection, before the model fails (0: at the first); retried meanwhile."""

    @model_serializer(mode="wrap")
    def _dump_as_before(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without ``connect_budget_s`` when it is the default: configs dump, and hash, as
        they did before it existed."""
        data: dict[str, Any] = handler(self)
        if data.get("connect_budget_s") == DEFAULT_CONNECT_BUDGET_S:
            del data["connect_budget_s"]
        for price in ("input_cost_per_token", "output_cost_per_token", "max_cost_usd"):
            if data.get(price, ...) is None:
                del data[price]
        if data.get("batch", ...) is False:
            del data["batch"]
        return data


class Message(Spec):
    """One chat message."""

    role: Literal["system", "user", "assistant"]
    """Who speaks."""
    content: str
    """The text."""


class ModelSpec(_Endpoint):
    """An LLM reached through litellm, and how to call it."""

    model: str = Field(min_length=1)
    """A litellm model string (``openai/gpt-4o-mini``) or ``local/smollm2-135m``."""
    name: str | None = None
    """Display name in tables and reports (default: the model string); not part of an arm's id."""
    api_base: str | None = None
    """Base URL of an OpenAI-compatible or self-hosted endpoint."""
    api_key_env: str | None = None
    """Name of the environment variable holding the API key (the key itself is never stored)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Sampling parameters passed to the provider: temperature, top_p, max_tokens, ..."""
    max_concurrency: int = Field(default=8, ge=1)
    """Requests in flight at once for this model."""
    max_n: int | None = Field(default=None, ge=1)
    """Choices asked per request; None: the provider's known limit (1 when unknown)."""
    timeout_s: float = Field(default=120.0, gt=0)
    """Per-request HTTP timeout."""
    max_retries: int = Field(default=6, ge=0)
    """Retries of transient failures (rate limit, timeout, 5xx, malformed answers); failed
    connections are retried for ``connect_budget_s`` instead."""
    input_cost_per_token: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """USD per prompt token, for a model litellm's price map lacks (with
    ``output_cost_per_token``); overrides the map. Needed under ``max_cost_usd``."""
    output_cost_per_token: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    """USD per completion token (see ``input_cost_per_token``)."""
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Most a run may spend on this model's requests (USD), on top of the run's own
    ``max_cost_usd``; held the same way (docs/how-to/cost.md)."""
    batch: bool = False
    """Send the run's missing requests as provider batches (OpenAI-style Files + Batches
    API): half the list price, answers within the provider's window (docs/how-to/cost.md)."""

    @field_validator("params")
    @classmethod
    def _no_reserved_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        reserved = {"model", "messages", "n", "api_key", "api_base", "stream"} & set(value)
        if reserved:
            raise ValueError(f"set {sorted(reserved)[0]!r} through its own field, not params")
        return value

    @model_validator(mode="after")
    def _both_prices(self) -> ModelSpec:
        if (self.input_cost_per_token is None) != (self.output_cost_per_token is None):
            raise ValueError("input_cost_per_token and output_cost_per_token: give both or neither")
        return self

    @property
    def is_local(self) -> bool:
        """Runs on the embedded in-process server."""
        return self.model.startswith(LOCAL_MODEL_PREFIX)

    @property
    def label(self) -> str:
        """Short name for tables, logs and tags."""
        return self.name or self.model


class EmbedderSpec(_Endpoint):
    """Which embedding model turns outputs into vectors."""

    backend: Literal["sentence-transformers", "litellm"] = "sentence-transformers"
    """``sentence-transformers`` (in-process) or ``litellm`` (a hosted embedding model)."""
    model: str = "all-MiniLM-L6-v2"
    """sentence-transformers: ``all-MiniLM-L6-v2`` (packaged, offline), a local path or a cached
    model name; litellm: an embedding model string such as ``text-embedding-3-small``."""
    api_base: str | None = None
    """litellm: base URL of a self-hosted or OpenAI-compatible embedding endpoint."""
    api_key_env: str | None = None
    """litellm: name of the environment variable holding the API key (never stored)."""
    batch_size: int = Field(default=64, ge=1)
    """Texts embedded per batch."""
    timeout_s: float = Field(default=120.0, gt=0)
    """litellm: per-request HTTP timeout."""
    max_retries: int = Field(default=6, ge=0)
    """litellm: retries of transient failures per request."""


def content_hash(*parts: Any) -> str:
    """Stable hex digest of JSON-serializable parts (sorted keys), for ids and cache keys."""
    payload = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=_jsonable)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def text_hash(text: str) -> str:
    """Digest of one output text (the embedding cache key)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"cannot hash {type(value).__name__}")


OutputStatus = Literal["ok", "empty", "filtered"]


@dataclass(frozen=True)
class Generation:
    """One sampled output of an arm, as it is stored."""

    index: int
    """Position in the arm, 0..k-1."""
    text: str
    status: OutputStatus
    """``ok``; ``empty`` (no text); ``filtered`` (the provider's content filter stopped it)."""
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    """litellm's cost estimate when it knows the model's price, else None."""
    latency_s: float
    """Wall time of the request that produced this output."""
    seed: int | None
    """Seed sent with the request, when the provider accepts one."""
    request_id: str
    """Requests asking for several choices share it."""


@dataclass(frozen=True)
class EmbeddingBatch:
    """Vectors of a list of texts, in order."""

    vectors: NDArray[np.float32]
    """(n, d) float32."""
    truncated: NDArray[np.bool_]
    """(n,) True where the text was longer than the model's window and was cut by the model."""
