"""Progress of long work, reported to whoever listens (the CLI's progress bars, for one).

Producers call ``report(phase, done, total)``; listeners registered with ``listen`` receive
every update. Thread-safe; with no listener a report costs a lock and a loop over nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class Progress:
    """How far one phase of an audit is."""

    phase: str
    """``sample``, ``embed``, ``test``..."""
    done: int
    total: int
    unit: str = ""


Listener = Callable[[Progress], None]
_LISTENERS: list[Listener] = []
_LOCK = threading.Lock()


def report(phase: str, done: int, total: int, unit: str = "") -> None:
    """Tell every listener how far ``phase`` is."""
    update = Progress(phase, done, total, unit)
    with _LOCK:
        listeners = list(_LISTENERS)
    for listener in listeners:
        listener(update)


@contextmanager
def listen(listener: Listener) -> Iterator[None]:
    """Receive progress updates inside the ``with`` block."""
    with _LOCK:
        _LISTENERS.append(listener)
    try:
        yield
    finally:
        with _LOCK:
            _LISTENERS.remove(listener)


class Counter:
    """A thread-safe running count for one phase that reports each increment."""

    def __init__(self, phase: str, total: int, done: int = 0, unit: str = "") -> None:
        self.phase, self.total, self.done, self.unit = phase, total, done, unit
        self._lock = threading.Lock()
        report(phase, done, total, unit)

    def add(self, n: int) -> None:
        """Count ``n`` more units done."""
        with self._lock:
            self.done += n
            done = self.done
        report(self.phase, done, self.total, self.unit)

    def extend(self, more: int, done: int = 0) -> None:
        """``more`` units planned besides those counted, ``done`` of them done already (a
        sequential audit's next look: its bars count every look)."""
        with self._lock:
            self.done += done
            self.total += more
            done, total = self.done, self.total
        report(self.phase, done, total, self.unit)

    def reset(self, done: int, total: int) -> None:
        """Count from ``done`` of ``total`` from now on (the work planned has changed: a
        sequential audit's arms that stop early)."""
        with self._lock:
            self.done, self.total = done, total
        report(self.phase, done, total, self.unit)
