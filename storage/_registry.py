"""The open store of this process, found by the record it holds.

Prefect task parameters must be hashable plain values, so tasks receive the record's file
path or URL and look up the ``Store`` that the flow opened in this process, by the record's
identity (``locate``: a file's absolute path, a database's host, port and name).
"""

from __future__ import annotations

import threading
from pathlib import Path

from ._core import locate
from ._store import Store

_OPEN: dict[str, Store] = {}
_LOCK = threading.Lock()


def register(store: Store) -> None:
    """Make ``store`` available to tasks running in this process."""
    with _LOCK:
        _OPEN[store.location] = store


def unregister(store: Store) -> None:
    """Forget ``store`` (the flow is done with it)."""
    with _LOCK:
        if _OPEN.get(store.location) is store:
            del _OPEN[store.location]


def get(target: str | Path) -> Store:
    """The store the flow opened for ``target`` (a file's path or a database's URL)."""
    key = locate(target)
    with _LOCK:
        store = _OPEN.get(key)
    if store is None:
        raise RuntimeError(
            f"no open store for {key}: tasks that write run in the audit flow's process"
        )
    return store
