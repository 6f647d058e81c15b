"""``dbpa drift`` (the monitor, by default) and ``dbpa monitor reset``, from the record alone."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dbpa.cli import app
from storage import Store
from tests.cli.conftest import shown_at
from tests.drift.conftest import record_tick

runner = CliRunner()
pytestmark = pytest.mark.usefixtures("wide_console")
EPOCHS = [f"2026-11-{day:02d}T03:00:00+00:00" for day in range(1, 13)]


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def db(tmp_path):
    """Twelve ticks; the original arm moved from the sixth on (after five quiet ones)."""
    path = tmp_path / "drift.duckdb"
    with Store(path) as store:
        for i, epoch in enumerate(EPOCHS):
            record_tick(store, epoch, shift={"original": 4.0} if i >= 5 else None)
    return path


def monitored(db) -> dict[str, dict]:
    result = invoke("drift", "drifty", "--db", str(db), "--format", "json")
    assert result.exit_code == 0, result.output
    return {row["arm"].split(" ")[0]: row for row in json.loads(result.output)["latest"]}


def test_the_monitor_is_the_default_and_alarms_for_the_moved_arm_only(db):
    rows = monitored(db)
    assert {role: row["alarm"] for role, row in rows.items()} == {
        "original": True,
        "prompt-is-the-sky-blue-today": False,
        "prompt-sky-blue": False,
    }
    assert {(row["ticks"], row["threshold"]) for row in rows.values()} == {(11, 60.0)}
    table = invoke("drift", "drifty", "--db", str(db))
    assert table.exit_code == 0
    assert "drift monitor of 3 arms" in table.output
    assert "alarm" in table.output


@pytest.mark.parametrize("columns", [80, 30])
def test_the_monitor_shows_each_arm_whole_on_a_narrow_terminal(db, columns):
    """An arm's label is what ``dbpa monitor reset`` takes: never cut nor folded."""
    shown = shown_at(columns, "drift", "drifty", "--db", str(db))
    for label in monitored(db):
        assert any(line.startswith(label) for line in shown.splitlines()), shown
    assert "\u2026" not in shown


def test_reset_starts_a_new_baseline_for_one_arm_or_all(db):
    label = next(r["arm"] for role, r in monitored(db).items() if role == "original")
    result = invoke("monitor", "reset", "drifty", label, "--db", str(db))
    assert result.exit_code == 0, result.output
    rows = monitored(db)
    assert "original" not in rows  # its new baseline is the latest tick: no tick since
    assert rows["prompt-sky-blue"]["baseline_epoch"] == EPOCHS[0]
    assert invoke("monitor", "reset", "drifty", "--all", "--db", str(db)).exit_code == 0
    with Store(db, read_only=True) as store:
        assert len(store.monitor_resets("drifty")) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["monitor", "reset", "drifty"], "ARM:"),
        (["monitor", "reset", "drifty", "nope"], "ARM: drifty has no arm 'nope'"),
        (["monitor", "reset", "other", "--all"], "AUDIT: no completed run"),
        (["drift", "drifty", "--baseline", "x"], "--baseline: only with --per-tick"),
        (["drift", "drifty", "--against", "previous"], "--against: only with --per-tick"),
        (["drift", "drifty", "--tolerance", "1.5"], "--tolerance:"),
        (["drift", "drifty", "--conformal", "pairs"], "--conformal: unknown 'pairs'"),
        (["drift", "drifty", "--per-tick", "--tolerance", "0.1"], "--tolerance: only without"),
        (["drift", "drifty", "--per-tick", "--conformal", "both"], "--conformal: only without"),
        (["drift", "drifty", "--per-tick", "--pool", "arms"], "--pool: only without"),
    ],
)
def test_bad_input_is_named(db, args, message):
    result = invoke(*args, "--db", str(db))
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


def test_the_design_is_shown_and_can_be_chosen(db):
    table = invoke("drift", "drifty", "--db", str(db))
    assert "conformal both" in " ".join(table.output.split())
    chosen = invoke(
        "drift", "drifty", "--db", str(db), "--conformal", "outputs", "--format", "json"
    )
    assert chosen.exit_code == 0, chosen.output
    assert json.loads(chosen.output)["conformal"] == "outputs"


def test_the_configs_tolerance_is_used_and_the_option_overrides_it(tmp_path):
    path = tmp_path / "tolerant.duckdb"
    with Store(path) as store:
        for epoch in EPOCHS[:3]:
            record_tick(store, epoch, monitor={"tolerance": 0.2})
    shown = invoke("drift", "drifty", "--db", str(path), "--format", "json")
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["tolerance"] == 0.2
    chosen = invoke("drift", "drifty", "--db", str(path), "--tolerance", "0", "--format", "json")
    assert json.loads(chosen.output)["tolerance"] == 0.0


def test_an_unknown_pooling_is_named(db):
    result = invoke("drift", "drifty", "--db", str(db), "--pool", "models")
    assert result.exit_code != 0
    assert "--pool: unknown 'models'" in result.output


def test_a_single_prompts_arms_are_each_alone(db):
    shown = json.loads(invoke("drift", "drifty", "--db", str(db), "--format", "json").output)
    assert shown["pool"] == "prompts"
    assert shown["design"] == "3 arms, each alone, alarm at e = 3/0.05"
    assert set(shown["series"].values()) == {1}
