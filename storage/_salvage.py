"""Export what can still be read from a damaged record, writing nothing to it.

Every table of the file (and the ``results`` view) is read in ranges of rows: a range
that fails is halved until the rows DuckDB cannot read are isolated to runs of at most
``MIN_ROWS``; everything else is written, in stored order, to ``<table>.<format>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from ._export import EXPORTS, FORMATS, export_sql, write_table
from ._open import connect, first_line, is_interrupt, quote

__all__ = ["MIN_ROWS", "Salvage", "SalvagedTable", "salvage"]

MIN_ROWS = 2048
"""Rows below which a range that cannot be read is given up (DuckDB's vector size)."""


@dataclass(frozen=True)
class SalvagedTable:
    """What was exported of one table."""

    name: str
    path: Path | None
    """The file written (None when no row could be read)."""
    rows: int
    """Rows written."""
    total: int | None
    """Rows the table holds, when DuckDB can count them."""
    problem: str | None
    """What DuckDB reported for the rows that could not be read (None: all were)."""


@dataclass(frozen=True)
class Salvage:
    """The tables of a salvage, in export order."""

    tables: tuple[SalvagedTable, ...]

    @property
    def complete(self) -> bool:
        """Whether every row of every table was read."""
        return all(t.problem is None for t in self.tables)


def salvage(path: str | Path, out_dir: str | Path, fmt: str = "parquet") -> Salvage:
    """Export every table of the record at ``path`` that can be read, row range by row range,
    to ``out_dir``. ``DamagedRecordError`` when DuckDB cannot open the file at all."""
    if fmt not in FORMATS:
        raise ValueError(f"format: unknown {fmt!r}; choose {' or '.join(FORMATS)}")
    db = Path(path).expanduser().resolve()
    if not db.exists():
        raise FileNotFoundError(f"database {db} does not exist")
    if db.is_dir():
        raise ValueError(f"database {db} is a directory; name a database file")
    out = Path(out_dir)
    con = connect(db, read_only=True)
    interrupted = False
    try:
        tables = con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()
        names = [n for (n,) in tables]
        ordered = [n for n in EXPORTS if n in names] + [n for n in names if n not in EXPORTS]
        found = [_salvage_table(con, name, out, fmt) for name in ordered]
        if {"run_tests", "tests", "corrections"} <= set(names):
            found.append(_salvage_results(con, out, fmt))
    except (RuntimeError, duckdb.Error) as exc:  # Ctrl-C stops DuckDB's query
        if not is_interrupt(exc):
            raise
        interrupted = True
    finally:
        con.close()
    if interrupted:
        raise KeyboardInterrupt
    return Salvage(tuple(found))


def _salvage_table(con: duckdb.DuckDBPyConnection, name: str, out: Path, fmt: str) -> SalvagedTable:
    table = quote(name)
    try:
        ((end, total),) = con.execute(f"SELECT max(rowid) + 1, count(*) FROM {table}").fetchall()
    except duckdb.Error as exc:
        return SalvagedTable(name, None, 0, None, first_line(str(exc)))
    problems: list[str] = []
    chunks = _read_rows(con, table, 0, int(end or 0), problems)
    if not chunks and not problems:  # an empty table: its columns, no rows
        chunks = _read_rows(con, table, 0, 1, problems)
    if not chunks:
        return SalvagedTable(name, None, 0, int(total), problems[0])
    data = pa.concat_tables(chunks)
    written = write_table(data, out / f"{name}.{fmt}", fmt)
    return SalvagedTable(
        name, written, data.num_rows, int(total), problems[0] if problems else None
    )


def _read_rows(
    con: duckdb.DuckDBPyConnection, table: str, start: int, end: int, problems: list[str]
) -> list[pa.Table]:
    """The readable rows with rowid in [start, end), in order; what failed goes to ``problems``."""
    if end <= start:
        return []
    try:
        relation = con.sql(
            f"SELECT * FROM {table} WHERE rowid >= $start AND rowid < $end",
            params={"start": start, "end": end},
        )
        try:
            return [relation.to_arrow_table()]
        finally:
            relation.close()
    except duckdb.Error as exc:
        if is_interrupt(exc):
            raise
        if end - start <= MIN_ROWS:
            problems.append(first_line(str(exc)))
            return []
    middle = (start + end) // 2
    first = _read_rows(con, table, start, middle, problems)
    return first + _read_rows(con, table, middle, end, problems)


def _salvage_results(con: duckdb.DuckDBPyConnection, out: Path, fmt: str) -> SalvagedTable:
    try:
        ((version,),) = con.execute("SELECT max(version) FROM schema_migrations").fetchall()
        relation = con.sql(export_sql("results", int(version or 0)))
        try:
            data = relation.to_arrow_table()
        finally:
            relation.close()
    except duckdb.Error as exc:
        return SalvagedTable("results", None, 0, None, first_line(str(exc)))
    written = write_table(data, out / f"results.{fmt}", fmt)
    return SalvagedTable("results", written, data.num_rows, data.num_rows, None)
