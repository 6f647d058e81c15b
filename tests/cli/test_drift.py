"""``dbpa drift --per-tick``: arm-by-arm drift tests of an audit from the record alone (the
monitor, the default, is in test_monitor)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dbpa.cli import app
from storage import Store
from tests.cli.conftest import shown_at
from tests.drift.conftest import ROLES, record_tick

runner = CliRunner()


pytestmark = pytest.mark.usefixtures("wide_console")


def invoke(*args: str):
    return runner.invoke(app, ["drift", "--per-tick", *args], catch_exceptions=False)


@pytest.fixture
def db(tmp_path):
    """Three ticks: t2 like t1, t3 with the original arm moved."""
    path = tmp_path / "drift.duckdb"
    with Store(path) as store:
        record_tick(store, "t1")
        record_tick(store, "t2")
        record_tick(store, "t3", shift={"original": 4.0})
    return path


def _decisions(result) -> dict[str, dict[str, bool]]:
    assert result.exit_code == 0, result.output
    return {
        c["against"]: {r["role"]: r["reject"] for r in c["results"]}
        for c in json.loads(result.output)
    }


def test_the_latest_tick_against_the_previous_and_the_first(db):
    found = json.loads(invoke("drifty", "--db", str(db), "--format", "json").output)
    assert [(c["against"], c["epoch"], c["reference_epoch"]) for c in found] == [
        ("previous", "t3", "t2"),
        ("baseline", "t3", "t1"),
    ]
    for comparison in found:
        assert {r["role"]: r["reject"] for r in comparison["results"]} == {
            "original": True,
            ROLES[1]: False,
            ROLES[2]: False,
        }
        assert comparison["correction"] == "holm"
        assert comparison["k"] == 12


def test_an_earlier_tick_and_a_chosen_baseline(db):
    assert _decisions(invoke("drifty", "--db", str(db), "--epoch", "t2", "--format", "json")) == {
        "previous": dict.fromkeys(ROLES, False),
        "baseline": dict.fromkeys(ROLES, False),
    }
    found = _decisions(
        invoke(
            "drifty",
            "--db",
            str(db),
            "--baseline",
            "t2",
            "--against",
            "baseline",
            "--format",
            "json",
        )
    )
    assert found == {"baseline": {"original": True, ROLES[1]: False, ROLES[2]: False}}


def test_the_table_names_the_ticks_and_the_changed_arm(db):
    result = invoke("drifty", "--db", str(db))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert (
        "drifty: epoch t3 against the previous epoch t2 (holm at alpha=0.05, k=12, B=499)" in text
    )
    assert "epoch t3 against the baseline epoch t1" in text
    lines = [line.strip() for line in result.output.splitlines() if "original (m)" in line]
    assert len(lines) == 2
    assert all(line.endswith("changed") and "no change" not in line for line in lines)


@pytest.mark.parametrize("columns", [80, 30])
def test_arms_and_decisions_show_whole_on_a_narrow_terminal(db, columns):
    shown = shown_at(columns, "drift", "drifty", "--per-tick", "--db", str(db))
    lines = [line.strip() for line in shown.splitlines() if line.startswith("original (m)")]
    assert len(lines) == 2, shown
    assert all(line.endswith(" changed") for line in lines)
    assert "\u2026" not in shown


def test_it_reads_only(db):
    before = db.read_bytes()
    assert invoke("drifty", "--db", str(db)).exit_code == 0
    assert db.read_bytes() == before


def test_ticks_with_different_k_compare_the_first_outputs_of_both(tmp_path):
    path = tmp_path / "k.duckdb"
    with Store(path) as store:
        record_tick(store, "t1", k=12)
        record_tick(store, "t2", k=8)
        record_tick(store, "failed", status="failed")  # not an epoch: its run did not complete
    found = json.loads(invoke("drifty", "--db", str(path), "--format", "json").output)
    assert [(c["epoch"], c["reference_epoch"], c["k"]) for c in found] == [
        ("t2", "t1", 8),
        ("t2", "t1", 8),
    ]


def test_dated_ticks_are_compared_in_time_order_whatever_order_they_ran_in(tmp_path):
    path = tmp_path / "late.duckdb"
    with Store(path) as store:
        for epoch in ("2026-11-27", "2026-11-29", "2026-11-28"):  # the 28th run last
            record_tick(store, epoch)

    def compared(*args: str) -> list[tuple[str, str, str]]:
        found = json.loads(invoke("drifty", "--db", str(path), "--format", "json", *args).output)
        return [(c["against"], c["epoch"], c["reference_epoch"]) for c in found]

    assert compared() == [
        ("previous", "2026-11-29", "2026-11-28"),
        ("baseline", "2026-11-29", "2026-11-27"),
    ]
    assert compared("--epoch", "2026-11-28") == [
        ("previous", "2026-11-28", "2026-11-27"),
        ("baseline", "2026-11-28", "2026-11-27"),
    ]


def test_a_single_tick_has_nothing_to_compare(tmp_path):
    path = tmp_path / "one.duckdb"
    with Store(path) as store:
        record_tick(store, "t1")
    result = invoke("drifty", "--db", str(path))
    assert result.exit_code == 0
    assert "a single epoch is recorded; nothing to compare yet" in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "audit: no completed run of 'nope' is recorded"),
        (
            ["drifty", "--baseline", "t9"],
            "baseline: no completed run at epoch 't9'; recorded: t1, t2, t3",
        ),
        (["drifty", "--epoch", "t0"], "epoch: no completed run at epoch 't0'"),
        (["drifty", "--epoch", "t1", "--baseline", "t2"], "baseline: epoch 't2' is later than"),
        (
            ["drifty", "--against", "sideways"],
            "against: unknown 'sideways'; choose previous or baseline",
        ),
        (["drifty", "--format", "xml"], "--format: unknown 'xml'; choose table or json"),
    ],
)
def test_bad_requests_exit_2_naming_the_option(db, args, message):
    result = invoke(*args, "--db", str(db))
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_a_missing_database_exits_2(tmp_path):
    result = invoke("drifty", "--db", str(tmp_path / "none.duckdb"))
    assert result.exit_code == 2
    assert "does not exist" in result.output
