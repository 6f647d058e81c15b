"""The open store of this process, found by path."""

from __future__ import annotations

import pytest

import storage


@pytest.mark.file_only("the flow's tasks find its store by the file's path")
def test_tasks_find_the_store_the_flow_opened(store, tmp_path):
    with pytest.raises(RuntimeError, match="no open store for"):
        storage.get(store.path)
    storage.register(store)
    try:
        assert storage.get(tmp_path / "." / "audit.duckdb") is store
    finally:
        storage.unregister(store)
    with pytest.raises(RuntimeError, match="tasks that write run in the audit flow's process"):
        storage.get(store.path)
