"""``--db`` takes the path of a DuckDB file: a URL (``scheme://``) is refused by every command
that takes it, with exit 2 and one line naming ``--db``, its password never shown, nothing
created (a path would have dropped a slash: ``postgresql:/dbpa@host/db``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

from dbpa.cli import app
from tests.cli.conftest import runner

SECRET = "s3cr3t-pw"
REFUSED = "shared records are not supported yet; give the path of a DuckDB file"


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
    "url",
    [
        f"postgresql://dbpa:{SECRET}@127.0.0.1:5432/dbpa",
        f"postgres://127.0.0.1/dbpa?sslmode=require&password={SECRET}",
        "ducklake:sqlite://meta.sqlite",
        "file:///tmp/dbpa.duckdb",
    ],
    ids=["password", "query", "ducklake", "file"],
)
def test_a_url_as_the_record_exits_2_on_one_line(tmp_path: Path, path, args, url):
    result = runner.invoke(app, [*path, *args, "--db", url], env={"COLUMNS": "80"})
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith("error: --db ")
    assert line.endswith(REFUSED)
    assert len(line) <= 200
    assert SECRET not in line
    assert list(tmp_path.iterdir()) == []  # the working directory: nothing created


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"),
        ("postgresql://u:p@ss/w@rd@h/db", "postgresql://u:***@h/db"),  # up to the last @
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://h/db?password=pw&ssl", "postgresql://h/db?password=***&ssl"),
        ("s3://bucket/key", "s3://bucket/key"),
    ],
)
def test_a_url_is_shown_without_its_password(url, shown):
    result = runner.invoke(app, ["runs", "--db", url])
    assert result.stderr == f"error: --db {shown}: {REFUSED}\n"


@pytest.mark.parametrize("path", ["dbpa.duckdb", "records/a:b.duckdb", "C:/records/dbpa.duckdb"])
def test_a_path_is_still_a_path(wide_console, path):
    result = runner.invoke(app, ["runs", "--db", path])
    assert result.exit_code == 2  # no such record, named as a file
    assert f"{path} does not exist (run an audit first)" in result.stderr
