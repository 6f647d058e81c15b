"""Provider batches: an arm's missing requests sent as OpenAI-format batches through litellm.

A request of a batch is the request :func:`~dbpa.llm.sample` would send for the same block
of output indices (same ``n``, same seed: :func:`~dbpa.llm.block_seed`), a line of a JSONL
file uploaded with ``litellm.create_file`` and run by ``litellm.create_batch``; its
``custom_id`` is ``ARM_ID/BLOCK``. ``poll`` reads a batch's state (``retrieve_batch``);
``collect`` reads its output and error files (``file_content``) into outputs per arm and the
requests that failed (error lines, and requests the output file does not hold: an expired or
cancelled batch's unanswered ones), which the caller sends again in a new batch.

Batches are split by the provider's limits (:data:`BATCH_PROVIDERS`: requests and bytes per
batch). Outputs are priced at the batch price: litellm's ``*_cost_per_token_batches`` where
its price map has them, else :data:`BATCH_DISCOUNT` of the list price (the spec's own prices
count as list prices).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from dbpa.specs import Generation, Message, ModelSpec

from ._client import litellm
from ._errors import PermanentModelError, TransientModelError, describe, is_transient
from ._providers import choices_per_request, provider_name, route_for
from ._spend import Prices, UnknownPriceError, model_prices, priced_cost


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


@dataclass(frozen=True)
class Submitted:
    """A batch the provider accepted."""

    batch_id: str
    input_file_id: str
    deadline: datetime
    """When the provider's window ends (UTC)."""


@dataclass(frozen=True)
class BatchState:
    """What the provider says of a batch."""

    batch_id: str
    status: str
    total: int
    completed: int
    failed: int
    output_file_id: str | None
    error_file_id: str | None
    seconds: float | None
    """From creation to the end (None while it runs)."""

    @property
    def done(self) -> bool:
        return self.status in DONE


def submit(
    model: ModelSpec, requests: Sequence[BatchRequest], metadata: Mapping[str, str]
) -> Submitted:
    """Upload ``requests`` and start them as one batch; a ``ModelError`` when the provider
    refuses (nothing of it then runs, or the file alone was uploaded)."""
    kwargs = _kwargs(model)
    data = "".join(r.line + "\n" for r in requests).encode()
    file = _call(model, "create_file", file=("dbpa-batch.jsonl", data), purpose="batch", **kwargs)
    batch = _call(
        model,
        "create_batch",
        completion_window=WINDOW,
        endpoint="/v1/chat/completions",
        input_file_id=file.id,
        metadata=dict(metadata),
        **kwargs,
    )
    expires = getattr(batch, "expires_at", None)
    created = getattr(batch, "created_at", None) or datetime.now(UTC).timestamp()
    end = float(expires) if expires else float(created) + WINDOW_S
    return Submitted(batch.id, file.id, datetime.fromtimestamp(end, UTC))


def poll(model: ModelSpec, batch_id: str) -> BatchState:
    """The batch's state now."""
    batch = _call(model, "retrieve_batch", batch_id=batch_id, **_kwargs(model))
    counts = getattr(batch, "request_counts", None)
    ended = next(
        (
            getattr(batch, f, None)
            for f in ("completed_at", "expired_at", "cancelled_at", "failed_at")
            if getattr(batch, f, None)
        ),
        None,
    )
    return BatchState(
        batch_id,
        str(batch.status),
        int(getattr(counts, "total", 0) or 0),
        int(getattr(counts, "completed", 0) or 0),
        int(getattr(counts, "failed", 0) or 0),
        getattr(batch, "output_file_id", None),
        getattr(batch, "error_file_id", None),
        None if ended is None else max(0.0, float(ended) - float(batch.created_at)),
    )


def cancel(model: ModelSpec, batch_id: str) -> None:
    """Ask the provider to cancel the batch (its answered requests stay in its files)."""
    _call(model, "cancel_batch", batch_id=batch_id, **_kwargs(model))


@dataclass(frozen=True)
class Collected:
    """A finished batch read back."""

    outputs: dict[str, list[Generation]]
    """arm_id -> the outputs its answered requests delivered."""
    failed: dict[str, str]
    """custom_id -> why the request has no answer (to be sent again)."""


