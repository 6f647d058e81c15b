"""Retries of transient model errors: exponential backoff with full jitter, Retry-After honoured."""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from ._errors import (
    PermanentModelError,
    TransientModelError,
    describe,
    is_provider_error,
    is_transient,
    status_of,
)

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How long to wait before retrying; how often is ``ModelSpec.max_retries``."""

    base_delay_s: float = 0.5
    """Backoff scale: retry r waits uniform(0, min(max_delay_s, base_delay_s * 2**(r-1)))."""
    max_delay_s: float = 30.0
    """Cap of the backoff window."""
    max_retry_after_s: float = 120.0
    """Cap of a provider's Retry-After (a misbehaving server cannot park a run for hours)."""

    def __post_init__(self) -> None:
        for name in ("base_delay_s", "max_delay_s", "max_retry_after_s"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"{name}: must be >= 0, got {value!r}")

    def delay(self, retry: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (1, 2, ...).

        Full jitter; with a Retry-After the wait is at least that long (capped).
        """
        window = min(self.max_delay_s, self.base_delay_s * 2.0 ** (retry - 1))
        backoff = rng.uniform(0.0, window)
        if retry_after is None:
            return backoff
        return min(max(retry_after, backoff), self.max_retry_after_s)


DEFAULT_RETRY = RetryPolicy()


def retry_after_s(exc: BaseException) -> float | None:
    """The wait a provider asked for (``retry-after-ms`` or ``retry-after``: seconds or a date)."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return None
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return max(0.0, float(ms) / 1000.0)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError, AttributeError):
        return None  # unparseable header: plain backoff


@dataclass(frozen=True)
class Retrier:
    """Runs one model call with retries; failures become :class:`~dbpa.llm.ModelError`."""

    model: str
    """Label used in error messages."""
    max_retries: int
    policy: RetryPolicy
    rng: random.Random
    secrets: tuple[str, ...] = ()
    auth_hint: str = ""
    """Appended to 401/403 errors: the name (never the value) of the variable holding the key."""

    async def call_async(
        self,
        fn: Callable[[], Awaitable[T]],
        sleep: Callable[[float], Awaitable[Any]],
    ) -> T:
        retry = 0
        while True:
            try:
                return await fn()
            except Exception as exc:  # classified below, bugs re-raised
                failure = exc
            retry += 1
            await sleep(self._delay_or_raise(failure, retry))

    def call(self, fn: Callable[[], T], sleep: Callable[[float], Any] = time.sleep) -> T:
        retry = 0
        while True:
            try:
                return fn()
            except Exception as exc:  # classified below, bugs re-raised
                failure = exc
            retry += 1
            sleep(self._delay_or_raise(failure, retry))

    def _delay_or_raise(self, exc: Exception, retry: int) -> float:
        """The wait before ``retry``, or the error to stop with (raised outside the ``except``
        so the provider's exception, which may quote the key, is not chained)."""
        if not is_provider_error(exc):
            raise exc
        reason = describe(exc, self.secrets)
        status = status_of(exc)
        if not is_transient(exc):
            hint = self.auth_hint if status in (401, 403) else ""
            raise PermanentModelError(self.model, reason + hint, status)
        if retry > self.max_retries:
            raise TransientModelError(
                self.model, f"still failing after {self.max_retries} retries: {reason}", status
            )
        return self.policy.delay(retry, retry_after_s(exc), self.rng)
