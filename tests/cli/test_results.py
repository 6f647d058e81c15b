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


SEQUENTIAL_CONFIG = {"k": 16, "sequential": {"first": 8, "looks": 2}}


def _sequential_record(path: Path, *, looked: bool, config: dict | None = None) -> Path:
    """A sequential run in progress, written as the flow writes it: five perturbations, the
    arm of ``failed`` could not be sampled; after the first look (``looked``) ``comedian``
    has stopped as changed, ``doctor`` as futile, ``child`` and ``nurse`` are open."""
    from storage import Store
    from tests.storage.conftest import family_row, make_record

    names = ("comedian", "doctor", "child", "nurse", "failed")
    with Store(path, serve_readers=False) as store:
        store.start_run(
            "seq",
            audit="a",
            config=config or SEQUENTIAL_CONFIG,
            config_hash="h",
            epoch="0",
            flow_run_id=None,
            versions={},
        )
        store.add_family(
            "seq",
            [
                family_row(name, "o", f"arm-{name}", f"{name}-at-16", position=i)
                for i, name in enumerate(names)
            ],
        )
        store.add_arm_failure("seq", "arm-failed", "openai/m", "401 bad key")
        if looked:
            p = {"comedian": 0.0002, "doctor": 0.9, "child": 0.04, "nurse": 0.3}
            store.add_tests(
                [make_record(f"{name}-at-8", "o", f"arm-{name}", p[name]) for name in p]
            )
            stops = {"comedian": "changed", "doctor": "futile"}
            store.add_sequential_looks(
                "seq",
                "m",
                [
                    dict(perturbation_id=name, look=0, k=8, test_id=f"{name}-at-8")
                    | dict(p_value=p[name], weight=0.3, stop=stops.get(name))
                    for name in p
                ],
            )
    return path


def _decisions(path: Path) -> dict[str, str]:
    rows = json.loads(invoke("results", "seq", "--db", str(path), "--format", "json").output)
    return {r["perturbation_id"]: r["decision"] for r in rows}


@pytest.mark.usefixtures("wide_console")
def test_a_running_sequential_run_shows_its_stops_so_far_and_pending_for_the_rest(tmp_path):
    before = _sequential_record(tmp_path / "before.duckdb", looked=False)
    assert _decisions(before) == {
        "comedian": "pending",
        "doctor": "pending",
        "child": "pending",
        "nurse": "pending",
        "failed": "not tested",  # only an arm that failed is not tested
    }
    shown = invoke("results", "seq", "--db", str(before))
    assert shown.exit_code == 0, shown.output
    assert "stopped" in shown.output  # the run is sequential: its stops will show there
    assert "0 of 5 perturbations tested so far; 4 pending: decided at a later look or" in text(
        shown
    )

    after = _sequential_record(tmp_path / "after.duckdb", looked=True)
    assert _decisions(after) == {
        "comedian": "changed",  # below the lone threshold: changed after any correction
        "doctor": "no change",  # futile: p = 1
        "child": "pending",
        "nurse": "pending",
        "failed": "not tested",
    }
    rows = json.loads(invoke("results", "seq", "--db", str(after), "--format", "json").output)
    stops = {r["perturbation_id"]: (r["stopped_at"], r["stop_reason"]) for r in rows}
    assert stops["comedian"] == (8, "changed")
    assert stops["doctor"] == (8, "futile")
    assert stops["child"] == stops["nurse"] == (None, None)
    assert [r["k_a"] for r in rows[:4]] == [5, 5, 5, 5]  # each points at its look's test
    table = invoke("results", "seq", "--db", str(after))
    lines = {name: _line(table.output, name) for name in ("comedian", "doctor", "child")}
    assert lines["comedian"][-3:] == ["8", "changed", "changed"]
    assert lines["doctor"][-4:] == ["8", "futile", "no", "change"]
    assert lines["child"][-2:] == ["open", "pending"]
    assert "4 of 5 perturbations tested so far; 2 pending" in text(table)


def _line(output: str, name: str) -> list[str]:
    return next(line for line in output.splitlines() if line.startswith(name)).split()


@pytest.mark.usefixtures("wide_console")
def test_with_a_margin_a_change_found_at_a_look_waits_for_the_equivalence_test(tmp_path):
    """A test stopped as changed may still be shown equivalent by the correction."""
    config = SEQUENTIAL_CONFIG | {"equivalence": {"margin": 0.5}}
    path = _sequential_record(tmp_path / "margin.duckdb", looked=True, config=config)
    decided = _decisions(path)
    assert decided["comedian"] == "pending"
    assert decided["failed"] == "not tested"
    table = invoke("results", "seq", "--db", str(path))
    assert _line(table.output, "comedian")[-3:] == ["8", "changed", "pending"]


def test_a_finished_runs_untested_perturbations_stay_not_tested(tmp_path):
    """A run that ended (crashed) without testing them never will: not tested, not pending."""
    from storage import Store

    path = _sequential_record(tmp_path / "crashed.duckdb", looked=False)
    with Store(path, serve_readers=False) as store:
        store.finish_run("seq", "crashed", "killed")
    assert set(_decisions(path).values()) == {"not tested"}


def test_the_report_of_a_running_sequential_run_reads_as_its_results(tmp_path):
    path = _sequential_record(tmp_path / "after.duckdb", looked=True)
    made = invoke("report", "seq", "--db", str(path), "--format", "json", "--out", str(tmp_path))
    assert made.exit_code == 0, made.output
    report = json.loads((tmp_path / "seq.json").read_text())
    rows = [r for f in report["families"] for r in f["results"]]
    assert {r["perturbation_id"]: r["decision"] for r in rows} == _decisions(path)
    invoke("report", "seq", "--db", str(path), "--out", str(tmp_path))
    page = (tmp_path / "seq.html").read_text()
    # only the failed arm's perturbation is called untested; the open ones are pending
    assert "1 perturbation could not be tested" in page
    assert "stopped at k=8: changed" in page


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
