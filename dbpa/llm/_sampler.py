"""Filling an arm with outputs: ``sample_async`` / ``sample``.

Resumability contract. Output ``i`` of an arm belongs to block ``i // n_eff`` (``n_eff`` =
:func:`choices_per_request`, a function of the ModelSpec only) and is choice ``i % n_eff`` of
a request seeded :func:`block_seed(seed, block) <block_seed>`. So a resumed run, asked only
for the missing indices, requests the same blocks with the same seeds and gets the same texts
as a full run (on providers that are deterministic given the seed, as the embedded model is).
A block asks for as many choices as its highest wanted offset needs; choices nobody asked
for (a block resumed after a partial write) are dropped.

Delivery. ``on_outputs(list[Generation])`` is called once per successful request, as soon
as it returns (the pipeline stores them at once); every output is also returned, in index
order. ``on_outputs`` doubles as the progress hook: it sees every output exactly once.

Spend cap. With a ``cap`` (:class:`~dbpa.llm._spend.SpendCap`), each request reserves its
most before it is sent and settles at its real cost; once the cap refuses a request, no
request of the arm is sent any more, those in flight deliver, and the arm raises
:class:`~dbpa.llm._spend.SpendCapReached`.

Failures. Transient errors are retried (:class:`RetryPolicy`, ``ModelSpec.max_retries``),
then :class:`TransientModelError`; permanent ones raise :class:`PermanentModelError` at once.
Failed connections are retried until the endpoint has been unreachable for
``ModelSpec.connect_budget_s`` (counted across every arm of the process), then
:class:`UnreachableModelError` (a permanent error naming the address); ``warn`` hears once
per outage that they are being retried. Once the endpoint rejected the key or the model
(401, 403, 404), no arm of the process sends it another request (``_endpoints``). Any of
these stops the arm: requests in flight are cancelled, delivered outputs stay delivered.
Once the process is stopping (a signal: ``stop_requests``), requests still waiting for a slot
are not sent, those in flight finish and deliver (they are paid for), and the arm then raises
:class:`SamplingStopped`; an arm that starts then sends nothing and raises it at once.

Usage figures. With one choice per request, ``prompt_tokens``, ``completion_tokens`` and
``cost_usd`` are the request's. With several, each delivered output gets an equal share of the
request's figures (integers split so that they sum exactly), and ``completion_tokens`` is None
where the provider's usage does not cover every choice (xllamacpp counts only the first).
"""

from __future__ import annotations

import asyncio
import operator
import queue
import random
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dbpa.specs import Generation, Message, ModelSpec, OutputStatus, content_hash

from ._client import litellm
from ._endpoints import endpoint_for
from ._errors import ModelError, PermanentModelError, SamplingStopped
from ._limits import limit_for
from ._providers import Route, choices_per_request, route_for
from ._retry import DEFAULT_RETRY, Retrier, RetryPolicy
from ._runner import stopping, submit
from ._spend import (
    Prices,
    SpendCap,
    SpendCapReached,
    UnknownPriceError,
    model_prices,
    priced_cost,
    prompt_tokens_high,
)

OnOutputs = Callable[[list[Generation]], object]
Warn = Callable[[str], object]

_SEED_BITS = 31  # every provider takes a signed 32-bit seed; llama.cpp reads 2**32-1 as "random"


def block_seed(seed: int, block: int) -> int:
    """The request seed of ``block`` in an arm sampled with base ``seed`` (0 <= s < 2**31)."""
    return int(content_hash("dbpa.llm.block_seed", seed, block), 16) % (1 << _SEED_BITS)


