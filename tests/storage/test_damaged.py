"""A damaged, foreign or newer record: refused with what DuckDB reported, never written to;
what can still be read is salvaged."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from storage import DamagedRecordError, Store, ready_to_write, salvage
from tests.storage.conftest import (
    DAMAGES,
    damaged_record,
    fingerprint,
    index_blocks,
    make_arm,
    make_gen,
    overwrite_block,
)

pytestmark = pytest.mark.file_only("damaged files, their salvage and the checks before opening one")


def copy(source, path):
    shutil.copyfile(source, path)
    return path


REFUSED = {
    "truncated": "Could not read enough bytes",
    "garbage-in-the-middle": "Corrupt database file",
    "main-header": "not a valid DuckDB database file",
    "database-headers": "Corrupt database file",
    "text-file": "not a valid DuckDB database file",
    "sqlite-file": "it is a SQLite database",
    "newer-schema": "written by a newer dbpa (schema version 99",
}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_every_open_refuses_it_and_leaves_the_bytes(sound_record, tmp_path, kind):
    path = damaged_record(sound_record, tmp_path, kind)
    before = fingerprint(path)
    opens = [
        lambda: Store(path),
        lambda: Store(path, read_only=True),
        lambda: ready_to_write(path, wait=False, on_wait=print),
    ]
    for open_it in opens:
        with pytest.raises(DamagedRecordError) as caught:
            open_it()
        message = str(caught.value)
        assert str(path) in message
        assert REFUSED[kind] in message
        assert "Nothing was written to it" in message
        assert fingerprint(path) == before
    if kind != "newer-schema":
        assert "start a new record with another --db, or restore a copy" in message


def test_damage_found_in_the_data_names_the_salvage(sound_record, tmp_path):
    path = damaged_record(sound_record, tmp_path, "garbage-in-the-middle")
    with pytest.raises(DamagedRecordError, match="dbpa export --salvage"):
        Store(path)
    opened = damaged_record(sound_record, tmp_path, "main-header")
    with pytest.raises(DamagedRecordError, match="nothing can be exported from it"):
        Store(opened)


def test_a_directory_is_named_as_such(sound_record, tmp_path):
    path = damaged_record(sound_record, tmp_path, "directory")
    before = fingerprint(path)
    for open_it in (lambda: Store(path), lambda: Store(path, read_only=True)):
        with pytest.raises(ValueError, match=f"database {path} is a directory"):
            open_it()
    assert fingerprint(path) == before


def test_a_duckdb_database_of_something_else_is_not_written_to(tmp_path):
    import duckdb

    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE sales (amount INTEGER)")
    con.close()
    before = fingerprint(path)
    with pytest.raises(DamagedRecordError, match="without dbpa's tables"):
        Store(path)
    assert fingerprint(path) == before


def test_a_sound_record_opens_and_an_empty_duckdb_file_becomes_one(sound_record, tmp_path):
    with Store(copy(sound_record, tmp_path / "ok.duckdb"), read_only=True) as store:
        assert list(store.runs().run_id) == ["done"]
    import duckdb

    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    with Store(tmp_path / "empty.duckdb") as store:
        assert store.runs().empty


def test_a_leftover_wal_is_read_without_a_write(sound_record, tmp_path):
    """A writer killed before its checkpoint leaves a .wal: readers see its rows and leave the
    file and the .wal as they are; the next writer replays it."""
    path = copy(sound_record, tmp_path / "wal.duckdb")
    script = textwrap.dedent(
        f"""
        import os
        from storage import Store
        store = Store({str(path)!r}, serve_readers=False)
        store.start_run("killed", audit="a", config={{}}, config_hash="h", epoch="0",
                        flow_run_id=None, versions={{}})
        os._exit(9)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=False)
    wal = path.with_name(path.name + ".wal")
    assert wal.exists()
    before = (fingerprint(path), wal.read_bytes())
    with Store(path, read_only=True) as store:
        assert set(store.runs().run_id) == {"done", "killed"}
    assert (fingerprint(path), wal.read_bytes()) == before
    with Store(path, serve_readers=False) as store:
        assert set(store.runs().run_id) == {"done", "killed"}


