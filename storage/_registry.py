"""The open store of this process, found by path.

Prefect task parameters must be hashable plain values, so tasks receive the database
path and look up the ``Store`` that the flow opened in this (the only writing) process.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ._store import Store

_OPEN: dict[Path, Store] = {}
_LOCK = threading.Lock()


def register(store: Store) -> None:
    """Make ``store`` available to tasks running in this process."""
    with _LOCK:
        _OPEN[store.path] = store


def unregister(store: Store) -> None:
    """Forget ``store`` (the flow is done with it)."""
    with _LOCK:
        if _OPEN.get(store.path) is store:
            del _OPEN[store.path]


def get(path: str | Path) -> Store:
    """The store the flow opened for ``path``."""
    key = Path(path).expanduser().resolve()
    with _LOCK:
        store = _OPEN.get(key)
    if store is None:
        raise RuntimeError(
            f"no open store for {key}: tasks that write run in the audit flow's process"
        )
    return store
