"""A damaged, foreign or newer record: every command exits 2 with the file, what DuckDB
reported and the advice, no traceback, and the bytes on disk as they were."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import make_config
from tests.storage.conftest import DAMAGES, damaged_record, fingerprint
from tests.support.signals import interruptible

pytestmark = pytest.mark.usefixtures("wide_console")

SAID = {
    "truncated": "Could not read enough bytes",
    "garbage-in-the-middle": "Corrupt database file",
    "main-header": "not a valid DuckDB database file",
    "database-headers": "Corrupt database file",
    "text-file": "not a valid DuckDB database file",
    "sqlite-file": "it is a SQLite database",
    "directory": "is a directory; name a database file",
    "newer-schema": "was written by a newer dbpa (schema version 99; this dbpa knows",
}
COMMANDS = {
    "run": lambda config, out: ["run", str(config), "--out", str(out)],
    "runs": lambda config, out: ["runs"],
    "results": lambda config, out: ["results", "latest"],
    "report": lambda config, out: ["report", "latest", "--out", str(out / "r.html")],
    "export": lambda config, out: ["export", "--out", str(out)],
}


@pytest.mark.parametrize("kind", sorted(SAID))
def test_every_command_refuses_it_and_writes_nothing(
    sound_record, tmp_path, provider, write_config, kind
):
    path = damaged_record(sound_record, tmp_path, kind)
    config = write_config(make_config(provider))
    before = fingerprint(path)
    for name, args in COMMANDS.items():
        result = invoke(*args(config, tmp_path / name), "--db", str(path))
        said = text(result)
        assert result.exit_code == 2, (name, result.output)
        assert f"error: database {path}" in said, name
        assert SAID[kind] in said, name
        assert "Traceback" not in result.output
        assert fingerprint(path) == before, name
        if kind not in ("directory", "newer-schema"):
            assert "Keep the file as it is and start a new record with another --db" in said


def test_every_damage_is_tested():
    assert set(SAID) == set(DAMAGES)


def test_export_salvage_writes_what_reads_and_exits_2(sound_record, tmp_path):
    path = damaged_record(sound_record, tmp_path, "garbage-in-the-middle")
    before = fingerprint(path)
    plain = invoke("export", "--db", str(path), "--out", str(tmp_path / "plain"))
    assert plain.exit_code == 2
    assert f"dbpa export --salvage --db {path}" in text(plain)
    result = invoke("export", "--salvage", "--db", str(path), "--out", str(tmp_path / "x"))
    said = text(result)
    assert result.exit_code == 2, result.output
    assert f"runs: {tmp_path / 'x' / 'runs.parquet'}" in said
    assert "samples: " in said
    assert "of 6,000 rows)" in said
    assert "could not read some rows of samples: Corrupt database file" in said
    assert "1 table(s) of" in said
    assert list(pd.read_parquet(tmp_path / "x" / "runs.parquet").run_id) == ["done"]
    assert fingerprint(path) == before
    whole = invoke("export", "--salvage", "--db", str(sound_record), "--out", str(tmp_path / "y"))
    assert whole.exit_code == 0, whole.output
    assert len(pd.read_parquet(tmp_path / "y" / "samples.parquet")) == 6000
    both = invoke("export", "--salvage", "--table", "runs", "--db", str(path))
    assert both.exit_code == 2
    assert "--salvage exports every table" in text(both)


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbpa.cli", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )


@pytest.mark.parametrize("kind", ["garbage-in-the-middle", "truncated", "main-header"])
def test_a_failing_command_leaves_no_traceback_and_no_leak_report(sound_record, tmp_path, kind):
    path = damaged_record(sound_record, tmp_path, kind)
    for args in (["runs"], ["export", "--out", str(tmp_path / "x")]):
        done = _cli(*args, "--db", str(path))
        assert done.returncode == 2, done.stderr
        for word in ("nanobind", "leaked", "Traceback"):
            assert word not in done.stderr


def test_ctrl_c_during_a_read_leaves_no_traceback_and_no_leak_report(sound_record, tmp_path):
    """SIGINT while DuckDB answers a read (a long query in place of the runs query)."""
    script = textwrap.dedent(
        f"""
        import os, signal, threading
        import storage._core as core
        from dbpa.cli import app

        original = core.StoreCore._arrow

        def slow(self, sql, params=()):
            threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
            return original(self, "SELECT sum(range) FROM range(2000000000)")

        core.StoreCore._arrow = slow
        app(["runs", "--db", {str(sound_record)!r}], prog_name="dbpa")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=interruptible,
    )
    assert done.returncode in (1, 128 + signal.SIGINT, -signal.SIGINT), done.stderr
    for word in ("nanobind", "leaked", "Traceback"):
        assert word not in done.stderr
    assert os.path.exists(sound_record)