def test_a_damaged_wal_is_refused_untouched(sound_record, tmp_path):
    path = copy(sound_record, tmp_path / "wal.duckdb")
    script = textwrap.dedent(
        f"""
        import os
        from storage import Store
        from tests.storage.conftest import make_arm, make_gen
        store = Store({str(path)!r}, serve_readers=False)
        arm = make_arm("late")
        store.add_samples(arm.arm_id, [make_gen(i, "x" * 2000) for i in range(200)])
        os._exit(9)
        """
    )
    subprocess.run([sys.executable, "-c", script], check=False)
    wal = path.with_name(path.name + ".wal")
    size = wal.stat().st_size
    with wal.open("r+b") as f:
        f.seek(size // 2)
        f.write(os.urandom(512))
    before = (fingerprint(path), wal.read_bytes())
    for read_only in (True, False):
        with pytest.raises(DamagedRecordError, match="WAL"):
            Store(path, read_only=read_only)
    assert (fingerprint(path), wal.read_bytes()) == before


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_salvage_exports_what_reads_and_names_what_does_not(sound_record, tmp_path, fmt):
    path = damaged_record(sound_record, tmp_path, "garbage-in-the-middle")
    before = fingerprint(path)
    found = salvage(path, tmp_path / "out", fmt)
    assert fingerprint(path) == before
    assert not found.complete
    by_name = {t.name: t for t in found.tables}
    assert {"runs", "arms", "samples", "embeddings", "tests", "results", "meta"} <= set(by_name)
    lost = [t for t in found.tables if t.problem]
    assert [t.name for t in lost] == ["samples"], lost
    assert "Corrupt database file" in lost[0].problem
    damaged = lost[0]
    assert damaged.total == 6000
    assert 0 < damaged.rows < 6000  # the rest of the table is kept
    runs = by_name["runs"]
    assert runs.problem is None
    assert runs.path == tmp_path / "out" / f"runs.{fmt}"
    read = pd.read_parquet if fmt == "parquet" else pd.read_csv
    assert list(read(runs.path).run_id) == ["done"]
    assert len(read(damaged.path)) == damaged.rows


def test_salvage_of_a_sound_record_is_complete_and_unopenable_files_are_refused(
    sound_record, tmp_path
):
    found = salvage(copy(sound_record, tmp_path / "ok.duckdb"), tmp_path / "out")
    assert found.complete
    assert {t.name: t.rows for t in found.tables}["samples"] == 6000
    for kind in ("main-header", "sqlite-file"):
        path = damaged_record(sound_record, tmp_path, kind)
        before = fingerprint(path)
        with pytest.raises(DamagedRecordError, match="nothing can be exported"):
            salvage(path, tmp_path / kind)
        assert fingerprint(path) == before


def test_every_damage_is_tested():
    assert set(DAMAGES) == set(REFUSED) | {"directory"}


def test_a_damaged_index_is_found_by_the_first_write_that_uses_it_and_not_committed(
    sound_record, tmp_path
):
    """Index blocks are read only when a write uses them: the check before opening cannot see
    them. The write that finds one is not committed, and the file keeps its bytes."""
    arm = make_arm("original")
    found = []
    for block in index_blocks(sound_record):
        path = copy(sound_record, tmp_path / f"index-{block}.duckdb")
        overwrite_block(path, block)
        before = fingerprint(path)
        try:
            with Store(path, serve_readers=False) as store:
                store.add_samples(arm.arm_id, [make_gen(0), make_gen(6000)])
        except DamagedRecordError as error:
            found.append((str(error), fingerprint(path) == before))
    assert len(found) >= 2  # samples' index, and meta's (written when a writer opens)
    for message, unchanged in found:
        assert "Corrupt database file" in message
        assert "A write found it and was not committed" in message
        assert unchanged
