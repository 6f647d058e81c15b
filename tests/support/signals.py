"""Child processes that a test stops by signal, and the processes they leave behind."""

from __future__ import annotations

import signal
from pathlib import Path


def interruptible() -> None:
    """``preexec_fn`` for a child a test sends SIGINT to: SIGINT back to its default action.

    A test run started in the background of a non-interactive shell (``pytest &``) inherits
    SIGINT ignored, and so would its children: Python then installs no KeyboardInterrupt
    handler and the child never sees the test's SIGINT.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid``, read from /proc."""
    found: set[int] = set()
    pending = [pid]
    while pending:
        current = pending.pop()
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.add(child)
                    pending.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def command_line(pid: int) -> list[str]:
    """The arguments ``pid`` was started with ([] once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
    except OSError:
        return []
