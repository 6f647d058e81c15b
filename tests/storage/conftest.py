"""A fresh store per test (on a DuckDB file and on a PostgreSQL database), small records to
write into it, damaged records, and a second process that holds a record while it writes it."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from dbpa.analysis import PerturbationTestRecord
from dbpa.arms import Arm
from dbpa.specs import Generation, Message, ModelSpec
from storage import Store, export_sql, sidecar_path


def make_arm(prompt: str = "hello", epoch: str = "0") -> Arm:
    return Arm.of(ModelSpec(model="openai/m"), [Message(role="user", content=prompt)], epoch)


def make_gen(i: int, text: str | None = None) -> Generation:
    return Generation(i, text or f"text {i}", "ok", "stop", 5, 7, 0.001, 0.2, 100 + i, f"r{i}")


def make_record(
    test_id: str = "t1", arm_a: str = "a", arm_b: str = "b", p: float = 0.01
) -> PerturbationTestRecord:
    return PerturbationTestRecord(
        test_id,
        arm_a,
        arm_b,
        "emb",
        "cosine",
        "jsd",
        {"bins": 30},
        100,
        1,
        0.3,
        p,
        0.1,
        0.05,
        0.2,
        4.0,
        100,
        False,
        5,
        5,
        np.linspace(0, 1, 100),
    )


def count(store: Store, table: str) -> int:
    """Rows of an exportable table."""
    return len(store._df(export_sql(table, store.schema_version)))


ENGINES = ("duckdb", "postgresql")
"""The kinds of record every test of the record's behaviour runs on."""
FILE_ONLY = "file_only"
"""Marker of a test about the DuckDB file itself (its path, damage, the process holding it,
its reader server): skipped on PostgreSQL with the marker's reason."""


def postgres_url(server: Any, dbname: str) -> str:
    """The URL of ``dbname`` on ``server`` (the password goes in PGPASSWORD, never here)."""
    return f"postgresql://{server.user}@{server.host}:{server.port}/{dbname}"


