"""A record copied into another: a file into a PostgreSQL database and back, or a file into
a file (issue 50).

Table by table in the order the migrations create them (``record_layout``), each in batches
in the order of its primary key, each batch one transaction of the target. A row whose key
the target already holds is skipped when it is the same, so a second copy copies nothing and
a copy stopped half-way completes when it is run again; a row the target holds under that key
with other content stops the copy (``CopyConflictError``) rather than being overwritten. A
row's time of writing is no part of its content: the same arm, test or vector written into
two records at different times is the same row (the target keeps its own time), so two
records can be merged into one.

The source is opened read-only (a PostgreSQL one in one snapshot) and never migrated; the
target is migrated to this dbpa's schema, so at least the source's (a record of a newer dbpa
is refused, as on opening it anywhere). Only the
columns the source's schema version has are copied; a later migration's columns stay empty in
the target, as they do in a record that migration upgraded. ``meta`` is left out: it holds
the record's identity (``database_id``), which the target keeps its own of.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from ._core import locate, retried
from ._layout import Layout, record_layout
from ._postgres import check_url, is_postgres_url
from ._store import Store

__all__ = [
    "BATCH_ROWS",
    "CopyConflictError",
    "CopyInputError",
    "RecordCopy",
    "TableCopy",
    "copy_record",
]

BATCH_ROWS = 1000
"""Rows read, compared and written at a time (one transaction of the target each)."""
_IDENTITY = "meta"
"""The table of the record's identity, which a copy does not carry over."""
_WRITTEN_AT = "current_timestamp"
"""The default of the columns of a row's time of writing (``created_at``, a run's
``started_at``): copied, but not compared."""


@dataclass(frozen=True)
class TableCopy:
    """How far the copy of one table has come."""

    table: str
    copied: int
    """Rows written to the target."""
    skipped: int
    """Rows the target already held, the same."""
    finished: bool
    """Whether every row of the table has been read."""


@dataclass(frozen=True)
class RecordCopy:
    """A finished copy: where from and to (as messages show them), and each table's rows."""

    source: str
    target: str
    schema_version: int
    """The source's schema version: the columns copied."""
    tables: tuple[TableCopy, ...]

    @property
    def copied(self) -> int:
        return sum(t.copied for t in self.tables)

    @property
    def skipped(self) -> int:
        return sum(t.skipped for t in self.tables)


class CopyInputError(ValueError):
    """A source or target that cannot be copied from or to; ``argument`` says which."""

    def __init__(self, argument: str, problem: str) -> None:
        super().__init__(f"{argument}: {problem}")
        self.argument = argument
        """``source`` or ``target``."""
        self.problem = problem


class CopyConflictError(ValueError):
    """The target holds a row under the key of a row of the source with other content."""

    def __init__(self, table: str, key: dict[str, Any], column: str) -> None:
        shown = ", ".join(f"{name}={value!r}" for name, value in key.items())
        super().__init__(
            f"table {table}: the target already holds a different row for ({shown}) (its "
            f"{column} differs); nothing was overwritten. The two records diverged: copy into "
            "an empty target, or remove the row from one of them"
        )
        self.table = table
        self.key = key


def copy_record(
    source: str | Path,
    target: str | Path,
    *,
    batch_rows: int = BATCH_ROWS,
    progress: Callable[[TableCopy], None] | None = None,
) -> RecordCopy:
    """Copy every row of the record at ``source`` that ``target`` lacks (see the module);
    each a file path or a PostgreSQL URL. ``progress`` is called after every batch, and
    once more when a table is finished.

    ``CopyInputError`` for a missing source file, a directory, a URL ``check_url`` refuses
    (one with a password in it), or the same record twice; ``CopyConflictError``; as on
    opening any record, ``DamagedRecordError`` for a record written by a newer dbpa (either
    one) or a damaged file, ``FileNotFoundError`` for a database that holds no record yet,
    ``RecordUnreachableError`` for a server that cannot be reached.
    """
    if batch_rows < 1:
        raise ValueError(f"batch_rows: must be at least 1, not {batch_rows}")
    _check(source, target)
    layout = record_layout()
    with Store(source, read_only=True) as src, Store(target, serve_readers=False) as dst:
        version = src.schema_version
        tables = []
        for table in layout.tables:
            columns = [
                c.name for c in layout.columns if c.table == table and c.migration <= version
            ]
            if table == _IDENTITY or not columns:
                continue
            copy = _TableCopier(src, dst, layout, table, columns, batch_rows)
            tables.append(copy.run(progress or (lambda _: None)))
        return RecordCopy(src.location, dst.location, version, tuple(tables))


