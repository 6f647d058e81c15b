"""Prefect's event and log workers around the end of the temporary server.

Prefect's workers send a flow's events and logs to the server in the background and, at
exit, send what they still hold. ``send_pending`` sends it before the server is stopped.
Where the server ends first (a signal to the whole process group stops it too), each event
left failed with a line of the whole event (5 KB each, eight at a SIGTERM) and each
connection attempt with a 320-character warning: ``ShortFailures`` makes the first such
failure one short line saying the events are dropped and drops the rest, and cuts any other
line of those loggers to ``LONGEST_LINE`` characters.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable

LONGEST_LINE = 200
"""Characters of the longest line of Prefect's workers shown, its prefix included."""
_MESSAGE = LONGEST_LINE - 64
"""Characters of a message: the handler's prefix (time, level, logger) takes the rest."""
LOGGERS = (
    "prefect._internal.concurrency",
    "prefect.events.clients",
    "EventsWorker",
    "APILogWorker",
)
"""Where Prefect's workers report what they could not send (its services, the events client)
and what they still hold ("Still processing items")."""
DROPPED = (
    "Prefect's temporary server has stopped: the flow's events and logs it had not received "
    "are dropped"
)


class ShortFailures(logging.Filter):
    """Prefect's failures to send, once the temporary server has stopped (``stopped()``),
    as one line (the first) and nothing more; any other line of theirs cut to length."""

    def __init__(self, stopped: Callable[[], bool]) -> None:
        super().__init__()
        self.stopped = stopped
        self.told = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING and self.stopped():
            if self.told:
                return False
            self.told = True
            record.msg, record.args, record.exc_info, record.exc_text = DROPPED, None, None, None
            return True
        message = record.getMessage()
        if any(len(line) > _MESSAGE for line in message.splitlines()):
            lines = [_cut(line) for line in message.splitlines()]
            record.msg, record.args = "\n".join(lines), None
        return True


def _cut(line: str) -> str:
    if len(line) <= _MESSAGE:
        return line
    kept = _MESSAGE - 40  # the rest for the note
    return f"{line[:kept]}... ({len(line) - kept:,} characters left out)"


def quiet_failures(stopped: Callable[[], bool]) -> ShortFailures:
    """Install a ``ShortFailures`` on Prefect's workers' loggers (replacing one installed
    before) and return it."""
    shortened = ShortFailures(stopped)
    for name in LOGGERS:
        logger = logging.getLogger(name)
        for old in [f for f in logger.filters if isinstance(f, ShortFailures)]:
            logger.removeFilter(old)
        logger.addFilter(shortened)
    return shortened


def send_pending(timeout: float) -> None:
    """Send the events and logs Prefect's workers still hold, waiting at most ``timeout``
    seconds (the workers stop; the next event or log starts new ones). Nothing to do when
    Prefect's workers were never imported, or from a thread running an event loop."""
    if "prefect.events.worker" not in sys.modules:
        return
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (EventsWorker, APILogWorker):
        worker.drain_all(timeout=timeout, at_exit=False)
