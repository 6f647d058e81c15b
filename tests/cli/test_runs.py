"""``dbpa runs``: every run of a record, its id whole whatever the terminal's width."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import shown_at

SHORT = ("persona-test", "persona-test-20261127-061633-5742b91b")
LONG = (
    "clinic-triage-paraphrase-robustness-2026",
    "clinic-triage-paraphrase-robustness-2026-20261127-061633-5742b91b",
)
MESSAGE = "2 of 10 arms could not be sampled: the provider said 401 (invalid key); fix it"


def _record(path: Path, *runs: tuple[str, str]) -> Path:
    from storage import Store

    with Store(path, serve_readers=False) as store:
        for audit, run_id in runs:
            store.start_run(
                run_id,
                audit=audit,
                config={"k": 4},
                config_hash="h",
                epoch="0",
                flow_run_id=None,
                versions={},
            )
            store.finish_run(run_id, "incomplete", MESSAGE)
    return path


@pytest.mark.parametrize("columns", [80, 120])
def test_run_ids_are_never_cut_or_wrapped(tmp_path, columns):
    db = _record(tmp_path / "a.duckdb", SHORT, LONG)
    shown = shown_at(columns, "runs", "--db", str(db))
    lines = shown.splitlines()
    for _, run_id in (SHORT, LONG):
        assert any(run_id in line for line in lines), run_id
    assert "…" not in shown
    if columns == 80:  # too narrow for a table: one run after the other, all of it said
        assert lines[0] == LONG[1]
        assert f"incomplete · audit {LONG[0]} · epoch 0" in lines[1]
        assert lines[2].strip() == MESSAGE
    else:
        assert lines[0].split() == ["run", "status", "epoch", "started", "message"]


def test_runs_that_fit_are_a_table_without_the_audit_their_ids_name(tmp_path):
    db = _record(tmp_path / "a.duckdb", SHORT)
    shown = shown_at(80, "runs", "--db", str(db))
    assert all(len(line.rstrip()) <= 80 for line in shown.splitlines())
    header, _, first, *rest = shown.splitlines()
    assert header.split() == ["run", "status", "epoch", "started", "message"]
    assert first.startswith(f"{SHORT[1]}  incomplete  0 ")
    words = " ".join(line[first.index(MESSAGE[:5]) :].strip() for line in [first, *rest])
    assert words == MESSAGE  # wrapped at spaces, in its column
