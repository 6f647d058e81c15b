"""The spend cap of a run: what a request may cost is reserved before it is sent.

A :class:`SpendCap` starts at what the run's stored outputs cost already. Before a request
is sent, the most it can cost (its prompt's tokens counted high, ``max_tokens`` per choice,
at the model's prices: :func:`model_prices`) is reserved; once it is answered the
reservation is replaced by its real cost (the reservation itself when the answer carries no
usage). A reservation that would take spent + reserved over the cap is refused, and from
then on every request is (the cap is *closed*): the requests in flight still deliver.
The embedded model costs nothing and is never stopped.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from dbpa.specs import ModelSpec

from ._client import litellm

TOKENS_PER_MESSAGE = 8
"""Tokens a chat template may add around each message (and once to prime the answer);
counted high: no template of the known providers adds more than 4-5."""


@dataclass(frozen=True)
class Prices:
    """A model's USD per token, and the most completion tokens one choice may take."""

    input_per_token: float
    output_per_token: float
    max_tokens: int | None
    """``params.max_tokens`` (or ``max_completion_tokens``), else the price map's limit."""
    own: bool = False
    """The spec's own prices (a cost is then computed from the answer's usage), not the map's."""

    def request_most(self, prompt_tokens: int, n: int) -> float:
        """The most a request of ``n`` choices and ``prompt_tokens`` can cost."""
        if self.max_tokens is None:
            raise UnknownPriceError(
                "nothing bounds the length of an answer; a run with max_cost_usd needs the "
                "model's params.max_tokens"
            )
        return prompt_tokens * self.input_per_token + n * self.max_tokens * self.output_per_token


class UnknownPriceError(ValueError):
    """A capped run of a model whose price (or output limit) is not known."""


class SpendCapReached(Exception):
    """The run's spend cap refused a request: nothing more was sent."""

    def __init__(self, spent: float, cap: float, missing: int | None = None) -> None:
        self.spent, self.cap, self.missing = spent, cap, missing
        super().__init__(self.line())

    def line(self, command: str | None = None) -> str:
        """The one line that says so: spent, cap, outputs missing, how to resume (with
        ``command``, the ``dbpa run`` that does; else the key to raise, as a tick needs)."""
        missing = "" if self.missing is None else f"; {self.missing} output(s) still missing"
        larger = f"max_cost_usd={_round_up(max(2 * self.cap, self.spent + self.cap)):g}"
        resume = (
            f"{command} --set {larger}"
            if command is not None
            else f"{larger} in the config (or its --set / the deployment's overrides)"
        )
        return (
            f"spend cap reached: ${self.spent:.4f} spent of max_cost_usd=${self.cap:g}{missing}"
            f"; every answer is stored; resume with a larger cap: {resume}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.spent, self.cap, self.missing))


def _round_up(value: float) -> float:
    """``value`` up to two significant digits."""
    digits = f"{value:.1e}"
    rounded = float(digits)
    return rounded if rounded >= value else float(f"{rounded + 10 ** (int(digits[-3:]) - 1):.1e}")


def model_prices(model: ModelSpec) -> Prices:
    """The model's prices: its spec's ``input_cost_per_token``/``output_cost_per_token``,
    else litellm's price map (0 for the embedded model); ``UnknownPriceError`` when neither
    has them."""
    params = model.params
    asked = params.get("max_tokens", params.get("max_completion_tokens"))
    if model.is_local:
        return Prices(0.0, 0.0, None)
    info: dict[str, object] = {}
    try:
        info = dict(litellm().get_model_info(model.model))
    except Exception:  # litellm: "This model isn't mapped yet"
        info = {}
    if model.input_cost_per_token is not None and model.output_cost_per_token is not None:
        limit = asked if asked is not None else info.get("max_output_tokens")
        return Prices(model.input_cost_per_token, model.output_cost_per_token, _limit(limit), True)
    elif isinstance(info.get("input_cost_per_token"), int | float) and isinstance(
        info.get("output_cost_per_token"), int | float
    ):
        inp = float(info["input_cost_per_token"])  # type: ignore[arg-type]
        outp = float(info["output_cost_per_token"])  # type: ignore[arg-type]
    else:
        raise UnknownPriceError(
            f"model {model.label!r}: litellm's price map has no price for {model.model!r}; "
            "a run with max_cost_usd needs it: set the model's input_cost_per_token and "
            "output_cost_per_token (USD per token)"
        )
    limit = asked if asked is not None else info.get("max_output_tokens")
    return Prices(inp, outp, _limit(limit))


def _limit(value: object) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 1
    return value if ok else None  # type: ignore[return-value]


def priced_cost(
    prices: Prices, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    """A request's cost at ``prices`` from its usage; None without usage."""
    if prompt_tokens is None or completion_tokens is None:
        return None
    return prompt_tokens * prices.input_per_token + completion_tokens * prices.output_per_token


def prompt_tokens_high(messages: Sequence[dict[str, str]]) -> int:
    """More tokens than any tokenizer makes of ``messages``: byte-level tokenizers emit at
    most one token per byte, plus :data:`TOKENS_PER_MESSAGE` per message and once more."""
    text = sum(
        len(m.get("content", "").encode()) + len(m.get("role", "").encode()) for m in messages
    )
    return text + TOKENS_PER_MESSAGE * (len(messages) + 1)


class SpendCap:
    """A run's spend against ``cap_usd`` (USD), starting at ``spent_usd``; thread-safe."""

    def __init__(self, cap_usd: float, spent_usd: float = 0.0) -> None:
        if not cap_usd > 0:
            raise ValueError(f"max_cost_usd: {cap_usd} is not above 0")
        self.cap = float(cap_usd)
        self._spent = float(spent_usd)
        self._reserved = 0.0
        self._closed = False
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        """USD spent so far (stored outputs and answered requests)."""
        with self._lock:
            return self._spent

    @property
    def reserved(self) -> float:
        """USD reserved by requests in flight."""
        with self._lock:
            return self._reserved

    def add_spent(self, usd: float) -> None:
        """Count ``usd`` spent before (outputs stored by an earlier run of these arms)."""
        with self._lock:
            self._spent += usd

    def reserve(self, usd: float) -> None:
        """Reserve ``usd`` for a request about to be sent; :class:`SpendCapReached` (and the
        cap closed for good) when spent + reserved would pass the cap."""
        with self._lock:
            if self._closed or self._spent + self._reserved + usd > self.cap:
                self._closed = True
                raise SpendCapReached(self._spent + self._reserved, self.cap)
            self._reserved += usd

    def settle(self, reserved: float, cost: float | None) -> None:
        """A request answered: its reservation replaced by its ``cost`` (None: unknown,
        the reservation counts as spent)."""
        with self._lock:
            self._reserved -= reserved
            self._spent += reserved if cost is None else cost

    def release(self, reserved: float) -> None:
        """A request that failed without an answer: its reservation freed."""
        with self._lock:
            self._reserved -= reserved
