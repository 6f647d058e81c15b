"""The record's tables and columns as the migrations build them, for its documentation."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ._schema import MIGRATIONS


@dataclass(frozen=True)
class Column:
    """One column of a table of the record."""

    table: str
    name: str
    type: str
    nullable: bool
    default: str | None
    """The SQL default, as DuckDB shows it; None without one."""
    migration: int
    """The schema version that added the column."""


@dataclass(frozen=True)
class Layout:
    """What the migrations build: every column in table order, each table's primary key, the
    tables in the order the migrations create them."""

    columns: tuple[Column, ...]
    primary_keys: dict[str, tuple[str, ...]]
    tables: tuple[str, ...]
    """In creation order: a table before the tables created after it, which refer to it."""


def record_layout() -> Layout:
    """Apply ``MIGRATIONS`` in order to an empty in-memory DuckDB and read its tables."""
    with duckdb.connect() as db:
        added: dict[tuple[str, str], int] = {}
        created: dict[str, None] = {}
        for version, _, statements in MIGRATIONS:
            for statement in statements:
                db.execute(statement)
                for (table,) in db.execute(
                    "SELECT table_name FROM information_schema.tables"
                ).fetchall():
                    created.setdefault(table)
            for table, column in db.execute(
                "SELECT table_name, column_name FROM information_schema.columns"
            ).fetchall():
                added.setdefault((table, column), version)
        rows = db.execute(
            "SELECT table_name, column_name, data_type, is_nullable, column_default "
            "FROM information_schema.columns ORDER BY table_name, ordinal_position"
        ).fetchall()
        keys = db.execute(
            "SELECT table_name, constraint_column_names FROM duckdb_constraints() "
            "WHERE constraint_type = 'PRIMARY KEY'"
        ).fetchall()
    columns = tuple(
        Column(table, name, kind, nullable == "YES", default, added[(table, name)])
        for table, name, kind, nullable, default in rows
    )
    return Layout(columns, {table: tuple(names) for table, names in keys}, tuple(created))
