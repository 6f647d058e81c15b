"""A finished audit run again: decided from the record, without Prefect's temporary server."""

from __future__ import annotations

import duckdb
import pytest

from dbpa.launch._from_record import MESSAGE
from tests.cli.conftest import invoke, text
from tests.pipeline.conftest import KEY_ENV, make_config
from tests.support.cli_process import normalised, run_dbpa

DECIDED = (
    "SELECT perturbation_id, p_value, adjusted_p, reject, decision, margin FROM corrections "
    "WHERE run_id = ? ORDER BY perturbation_id"
)


def _runs(db) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(
            "SELECT run_id, status, flow_run_id, message FROM runs ORDER BY started_at"
        ).fetchall()


def _decided(db, run_id) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(DECIDED, [run_id]).fetchall()


@pytest.mark.slow
@pytest.mark.usefixtures("prefect_harness", "wide_console")
def test_a_rerun_decides_from_the_record_as_the_flow_did(
    tmp_path, provider, write_config, prefect_home
):
    """The re-run of a finished audit in a fresh interpreter, as a user runs it, makes no
    model call, starts no Prefect server and records the decisions the flow recorded (the
    first run, which only finishes the record, runs here on the harness's server)."""
    config = write_config(make_config(provider, equivalence={"replicates": 2}))
    db = tmp_path / "a.duckdb"
    args = ["run", str(config), "--db", str(db)]
    first = invoke(*args)
    assert first.exit_code == 0, first.output
    calls = provider.counts.by_endpoint["/v1/chat/completions"]
    env = {KEY_ENV: "sk-pipeline-test"}
    second = run_dbpa(args, prefect_home, cwd=tmp_path, env=env)
    assert second.returncode == 0, second.stdout
    assert provider.counts.by_endpoint["/v1/chat/completions"] == calls
    shown = normalised(second.stdout, tmp_path)
    assert shown.startswith(
        "persona-test: every output, vector and test is in <TMP>/a.duckdb: deciding and "
        "reporting from the record (Prefect not started)\n"
    )
    assert "Started a temporary server" not in second.stdout
    assert "html report: <TMP>/reports/persona-test-" in shown
    (flow_run, by_record) = _runs(db)
    assert flow_run[1] == "completed"
    assert flow_run[2] is not None  # the flow's run has its flow run
    assert by_record[1:] == ("completed", None, MESSAGE)
    assert by_record[0].endswith("-record")
    assert _decided(db, by_record[0]) == _decided(db, flow_run[0])
    assert {row[4] for row in _decided(db, by_record[0])} <= {
        "changed",
        "inconclusive",
        "equivalent",
    }
    # the tables of both runs read the same, row for row
    table = [line for line in shown.splitlines() if line.startswith("persona-")][1:]
    assert len(table) >= 4  # a row a perturbation (and the advice after the table)
    assert (
        table
        == [
            line
            for line in normalised(first.output, tmp_path).splitlines()
            if line.startswith("persona-")
        ][1:]
    )


@pytest.mark.usefixtures("prefect_harness")
def test_with_a_prefect_server_configured_a_rerun_goes_through_the_flow(
    tmp_path, provider, write_config
):
    """The Prefect UI should see every run when a server is configured (the harness's)."""
    config, db = str(write_config(make_config(provider))), str(tmp_path / "a.duckdb")
    for _ in range(2):
        result = invoke("run", config, "--db", db)
        assert result.exit_code == 0, result.output
    assert "Prefect not started" not in text(result)
    assert [run[2] is not None for run in _runs(db)] == [True, True]
