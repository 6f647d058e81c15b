"""``dbpa results``: a run's results as a table (a huge family summarised), csv or json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.conftest import invoke, text


def _huge_record(path: Path, m: int) -> Path:
    """A completed run of ``m`` perturbations (odd ones labelled control): every test at
    p = (i + 1) / (m + 1), and the first 20 changed."""
    from dbpa.analysis import Decision
    from storage import Store
    from tests.storage.conftest import family_row, make_record

    with Store(path, serve_readers=False) as store:
        store.add_tests([make_record(f"t{i}", "o", f"a{i}", (i + 1) / (m + 1)) for i in range(m)])
        store.start_run(
            "huge",
            audit="a",
            config={"k": 4},
            config_hash="h",
            epoch="0",
            flow_run_id=None,
            versions={},
        )
        family = [
            family_row(
                f"style-number-{i}",
                "o",
                f"a{i}",
                f"t{i}",
                position=i,
                kind="template",
                label="control" if i % 2 else "target",
                description=f"value {i}",
            )
            for i in range(m)
        ]
        store.add_family("huge", family)
        decisions = [
            Decision(f"style-number-{i}", (i + 1) / (m + 1), (i + 1) / (m + 1) * 10, i < 20, True)
            for i in range(m)
        ]
        store.add_corrections("huge", "m", "holm", 0.05, decisions)
        store.finish_run("huge", "completed")
    return path


@pytest.fixture(scope="module")
def huge_record(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _huge_record(tmp_path_factory.mktemp("huge") / "huge.duckdb", 10_000)


@pytest.mark.usefixtures("wide_console")
def test_results_of_a_huge_family_are_summarised_and_listed_with_all(huge_record):
    result = invoke("results", "huge", "--db", str(huge_record))
    assert result.exit_code == 0, result.output
    assert "run huge (completed): 10,000 perturbations" in result.output
    assert re.search(r"│ target\s*│ 5,000\s*│ 10\s*│ 4,990\s*│", result.output)
    assert re.search(r"│ control\s*│ 5,000\s*│ 10\s*│ 4,990\s*│", result.output)
    assert "the 10 of smallest adjusted p, then p (--all lists every one;" in text(result)
    shown = re.findall(r"style-number-\d+", result.output)
    assert shown == [f"style-number-{i}" for i in range(10)]
    assert len(result.output.splitlines()) < 40

    listed = invoke("results", "huge", "--db", str(huge_record), "--all")
    assert listed.exit_code == 0, listed.output
    lines = [line.split() for line in listed.output.splitlines() if "style-number-" in line]
    assert [line[0] for line in lines] == [f"style-number-{i}" for i in range(10_000)]
    assert lines[0][1:] == ["target", "0.300***", "+0.200", "0.0001", "0.0010", "changed"]
    assert lines[-1][1:] == ["control", "0.300", "+0.200", "0.9999", "9.9990", "no", "change"]

    as_json = json.loads(
        invoke("results", "huge", "--db", str(huge_record), "--format", "json").output
    )
    assert len(as_json) == 10_000


@pytest.mark.parametrize(
    ("estimate", "low", "high", "shown"),
    [
        (-0.000873, 0.0, 0.438, "0 [0, 0.44]"),
        (-0.162, 0.0, 0.0, "0 [0, 0]"),
        (0.5, 0.0, 0.438, "0.44 [0, 0.44]"),
        (0.0123, 0.0, 0.031, "0.012 [0, 0.031]"),
    ],
)
def test_the_results_table_never_shows_an_estimate_outside_its_interval(estimate, low, high, shown):
    """As in the reports: the estimate is clipped into its interval (the JSON keeps it raw)."""
    from dbpa.cli._record import _interval_cell, _Result

    fields = dict.fromkeys(_Result._fields)
    fields.update(effect_estimate=estimate, effect_low=low, effect_high=high)
    assert _interval_cell(_Result(**fields)) == shown
