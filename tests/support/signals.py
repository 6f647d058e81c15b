"""Child processes that a test stops with SIGINT, as a user's Ctrl-C does."""

from __future__ import annotations

import signal


def interruptible() -> None:
    """``preexec_fn`` for a child a test sends SIGINT to: SIGINT back to its default action.

    A test run started in the background of a non-interactive shell (``pytest &``) inherits
    SIGINT ignored, and so would its children: Python then installs no KeyboardInterrupt
    handler and the child never sees the test's SIGINT.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
