"""The record on PostgreSQL (issue 50): a psycopg 3 connection that speaks to the core as
DuckDB's does, so the record classes keep their SQL.

What differs is kept here: the URL (the password only from ``PGPASSWORD`` or ``~/.pgpass``,
as libpq reads them, and never in a message), placeholders (``?`` and ``$name`` become
psycopg's ``%s`` and ``%(name)s``), the migrations through a type map (never a second
schema), list columns as ``bytea`` of little-endian float32/float64, inserts as
``executemany`` of ``INSERT ... ON CONFLICT`` in key order (overlapping writers wait rather
than deadlock) and results as Arrow.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import pyarrow as pa

from ._errors import RecordUnreachableError
from ._schema import MIGRATIONS

__all__ = [
    "CONNECT_TIMEOUT_S",
    "RETRIED",
    "UNIQUE_VIOLATION",
    "PostgresConnection",
    "check_url",
    "connect",
    "is_postgres_url",
    "pg_statement",
]

RETRIED = ("40001", "40P01")
"""SQLSTATEs of a transaction that lost to another (serialization failure, deadlock): run
again."""
UNIQUE_VIOLATION = "23505"
"""SQLSTATE of an INSERT of a key another transaction inserted first."""
_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(target: object) -> bool:
    """Whether ``target`` names a PostgreSQL record rather than a file."""
    return isinstance(target, str) and target.startswith(_SCHEMES)


CONNECT_TIMEOUT_S = 10
"""Seconds a connection may take to be made (libpq's ``connect_timeout``) unless the URL
says otherwise: a server down or unreachable is reported after at most this long."""
QUERY_PARAMETERS = frozenset(
    {"application_name", "connect_timeout", "sslcert", "sslkey", "sslmode", "sslrootcert"}
)
"""The libpq parameters a record's URL may carry (none of them a secret)."""


def check_url(url: str) -> str:
    """``url`` once it is a record's URL, ``postgresql://USER@HOST:PORT/DBNAME`` (a query of
    ``QUERY_PARAMETERS`` only); ``ValueError`` naming what is wrong, never the password."""
    parts = urlsplit(url)
    if parts.password is not None:
        raise ValueError(
            "a PostgreSQL URL must not hold the password (use PGPASSWORD or ~/.pgpass)"
        )
    try:
        parts.port  # noqa: B018 (a port that is no number raises)
    except ValueError:
        raise ValueError("the port of a PostgreSQL URL must be a number") from None
    if not parts.hostname or parts.path.strip("/") == "":
        raise ValueError(
            "a PostgreSQL URL names a host and a database: postgresql://USER@HOST:PORT/DBNAME"
        )
    names = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True)]
    if "password" in names:
        raise ValueError(
            "a PostgreSQL URL must not hold the password (use PGPASSWORD or ~/.pgpass)"
        )
    unknown = sorted(set(names) - QUERY_PARAMETERS)
    if unknown:
        raise ValueError(
            f"unknown URL parameter(s) {', '.join(unknown)}: a PostgreSQL record keeps all its "
            f"data in the database (no data_path); allowed: {', '.join(sorted(QUERY_PARAMETERS))}"
        )
    return url


def location(url: str) -> str:
    """What a message may say of the record: ``postgresql://host:port/dbname``."""
    parts = urlsplit(url)
    return f"postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"


def _where(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or 5432}"


def connect(url: str, *, read_only: bool) -> PostgresConnection:
    """Connect to the record at ``url`` (``postgresql://USER@HOST:PORT/DBNAME``).

    ``ValueError`` for a URL that ``check_url`` refuses, or a login or database the server
    refuses; ``RecordUnreachableError`` when the server cannot be reached within
    ``CONNECT_TIMEOUT_S`` (unless the URL's ``connect_timeout`` says otherwise). Messages
    name host and port, nothing of the credentials.

    A reader (``read_only``) reads one snapshot: its connection keeps one REPEATABLE READ,
    READ ONLY transaction open until it closes, so every query of a command sees the record
    as it was at its first, whatever other writers commit meanwhile.
    """
    check_url(url)
    try:
        import psycopg
    except ImportError:
        raise ValueError(
            "a PostgreSQL record needs psycopg: pip install 'dbpa[postgres]'"
        ) from None

    where = _where(url)
    timeout = "" if "connect_timeout=" in url else str(CONNECT_TIMEOUT_S)
    try:
        if timeout:
            con = psycopg.connect(url, autocommit=not read_only, connect_timeout=timeout)
        else:
            con = psycopg.connect(url, autocommit=not read_only)
    except psycopg.Error as exc:
        raise _connect_error(exc, where, url) from None
    if read_only:
        con.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        con.read_only = True
    _load_json_as_text(con)
    return PostgresConnection(con, where)


_REFUSED_LOGIN = ("28P01", "28000")
_UNKNOWN_DATABASE = "3D000"


