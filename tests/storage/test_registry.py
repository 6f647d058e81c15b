"""The open store of this process, found by the record it holds (a file or a database)."""

from __future__ import annotations

import pytest

import storage


def test_tasks_find_the_store_the_flow_opened(store, target):
    with pytest.raises(RuntimeError, match="no open store for"):
        storage.get(target)
    storage.register(store)
    try:
        assert storage.get(target) is store
        if store.postgres:  # the same database however the URL names its user
            assert storage.get(target.replace("postgresql://", "postgres://")) is store
        else:
            assert storage.get(store.path.parent / "." / store.path.name) is store
    finally:
        storage.unregister(store)
    with pytest.raises(RuntimeError, match="tasks that write run in the audit flow's process"):
        storage.get(target)