def collect(
    model: ModelSpec,
    state: BatchState,
    requests: Sequence[BatchRequest],
    prices: Prices | None,
) -> Collected:
    """The outputs of the finished batch ``state`` and its requests without an answer."""
    by_id = {r.custom_id: r for r in requests}
    answers: dict[str, dict[str, Any]] = {}
    failed: dict[str, str] = {}
    for file_id in (state.output_file_id, state.error_file_id):
        for row in _lines(model, file_id):
            custom_id = str(row.get("custom_id"))
            if custom_id not in by_id:
                continue
            response = row.get("response") or {}
            if response.get("status_code") == 200 and isinstance(response.get("body"), dict):
                answers[custom_id] = response["body"]
            else:
                failed[custom_id] = _why(row)
    outputs: dict[str, list[Generation]] = {}
    for custom_id, request in by_id.items():
        body = answers.get(custom_id)
        if body is None:
            failed.setdefault(custom_id, f"no answer in the {state.status} batch")
            continue
        delivered = _generations(model, request, body, prices, state.seconds or 0.0)
        if delivered is None:
            failed[custom_id] = "fewer choices than asked for"
            continue
        failed.pop(custom_id, None)
        outputs.setdefault(request.arm_id, []).extend(delivered)
    return Collected(outputs, failed)


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


def _generations(
    model: ModelSpec,
    request: BatchRequest,
    body: Mapping[str, Any],
    prices: Prices | None,
    seconds: float,
) -> list[Generation] | None:
    from ._sampler import _split, _status

    choices = sorted(body.get("choices") or [], key=lambda c: c.get("index", 0))
    choices_n = choices_per_request(model)
    offsets = [i % choices_n for i in request.indices]
    if len(choices) <= max(offsets):
        return None
    usage = body.get("usage") or {}
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    asked = max(offsets) + 1
    if asked > 1 and provider_name(model.model, model.api_base) not in ("openai", "azure"):
        completion = None
    cost = None if prices is None else priced_cost(prices, prompt, completion)
    delivered = len(offsets)
    prompts, completions = _split(prompt, delivered), _split(completion, delivered)
    request_id = str(body.get("id") or request.custom_id)
    out = []
    for k, (index, j) in enumerate(zip(request.indices, offsets, strict=True)):
        message = choices[j].get("message") or {}
        text = message.get("content") or ""
        reason = choices[j].get("finish_reason")
        out.append(
            Generation(
                index=index,
                text=text,
                status=_status(text, reason),
                finish_reason=reason,
                prompt_tokens=prompts[k],
                completion_tokens=completions[k],
                cost_usd=None if cost is None else cost / delivered,
                latency_s=seconds,
                seed=request.seed,
                request_id=request_id,
            )
        )
    return out


def _why(row: Mapping[str, Any]) -> str:
    error = row.get("error") or (row.get("response") or {}).get("body", {}).get("error") or {}
    status = (row.get("response") or {}).get("status_code")
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else str(error)
    head = f"HTTP {status}" if status else (code or "failed")
    return f"{head}: {message}" if message else head


def _lines(model: ModelSpec, file_id: str | None) -> list[dict[str, Any]]:
    if not file_id:
        return []
    content = _call(model, "file_content", file_id=file_id, **_kwargs(model))
    raw = content.content if hasattr(content, "content") else bytes(content)
    return [json.loads(line) for line in raw.decode().splitlines() if line.strip()]


def _kwargs(model: ModelSpec) -> dict[str, Any]:
    route = route_for(model)
    kwargs: dict[str, Any] = {"custom_llm_provider": provider_name(model.model, model.api_base)}
    for key in ("api_base", "api_key", "api_version"):
        if key in route.kwargs:
            kwargs[key] = route.kwargs[key]
    kwargs["timeout"] = model.timeout_s
    kwargs["max_retries"] = 0  # a client's retry of create_batch could start a batch twice
    return kwargs


def _call(model: ModelSpec, name: str, **kwargs: Any) -> Any:
    """``litellm.NAME(**kwargs)``; its errors as ``ModelError`` (transient as the sampler
    judges them: connections, timeouts, 408/409/425/429, 5xx), never holding the key."""
    secrets = tuple(v for k, v in kwargs.items() if k == "api_key" and isinstance(v, str))
    try:
        return getattr(litellm(), name)(**kwargs)
    except Exception as exc:
        text = f"{name}: {describe(exc, secrets)}"
        if is_transient(exc):
            raise TransientModelError(model.label, text) from None
        raise PermanentModelError(model.label, text) from None
