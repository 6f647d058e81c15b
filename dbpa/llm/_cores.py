"""The cores free for the embedded model's threads: the cores this process may use, less
those that other work keeps busy (llama.cpp's threads wait on each other at every token, so a
thread given a busy core slows them all: ``_local``)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

BUSY_WINDOW = 0.25
"""Seconds over which ``free_cores`` measures the other processes' CPU use."""


def free_cores(window: float = BUSY_WINDOW) -> int:
    """The cores this process may use less the cores that other work kept busy over the next
    ``window`` seconds (every core's busy time in ``/proc/stat``, less this process's and its
    children's, such as the run's own Prefect server), at least 1; all of them where
    ``/proc/stat`` cannot be read."""
    usable = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    cores = (len(usable) if usable is not None else os.cpu_count()) or 1
    before = _busy_seconds(), own_seconds(), time.monotonic()
    time.sleep(window)
    after = _busy_seconds(), own_seconds(), time.monotonic()
    if before[0] is None or after[0] is None:
        return cores
    elsewhere = (after[0] - before[0] - (after[1] - before[1])) / (after[2] - before[2])
    return cores_left(cores, elsewhere)


def cores_left(cores: int, busy_elsewhere: float) -> int:
    """``cores`` less ``busy_elsewhere`` cores' worth of other work, rounded to the nearest
    core (a core busy half the time or more is taken), at least 1."""
    return max(1, cores - math.floor(max(busy_elsewhere, 0.0) + 0.5))


def _busy_seconds() -> float | None:
    """CPU seconds every core has spent busy since boot (``/proc/stat``: all but idle and
    iowait), or None where it cannot be read."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    ticks = [int(x) for x in fields[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """CPU seconds of this process and of its living descendants (``/proc``; this process
    alone where the children cannot be listed)."""
    seconds, tick = time.process_time(), os.sysconf("SC_CLK_TCK")
    pending = [os.getpid()]
    while pending:
        pid = pending.pop()
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                continue
            for child in children:
                try:
                    stat = Path(f"/proc/{child}/stat").read_text()
                except OSError:
                    continue
                fields = stat.rsplit(")", 1)[1].split()  # past the command's name
                seconds += (int(fields[11]) + int(fields[12])) / tick
                pending.append(child)
    return seconds
