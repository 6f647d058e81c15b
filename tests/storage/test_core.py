"""The connection core: migrations, transactions, one writer, threads."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import duckdb
import pytest

from dbpa.analysis import Decision
from storage import MIGRATIONS, DatabaseInUseError, Store
from tests.storage.conftest import count, engine_error, make_arm, make_gen


def test_migrations_apply_once_and_the_database_keeps_its_id(target):
    path = target
    with Store(path) as s:
        first_id = s.database_id
        assert s.schema_version == MIGRATIONS[-1][0]
    with Store(path) as s:
        assert s.database_id == first_id
        versions = s._rows("SELECT version FROM schema_migrations")
    assert versions == [(v,) for v, _, _ in MIGRATIONS]


def test_failed_transaction_leaves_nothing(store, monkeypatch):
    arm = make_arm()
    bad = make_gen(1)
    object.__setattr__(bad, "index", "not an int")
    with pytest.raises(engine_error(store)):
        store.add_samples(arm.arm_id, [make_gen(0), bad])
    assert store.sample_indices([arm.arm_id]) == {arm.arm_id: set()}


def test_a_failed_insert_raises_its_own_error(store):
    """DuckDB refuses to unregister the inserted rows in the aborted transaction; that
    refusal must not hide why the insert failed (here: a constraint the rows break)."""
    store._connection.execute("ALTER TABLE corrections ALTER COLUMN margin_multiple SET NOT NULL")
    decisions = [Decision("p0", 0.01, 0.02, True, True)]  # no margin: margin_multiple NULL
    broken = duckdb.ConstraintException
    if store.postgres:
        import psycopg

        broken = psycopg.errors.NotNullViolation
    with pytest.raises(broken, match="margin_multiple"):
        store.add_corrections("run", "m", "holm", 0.05, decisions)


def test_threads_share_the_store(store):
    arms = [make_arm(f"p{i}") for i in range(8)]

    def write(arm):
        for i in range(20):
            store.add_samples(arm.arm_id, [make_gen(i)])

    threads = [threading.Thread(target=write, args=(a,)) for a in arms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert count(store, "samples") == 160


@pytest.mark.file_only("DuckDB lets one process write a file; PostgreSQL takes many writers")
def test_a_second_process_gets_a_clear_message(tmp_path):
    path = tmp_path / "busy.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from storage import Store
            s = Store({str(path)!r})
            print("open", flush=True)
            sys.stdin.readline()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(DatabaseInUseError, match=f"database {path} is in use by another run"):
            Store(path)
        with pytest.raises(DatabaseInUseError):
            Store(path, read_only=True)
    finally:
        holder.communicate("\n", timeout=30)


@pytest.mark.file_only("a file that does not exist")
def test_read_only_needs_an_existing_database(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Store(tmp_path / "missing.duckdb", read_only=True)


@pytest.mark.parametrize("read_only", [False, True])
@pytest.mark.file_only("DuckDB's leak report at exit")
def test_a_closed_store_holds_nothing_of_duckdb_at_exit(tmp_path, read_only):
    """A closed store still referenced when the interpreter exits (by a thread that keeps a
    failed flow's frames, as Prefect's log and event workers do) is no leak report."""
    path = tmp_path / "a.duckdb"
    Store(path).close()
    script = textwrap.dedent(
        f"""
        import threading
        from storage import Store

        store = Store({str(path)!r}, read_only={read_only!r})
        store.runs()
        store.close()
        store.close()
        held = threading.Thread(target=lambda s=store: threading.Event().wait(), daemon=True)
        held.start()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "nanobind" not in done.stderr
    assert "leaked" not in done.stderr


def test_a_closed_store_says_so(target):
    store = Store(target)
    store.close()
    with pytest.raises(RuntimeError, match="is closed"):
        store.runs()
