"""``copy_record``: a record copied into another, a file into a PostgreSQL database and back
(issue 50): every row of every table, nothing twice, resumed after a stop, never overwriting."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from storage import (
    MIGRATIONS,
    CopyConflictError,
    CopyInputError,
    DamagedRecordError,
    Store,
    TableCopy,
    copy_record,
    record_layout,
)
from storage._schema import MONITOR
from tests.storage.conftest import DAMAGES, make_record, postgres_url
from tests.storage.test_engines import _read, _same, _write


def _tables(store: Store) -> dict[str, Any]:
    """Every table of the record but its identity, whole (times of writing too), in key
    order."""
    layout = record_layout()
    return {
        table: store._df(f"SELECT * FROM {table} ORDER BY {', '.join(layout.primary_keys[table])}")
        for table in layout.tables
        if table != "meta"
    }


def _count(tables: dict[str, Any]) -> int:
    return sum(len(frame) for frame in tables.values())


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, list[str]]:
    """A small record of every kind in a file; with its arms' ids."""
    path = tmp_path / "source.duckdb"
    with Store(path, serve_readers=False) as store:
        ids = _write(store)
    return path, ids


@pytest.fixture
def pg_url(postgres: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new empty database on the throwaway server (PGPASSWORD set)."""
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    return postgres_url(postgres, postgres.create_database())


def test_a_copy_holds_every_row_and_a_second_copy_copies_none(source, target):
    path, _ = source
    with Store(path, read_only=True) as store:
        original = _tables(store)
    first = copy_record(path, target, batch_rows=4)
    assert first.copied == _count(original) > 20
    assert first.skipped == 0
    assert {t.table for t in first.tables} == set(original)
    assert all(t.finished for t in first.tables)
    with Store(target, read_only=True) as store:
        for table, frame in _tables(store).items():
            _same(original[table], frame, table)
    again = copy_record(path, target, batch_rows=4)
    assert (again.copied, again.skipped) == (0, _count(original))


def test_a_file_copied_into_postgresql_and_back_reads_as_the_original(source, pg_url, tmp_path):
    path, ids = source
    back = tmp_path / "back.duckdb"
    copy_record(path, pg_url)

    def stop_in_samples(step: TableCopy) -> None:
        if step.table == "samples":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_record(pg_url, back, batch_rows=2, progress=stop_in_samples)
    assert copy_record(pg_url, back, batch_rows=2).skipped == 3 + 2  # the arms, a batch
    assert copy_record(pg_url, back).copied == 0
    with Store(path, read_only=True) as store:
        tables, read = _tables(store), _read(store, ids)
    with Store(back, read_only=True) as store:
        for table, frame in _tables(store).items():
            _same(tables[table], frame, table)
        for what, value in _read(store, ids).items():
            _same(read[what], value, what)


def test_a_copy_stopped_after_some_batches_completes_when_run_again(source, target):
    path, _ = source
    with Store(path, read_only=True) as store:
        original = _tables(store)
    seen: list[TableCopy] = []

    def stop_after_five(step: TableCopy) -> None:
        seen.append(step)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        copy_record(path, target, batch_rows=3, progress=stop_after_five)
    written = seen[-1].copied + sum(s.copied for s in seen[:-1] if s.finished)
    assert 0 < written < _count(original)
    rest = copy_record(path, target, batch_rows=3)
    assert rest.copied == _count(original) - written
    assert rest.skipped == written
    with Store(target, read_only=True) as store:
        for table, frame in _tables(store).items():
            _same(original[table], frame, table)


def test_progress_reports_each_batch_and_each_table_once_finished(source, tmp_path):
    path, _ = source
    steps: list[TableCopy] = []
    done = copy_record(path, tmp_path / "copy.duckdb", batch_rows=5, progress=steps.append)
    finished = [s for s in steps if s.finished]
    assert finished == list(done.tables)
    samples = [s for s in steps if s.table == "samples"]
    assert [s.copied for s in samples] == [5, 10, 15, 18, 18]  # 3 arms of 6 outputs


def test_a_target_with_another_row_under_the_same_key_is_refused_untouched(source, target):
    path, ids = source
    copy_record(path, target)
    with Store(target, serve_readers=False) as store:
        with store._transaction() as con:
            con.execute("UPDATE samples SET text = 'other' WHERE arm_id = ? AND idx = 4", [ids[0]])
        before = _tables(store)
    with pytest.raises(CopyConflictError) as raised:
        copy_record(path, target)
    message = str(raised.value)
    assert (
        f"table samples: the target already holds a different row for (arm_id={ids[0]!r}, idx=4)"
        in message
    )
    assert "(its text differs)" in message
    with Store(target, read_only=True) as store:
        after = _tables(store)
        for table, frame in before.items():
            _same(frame, after[table], table)


def test_a_row_with_nan_is_the_same_row_when_copied_again(tmp_path, target):
    path = tmp_path / "nan.duckdb"
    nan = float("nan")
    record = dataclasses.replace(
        make_record("t1"), z=nan, null_distribution=np.array([nan, 0.5, nan])
    )
    with Store(path, serve_readers=False) as store:
        store.add_tests([record])
    assert copy_record(path, target).copied == 1
    again = copy_record(path, target)
    assert (again.copied, again.skipped) == (0, 1)
    with Store(target, read_only=True) as store:
        assert np.isnan(store.tests(["t1"]).z[0])


def test_a_row_written_at_another_time_is_the_same_row(source, target):
    path, ids = source
    copy_record(path, target)
    later = "created_at + INTERVAL '1 hour'"
    with Store(target, serve_readers=False) as store:
        with store._transaction() as con:
            con.execute(f"UPDATE samples SET created_at = {later} WHERE arm_id = ?", [ids[0]])
            con.execute(f"UPDATE arms SET created_at = {later}")
            con.execute("UPDATE runs SET started_at = started_at - INTERVAL '1 day'")
        before = _tables(store)
    again = copy_record(path, target)
    assert again.copied == 0
    with Store(target, read_only=True) as store:
        after = _tables(store)
        for table, frame in before.items():
            _same(frame, after[table], table)


def _older(path: Path, version: int) -> None:
    """Make the record at ``path`` one of schema ``version``: what later migrations added
    dropped (from the migrations' own layout)."""
    layout = record_layout()
    created = {t: min(c.migration for c in layout.columns if c.table == t) for t in layout.tables}
    with duckdb.connect(str(path)) as con:
        for table in layout.tables:
            if created[table] > version:
                con.execute(f"DROP TABLE {table}")
                continue
            for column in layout.columns:
                if column.table == table and column.migration > version:
                    con.execute(f"ALTER TABLE {table} DROP COLUMN {column.name}")
        con.execute("DELETE FROM schema_migrations WHERE version > ?", [version])


def test_a_record_of_an_older_schema_is_copied_into_the_current_one(source, target):
    path, _ = source
    _older(path, MONITOR)
    with Store(path, read_only=True) as store:
        assert store.schema_version == MONITOR
        original = _tables_of(store, MONITOR)
    done = copy_record(path, target)
    assert done.schema_version == MONITOR
    assert "set_prompts" not in {t.table for t in done.tables}
    with Store(target, read_only=True) as store:
        assert store.schema_version == MIGRATIONS[-1][0]
        for table, frame in _tables_of(store, MONITOR).items():
            _same(original[table], frame, table)
        assert store._rows("SELECT count(*) FROM tests WHERE n_prompts IS NOT NULL") == [(0,)]
    assert copy_record(path, target).copied == 0


def _tables_of(store: Store, version: int) -> dict[str, Any]:
    """``_tables`` with the columns of schema ``version`` only."""
    layout = record_layout()
    found = {}
    for table in layout.tables:
        names = [c.name for c in layout.columns if c.table == table and c.migration <= version]
        if table != "meta" and names:
            key = ", ".join(layout.primary_keys[table])
            found[table] = store._df(f"SELECT {', '.join(names)} FROM {table} ORDER BY {key}")
    return found


def test_bad_sources_and_targets_are_refused_naming_which(source, tmp_path):
    path, _ = source
    cases = [
        ("source", "does not exist", tmp_path / "missing.duckdb", tmp_path / "t.duckdb"),
        ("source", "is a directory", tmp_path, tmp_path / "t.duckdb"),
        ("target", "is a directory", path, tmp_path),
        ("target", "is the source itself", path, tmp_path / ".." / tmp_path.name / path.name),
        ("source", "must not hold the password", "postgresql://u:s3cret@h:5/d", path),
        ("target", "must not hold the password", path, "postgres://u:s3cret@h/d"),
        ("target", "is the source itself", "postgresql://u@h:5/d", "postgresql://v@h:5/d"),
    ]
    for argument, problem, src, dst in cases:
        with pytest.raises(CopyInputError, match=problem) as raised:
            copy_record(src, dst)
        assert raised.value.argument == argument
        assert str(raised.value).startswith(f"{argument}: "), raised.value
        assert "s3cret" not in str(raised.value)
    assert not (tmp_path / "t.duckdb").exists()
    with pytest.raises(ValueError, match=r"^batch_rows: "):
        copy_record(path, tmp_path / "t.duckdb", batch_rows=0)


def test_a_record_of_a_newer_dbpa_is_refused_either_way(source, pg_url, tmp_path):
    path, _ = source
    DAMAGES["newer-schema"](path)
    with pytest.raises(DamagedRecordError, match="newer dbpa"):
        copy_record(path, pg_url)
    newer = tmp_path / "fresh.duckdb"
    Store(newer, serve_readers=False).close()
    with Store(pg_url, serve_readers=False) as store, store._transaction() as con:
        con.execute("INSERT INTO schema_migrations (version, description) VALUES (99, 'x')")
    for src, dst in ((pg_url, newer), (newer, pg_url)):
        with pytest.raises(DamagedRecordError, match=r"newer dbpa \(schema version 99"):
            copy_record(src, dst)
    with Store(newer, read_only=True) as store:
        assert store.table("arms").num_rows == 0
