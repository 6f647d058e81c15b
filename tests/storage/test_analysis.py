"""The analysis record: tests, runs, families, corrections and results."""

from __future__ import annotations

import pandas as pd
import pytest

from dbpa.analysis import Decision
from storage import UnknownRunError
from tests.storage.conftest import count, make_record


def test_results_join_family_tests_and_corrections(store):
    store.start_run(
        "run",
        audit="a",
        config={"k": 2},
        config_hash="h",
        epoch="0",
        flow_run_id=None,
        versions={"dbpa": "0"},
    )
    store.add_tests([make_record("t1", p=0.01), make_record("t2", p=0.5)])
    rows = [
        dict(
            family="m",
            perturbation_id=f"p{i}",
            position=i,
            kind="variant",
            label=lab,
            description=f"d{i}",
            original_arm="a",
            perturbed_arm=f"b{i}",
            test_id=f"t{i + 1}",
        )
        for i, lab in enumerate(["target", "control", None])
    ]
    store.add_family("run", rows)
    decisions = [
        Decision("p0", 0.01, 0.02, True, True),
        Decision("p1", 0.5, 0.5, False, True),
        Decision("p2", 1.0, 1.0, False, False),
    ]
    store.add_corrections("run", "m", "holm", 0.05, decisions)
    store.add_corrections("run", "m", "holm", 0.05, decisions)  # replaced, not duplicated
    df = store.results("run")
    assert df.perturbation_id.tolist() == ["p0", "p1", "p2"]
    assert df.reject.tolist() == [True, False, False]
    assert df.p_value.tolist()[:2] == [0.01, 0.5]
    assert pd.isna(df.p_value.iloc[2])
    assert df.tested.tolist() == [True, True, False]
    assert count(store, "corrections") == 3


def test_runs_lifecycle(store):
    store.start_run(
        "r1", audit="a", config={}, config_hash="h", epoch="0", flow_run_id="f", versions={}
    )
    assert store.run("latest")["status"] == "running"
    assert store.mark_interrupted_runs() == 1
    assert store.run("r1")["status"] == "crashed"
    store.start_run(
        "r1", audit="a", config={}, config_hash="h", epoch="0", flow_run_id="f", versions={}
    )
    store.finish_run("r1", "completed", report_path="/tmp/r.html")
    row = store.run("r1")
    assert (row["status"], row["report_path"]) == ("completed", "/tmp/r.html")
    with pytest.raises(UnknownRunError, match="run 'nope' is not in"):
        store.run("nope")


def test_tests_read_without_nulls_and_p_values_alone(store):
    store.add_tests([make_record("t1", p=0.01), make_record("t2", p=0.5)])
    full = store.tests(["t1", "t2", "t3"])
    light = store.tests(["t2", "t1"], nulls=False)
    assert light.test_id.tolist() == ["t1", "t2"]
    assert "null_distribution" in full.columns
    assert "null_distribution" not in light.columns
    assert light.equals(full.drop(columns="null_distribution"))
    assert store.test_p_values(["t2", "t1", "t3"]) == {"t1": 0.01, "t2": 0.5}
    assert store.test_p_values([]) == {}