def _connect_error(exc: Exception, where: str, url: str) -> Exception:
    """libpq's refusal as ours (its words are not repeated: they may name the user)."""
    said = str(exc).lower()
    state = getattr(exc, "sqlstate", None)
    if state in _REFUSED_LOGIN or "password" in said or "authentication" in said:
        return ValueError(
            f"PostgreSQL at {where} refused the login (check PGPASSWORD or ~/.pgpass)"
        )
    if state == _UNKNOWN_DATABASE or "does not exist" in said:
        dbname = urlsplit(url).path.lstrip("/")
        return ValueError(f"PostgreSQL at {where} has no database {dbname!r} (create it first)")
    return RecordUnreachableError(
        f"PostgreSQL at {where} cannot be reached (tried for up to {connect_budget(url)} s)"
    )


def connect_budget(url: str) -> int:
    """Seconds a connection to ``url`` may take: its ``connect_timeout``, else
    ``CONNECT_TIMEOUT_S``."""
    timeout = re.search(r"connect_timeout=(\d+)", url)
    return int(timeout.group(1)) if timeout else CONNECT_TIMEOUT_S


def _load_json_as_text(con: Any) -> None:
    """JSON columns read as their text, as DuckDB returns them."""
    from psycopg.types.string import TextLoader

    for name in ("json", "jsonb"):
        con.adapters.register_loader(name, TextLoader)


# ---------------------------------------------------------------------- the schema

_TYPES = (
    (re.compile(r"\b(FLOAT|DOUBLE)\[\]"), "BYTEA"),
    (re.compile(r"\bDOUBLE\b"), "DOUBLE PRECISION"),
)


def pg_statement(statement: str) -> str:
    """A migration's statement in PostgreSQL's types (lists as bytea, DOUBLE as double
    precision)."""
    for pattern, replacement in _TYPES:
        statement = pattern.sub(replacement, statement)
    return statement


def _schema_facts() -> tuple[dict[str, np.dtype[Any]], dict[str, list[str]]]:
    """From the migrations: each list column's element type (by column name), and each
    table's primary key."""
    lists: dict[str, np.dtype[Any]] = {}
    keys: dict[str, list[str]] = {}
    for _, _, statements in MIGRATIONS:
        for statement in statements:
            for name, kind in re.findall(r"(\w+) (FLOAT|DOUBLE)\[\]", statement):
                lists[name] = np.dtype("<f4" if kind == "FLOAT" else "<f8")
            created = re.search(r"CREATE TABLE (\w+)", statement)
            if created is None:
                continue
            compound = re.search(r"PRIMARY KEY \(([^)]*)\)", statement)
            single = re.search(r"(\w+) VARCHAR PRIMARY KEY", statement)
            if compound:
                keys[created.group(1)] = [c.strip() for c in compound.group(1).split(",")]
            elif single:
                keys[created.group(1)] = [single.group(1)]
    return lists, keys


LIST_COLUMNS, PRIMARY_KEYS = _schema_facts()
"""List columns (name -> numpy element type, stored as bytea) and each table's key."""


def _encode(value: Any, dtype: np.dtype[Any]) -> bytes | None:
    return None if value is None else np.asarray(value, dtype=dtype).tobytes()


def _decode(value: bytes | None, dtype: np.dtype[Any]) -> np.ndarray | None:
    return (
        None if value is None else np.frombuffer(value, dtype=dtype).astype(dtype.newbyteorder("="))
    )


# ---------------------------------------------------------------------- SQL

_PLACEHOLDER = re.compile(r"'[^']*'|\?|\$([a-z_]+)|%")


def to_psycopg(sql: str) -> str:
    """``?`` -> ``%s``, ``$name`` -> ``%(name)s``, ``%`` -> ``%%`` (outside string literals)."""

    def one(match: re.Match[str]) -> str:
        text = match.group(0)
        if text.startswith("'"):
            return text.replace("%", "%%")
        if text == "?":
            return "%s"
        if text == "%":
            return "%%"
        return f"%({match.group(1)})s"

    return _PLACEHOLDER.sub(one, sql)


class _Result:
    """A query's rows, list columns decoded, with DuckDB's fetch methods."""

    def __init__(
        self, names: list[str], rows: list[tuple[Any, ...]], types: Sequence[int] = ()
    ) -> None:
        self.names = names
        self.types = list(types) or [0] * len(names)
        decoders = [(i, LIST_COLUMNS[n]) for i, n in enumerate(names) if n in LIST_COLUMNS]
        if decoders:
            rows = [_decoded(row, decoders) for row in rows]
        self.rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self.rows

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.rows[0] if self.rows else None

    def to_arrow_table(self) -> pa.Table:
        columns = list(zip(*self.rows, strict=True)) if self.rows else [()] * len(self.names)
        arrays = []
        for name, oid, values in zip(self.names, self.types, columns, strict=True):
            if name in LIST_COLUMNS:
                kind = pa.from_numpy_dtype(LIST_COLUMNS[name].newbyteorder("="))
                arrays.append(pa.array([_listed(v) for v in values], pa.list_(kind)))
            else:
                arrays.append(pa.array(list(values), _ARROW_TYPES.get(oid)))
        return pa.table(arrays, names=_unique(self.names))

    def close(self) -> None:
        return None


