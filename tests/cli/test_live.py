"""Reading a record while an audit writes it, and a second ``dbpa run`` on it."""

from __future__ import annotations

import json
import time

import numpy as np
import pandas as pd
import pytest

from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import make_config
from tests.report.conftest import build_run
from tests.storage.conftest import LIVE_RUN, holding

pytestmark = pytest.mark.usefixtures("wide_console")


@pytest.fixture
def record(tmp_path):
    """A record with a completed run, to be written further by a second process."""
    path = tmp_path / "audit.duckdb"
    build_run(path, families=("gpt-4",), n_permutations=99, run_id="finished")
    return path


def test_runs_results_report_and_export_while_another_process_writes(record, tmp_path):
    with holding(record):
        runs = invoke("runs", "--db", str(record))
        results = invoke("results", LIVE_RUN, "--db", str(record))
        as_json = invoke("results", LIVE_RUN, "--db", str(record), "--format", "json")
        report = invoke(
            "report", LIVE_RUN, "--db", str(record), "--format", "md", "--out", str(tmp_path)
        )
        export = invoke("export", "--db", str(record), "--table", "samples", "--out", str(tmp_path))
    assert runs.exit_code == 0, runs.output
    assert "finished" in text(runs)
    assert "completed" in text(runs)
    assert f"{LIVE_RUN} a running 0" in text(runs)
    assert "9/12 outputs, 1/2 tests so far" in text(runs)
    assert results.exit_code == 0, results.output
    assert f"run {LIVE_RUN} (running)" in text(results)
    # the untested one is still being sampled: pending too (not tested: an arm failed)
    assert "not tested" not in text(results)
    assert "1 of 2 perturbations tested so far; 2 pending" in text(results)
    rows = json.loads(as_json.output)
    assert [r["tested"] for r in rows] == [True, False]
    assert [r["decision"] for r in rows] == ["pending", "pending"]
    assert rows[0]["adjusted_p"] is None
    assert report.exit_code == 0, report.output
    assert "status **running**" in (tmp_path / f"{LIVE_RUN}.md").read_text()
    assert export.exit_code == 0, export.output
    assert len(pd.read_parquet(tmp_path / "samples.parquet")) == 9 + 7 * 10


def test_a_run_whose_writer_died_is_shown_interrupted(record):
    with holding(record) as holder:
        holder.kill()
        holder.wait()
    runs = invoke("runs", "--db", str(record))
    assert runs.exit_code == 0, runs.output
    assert (
        "interrupted (9/12 outputs, 1/2 tests so far): no process is writing the record; "
        "the next run marks it crashed"
    ) in text(runs)


def test_run_no_wait_fails_at_once(record, provider, write_config):
    config = write_config(make_config(provider))
    with holding(record) as holder:
        start = time.monotonic()
        result = invoke("run", str(config), "--db", str(record), "--no-wait")
        elapsed = time.monotonic() - start
    assert result.exit_code == 1, result.output
    assert f"database {record} is in use by another run (process {holder.pid})" in text(result)
    assert "Traceback" not in result.output
    assert "waiting" not in result.output
    assert elapsed < 15


@pytest.mark.usefixtures("prefect_harness")
def test_a_second_run_waits_for_the_first_then_runs(tmp_path, provider, write_config):
    db = tmp_path / "cli.duckdb"
    config = write_config(make_config(provider))
    with holding(db, seconds=4) as holder:
        result = invoke("run", str(config), "--db", str(db), "--out", str(tmp_path / "reports"))
    said = text(result)
    assert result.exit_code == 0, result.output
    waiting = f"waiting for process {holder.pid}'s run of {db} to finish; --no-wait to fail at once"
    assert said.count(waiting) == 1
    assert "persona-comedian" in said
    runs = invoke("runs", "--db", str(db))
    assert "completed" in text(runs)
    assert f"{LIVE_RUN} a crashed" in text(runs)  # the first run never finished its run


def test_a_running_sequential_run_counts_outputs_against_the_most_it_may_take():
    from types import SimpleNamespace

    from dbpa.cli._record import _progress

    row = dict(outputs_stored=88, outputs_planned=220, tests_stored=0, tests_planned=10)
    sequential = SimpleNamespace(**row, sequential=np.bool_(True))
    fixed = SimpleNamespace(**row, sequential=np.bool_(False))
    assert _progress(sequential, writing=True) == "88 of at most 220 outputs so far"
    assert _progress(fixed, writing=True) == "88/220 outputs, 0/10 tests so far"
