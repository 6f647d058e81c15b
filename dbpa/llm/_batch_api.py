"""Provider batches through litellm's Files + Batches API: submit, poll, cancel, collect.

``submit`` uploads a batch's requests (``litellm.create_file``) and starts them
(``create_batch``); ``poll`` reads a batch's state (``retrieve_batch``); ``collect`` reads
its output and error files (``file_content``) into outputs per arm and the requests that
failed (error lines, and requests the output file does not hold: an expired or cancelled
batch's unanswered ones), which the caller sends again in a new batch. No call is retried
by the client (a retried ``create_batch`` could start a batch twice): a failure is a
``ModelError``, transient or permanent as the sampler judges it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from dbpa.specs import Generation, ModelSpec

from ._batch import DONE, WINDOW, WINDOW_S, BatchRequest
from ._client import litellm
from ._errors import PermanentModelError, TransientModelError, describe, is_transient
from ._providers import choices_per_request, provider_name, route_for
from ._spend import Prices, priced_cost


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
