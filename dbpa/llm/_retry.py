"""Retries of transient model errors: exponential backoff with full jitter, Retry-After honoured.

Failures to connect are retried for a time (``connect_budget_s``, counted from the first
failed connection to the endpoint by any caller, see ``_endpoints``) rather than a number
of times; other transient errors ``max_retries`` times. An endpoint that rejected the key
or the model is not asked again: the call fails at once with that rejection.
"""

from __future__ import annotations

import email.utils
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

from ._endpoints import Endpoint
from ._errors import (
    PermanentModelError,
    TransientModelError,
    UnreachableModelError,
    connect_failure,
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


@dataclass
class _Attempts:
    """Failures met so far by one call."""

    retries: int = 0
    """Transient failures other than connecting (bounded by ``max_retries``)."""
    connects: int = 0
    """Failed connections (bounded by the connect budget)."""


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
    connect_budget_s: float = 60.0
    """Seconds an endpoint may stay unreachable (since its first failed connection) before
    the call fails with :class:`~dbpa.llm.UnreachableModelError`."""
    address: str | None = None
    """The endpoint, named when it cannot be reached (None: taken from the error)."""
    endpoint: Endpoint = field(default_factory=Endpoint)
    """Shared by every caller of the endpoint (``endpoint_for``): the connect budget and a
    rejection are theirs."""
    warn: Callable[[str], object] | None = None
    """Told once per outage that connections fail and are retried (from the thread or
    event loop of the call)."""
    clock: Callable[[], float] = time.monotonic
    """Seconds, for the connect budget (monotonic; a test's own clock)."""

    async def call_async(
        self,
        fn: Callable[[], Awaitable[T]],
        sleep: Callable[[float], Awaitable[Any]],
    ) -> T:
        attempts = _Attempts()
        while True:
            self.check()
            try:
                result = await fn()
            except Exception as exc:  # classified below, bugs re-raised
                failure = exc
            else:
                self.endpoint.connected()
                return result
            await sleep(self._delay_or_raise(failure, attempts))

    def call(self, fn: Callable[[], T], sleep: Callable[[float], Any] = time.sleep) -> T:
        attempts = _Attempts()
        while True:
            self.check()
            try:
                result = fn()
            except Exception as exc:  # classified below, bugs re-raised
                failure = exc
            else:
                self.endpoint.connected()
                return result
            sleep(self._delay_or_raise(failure, attempts))

    def check(self) -> None:
        """Raise the endpoint's rejection (401, 403, 404), if it has one: a request would
        meet it again. Also for a caller to check just before it sends (after a wait)."""
        if (rejection := self.endpoint.rejection(self.clock())) is not None:
            raise rejection

    def _delay_or_raise(self, exc: Exception, attempts: _Attempts) -> float:
        """The wait before the next attempt, or the error to stop with (raised outside the
        ``except`` so the provider's exception, which may quote the key, is not chained)."""
        if not is_provider_error(exc):
            raise exc
        if (where := connect_failure(exc, self.address)) is not None:
            attempts.connects += 1
            return self._connect_delay(where, attempts.connects)
        self.endpoint.connected()  # the server answered, if not with what we wanted
        reason = describe(exc, self.secrets)
        status = status_of(exc)
        if not is_transient(exc):
            hint = self.auth_hint if status in (401, 403) else ""
            permanent = PermanentModelError(self.model, reason + hint, status)
            self.endpoint.reject(permanent, self.clock())
            raise permanent
        attempts.retries += 1
        if attempts.retries > self.max_retries:
            raise TransientModelError(
                self.model, f"still failing after {self.max_retries} retries: {reason}", status
            )
        return self.policy.delay(attempts.retries, retry_after_s(exc), self.rng)

    def _connect_delay(self, where: str, attempt: int) -> float:
        """The wait before connecting again, within what is left of the budget; past it,
        the error naming ``where`` (``connection refused by ADDRESS``)."""
        budget = self.connect_budget_s
        unreachable = self.endpoint.failed_to_connect(self.clock())
        if unreachable >= budget:
            raise UnreachableModelError(
                self.model, f"{where}; gave up after {budget:g} s (connect_budget_s)"
            )
        if self.warn is not None and self.endpoint.report_once():
            self.warn(
                f"model {self.model!r}: {where}; retrying for up to {budget:g} s (connect_budget_s)"
            )
        return min(self.policy.delay(attempt, None, self.rng), budget - unreachable)
