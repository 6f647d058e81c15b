"""Prefect's terminal output while ``dbpa run`` is not verbose: errors once, no tracebacks.

Prefect logs a failed flow run's exception with its traceback through its console handler,
after which ``dbpa`` prints the same error as its exit message. While :func:`quiet_console`
is active, the console handler drops the records of errors the command reports itself and
the error lines of task runs whose failures the flow sums up (a failed ``sample`` task run's
final state: the flow logs one line per failed model), and prints the others without their
traceback. Only the terminal changes: Prefect's API log
handler still sends every record, traceback included, to the server and its UI.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _WithoutTraceback(logging.Formatter):
    """A formatter's lines without the traceback or stack of the record."""

    def __init__(self, inner: logging.Formatter | None) -> None:
        super().__init__()
        self._inner = inner or logging.Formatter()

    def format(self, record: logging.LogRecord) -> str:
        # The record goes on to the API handler: restore what this one hides.
        kept = record.exc_info, record.exc_text, record.stack_info
        record.exc_info = record.exc_text = record.stack_info = None
        try:
            return self._inner.format(record)
        finally:
            record.exc_info, record.exc_text, record.stack_info = kept


@contextmanager
def quiet_console(
    reported: Callable[[Exception], bool], summarised: frozenset[str] = frozenset()
) -> Iterator[None]:
    """Inside the block, Prefect's console handler prints no traceback, no record of an
    exception for which ``reported`` is true (the command prints that error itself) and no
    error line of a task run of a task named in ``summarised`` (the flow sums them up)."""
    from prefect.logging.handlers import PrefectConsoleHandler

    def shown(record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, Exception) and reported(error):
            return False
        return not (
            record.levelno >= logging.ERROR and getattr(record, "task_name", None) in summarised
        )

    changed = [
        (handler, handler.formatter)
        for handler in logging.getLogger().handlers
        if isinstance(handler, PrefectConsoleHandler)
    ]
    for handler, formatter in changed:
        handler.setFormatter(_WithoutTraceback(formatter))
        handler.addFilter(shown)
    try:
        yield
    finally:
        for handler, formatter in changed:
            handler.removeFilter(shown)
            handler.setFormatter(formatter)  # type: ignore[arg-type]
