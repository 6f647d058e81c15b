"""Stopping ``dbpa run`` (and ``dbpa view``) by signal, never inside the import machinery.

Python runs a signal's handler in the main thread between two bytecodes, wherever it is. An
exception raised there while the main thread runs ``importlib``'s own code (``dbpa run``
imports Prefect while its head start samples) can leave an import lock held: the sampling
threads, which import as they go, then wait forever, and so does the exit that waits for
them (measured: a SIGTERM 7 s into a run hung it). So a signal that arrives there is
delivered again a moment later, once that code has moved on; anywhere else, a module's own
code included (the exception then unwinds through importlib's ``with`` blocks, which release
their locks), it stops the run at once, as before.

The exception a handler raises can also be changed on its way out by C code that calls back
into Python: pydantic-core turned a ``SystemExit`` raised inside Prefect's settings serializer
into a ``PydanticSerializationError``, a ``ValueError``, so the run exited 2 instead of 143
(measured in CI), and it can drop it: pydantic-core printed a ``SystemExit`` raised while it
serialized a ``SecretStr`` ("Exception ignored in") and went on, so the run sampled every
output before it exited 143 (measured in a clean clone). So once a signal has acted, the run
ends by it whatever came out; ``on_stop`` (``dbpa run`` stops the model requests) is what
ends the work on the way: no request is sent, and ``run_prepared`` does not start its flow.
"""

from __future__ import annotations

import contextlib
import functools
import queue
import signal
import threading
import time
from collections.abc import Callable, Iterator
from types import FrameType

RETRY_S = 0.05
"""How long a signal that arrived in importlib's code waits before it is delivered again."""


_acted: list[int] = []
"""The signals whose handler has raised, first first (this process's, reset on entry)."""


@contextlib.contextmanager
def stopped_by_signals(on_stop: Callable[[], None] | None = None) -> Iterator[None]:
    """Within it, SIGTERM ends the run with exit 128 + 15 (through every ``finally`` and exit
    hook, as Ctrl-C does) and SIGINT raises ``KeyboardInterrupt`` unless it is ignored (a
    background job); neither acts inside importlib's own code. Once one has acted, the block
    ends by it, whatever exception it became on the way out, or none. ``on_stop`` runs in
    the handler as a signal acts (it must take no lock the main thread may hold). Main
    thread only."""
    _acted.clear()
    handler = functools.partial(_stop, on_stop=on_stop)
    signal.signal(signal.SIGTERM, handler)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, handler)
    _later()  # its thread started now, not in a handler
    try:
        yield
    except BaseException as error:
        if not _acted or _is_stop(error, _acted[0]):
            raise
        raise _stop_exception(_acted[0]) from error
    if _acted:  # swallowed on the way
        raise _stop_exception(_acted[0])


def _stop(signum: int, frame: FrameType | None, on_stop: Callable[[], None] | None) -> None:
    if _in_import_machinery(frame):
        _later().put(signum)  # SimpleQueue.put is safe in a handler
        return
    _acted.append(signum)
    if on_stop is not None:
        on_stop()
    raise _stop_exception(signum)


def _stop_exception(signum: int) -> BaseException:
    if signum == signal.SIGINT:
        return KeyboardInterrupt()
    return SystemExit(128 + signum)


def _is_stop(error: BaseException, signum: int) -> bool:
    if signum == signal.SIGINT:
        return isinstance(error, KeyboardInterrupt)
    return isinstance(error, SystemExit) and error.code == 128 + signum


@functools.cache
def _later() -> queue.SimpleQueue[int]:
    """The signals to deliver again, once ``RETRY_S`` has passed (one thread per process)."""
    pending: queue.SimpleQueue[int] = queue.SimpleQueue()
    main = threading.get_ident()  # the main thread's: a handler's or the installer's

    def redeliver() -> None:  # a real signal, so that a blocked main thread wakes for it
        while True:
            signum = pending.get()
            time.sleep(RETRY_S)
            signal.pthread_kill(main, signum)

    threading.Thread(target=redeliver, name="dbpa-signals", daemon=True).start()
    return pending


def _in_import_machinery(frame: FrameType | None) -> bool:
    """Whether ``frame``, the one a handler interrupts, is importlib's own code (where an
    exception can fall between a lock's acquire and the block that releases it)."""
    return frame is not None and frame.f_code.co_filename.startswith("<frozen importlib")
