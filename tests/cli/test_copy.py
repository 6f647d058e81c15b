"""``dbpa copy``: a record into a shared PostgreSQL record and back, one line per table and a
total; exit 2 naming ``--from`` or ``--to`` for what cannot be copied (issue 50)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pa_parquet
import pytest

from dbpa.cli import app
from storage import EXPORTS, record_layout
from tests.cli.conftest import invoke, runner, text
from tests.storage.conftest import postgres_url
from tests.support.cli_process import ROOT

SECRET = "s3cr3t-pw"


@pytest.fixture
def pg_url(postgres: Any, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new empty database on the throwaway server (PGPASSWORD set)."""
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    return postgres_url(postgres, postgres.create_database())


def _exported(db: str | Path, out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every table ``dbpa export`` writes from ``db``, read back."""
    result = invoke("export", "--db", str(db), "--out", str(out))
    assert result.exit_code == 0, result.output
    return {name: pa_parquet.read_table(out / f"{name}.parquet").to_pylist() for name in EXPORTS}


def test_a_record_copied_into_postgresql_and_back_exports_and_shows_as_the_original(
    labelled_run, pg_url, tmp_path, wide_console
):
    original = tmp_path / "original.duckdb"
    shutil.copyfile(labelled_run.db, original)
    back = tmp_path / "back.duckdb"
    there = invoke("copy", "--from", str(original), "--to", pg_url)
    assert there.exit_code == 0, there.output
    lines = there.output.splitlines()
    tables = [t for t in record_layout().tables if t != "meta"]
    assert [line.split(":")[0] for line in lines] == [*tables, "total"]
    assert ", 0 already there" in lines[0]
    assert invoke("copy", "--from", pg_url, "--to", str(back)).exit_code == 0
    again = invoke("copy", "--from", str(original), "--to", pg_url)
    assert again.exit_code == 0, again.output
    assert again.output.splitlines()[-1].startswith("total: 0 rows copied, ")
    assert all(" 0 copied, " in line for line in again.output.splitlines()[:-1])
    exported = _exported(original, tmp_path / "original")
    for db in (back, pg_url):
        assert _exported(db, tmp_path / "copy") == exported, db
        for command in (["results", "latest"], ["runs"]):
            shown = invoke(*command, "--db", str(db)).output
            assert shown == invoke(*command, "--db", str(original)).output, command


def test_what_cannot_be_copied_exits_2_naming_the_option(labelled_run, tmp_path):
    db = str(labelled_run.db)
    password = f"postgresql://u:{SECRET}@127.0.0.1:9/d"
    cases = [
        (["--from", str(tmp_path / "nil.duckdb"), "--to", "t.duckdb"], "--from ", "does not exist"),
        (["--from", db, "--to", db], "--to ", "is the source itself"),
        (["--from", db, "--to", str(tmp_path)], "--to ", "is a directory"),
        (["--from", password, "--to", "t.duckdb"], "--from ", "password"),
        (["--from", db, "--to", password], "--to ", "password"),
        (["--from", db, "--to", "s3://bucket/record"], "--to s3://bucket/record", "DuckDB file"),
        (["--from", db], "--to", "Missing option"),
    ]  # fmt: skip
    for args, names, problem in cases:
        result = runner.invoke(app, ["copy", *args], env={"COLUMNS": "80"})
        assert result.exit_code == 2, (args, result.output)
        shown = text(result)
        assert names in shown, (args, shown)
        assert problem in shown, (args, shown)
        assert SECRET not in result.output
    assert not (tmp_path / "t.duckdb").exists()


def test_a_target_that_diverged_exits_2_naming_the_table_and_key(labelled_run, tmp_path):
    target = tmp_path / "target.duckdb"
    assert invoke("copy", "--from", str(labelled_run.db), "--to", str(target)).exit_code == 0
    from storage import Store

    with Store(target, serve_readers=False) as store, store._transaction() as con:
        con.execute("UPDATE runs SET status = 'failed'")
    result = runner.invoke(
        app, ["copy", "--from", str(labelled_run.db), "--to", str(target)], env={"COLUMNS": "80"}
    )
    assert result.exit_code == 2, result.output
    shown = text(result)
    key = f"(run_id={labelled_run.run_id!r})"
    assert f"table runs: the target already holds a different row for {key}" in shown
    assert "its status differs" in shown


def test_a_copy_killed_half_way_completes_when_run_again(sound_record, pg_url, tmp_path):
    """``dbpa copy`` killed (SIGKILL) in the middle of a table, once some of its batches
    are in: the same command copies the rest, nothing twice."""
    import psycopg

    args = [sys.executable, "-m", "dbpa.cli", "copy", "--from", str(sound_record), "--to", pg_url]
    env = os.environ | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}
    copying = subprocess.Popen(args, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    assert copying.stdout is not None
    try:
        for line in copying.stdout:
            if line.startswith("samples:"):  # the vectors come next: kill once some are in
                with psycopg.connect(pg_url) as con:
                    while not con.execute("SELECT count(*) FROM embeddings").fetchone()[0]:
                        time.sleep(0.01)
                copying.send_signal(signal.SIGKILL)
                break
    finally:
        copying.kill()
        copying.wait(timeout=60)
    assert copying.returncode == -signal.SIGKILL
    rest = subprocess.run(args, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert rest.returncode == 0, rest.stderr
    shown = dict(line.split(": ", 1) for line in rest.stdout.splitlines())
    assert shown["samples"] == "0 copied, 6,000 already there"
    copied, kept = (int(n.replace(",", "")) for n in shown["embeddings"].split() if n[0].isdigit())
    assert kept > 0
    assert copied + kept == 6000
    again = invoke("copy", "--from", str(sound_record), "--to", pg_url)
    assert again.output.splitlines()[-1].startswith("total: 0 rows copied, 12,005 already there")
