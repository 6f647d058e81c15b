"""Model errors: transient (retried) or permanent (the arm stops), never carrying a key.

A request that could not even connect (the server refuses connections, or cannot be
reached) is transient but retried for a budget of seconds (``connect_budget_s``) rather than
a number of retries; past it, :class:`UnreachableModelError`.
"""

from __future__ import annotations

import os
import re
from typing import Any

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
_SECRET_ENV = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_MAX_REASON = 600


class ModelError(RuntimeError):
    """A model call failed; the message names the model and the reason."""

    def __init__(self, model: str, reason: str, status_code: int | None = None) -> None:
        super().__init__(f"model {model!r}: {reason}")
        self.model = model
        self.reason = reason
        self.status_code = status_code
        """HTTP status of the provider's answer, when there was one."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.model, self.reason, self.status_code))


class TransientModelError(ModelError):
    """Rate limits, timeouts, connection errors or 5xx that outlasted every retry."""


class PermanentModelError(ModelError):
    """An error retrying cannot fix (bad key, bad request, unknown model, context too long),
    or an endpoint unreachable for the whole connect budget: not retried again, by the
    sampler, its task or the flow."""


class UnreachableModelError(PermanentModelError):
    """No connection to the model's endpoint for its whole ``connect_budget_s``: the message
    names the address and what happened (``connection refused by http://...``)."""


def is_provider_error(exc: BaseException) -> bool:
    """Raised by litellm for a provider's answer (or its absence), not a bug in our code."""
    import openai  # a litellm dependency, imported with it

    return isinstance(exc, openai.OpenAIError)


def is_transient(exc: BaseException) -> bool:
    """Worth retrying: connection errors and timeouts, 408/409/425/429 and every 5xx.

    Malformed JSON from the server reaches us as a 500 (litellm maps it so): transient.
    """
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes litellm.Timeout
        return True
    status = status_of(exc)
    return status is not None and (status in _TRANSIENT_STATUS or status >= 500)


def connect_failure(exc: BaseException, address: str | None) -> str | None:
    """What kept the request from reaching the server at ``address`` (None: the address the
    error names), or None when it got there.

    litellm reports a refused connection as ``InternalServerError`` (HTTP 500) or
    ``APIConnectionError``, with the socket's ``ConnectionRefusedError`` at the end of the
    chain of causes (httpx or aiohttp in between): ``connection refused by ADDRESS``. Any
    other failure to connect (``httpx.ConnectError``: no route, no such host) is ``cannot
    connect to ADDRESS (why)``. Timeouts are not failures to connect: the server may be busy.
    """
    import httpx  # a litellm dependency, imported with it

    chain = _causes(exc)
    where = address or _named_address(chain) or "the provider's endpoint"
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return f"connection refused by {where}"
    if any(isinstance(e, httpx.ConnectError) for e in chain):
        return f"cannot connect to {where} ({chain[-1]})"
    return None


def _named_address(chain: list[BaseException]) -> str | None:
    """``host:port`` that could not be connected to, when an error of the chain says (aiohttp's
    does)."""
    for e in chain:
        host, port = getattr(e, "host", None), getattr(e, "port", None)
        if isinstance(host, str) and isinstance(port, int):
            return f"{host}:{port}"
    return None


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or during, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def describe(exc: BaseException, secrets: tuple[str, ...]) -> str:
    """``Type (HTTP status): message``, with every secret replaced by ``***``, shortened."""
    status = status_of(exc)
    head = type(exc).__name__ + (f" (HTTP {status})" if status is not None else "")
    text = f"{head}: {redact(str(exc), secrets)}"
    return text if len(text) <= _MAX_REASON else text[: _MAX_REASON - 3] + "..."


def redact(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` without any of ``secrets`` (longest first) nor any secret-looking env value."""
    candidates = set(secrets) | {
        value for name, value in os.environ.items() if _SECRET_ENV.search(name) and len(value) >= 8
    }
    for secret in sorted(candidates, key=len, reverse=True):
        if secret:
            text = text.replace(secret, "***")
    return text


class SamplingStopped(RuntimeError):
    """The process is stopping (a signal, :func:`~dbpa.llm.stop_requests`): the arm's
    requests in flight delivered, the others were not sent; a re-run asks for those."""
