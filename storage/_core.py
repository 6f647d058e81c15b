"""The connection core of the record: one DuckDB connection, its lock, transactions, migrations.

DuckDB allows one writing process per file. The core owns the connection of its process;
threads share it under a lock, and every write is one transaction. The file is checked
before it is opened for writing (``_open``); a writer serves reads of its record to other
processes while it holds it (``_serve``, started by ``Store``). The record classes
(``_samples``, ``_tests``, ``_runs``, ``_drift``, ``_export``) build on it; ``Store`` joins
them.
"""

from __future__ import annotations

import functools
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, ParamSpec, Protocol, Self, TypeVar

import duckdb
import pandas as pd
import pyarrow as pa

from ._errors import DamagedRecordError, RecordUnreachableError
from ._open import (
    damaged,
    damaged_in_write,
    first_line,
    is_damage,
    is_interrupt,
    newer_record,
    open_connection,
)
from ._postgres import (
    RETRIED,
    UNIQUE_VIOLATION,
    PostgresConnection,
    connect,
    connect_budget,
    is_postgres_url,
    location,
    pg_statement,
)
from ._schema import MIGRATIONS

__all__ = ["StoreCore", "locate", "replaced", "retried"]

T = TypeVar("T")
P = ParamSpec("P")
_MIGRATION_LOCK = 50_0001
"""The advisory lock that lets one process at a time migrate a PostgreSQL record."""
_ATTEMPTS = 8
"""Tries of a write that loses to another writer on PostgreSQL (``RETRIED``)."""
_RECONNECT_PAUSE_S = 0.5
"""Pause between connection attempts while a dropped PostgreSQL server comes back."""


