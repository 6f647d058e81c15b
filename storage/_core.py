"""The connection core of the record: one DuckDB connection, its lock, transactions, migrations.

DuckDB allows one writing process per file. The core owns the connection of its process;
threads share it under a lock, and every write is one transaction. The record classes
(``_samples``, ``_analysis``, ``_drift``, ``_export``) build on it; ``Store`` joins them.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

import duckdb
import pandas as pd
import pyarrow as pa

from ._schema import MIGRATIONS


class DatabaseInUseError(RuntimeError):
    """Another process holds the database (DuckDB allows one writer per file)."""


class UnknownRunError(LookupError):
    """No run with that id in the database."""


class StoreCore:
    """An open audit database: the connection, its lock and the helpers every record uses."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        self.path = Path(path).expanduser().resolve()
        if read_only and not self.path.exists():
            raise FileNotFoundError(f"database {self.path} does not exist (run an audit first)")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise DatabaseInUseError(
                    f"database {self.path} is in use by another run; wait for it to finish "
                    "or use another --db (DuckDB allows one writing process per file)"
                ) from None
            raise
        self._lock = threading.RLock()
        self.read_only = read_only
        if not read_only:
            self._migrate()
        self.database_id = self._meta("database_id")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._con.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """Highest applied migration."""
        return int(self._rows("SELECT max(version) FROM schema_migrations")[0][0])

    # ---------------------------------------------------------------------- for the records

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with self._lock:
            self._con.execute("BEGIN TRANSACTION")
            try:
                yield self._con
            except BaseException:
                self._con.execute("ROLLBACK")
                raise
            self._con.execute("COMMIT")

    def _arrow(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> pa.Table:
        """The result of a query as Arrow (``params``: positional, or named as a mapping)."""
        values = dict(params) if isinstance(params, Mapping) else list(params)
        with self._lock:
            return self._con.sql(sql, params=values or None).to_arrow_table()

    def _df(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        return self._arrow(sql, params).to_pandas()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._con.execute(sql, list(params)).fetchall()

    @staticmethod
    def _insert(con: duckdb.DuckDBPyConnection, table: str, data: pa.Table, tail: str = "") -> None:
        """INSERT the rows of ``data`` (its column names: the table's) into ``table`` in one
        statement (DuckDB's ``executemany`` runs one statement per row: ~2 ms each).

        ``table``, the column names and ``tail`` (e.g. ``ON CONFLICT DO NOTHING``) come from
        the record classes, never from data; the values travel as Arrow.
        """
        if data.num_rows == 0:
            return
        columns = ", ".join(data.column_names)
        con.register("new_rows", data)
        try:
            con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM new_rows {tail}")
        finally:
            con.unregister("new_rows")

    # ---------------------------------------------------------------------- schema and meta

    def _migrate(self) -> None:
        with self._transaction() as con:
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp)"
            )
            done = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
            for version, description, statements in MIGRATIONS:
                if version in done:
                    continue
                for statement in statements:
                    con.execute(statement)
                con.execute(
                    "INSERT INTO schema_migrations (version, description) VALUES (?, ?)",
                    [version, description],
                )
            con.execute(
                "INSERT INTO meta VALUES ('database_id', ?) ON CONFLICT DO NOTHING",
                [uuid.uuid4().hex],
            )

    def _meta(self, key: str) -> str:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", [key])
        if not rows:
            raise RuntimeError(f"database {self.path} has no {key}; is it a dbpa database?")
        return str(rows[0][0])
