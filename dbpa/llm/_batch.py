"""Provider batches: what goes in them, how they are split and priced.

A request of a batch is the request :func:`~dbpa.llm.sample` would send for the same block
of output indices (same ``n``, same seed: :func:`~dbpa.llm.block_seed`), a line of the JSONL
file of an OpenAI-format batch; its ``custom_id`` is ``ARM_ID/BLOCK``. ``_batch_api`` sends,
polls and reads the batches through litellm.

Batches are split by the provider's limits (:data:`BATCH_PROVIDERS`: requests and bytes per
batch). Outputs are priced at the batch price: litellm's ``*_cost_per_token_batches`` where
its price map has them, else :data:`BATCH_DISCOUNT` of the list price (the spec's own prices
count as list prices).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dbpa.specs import Message, ModelSpec

from ._client import litellm
from ._errors import PermanentModelError
from ._providers import choices_per_request, provider_name, route_for
from ._spend import Prices, UnknownPriceError, model_prices


@dataclass(frozen=True)
class BatchLimits:
    """The most one batch of a provider may hold."""

    requests: int
    bytes: int


BATCH_PROVIDERS: Mapping[str, BatchLimits] = MappingProxyType(
    {
        "openai": BatchLimits(50_000, 200 * 1024 * 1024),
        "azure": BatchLimits(100_000, 200 * 1024 * 1024),
    }
)
"""Providers whose batch API dbpa drives (litellm's OpenAI-format Files + Batches API), with
their documented limits per batch (OpenAI: 50,000 requests and a 200 MB input file; Azure
OpenAI: 100,000 requests, 200 MB)."""
WINDOW = "24h"
"""The completion window asked for (the only one OpenAI offers)."""
WINDOW_S = 24 * 3600.0
BATCH_DISCOUNT = 0.5
"""A batch request's price as a share of the list price where litellm's map has no batch
price (OpenAI's, Azure's and Anthropic's batch APIs all charge half)."""
DONE = frozenset({"completed", "expired", "cancelled", "failed"})
"""A batch's final statuses."""


class BatchUnsupportedError(ValueError):
    """``batch: true`` on a model whose provider has no batch API dbpa can use."""


def check_batchable(model: ModelSpec) -> BatchLimits:
    """The provider's limits per batch; :class:`BatchUnsupportedError` naming the model and
    why when it has no batch API dbpa drives."""
    why = None
    if model.is_local:
        why = "the embedded model runs in-process and has no batch API"
    else:
        try:
            name = provider_name(model.model, model.api_base)
        except PermanentModelError as exc:
            why = exc.reason
            name = None
        if name is not None and name not in BATCH_PROVIDERS:
            why = (
                f"litellm routes it to {name!r}, which has no batch API dbpa can drive "
                f"(the OpenAI-format Files + Batches API of: {', '.join(BATCH_PROVIDERS)})"
            )
    if why is not None:
        raise BatchUnsupportedError(f"model {model.label!r}: batch: true, but {why}")
    return BATCH_PROVIDERS[provider_name(model.model, model.api_base)]


@dataclass(frozen=True)
class BatchRequest:
    """One request of a batch: the outputs ``indices`` of arm ``arm_id``."""

    custom_id: str
    arm_id: str
    indices: tuple[int, ...]
    seed: int | None
    """The request's seed, when the provider takes one."""
    line: str
    """The request as a line of the batch's input file (without its newline)."""
    n: int = 1
    """Choices the request asks for."""

    def as_json(self) -> dict[str, Any]:
        """The request as the record keeps it (the line is made again from the arm)."""
        return {"custom_id": self.custom_id, "indices": list(self.indices), "seed": self.seed}


def batch_requests(
    model: ModelSpec,
    arm_id: str,
    messages: Sequence[Message],
    indices: Iterable[int],
    *,
    seed: int,
) -> list[BatchRequest]:
    """The requests that fill ``indices`` of the arm, blocked and seeded as the sampler's."""
    from ._sampler import block_seed

    route = route_for(model)
    choices = choices_per_request(model)
    name = litellm().get_llm_provider(model.model, api_base=model.api_base)[0]
    blocks: dict[int, list[int]] = {}
    for i in sorted(set(indices)):
        blocks.setdefault(i // choices, []).append(i)
    out = []
    for block, wanted in blocks.items():
        n = max(wanted) - block * choices + 1
        body: dict[str, Any] = {
            "model": name,
            "messages": [m.model_dump() for m in messages],
            **model.params,
        }
        if n > 1:
            body["n"] = n
        request_seed = block_seed(seed, block) if route.sends_seed else None
        if request_seed is not None:
            body["seed"] = request_seed
        custom_id = f"{arm_id}/{block}"
        line = {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions"}
        out.append(
            BatchRequest(
                custom_id,
                arm_id,
                tuple(wanted),
                request_seed,
                json.dumps({**line, "body": body}, separators=(",", ":")),
                n,
            )
        )
    return out


def split(requests: Sequence[BatchRequest], limits: BatchLimits) -> list[list[BatchRequest]]:
    """``requests`` in order, in batches within ``limits`` (requests and input bytes)."""
    batches: list[list[BatchRequest]] = []
    size = 0
    for request in requests:
        line = len(request.line.encode()) + 1
        if line > limits.bytes:
            raise ValueError(f"request {request.custom_id}: {line} bytes, above a batch's limit")
        if not batches or len(batches[-1]) >= limits.requests or size + line > limits.bytes:
            batches.append([])
            size = 0
        batches[-1].append(request)
        size += line
    return batches


def batch_prices(model: ModelSpec) -> Prices | None:
    """The model's prices in a batch: litellm's batch prices, else :data:`BATCH_DISCOUNT` of
    its list prices (the spec's own, or the map's); None when neither is known."""
    try:
        listed = model_prices(model)
    except UnknownPriceError:
        return None
    if not listed.own:
        try:
            info = dict(litellm().get_model_info(model.model))
        except Exception:  # not in the map: the list prices came from elsewhere
            info = {}
        inp, outp = (
            info.get("input_cost_per_token_batches"),
            info.get("output_cost_per_token_batches"),
        )
        if isinstance(inp, int | float) and isinstance(outp, int | float):
            return Prices(float(inp), float(outp), listed.max_tokens, True)
    return Prices(
        listed.input_per_token * BATCH_DISCOUNT,
        listed.output_per_token * BATCH_DISCOUNT,
        listed.max_tokens,
        True,
    )
