"""A writer of a PostgreSQL record whose connection the server dropped connects again within
the connect budget and replays the write (or read) that failed; a reader does not."""

from __future__ import annotations

import psycopg
import pytest

import storage._core
from storage import RecordUnreachableError, Store

from .conftest import make_arm, postgres_url


def _run(store: Store, run_id: str) -> None:
    store.start_run(
        run_id, audit="a", config={}, config_hash="h", epoch="0", flow_run_id=None, versions={}
    )


def _drop(server, store: Store) -> None:
    """End ``store``'s connection from the server's side, as a failover or a proxy does."""
    (pid,) = store._rows("SELECT pg_backend_pid()")[0]
    with psycopg.connect(server.conninfo(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])


def test_a_writer_goes_on_after_the_server_restarts(postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    url = postgres_url(postgres, postgres.create_database())
    with Store(url) as store:
        _run(store, "live")
        store.add_arms([make_arm("before")])
        postgres.restart()
        store.add_arms([make_arm("after")])  # a write on the dropped connection: replayed
        postgres.restart()
        assert len(store.runs()) == 1  # a read: replayed too
        with Store(url) as other:  # the live run's lock is held again on the new connection
            assert other.mark_interrupted_runs() == 0
        store.finish_run("live", "completed")
        (arms,) = store._rows("SELECT count(*) FROM arms")[0]
        assert arms == 2
        assert store.runs()["status"].tolist() == ["completed"]


def test_a_server_that_does_not_come_back_in_the_budget_fails_the_write(postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    url = postgres_url(postgres, postgres.create_database()) + "?connect_timeout=1"
    tries = []

    def unreachable(*args, **kwargs):
        tries.append(args)
        raise RecordUnreachableError("PostgreSQL at here cannot be reached")

    with Store(url) as store:
        _drop(postgres, store)
        monkeypatch.setattr(storage._core, "connect", unreachable)
        with pytest.raises(RecordUnreachableError, match="cannot be reached"):
            store.add_arms([make_arm()])
        assert len(tries) >= 2  # tried again while the budget lasted, then gave up


def test_a_reader_keeps_its_snapshot_or_fails(postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    url = postgres_url(postgres, postgres.create_database())
    Store(url).close()
    with Store(url, read_only=True) as reader:
        _drop(postgres, reader)
        with pytest.raises(RecordUnreachableError, match="closed the connection"):
            reader.runs()
