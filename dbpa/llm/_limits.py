"""Process-wide bounds on requests in flight, per (model, api_base).

Arms of one model share a bound whichever event loop or thread samples them: the counter
is guarded by a thread lock and waiters are woken on their own loop. Each caller brings
its own limit (``ModelSpec.max_concurrency``): a request starts only while fewer than that
many requests to the same endpoint are in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from dbpa.specs import ModelSpec


@dataclass(eq=False)
class _Waiter:
    limit: int
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = field(default=False)


class InFlightLimit:
    """A counter of requests in flight with FIFO waiters, usable from any event loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        self._waiters: deque[_Waiter] = deque()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @contextlib.asynccontextmanager
    async def slot(self, limit: int) -> AsyncIterator[None]:
        """Hold one of at most ``limit`` places for the duration of the block."""
        await self._acquire(limit)
        try:
            yield
        finally:
            self._release()

    async def _acquire(self, limit: int) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            # Waiters left in the queue all have limit <= in_flight (releases wake every
            # eligible one), so a newcomer below its own limit overtakes nobody.
            if self._in_flight < limit:
                self._in_flight += 1
                return
            waiter = _Waiter(limit, loop, loop.create_future())
            self._waiters.append(waiter)
        try:
            await waiter.future
        except asyncio.CancelledError:
            with self._lock:
                if waiter.granted:
                    self._in_flight -= 1
                    self._wake_locked()
                else:
                    self._waiters.remove(waiter)
            raise

    def _release(self) -> None:
        with self._lock:
            self._in_flight -= 1
            self._wake_locked()

    def _wake_locked(self) -> None:
        current = asyncio.get_running_loop()  # releases and cancellations run on a loop
        for waiter in list(self._waiters):
            if self._in_flight >= waiter.limit:
                continue
            self._waiters.remove(waiter)
            try:
                if waiter.loop is current:  # no self-pipe write: the common case, and cheaper
                    waiter.loop.call_soon(_resolve, waiter.future)
                else:
                    waiter.loop.call_soon_threadsafe(_resolve, waiter.future)
            except RuntimeError:  # its loop is closed: nobody is waiting any more
                continue
            waiter.granted = True
            self._in_flight += 1


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


_LIMITS: dict[tuple[str, str | None], InFlightLimit] = {}
_LIMITS_LOCK = threading.Lock()


def limit_for(model: ModelSpec) -> InFlightLimit:
    """The in-flight counter shared by every arm of ``model.model`` at ``model.api_base``."""
    key = (model.model, model.api_base)
    with _LIMITS_LOCK:
        return _LIMITS.setdefault(key, InFlightLimit())
