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
from collections.abc import Mapping, Sequence
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
    """A spend cap refused a request: nothing more was sent (under a model's own cap:
    nothing more of that model). ``key`` is the config key of the cap reached."""

    def __init__(
        self, spent: float, cap: float, missing: int | None = None, key: str = "max_cost_usd"
    ) -> None:
        self.spent, self.cap, self.missing, self.key = spent, cap, missing, key
        super().__init__(self.line())

    def line(self, command: str | None = None) -> str:
        """The one line that says so: spent, cap, outputs missing, how to resume (with
        ``command``, the ``dbpa run`` that does; else the key to raise, as a tick needs)."""
        missing = "" if self.missing is None else f"; {self.missing} output(s) still missing"
        larger = f"{self.key}={_round_up(max(2 * self.cap, self.spent + self.cap)):g}"
        resume = (
            f"{command} --set {larger}"
            if command is not None
            else f"{larger} in the config (or its --set / the deployment's overrides)"
        )
        return (
            f"spend cap reached: ${self.spent:.4f} spent of {self.key}=${self.cap:g}{missing}"
            f"; every answer is stored; resume with a larger cap: {resume}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.spent, self.cap, self.missing, self.key))


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


@dataclass
class _Ledger:
    """One cap's account: its key in the config, the cap, spent and reserved USD."""

    key: str
    cap: float | None
    spent: float = 0.0
    reserved: float = 0.0
    closed: bool = False

    def refuses(self, usd: float) -> bool:
        return self.cap is not None and (self.closed or self.spent + self.reserved + usd > self.cap)


class SpendCap:
    """A run's spend against ``cap_usd`` (USD; None: the run has no cap of its own),
    starting at ``spent_usd``, and each capped model's against its own cap
    (``model_caps``: label -> (config key, USD)); thread-safe.

    A request reserves on the run's account and on its model's; the first that refuses
    closes: the run's stops every request, a model's that model's only.
    """

    def __init__(
        self,
        cap_usd: float | None,
        spent_usd: float = 0.0,
        model_caps: Mapping[str, tuple[str, float]] | None = None,
    ) -> None:
        for key, usd in [("max_cost_usd", cap_usd), *(model_caps or {}).values()]:
            if usd is not None and not usd > 0:
                raise ValueError(f"{key}: {usd} is not above 0")
        self.cap = None if cap_usd is None else float(cap_usd)
        self._run = _Ledger("max_cost_usd", self.cap, float(spent_usd))
        self._models = {
            label: _Ledger(key, float(usd)) for label, (key, usd) in (model_caps or {}).items()
        }
        self._lock = threading.Lock()

    @property
    def spent(self) -> float:
        """USD spent so far (stored outputs and answered requests)."""
        with self._lock:
            return self._run.spent

    @property
    def reserved(self) -> float:
        """USD reserved by requests in flight."""
        with self._lock:
            return self._run.reserved

    def caps(self, model: str) -> bool:
        """Whether a cap holds the requests of ``model`` (a label)."""
        return self.cap is not None or model in self._models

    def add_spent(self, usd: float, model: str | None = None) -> None:
        """Count ``usd`` spent before (outputs stored by an earlier run of these arms), by
        ``model`` (a label) when given."""
        with self._lock:
            for ledger in self._ledgers(model):
                ledger.spent += usd

    def reserve(self, usd: float, model: str | None = None) -> None:
        """Reserve ``usd`` for a request of ``model`` about to be sent;
        :class:`SpendCapReached` (and the refusing cap closed for good) when spent + reserved
        would pass the run's cap or the model's."""
        with self._lock:
            ledgers = self._ledgers(model)
            for ledger in ledgers:
                if ledger.cap is not None and ledger.refuses(usd):
                    ledger.closed = True
                    used = ledger.spent + ledger.reserved
                    raise SpendCapReached(used, ledger.cap, key=ledger.key)
            for ledger in ledgers:
                ledger.reserved += usd

    def hold(self, usd: float, model: str | None = None) -> None:
        """Count ``usd`` as reserved whatever the cap says: requests already in flight
        (provider batches an earlier run of these arms created)."""
        with self._lock:
            for ledger in self._ledgers(model):
                ledger.reserved += usd

    def settle(self, reserved: float, cost: float | None, model: str | None = None) -> None:
        """A request answered: its reservation replaced by its ``cost`` (None: unknown,
        the reservation counts as spent)."""
        with self._lock:
            for ledger in self._ledgers(model):
                ledger.reserved -= reserved
                ledger.spent += reserved if cost is None else cost

    def release(self, reserved: float, model: str | None = None) -> None:
        """A request that failed without an answer: its reservation freed."""
        with self._lock:
            for ledger in self._ledgers(model):
                ledger.reserved -= reserved

    def reached(self, refused: SpendCapReached, missing: int) -> SpendCapReached:
        """``refused`` again, with the cap's spend now and the outputs still ``missing``."""
        with self._lock:
            ledger = next(
                (x for x in [self._run, *self._models.values()] if x.key == refused.key),
                None,
            )
            spent = refused.spent if ledger is None else ledger.spent
        return SpendCapReached(spent, refused.cap, missing, refused.key)

    def _ledgers(self, model: str | None) -> list[_Ledger]:
        own = self._models.get(model) if model is not None else None
        return [self._run] + ([own] if own is not None else [])