def _check(source: str | Path, target: str | Path) -> None:
    """``CopyInputError`` for what can be told before opening either record."""
    for argument, value in (("source", source), ("target", target)):
        if is_postgres_url(value):
            try:
                check_url(str(value))
            except ValueError as exc:
                raise CopyInputError(argument, str(exc)) from None
            continue
        path = Path(value).expanduser().resolve()
        if path.is_dir():
            raise CopyInputError(argument, f"{path} is a directory; name a database file")
        if argument == "source" and not path.exists():
            raise CopyInputError(argument, f"{path} does not exist")
    if locate(source) == locate(target):
        raise CopyInputError("target", f"{locate(target)} is the source itself")


class _TableCopier:
    """One table's copy: its queries (names from the schema, values as parameters)."""

    def __init__(
        self,
        src: Store,
        dst: Store,
        layout: Layout,
        table: str,
        columns: list[str],
        batch_rows: int,
    ) -> None:
        self.src, self.dst, self.table, self.batch_rows = src, dst, table, batch_rows
        self.key = list(layout.primary_keys[table])
        types = {c.name: c.type for c in layout.columns if c.table == table}
        self.compared = [
            c.name
            for c in layout.columns
            if c.table == table and c.name in columns and c.default != _WRITTEN_AT
        ]
        listed, ordered = ", ".join(columns), ", ".join(self.key)
        marks = ", ".join("?" for _ in self.key)
        self.first = f"SELECT {listed} FROM {table} ORDER BY {ordered} LIMIT ?"
        self.after = (
            f"SELECT {listed} FROM {table} WHERE ({ordered}) > ({marks}) ORDER BY {ordered} LIMIT ?"
        )
        unnested = ", ".join(f"unnest(CAST(? AS {types[k]}[]))" for k in self.key)
        self.held = f"SELECT {listed} FROM {table} WHERE ({ordered}) IN (SELECT {unnested})"

    def run(self, progress: Callable[[TableCopy], None]) -> TableCopy:
        copied = skipped = 0
        last: tuple[Any, ...] | None = None
        while True:
            if last is None:
                batch = self.src._arrow(self.first, [self.batch_rows])
            else:
                batch = self.src._arrow(self.after, [*last, self.batch_rows])
            if batch.num_rows == 0:
                break
            fresh = self._fresh(batch)
            if fresh:
                self._write(batch.take(fresh))
            copied += len(fresh)
            skipped += batch.num_rows - len(fresh)
            last = tuple(batch.column(k)[batch.num_rows - 1].as_py() for k in self.key)
            progress(TableCopy(self.table, copied, skipped, finished=False))
            if batch.num_rows < self.batch_rows:
                break
        done = TableCopy(self.table, copied, skipped, finished=True)
        progress(done)
        return done

    def _fresh(self, batch: pa.Table) -> list[int]:
        """The positions of the rows of ``batch`` the target lacks; ``CopyConflictError``
        for one it holds with other content."""
        rows = batch.to_pylist()
        keys = [tuple(row[k] for k in self.key) for row in rows]
        found = self.dst._arrow(self.held, [list(values) for values in zip(*keys, strict=True)])
        held = {tuple(row[k] for k in self.key): row for row in found.to_pylist()}
        fresh = []
        for i, (key, row) in enumerate(zip(keys, rows, strict=True)):
            there = held.get(key)
            if there is None:
                fresh.append(i)
                continue
            differs = next((c for c in self.compared if not _same(row[c], there[c])), None)
            if differs is not None:
                raise CopyConflictError(self.table, dict(zip(self.key, key, strict=True)), differs)
        return fresh

    @retried
    def _write(self, rows: pa.Table) -> None:
        # ON CONFLICT DO NOTHING: a row another writer added since ``_fresh`` stays as it is.
        with self.dst._transaction() as con:
            self.dst._insert(con, self.table, rows, "ON CONFLICT DO NOTHING")


def _same(a: Any, b: Any) -> bool:
    """Whether two values of a column are the same (NaN equal to NaN; lists element-wise,
    compared whole first: a vector's 384 floats at C speed)."""
    if a == b:
        return True
    if isinstance(a, float) and isinstance(b, float):
        return math.isnan(a) and math.isnan(b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return False
