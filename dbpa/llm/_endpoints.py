"""What the callers of one endpoint in this process have learnt about it, shared by all.

A model's arms sample in many threads and task runs. Two things they learn hold for every
one of them: that the endpoint refuses connections, and that it rejected the key or the
model. So the connect budget (``ModelSpec.connect_budget_s``) runs from the first of a run
of failed connections, whoever made it (a server that is down fails the audit once that
much time has passed, not once per arm or per batch of arms); and once the endpoint said
401, 403 or 404, no request of any arm is sent to it again, each fails at once with that
error (a rejected key costs the requests in flight when the answer came, not one or more
per arm).
"""

from __future__ import annotations

import threading

from ._errors import PermanentModelError

FORGET_AFTER_S = 300.0
"""A failed connection this long after the previous one starts a new outage (nobody tried
in between: a process sampling again later gets the whole budget again); a rejection this
old is checked again with one request."""
ENDPOINT_WIDE = frozenset({401, 403, 404})
"""Statuses that hold for every request to the endpoint with the same key and model: the
key rejected or not allowed, the model unknown (a 400 may be one prompt's fault)."""


class Endpoint:
    """The current outage of one endpoint and its rejection, if any (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: float | None = None
        self._last_failure = 0.0
        self._reported = False
        self._rejection: tuple[PermanentModelError, float] | None = None

    def failed_to_connect(self, now: float) -> float:
        """Record a failed connection at ``now`` (monotonic seconds); how long the endpoint
        has been unreachable (0 for the first failure of an outage)."""
        with self._lock:
            if self._since is None or now - self._last_failure > FORGET_AFTER_S:
                self._since, self._reported = now, False
            self._last_failure = now
            return now - self._since

    def report_once(self) -> bool:
        """True for the first caller of an outage, False after: one warning per outage."""
        with self._lock:
            first, self._reported = not self._reported, True
            return first

    def connected(self) -> None:
        """A request reached the server (whatever it answered): the next failed connection
        starts a new outage."""
        with self._lock:
            self._since = None

    def reject(self, error: PermanentModelError, now: float) -> None:
        """Remember ``error`` when its status holds for the whole endpoint."""
        if error.status_code in ENDPOINT_WIDE:
            with self._lock:
                self._rejection = (error, now)

    def rejection(self, now: float) -> PermanentModelError | None:
        """A fresh copy of the endpoint's rejection, unless none is known or it is older
        than :data:`FORGET_AFTER_S`."""
        with self._lock:
            if self._rejection is None:
                return None
            error, at = self._rejection
            if now - at > FORGET_AFTER_S:
                self._rejection = None
                return None
        return PermanentModelError(error.model, error.reason, error.status_code)


_ENDPOINTS: dict[tuple[str, str | None, str | None], Endpoint] = {}
_ENDPOINTS_LOCK = threading.Lock()


def endpoint_for(model: str, api_base: str | None, api_key_env: str | None) -> Endpoint:
    """The record shared by every caller of ``model`` at ``api_base`` with the key in
    ``$api_key_env`` in this process."""
    with _ENDPOINTS_LOCK:
        return _ENDPOINTS.setdefault((model, api_base, api_key_env), Endpoint())