def requests_needed(model: ModelSpec, indices: Iterable[int]) -> int:
    """How many requests :func:`sample_async` sends for ``indices`` when nothing fails."""
    wanted = _indices_iv(indices)
    return len({i // choices_per_request(model) for i in wanted})


async def sample_async(
    model: ModelSpec,
    messages: Sequence[Message],
    indices: Iterable[int],
    *,
    seed: int,
    on_outputs: OnOutputs | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
    rng: random.Random | None = None,
    warn: Warn | None = None,
    cap: SpendCap | None = None,
) -> list[Generation]:
    """Sample the outputs ``indices`` of the arm (``model``, ``messages``, ``seed``).

    ``rng`` only jitters the retry waits (default: a fresh ``random.Random()``); the texts
    depend on ``seed`` alone. ``warn`` is told, on the event loop, when the model's endpoint
    starts refusing connections (once per outage, whichever arm meets it first). ``cap``
    is the run's spend cap (see the module's docstring).
    """
    _model_iv(model)
    payload = _messages_iv(messages)
    wanted = _indices_iv(indices)
    seed = _seed_iv(seed)
    if not wanted:
        return []
    route = await asyncio.to_thread(route_for, model)
    if cap is not None and (model.is_local or not cap.caps(model.label)):
        cap = None  # no cap holds this model's requests
    priced = model.input_cost_per_token is not None or cap is not None
    prices = await asyncio.to_thread(model_prices, model) if priced else None
    arm = _Arm(
        model=model,
        route=route,
        retrier=Retrier(
            model=model.label,
            max_retries=model.max_retries,
            policy=retry,
            rng=rng if rng is not None else random.Random(),
            secrets=route.secrets,
            auth_hint=route.auth_hint,
            connect_budget_s=model.connect_budget_s,
            address=route.kwargs.get("api_base"),
            endpoint=endpoint_for(model.model, model.api_base, model.api_key_env),
            warn=warn,
        ),
        messages=payload,
        seed=seed,
        stop=asyncio.Event(),
        cap=cap,
        prices=prices,
    )
    blocks: dict[int, list[int]] = {}
    for i in wanted:
        blocks.setdefault(i // route.choices, []).append(i % route.choices)
    tasks = [asyncio.create_task(arm.request(b, offsets)) for b, offsets in blocks.items()]
    outputs: list[Generation] = []
    unsent = 0
    capped: SpendCapReached | None = None
    try:
        for finished in asyncio.as_completed(tasks):
            try:
                delivered = await finished
            except _ProcessStopping:  # the requests in flight still deliver
                unsent += 1
                continue
            except (SpendCapReached, _ArmStopped) as exc:  # so do they here
                if isinstance(exc, SpendCapReached):
                    capped = capped or exc
                elif capped is None:
                    raise
                continue
            if on_outputs is not None:
                on_outputs(delivered)
            outputs.extend(delivered)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    if unsent:
        raise _not_sent(model, unsent)
    if capped is not None:
        raise capped
    return sorted(outputs, key=operator.attrgetter("index"))


def sample(
    model: ModelSpec,
    messages: Sequence[Message],
    indices: Iterable[int],
    *,
    seed: int,
    on_outputs: OnOutputs | None = None,
    retry: RetryPolicy = DEFAULT_RETRY,
    rng: random.Random | None = None,
    warn: Warn | None = None,
    cap: SpendCap | None = None,
) -> list[Generation]:
    """Blocking :func:`sample_async`; ``on_outputs`` runs in the calling thread, ``warn`` on
    dbpa's event loop thread.

    The requests run on dbpa's background event loop, which every blocking call of the
    process shares (so litellm's connection pools and the in-flight bounds are shared too).
    """
    deliveries: queue.SimpleQueue[list[Generation] | None] = queue.SimpleQueue()
    future = submit(
        sample_async(
            model,
            messages,
            indices,
            seed=seed,
            on_outputs=deliveries.put,
            retry=retry,
            rng=rng,
            warn=warn,
            cap=cap,
        )
    )
    if future.cancelled():  # the process is stopping: the coroutine never ran
        raise _not_sent(model, requests_needed(model, indices))
    future.add_done_callback(lambda _: deliveries.put(None))
    try:
        while (delivered := deliveries.get()) is not None:
            if on_outputs is not None:
                on_outputs(delivered)
        return future.result()
    except BaseException:
        future.cancel()
        raise


@dataclass(frozen=True)
class _Arm:
    """Everything the requests of one ``sample_async`` call share."""

    model: ModelSpec
    route: Route
    retrier: Retrier
    messages: list[dict[str, str]]
    seed: int
    stop: asyncio.Event
    """Set when a request failed for good: requests still waiting for a slot are not sent."""
    cap: SpendCap | None = None
    """The run's spend cap (None: uncapped, or the embedded model)."""
    prices: Prices | None = None
    """The model's prices where the cap or the spec's own prices need them."""

    async def request(self, block: int, offsets: list[int]) -> list[Generation]:
        """The outputs at ``offsets`` of ``block``, from one successful request."""
        try:
            return await self._request(block, offsets)
        except (ModelError, SpendCapReached):
            # Set before any waiting request of the arm resumes (no await in between).
            self.stop.set()
            raise

    async def _request(self, block: int, offsets: list[int]) -> list[Generation]:
        model, route = self.model, self.route
        n = max(offsets) + 1
        request_seed = block_seed(self.seed, block)
        kwargs: dict[str, Any] = {**route.kwargs, "messages": self.messages}
        if n > 1:
            kwargs["n"] = n
        if route.sends_seed:
            kwargs["seed"] = request_seed
        limit = limit_for(model)
        acompletion = litellm().acompletion

        async def attempt() -> tuple[Any, float]:
            async with limit.slot(model.max_concurrency):
                if stopping():
                    raise _ProcessStopping
                if self.stop.is_set():
                    raise _ArmStopped
                self.retrier.check()  # the endpoint may have rejected the key meanwhile
                reserved = self._reserve(n)
                start = time.perf_counter()
                try:
                    response = await acompletion(**kwargs)
                except BaseException:
                    if self.cap is not None:
                        self.cap.release(reserved, model.label)
                    raise
                if self.cap is not None:
                    self.cap.settle(reserved, _request_cost(response, self.prices), model.label)
                return response, time.perf_counter() - start

        response, latency = await self.retrier.call_async(attempt, asyncio.sleep)
        choices = sorted(response.choices, key=lambda c: c.index)
        if len(choices) < n:
            raise PermanentModelError(
                model.label,
                f"asked for {n} choices, got {len(choices)}: the server ignores n; set max_n=1",
            )
        usage = _Usage.of(response, route, len(offsets), n, self.prices)
        request_id = getattr(response, "id", None) or uuid.uuid4().hex
        return [
            Generation(
                index=block * route.choices + j,
                text=(text := choices[j].message.content or ""),
                status=_status(text, choices[j].finish_reason),
                finish_reason=choices[j].finish_reason,
                prompt_tokens=usage.prompt_tokens[k],
                completion_tokens=usage.completion_tokens[k],
                cost_usd=usage.cost_usd,
                latency_s=latency,
                seed=request_seed if route.sends_seed else None,
                request_id=request_id,
            )
            for k, j in enumerate(offsets)
        ]

    def _reserve(self, n: int) -> float:
        """Reserve the most a request of ``n`` choices can cost; the amount reserved."""
        if self.cap is None or self.prices is None:
            return 0.0
        prices = self.prices
        try:
            most = prices.request_most(prompt_tokens_high(self.messages), n)
        except UnknownPriceError as exc:
            raise PermanentModelError(self.model.label, str(exc)) from None
        self.cap.reserve(most, self.model.label)
        return most


def _not_sent(model: ModelSpec, requests: int) -> SamplingStopped:
    return SamplingStopped(
        f"model {model.label!r}: the run is stopping; {requests} request(s) of the arm not sent"
    )


class _ArmStopped(Exception):
    """Another request of the arm failed for good: this one is not sent."""


class _ProcessStopping(Exception):
    """The process is stopping (:func:`~dbpa.llm._runner.stop_requests`): not sent."""


def _status(text: str, finish_reason: str | None) -> OutputStatus:
    if finish_reason == "content_filter":
        return "filtered"
    return "ok" if text.strip() else "empty"


@dataclass(frozen=True)
class _Usage:
    """Each delivered output's share of a request's tokens and cost."""

    prompt_tokens: list[int | None]
    completion_tokens: list[int | None]
    cost_usd: float | None

    @classmethod
    def of(
        cls, response: Any, route: Route, delivered: int, asked: int, prices: Prices | None = None
    ) -> _Usage:
        usage = getattr(response, "usage", None)
        prompt = getattr(usage, "prompt_tokens", None)
        completion = getattr(usage, "completion_tokens", None)
        if asked > 1 and not route.usage_sums_choices:
            completion = None
        cost = None if route.is_local else _request_cost(response, prices)
        return cls(
            _split(prompt, delivered),
            _split(completion, delivered),
            None if cost is None else cost / delivered,
        )


def _split(total: int | None, parts: int) -> list[int | None]:
    """``total`` in ``parts`` integers summing to it (the first ones one larger)."""
    if total is None:
        return [None] * parts
    share, extra = divmod(int(total), parts)
    return [share + (1 if k < extra else 0) for k in range(parts)]


def _request_cost(response: Any, prices: Prices | None) -> float | None:
    """The request's cost: at the spec's own prices where it gives them (from the answer's
    usage), else litellm's."""
    if prices is not None and prices.own:
        usage = getattr(response, "usage", None)
        return priced_cost(
            prices,
            getattr(usage, "prompt_tokens", None),
            getattr(usage, "completion_tokens", None),
        )
    return _cost(response)


def _cost(response: Any) -> float | None:
    """litellm's cost of the request, or None where it knows no price for the model.

    litellm prices every response it returns (``_hidden_params["response_cost"]``); asking it
    again with ``completion_cost`` after it found no price would only repeat the failed lookup
    (a tenth of the sampler's CPU per request for an unpriced model).
    """
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    return None if cost is None else float(cost)


def _model_iv(model: object) -> None:
    if not isinstance(model, ModelSpec):
        raise TypeError(f"model: expected a dbpa.specs.ModelSpec, got {type(model).__name__}")


def _messages_iv(messages: Sequence[Message]) -> list[dict[str, str]]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise TypeError(f"messages: expected a sequence of Message, got {type(messages).__name__}")
    if not messages:
        raise ValueError("messages: empty; give at least one Message")
    for k, message in enumerate(messages):
        if not isinstance(message, Message):
            raise TypeError(
                f"messages[{k}]: expected a dbpa.specs.Message, got {type(message).__name__}"
            )
    return [m.model_dump() for m in messages]


def _indices_iv(indices: Iterable[int]) -> list[int]:
    if isinstance(indices, (str, bytes)):
        raise TypeError("indices: expected integers, got a string")
    seen: set[int] = set()
    for value in indices:
        if isinstance(value, bool):
            raise TypeError(f"indices: expected integers, got {value!r}")
        try:
            i = operator.index(value)
        except TypeError:
            raise TypeError(
                f"indices: expected integers, got {value!r} ({type(value).__name__})"
            ) from None
        if i < 0:
            raise ValueError(f"indices: {i} is negative; output indices start at 0")
        if i in seen:
            raise ValueError(f"indices: {i} appears twice")
        seen.add(i)
    return sorted(seen)


def _seed_iv(seed: int) -> int:
    if isinstance(seed, bool):
        raise TypeError(f"seed: expected an integer, got {seed!r}")
    try:
        return operator.index(seed)
    except TypeError:
        raise TypeError(f"seed: expected an integer, got {type(seed).__name__}") from None
