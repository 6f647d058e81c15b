"""``--db`` (or ``DBPA_DB``) takes the path of a DuckDB file or a PostgreSQL record's URL,
``postgresql://USER@HOST:PORT/DBNAME``. Another URL (``scheme://``), or one with a password or
an unknown parameter, is refused by every command that takes it, with exit 2 and one line
naming ``--db``, its password never shown, nothing created (a path would have dropped a
slash: ``postgresql:/dbpa@host/db``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from dbpa.cli import app
from tests.cli.conftest import runner

SECRET = "s3cr3t-pw"
OTHER_URL = "give the path of a DuckDB file or postgresql://USER@HOST:PORT/DBNAME"
WITH_PASSWORD = "a PostgreSQL URL must not hold the password (use PGPASSWORD or ~/.pgpass)"


def _with_db(group: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], list[str]]]:
    """Each command taking ``--db``, with a value for each of its other required parameters."""
    found = []
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found += _with_db(command, (*path, name))
        elif any("--db" in p.opts for p in command.params):
            required = [p for p in command.params if p.required]
            args = [
                a
                for p in required
                for a in (["x"] if not p.opts[0].startswith("-") else [p.opts[0], "x"])
            ]
            found.append(((*path, name), args))
    return found


COMMANDS = _with_db(typer.main.get_command(app))


def test_the_commands_with_a_record_are_all_found():
    assert {" ".join(p) for p, _ in COMMANDS} == {
        *("validate", "plan", "run", "runs", "results", "compare", "export", "report"),
        *("view", "serve", "drift", "monitor reset"),
    }


@pytest.mark.parametrize(("path", "args"), COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
@pytest.mark.parametrize(
    ("url", "why"),
    [
        (f"postgresql://dbpa:{SECRET}@127.0.0.1:5432/dbpa", WITH_PASSWORD),
        (f"postgres://127.0.0.1/dbpa?sslmode=require&password={SECRET}", WITH_PASSWORD),
        (
            "postgresql://dbpa@127.0.0.1/dbpa?data_path=s3://b/p",
            "unknown URL parameter(s) data_path",
        ),
        ("ducklake:sqlite://meta.sqlite", OTHER_URL),
        ("file:///tmp/dbpa.duckdb", OTHER_URL),
    ],
    ids=["password", "query", "data_path", "ducklake", "file"],
)
@pytest.mark.parametrize("via", ["--db", "DBPA_DB"])
def test_a_url_that_cannot_be_a_record_exits_2_on_one_line(
    tmp_path: Path, path, args, url, why, via
):
    given = ["--db", url] if via == "--db" else []
    env = {"COLUMNS": "80", **({"DBPA_DB": url} if via == "DBPA_DB" else {})}
    result = runner.invoke(app, [*path, *args, *given], env=env)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: --db ")
    assert why in line
    assert len(line) <= 400
    assert SECRET not in line
    assert list(tmp_path.iterdir()) == []  # the working directory: nothing created


@pytest.mark.parametrize(
    ("url", "shown", "why"),
    [
        ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db", WITH_PASSWORD),
        ("postgresql://u:p@ss/w@rd@h/db", "postgresql://u:***@h/db", WITH_PASSWORD),
        ("postgresql://h/db?password=pw&ssl", "postgresql://h/db?password=***&ssl", WITH_PASSWORD),
        (
            "postgresql://u@h:x/db",
            "postgresql://u@h:x/db",
            "the port of a PostgreSQL URL must be a number",
        ),
        (
            "postgresql://u@h:5432",
            "postgresql://u@h:5432",
            "a PostgreSQL URL names a host and a database",
        ),
        ("s3://bucket/key", "s3://bucket/key", OTHER_URL),
    ],
)
def test_a_url_is_shown_without_its_password(url, shown, why):
    result = runner.invoke(app, ["runs", "--db", url])
    assert result.stderr.startswith(f"error: --db {shown}: {why}")


@pytest.mark.parametrize("path", ["dbpa.duckdb", "records/a:b.duckdb", "C:/records/dbpa.duckdb"])
def test_a_path_is_still_a_path(wide_console, path):
    result = runner.invoke(app, ["runs", "--db", path])
    assert result.exit_code == 2  # no such record, named as a file
    assert f"{path} does not exist (run an audit first)" in result.stderr


def test_dbpa_db_names_the_record_unless_db_is_given(wide_console):
    result = runner.invoke(app, ["runs"], env={"DBPA_DB": "from-env.duckdb"})
    assert "from-env.duckdb does not exist" in result.stderr
    result = runner.invoke(
        app, ["runs", "--db", "given.duckdb"], env={"DBPA_DB": "from-env.duckdb"}
    )
    assert "given.duckdb does not exist" in result.stderr


def test_the_help_names_dbpa_db():
    result = runner.invoke(app, ["runs", "--help"], env={"COLUMNS": "200"})
    assert "DBPA_DB" in result.stdout


def test_a_url_without_psycopg_installed_says_which_extra_to_install(wide_console, monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if not installed
    result = runner.invoke(app, ["runs", "--db", "postgresql://dbpa@127.0.0.1:9/dbpa"])
    assert result.exit_code == 2
    assert "needs psycopg: pip install 'dbpa[postgres]'" in result.stderr
