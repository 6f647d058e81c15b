"""One background event loop per process for the blocking API.

``asyncio.run`` per call would give litellm a new loop each time (its cached clients and
logging worker are bound to a loop and complain when it changes); one long-lived loop keeps
connection pools warm and lets blocking callers in many threads share the in-flight bounds.
The loop runs in a daemon thread and is wound down at interpreter exit.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_SHUTDOWN_TIMEOUT_S = 5.0

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()
_stopped: list[bool] = []
"""Non-empty once :func:`stop_requests` ran: the process is ending."""


def submit(coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
    """Run ``coro`` on the background loop (started on first use); once the process is
    stopping (:func:`stop_requests`), a future cancelled at once instead."""
    if _stopped:
        coro.close()
        cancelled: concurrent.futures.Future[T] = concurrent.futures.Future()
        cancelled.cancel()
        return cancelled
    return asyncio.run_coroutine_threadsafe(coro, _background_loop())


def stop_requests() -> None:
    """The process is ending (a signal): requests not yet sent are not sent, and no new
    work starts on the loop; requests in flight finish and deliver their outputs (they are
    paid for, and a re-run must not ask them again). Takes no lock: a signal handler may
    call it."""
    _stopped.append(True)


def allow_requests() -> None:
    """Undo :func:`stop_requests` once the run it stopped has ended (its sampling joined), for
    a new run in the same process (a library caller's, after a Ctrl-C). Never at a run's
    start: a stop made before it (a signal during ``dbpa run``'s head start) must hold."""
    _stopped.clear()


def stopping() -> bool:
    """Whether :func:`stop_requests` ran in this process."""
    return bool(_stopped)


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="dbpa-llm-loop", daemon=True)
            _thread.start()
            atexit.register(_shutdown)
        return _loop


def _shutdown() -> None:
    """Cancel what still runs on the loop (litellm's logging worker), stop and close it."""
    global _loop, _thread
    with _lock:
        loop, thread, _loop, _thread = _loop, _thread, None, None
    if loop is None or thread is None:
        return
    # A wedged task may outlive the timeout: the daemon thread dies with the process anyway.
    with contextlib.suppress(concurrent.futures.TimeoutError, RuntimeError):
        asyncio.run_coroutine_threadsafe(_cancel_others(), loop).result(_SHUTDOWN_TIMEOUT_S)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(_SHUTDOWN_TIMEOUT_S)
    if not thread.is_alive():
        loop.close()


async def _cancel_others() -> None:
    others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)