_ARROW_TYPES: dict[int, pa.DataType] = {
    16: pa.bool_(),
    20: pa.int64(),
    21: pa.int16(),
    23: pa.int32(),
    25: pa.string(),
    114: pa.string(),
    700: pa.float32(),
    701: pa.float64(),
    1043: pa.string(),
    1184: pa.timestamp("us", tz="Etc/UTC"),
}
"""PostgreSQL's types (by oid) as DuckDB gives them in Arrow (others inferred)."""


def _decoded(row: tuple[Any, ...], decoders: list[tuple[int, np.dtype[Any]]]) -> tuple[Any, ...]:
    values = list(row)
    for i, dtype in decoders:
        values[i] = _decode(values[i], dtype)
    return tuple(values)


def _listed(value: np.ndarray | None) -> list[float] | None:
    return None if value is None else value.tolist()


def _unique(names: list[str]) -> list[str]:
    return [n if names.index(n) == i else f"{n}_{i}" for i, n in enumerate(names)]


class PostgresConnection:
    """A psycopg connection (a writer's in autocommit: the core sends BEGIN and COMMIT; a
    reader's in one snapshot transaction) with the methods of a DuckDB connection the core
    uses. A connection the server dropped (restarted, stopped) is a
    ``RecordUnreachableError`` naming host and port."""

    def __init__(self, con: Any, where: str) -> None:
        self._con = con
        self._where = where
        self._columns: dict[str, list[str]] = {}

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> _Result:
        with self._speaking(), self._con.cursor() as cur:
            cur.execute(to_psycopg(sql), _params(params))
            if cur.description is None:
                return _Result([], [])
            names = [d.name for d in cur.description]
            return _Result(names, cur.fetchall(), [d.type_code for d in cur.description])

    @contextmanager
    def _speaking(self) -> Iterator[None]:
        """A lost connection as ``RecordUnreachableError``; a reader's failed query ends its
        snapshot (the next query reads a new one rather than failing too)."""
        import psycopg

        try:
            yield
        except psycopg.Error as exc:
            if self._con.broken or self._con.closed:
                raise RecordUnreachableError(
                    f"PostgreSQL at {self._where} closed the connection (restarted or stopped)"
                ) from exc
            if not self._con.autocommit:
                with suppress(psycopg.Error):
                    self._con.rollback()
            raise

    def sql(self, sql: str, params: Sequence[Any] | Mapping[str, Any] | None = None) -> _Result:
        return self.execute(sql, params)

    def insert(self, table: str, data: pa.Table, tail: str) -> None:
        """``executemany`` of one INSERT per row of ``data``, in the order of the table's
        key (two writers of overlapping rows then lock them in one order). With ``ON
        CONFLICT``, columns the table lacks (a record of an older schema) are left out, as
        DuckDB 2.0 does (measured: its ``INSERT ... ON CONFLICT`` ignores them)."""
        if "ON CONFLICT" in tail:
            have = set(self.columns(table))
            data = data.select([n for n in data.column_names if n in have])
        names = data.column_names
        coded = {n: LIST_COLUMNS[n] for n in names if n in LIST_COLUMNS}
        rows = [
            tuple(_encode(row[n], coded[n]) if n in coded else row[n] for n in names)
            for row in data.to_pylist()
        ]
        key = [names.index(c) for c in PRIMARY_KEYS.get(table, []) if c in names]
        if key:
            rows.sort(key=lambda r: tuple((r[i] is None, r[i]) for i in key))
        values = ", ".join(["%s"] * len(names))
        statement = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({values}) {tail}"
        with self._speaking(), self._con.cursor() as cur:
            cur.executemany(statement, rows)

    def columns(self, table: str) -> list[str]:
        """The columns of ``table`` in their order (read once: migrations run before)."""
        if table not in self._columns:
            self._columns[table] = [
                name
                for (name,) in self.execute(
                    "SELECT column_name FROM information_schema.columns "
                    "WHERE table_schema = current_schema() AND table_name = ? "
                    "ORDER BY ordinal_position",
                    [table],
                ).fetchall()
            ]
        return self._columns[table]

    def close(self) -> None:
        self._con.close()

    @property
    def broken(self) -> bool:
        """Whether the server dropped this connection."""
        return bool(self._con.broken or self._con.closed)


def _params(params: Sequence[Any] | Mapping[str, Any] | None) -> Any:
    if params is None:
        return None
    if isinstance(params, Mapping):
        return {k: _param(v) for k, v in params.items()}
    return [_param(v) for v in params] or None


def _param(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
