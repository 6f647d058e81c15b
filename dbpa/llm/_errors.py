"""Model errors: transient (retried) or permanent (the arm stops), never carrying a key."""

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
    """An error retrying cannot fix: bad key, bad request, unknown model, context too long."""


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