def _retrying(states: tuple[str, ...]) -> Callable[[Callable[P, T]], Callable[P, T]]:
    def decorate(write: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(write)
        def again(*args: P.args, **kwargs: P.kwargs) -> T:
            reconnected = False
            for attempt in range(_ATTEMPTS):
                try:
                    return write(*args, **kwargs)
                except RecordUnreachableError:
                    store = args[0]
                    if reconnected or not isinstance(store, StoreCore) or not store.reconnects:
                        raise
                    store._reconnect()
                    reconnected = True
                    continue
                except Exception as exc:
                    if getattr(exc, "sqlstate", None) not in states or attempt == _ATTEMPTS - 1:
                        raise
                time.sleep(0.01 * 2**attempt)
            raise AssertionError("unreachable")

        return again

    return decorate


retried = _retrying(RETRIED)
"""``write`` (one whole, idempotent write) run again when it lost to another writer of a
PostgreSQL record (serialization failure or deadlock), after a growing pause; and once more
after a writer's connection was dropped and made again (``StoreCore._reconnect``): whether
the lost attempt committed cannot be known, and being idempotent the write may run twice."""
replaced = _retrying((*RETRIED, UNIQUE_VIOLATION))
"""``retried``, for a write that replaces rows by key (DELETE, then INSERT): when another
writer inserted the same key meanwhile (the same tick run by two workers), the INSERT fails
on the key; run again, its DELETE sees that row and the write replaces it."""


def locate(target: str | Path) -> str:
    """The identity of the record ``target`` names: a file's absolute path, or a database's
    ``postgresql://host:port/dbname`` (never the user or password)."""
    if is_postgres_url(target):
        return location(str(target))
    return str(Path(target).expanduser().resolve())


class _Closing(Protocol):
    def close(self) -> None: ...


class StoreCore:
    """An open audit database: the connection, its lock and the helpers every record uses."""

    def __init__(self, path: str | Path, *, read_only: bool = False) -> None:
        """Open the record at ``path``: a file (created when missing, unless ``read_only``)
        or a PostgreSQL URL ``postgresql://USER@HOST:PORT/DBNAME`` (see ``_postgres``).

        ``DamagedRecordError`` for a file that cannot be used (nothing is written to it),
        ``DatabaseInUseError`` when another process holds it.
        """
        self.postgres = is_postgres_url(path)
        """Whether the record is a PostgreSQL database (else a DuckDB file)."""
        self.location = locate(path)
        """The record's identity: a file's absolute path, a database's URL without its user."""
        self._url = str(path) if self.postgres else None
        """A PostgreSQL record's URL (no password in it: ``check_url``), to connect again."""
        if self.postgres:
            self.path = Path()  # a file's: no file here
            self._attach(connect(str(path), read_only=read_only), read_only=read_only)
        else:
            self.path = Path(self.location)
            if read_only and not self.path.exists():
                raise FileNotFoundError(f"database {self.path} does not exist (run an audit first)")
            if not read_only:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self._attach(open_connection(self.path, read_only=read_only), read_only=read_only)
        self._server: _Closing | None = None
        """What serves this record's reads to other processes (``Store`` starts it)."""
        try:
            if not read_only:
                self._migrate()
            elif self.postgres:
                self._check_shared()
            self.database_id = self._meta("database_id")
        except BaseException:
            self.close()
            raise

    def _attach(self, con: Any, *, read_only: bool) -> None:
        self._con: Any = con
        self._lock = threading.RLock()
        self.read_only = read_only
        self._open_transactions = 0
        """Transactions under way in this store (a read inside one is not replayed alone)."""

    @property
    def reconnects(self) -> bool:
        """Whether a dropped connection is made again (``_reconnect``): a PostgreSQL record's
        writer only. A reader keeps its one snapshot or fails; a file is never dropped."""
        return self.postgres and not self.read_only

    def _reconnect(self) -> None:
        """A new connection in place of one the server dropped (restarted, failed over),
        tried for up to the connect budget (``connect_budget``: the URL's ``connect_timeout``,
        else ``CONNECT_TIMEOUT_S``) while the server comes back; then ``_reconnected``.
        ``RecordUnreachableError`` when it does not come back in time. Nothing is replayed
        here: the callers replay a whole idempotent write (``retried``) or a read."""
        with self._lock:
            old = self._connection
            if not old.broken:  # another thread made it again meanwhile
                return
            deadline = time.monotonic() + connect_budget(str(self._url))
            while True:
                try:
                    con = connect(str(self._url), read_only=False)
                    break
                except RecordUnreachableError:
                    if time.monotonic() + _RECONNECT_PAUSE_S >= deadline:
                        raise
                    time.sleep(_RECONNECT_PAUSE_S)
            with suppress(Exception):
                old.close()
            self._con = con
            self._reconnected()

    def _reconnected(self) -> None:
        """What a new connection must hold again (the records' session state): nothing
        here; ``RunRecord`` takes its live runs' locks again."""

    def _replayed(self, read: Callable[[], T]) -> T:
        """``read()``; on a writer whose connection was dropped, once more on a new one
        (a read changes nothing), unless a transaction is under way (its write is replayed
        whole, or not at all)."""
        try:
            return read()
        except RecordUnreachableError:
            if not self.reconnects or self._open_transactions:
                raise
            self._reconnect()
            return read()

    def _view(self) -> Self:
        """Another read-only view of this open record over its own DuckDB cursor, for the
        thread that serves other processes (reads there do not wait for this one's lock)."""
        view = type(self).__new__(type(self))
        view.path, view.postgres, view.location = self.path, self.postgres, self.location
        view._attach(self._connection.cursor(), read_only=True)
        view._server = None
        view.database_id = self.database_id
        return view

    @property
    def _connection(self) -> Any:
        """The open connection: DuckDB's, or ``PostgresConnection`` (``RuntimeError`` once
        closed)."""
        if self._con is None:
            raise RuntimeError(f"database {self.location} is closed")
        return self._con

    @property
    def writer_pid(self) -> int | None:
        """The process writing the record: this one when opened for writing, else None
        (nothing else can hold it while it is open here)."""
        return None if self.read_only else os.getpid()

    def close(self) -> None:
        """Stop serving readers and close the connection (idempotent). The connection is
        dropped, so nothing of DuckDB outlives a closed store (no leak report at exit)."""
        server, self._server = getattr(self, "_server", None), None
        if server is not None:
            server.close()
        with self._lock:
            con, self._con = self._con, None
            if con is not None:
                con.close()

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
    def _transaction(self) -> Iterator[Any]:
        """One write, committed whole or not at all. Damage that the check before opening
        cannot see (an index block, read when a write first uses it) is a
        ``DamagedRecordError``; the write is not committed."""
        error: DamagedRecordError | None = None
        with self._lock:
            con = self._connection
            con.execute("BEGIN TRANSACTION")
            self._open_transactions += 1
            try:
                yield con
            except duckdb.Error as exc:
                with suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                if not is_damage(exc, writing=True):
                    raise
                error = damaged_in_write(self.path, first_line(str(exc)))
            except BaseException:
                if not (self.postgres and con.broken):  # a dropped connection has nothing to end
                    con.execute("ROLLBACK")
                raise
            else:
                con.execute("COMMIT")
            finally:
                self._open_transactions -= 1
        if error is not None:
            raise error

    def _arrow(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> pa.Table:
        """The result of a query as Arrow (``params``: positional, or named as a mapping)."""
        values = dict(params) if isinstance(params, Mapping) else list(params)

        def read() -> pa.Table:
            with self._lock:
                relation = self._connection.sql(sql, params=values or None)
                try:
                    return self._read(relation.to_arrow_table)
                finally:
                    relation.close()

        return self._replayed(read)

    def _df(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        return self._arrow(sql, params).to_pandas()

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        def read() -> list[tuple[Any, ...]]:
            with self._lock:
                con = self._connection
                return self._read(lambda: con.execute(sql, list(params)).fetchall())

        return self._replayed(read)

    def _read(self, read: Callable[[], T]) -> T:
        """``read()``, with a damaged file as ``DamagedRecordError`` and a query that Ctrl-C
        stopped as ``KeyboardInterrupt``, raised without DuckDB's frames (which hold the
        connection)."""
        error: BaseException
        try:
            return read()
        except (duckdb.Error, RuntimeError) as exc:
            if is_interrupt(exc):
                error = KeyboardInterrupt()
            elif isinstance(exc, duckdb.Error) and is_damage(exc):
                error = damaged(self.path, first_line(str(exc)), readable=True)
            else:
                raise
        raise error

    @staticmethod
    def _insert(con: Any, table: str, data: pa.Table, tail: str = "") -> None:
        """INSERT the rows of ``data`` (its column names: the table's) into ``table`` in one
        statement (DuckDB's ``executemany`` runs one statement per row: ~2 ms each).

        ``table``, the column names and ``tail`` (e.g. ``ON CONFLICT DO NOTHING``) come from
        the record classes, never from data; the values travel as Arrow.
        """
        if data.num_rows == 0:
            return
        if isinstance(con, PostgresConnection):
            con.insert(table, data, tail)
            return
        columns = ", ".join(data.column_names)
        con.register("new_rows", data)
        try:
            con.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM new_rows {tail}")
        finally:
            with suppress(duckdb.Error):  # an aborted transaction refuses it; keep the cause
                con.unregister("new_rows")

    # ---------------------------------------------------------------------- schema and meta

    def _migrate(self) -> None:
        """Apply the migrations not yet applied (on PostgreSQL through the type map, one
        process at a time: a lock for the transaction)."""
        translate = pg_statement if self.postgres else str
        with self._transaction() as con:
            if self.postgres:
                con.execute("SELECT pg_advisory_xact_lock(?)", [_MIGRATION_LOCK])
            con.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                "version INTEGER PRIMARY KEY, description VARCHAR NOT NULL, "
                "applied_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp)"
            )
            done = {v for (v,) in con.execute("SELECT version FROM schema_migrations").fetchall()}
            if done and max(done) > MIGRATIONS[-1][0]:
                raise newer_record(self.location, max(done))
            for version, description, statements in MIGRATIONS:
                if version in done:
                    continue
                for statement in statements:
                    con.execute(translate(statement))
                con.execute(
                    "INSERT INTO schema_migrations (version, description) VALUES (?, ?)",
                    [version, description],
                )
            con.execute(
                "INSERT INTO meta VALUES ('database_id', ?) ON CONFLICT DO NOTHING",
                [uuid.uuid4().hex],
            )

    def _check_shared(self) -> None:
        """A PostgreSQL record opened for reading: ``FileNotFoundError`` while no audit has
        written it, ``DamagedRecordError`` when a newer dbpa did (as for a file)."""
        if self._rows("SELECT to_regclass('schema_migrations')")[0][0] is None:
            raise FileNotFoundError(
                f"database {self.location} holds no audit record yet (run an audit first)"
            )
        if self.schema_version > MIGRATIONS[-1][0]:
            raise newer_record(self.location, self.schema_version)

    def _meta(self, key: str) -> str:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", [key])
        if not rows:
            raise damaged(self.path, f"it has no {key}", readable=True, by_duckdb=False)
        return str(rows[0][0])
