"""Stopping ``dbpa run`` by signal, never inside the import machinery.

Python runs a signal's handler in the main thread between two bytecodes, wherever it is. An
exception raised there while the main thread runs ``importlib``'s own code (``dbpa run``
imports Prefect while its head start samples) can leave an import lock held: the sampling
threads, which import as they go, then wait forever, and so does the exit that waits for
them (measured: a SIGTERM 7 s into a run hung it). So a signal that arrives there is
delivered again a moment later, once that code has moved on; anywhere else, a module's own
code included (the exception then unwinds through importlib's ``with`` blocks, which release
their locks), it stops the run at once, as before.
"""

from __future__ import annotations

import functools
import queue
import signal
import threading
import time
from types import FrameType

RETRY_S = 0.05
"""How long a signal that arrived in importlib's code waits before it is delivered again."""


def stop_outside_imports() -> None:
    """SIGTERM ends the run with exit 128 + 15 (through every ``finally`` and exit hook, as
    Ctrl-C does); SIGINT raises ``KeyboardInterrupt`` unless it is ignored (a background
    job). Neither acts inside importlib's own code. Call from the main thread."""
    signal.signal(signal.SIGTERM, _stop)
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _stop)
    _later()  # its thread started now, not in a handler


def _stop(signum: int, frame: FrameType | None) -> None:
    if _in_import_machinery(frame):
        _later().put(signum)  # SimpleQueue.put is safe in a handler
        return
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise SystemExit(128 + signum)


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