@pytest.fixture(params=ENGINES)
def target(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> str | Path:
    """Where a fresh record goes: a DuckDB file, or a new database on this process's
    throwaway PostgreSQL server (with PGPASSWORD set for libpq)."""
    if request.param == "duckdb":
        return tmp_path / "audit.duckdb"
    marker = request.node.get_closest_marker(FILE_ONLY)
    if marker is not None:
        pytest.skip(f"about the DuckDB file: {marker.args[0]}")
    server = request.getfixturevalue("postgres")
    monkeypatch.setenv("PGPASSWORD", server.password)
    return postgres_url(server, server.create_database())


@pytest.fixture
def store(target: str | Path) -> Iterator[Store]:
    with Store(target) as s:
        yield s


def engine_error(store: Store) -> type[Exception]:
    """The base class of the errors the store's engine raises."""
    if store.postgres:
        import psycopg

        return psycopg.Error
    return duckdb.Error


# ---------------------------------------------------------------------- damaged records

BLOCK = 262144
"""DuckDB's block size; blocks start after three 4 KiB headers."""
HEADERS = 3 * 4096


def small_record(path: Path) -> Path:
    """A small real record (arms, 6,000 outputs and their vectors, a test, a completed run),
    written through ``Store`` and checkpointed (about 4 MB: the texts fill several blocks)."""
    from dbpa.specs import EmbeddingBatch, text_hash

    rng = np.random.default_rng(0)
    with Store(path, serve_readers=False) as store:
        original, perturbed = make_arm("original"), make_arm("perturbed")
        store.add_arms([original, perturbed])
        for arm in (original, perturbed):
            texts = [f"{arm.arm_id} {i} {rng.bytes(120).hex()}" for i in range(3000)]
            rows = pa.Table.from_pylist(
                [
                    {"arm_id": arm.arm_id, "idx": i, "text": t, "text_hash": text_hash(t)}
                    | {"status": "ok", "seed": i}
                    for i, t in enumerate(texts)
                ]
            )
            with store._transaction() as con:
                store._insert(con, "samples", rows)
            vectors = rng.normal(size=(len(texts), 32)).astype(np.float32)
            batch = EmbeddingBatch(vectors, np.zeros(len(texts), dtype=bool))
            store.add_embeddings("emb", [text_hash(t) for t in texts], batch)
        store.add_tests([make_record("t1", original.arm_id, perturbed.arm_id)])
        store.start_run(
            "done",
            audit="a",
            config={"k": 4},
            config_hash="h",
            epoch="0",
            flow_run_id=None,
            versions={},
        )
        store.add_family("done", [family_row("p", original.arm_id, perturbed.arm_id, "t1")])
        store.finish_run("done", "completed")
        store._rows("CHECKPOINT")
    return path


@pytest.fixture(scope="session")
def sound_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small real record, to be copied (and damaged) by the tests."""
    return small_record(tmp_path_factory.mktemp("sound") / "record.duckdb")


def family_row(
    perturbation: str, original: str, perturbed: str, test_id: str, **fields: Any
) -> dict[str, Any]:
    """A row of a run's family (``fields`` override its other columns)."""
    return (
        dict(
            family="m",
            perturbation_id=perturbation,
            position=0 if perturbation == "p" else 1,
            kind="persona",
            label="target",
            description=f"{perturbation} persona",
            original_arm=original,
            perturbed_arm=perturbed,
            test_id=test_id,
        )
        | fields
    )


def data_block_offset(path: Path) -> int:
    """Where the middle one of the blocks of the outputs' texts starts in the file."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        (blocks,) = con.execute(
            "SELECT list(DISTINCT block_id ORDER BY block_id) FROM pragma_storage_info('samples') "
            "WHERE column_name = 'text' AND block_id >= 0"
        ).fetchone()
    finally:
        con.close()
    return HEADERS + blocks[len(blocks) // 2] * BLOCK


def _overwrite(path: Path, offset: int, size: int) -> None:
    with path.open("r+b") as f:
        f.seek(offset)
        f.write(np.random.default_rng(1).bytes(size))


def _sqlite(path: Path) -> None:
    path.unlink()
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE runs (run_id TEXT)")
    con.commit()
    con.close()


def _newer(path: Path) -> None:
    with Store(path, serve_readers=False) as store, store._transaction() as con:
        con.execute("INSERT INTO schema_migrations (version, description) VALUES (99, 'future')")


DAMAGES: dict[str, Callable[[Path], None]] = {
    "truncated": lambda p: os.truncate(p, data_block_offset(p) + 4096),
    "garbage-in-the-middle": lambda p: _overwrite(p, data_block_offset(p) + 4096, 65536),
    "main-header": lambda p: _overwrite(p, 0, 4096),
    "database-headers": lambda p: _overwrite(p, 4096, 8192),
    "text-file": lambda p: p.write_text("run_id,status\nr1,completed\n"),
    "sqlite-file": _sqlite,
    "directory": lambda p: (p.unlink(), p.mkdir()),
    "newer-schema": _newer,
}
"""Ways a record's file can be unusable, each applied to a small real record."""


def damaged_record(sound: Path, directory: Path, kind: str) -> Path:
    """A copy of the small real record ``sound``, damaged the ``kind`` way."""
    path = directory / f"{kind}.duckdb"
    shutil.copyfile(sound, path)
    DAMAGES[kind](path)
    return path


def fingerprint(path: Path) -> tuple[str, bool, bool]:
    """The file's bytes (hashed; a directory's listing), and whether a .wal or a sidecar
    exists: what a command must leave as it found it."""
    if path.is_dir():
        content = hashlib.sha256(repr(sorted(os.listdir(path))).encode()).hexdigest()
    else:
        content = hashlib.sha256(path.read_bytes()).hexdigest()
    wal = path.with_name(path.name + ".wal").exists()
    return content, wal, sidecar_path(path).exists()


# ---------------------------------------------------------------------- a record being written

LIVE_RUN = "live"


def write_live_run(store: Store) -> None:
    """A run in progress: 9 of its 12 outputs stored, 1 of its 2 tests."""
    original, first, second = make_arm("live 0"), make_arm("live 1"), make_arm("live 2")
    store.start_run(
        LIVE_RUN,
        audit="a",
        config={"k": 4},
        config_hash="h",
        epoch="0",
        flow_run_id=None,
        versions={},
    )
    store.add_arms([original, first, second])
    store.add_family(
        LIVE_RUN,
        [
            family_row("p", original.arm_id, first.arm_id, "live-t1"),
            family_row("q", original.arm_id, second.arm_id, "live-t2"),
        ],
    )
    for arm, n in ((original, 4), (first, 4), (second, 1)):
        store.add_samples(arm.arm_id, [make_gen(i, f"{arm.arm_id} {i}") for i in range(n)])
    store.add_tests([make_record("live-t1", original.arm_id, first.arm_id)])


@contextmanager
def holding(path: Path, *, seconds: float | None = None) -> Iterator[subprocess.Popen[str]]:
    """A second process that opens ``path`` for writing (as the audit flow does), writes a
    run in progress and holds the record: until the block ends, or for ``seconds``."""
    script = textwrap.dedent(
        f"""
        import sys, time
        import storage
        from tests.storage.conftest import write_live_run
        seconds = {seconds!r}
        with storage.Store({str(path)!r}) as store:
            storage.register(store)
            write_live_run(store)
            print("ready", flush=True)
            if seconds is None:
                sys.stdin.readline()
            else:
                time.sleep(seconds)
            storage.unregister(store)
        """
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", script],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],  # the repository root, so ``tests`` imports
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        yield holder
    finally:
        if holder.poll() is None and seconds is None:
            holder.communicate("\n", timeout=60)
        elif holder.poll() is None:
            holder.wait(timeout=60 + seconds)
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def index_blocks(path: Path) -> list[int]:
    """The blocks in use that hold neither table data nor metadata: the primary keys' indexes."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        ((total, free),) = con.execute(
            "SELECT total_blocks, free_blocks FROM pragma_database_size()"
        ).fetchall()
        metadata = {
            b for (b,) in con.execute("SELECT block_id FROM pragma_metadata_info()").fetchall()
        }
        tables = [t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()]
        data = {
            b
            for t in tables
            for (b,) in con.execute(
                "SELECT DISTINCT block_id FROM pragma_storage_info(?) WHERE block_id >= 0", [t]
            ).fetchall()
        }
    finally:
        con.close()
    assert free == 0, "a freshly checkpointed record has no free blocks"
    return sorted(set(range(total)) - data - metadata)


def overwrite_block(path: Path, block: int) -> None:
    """4 KiB of garbage in ``block``."""
    _overwrite(path, HEADERS + block * BLOCK + 512, 4096)
