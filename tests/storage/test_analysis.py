"""The analysis record: tests, runs, families, corrections and results."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from dbpa.analysis import Decision
from dbpa.stats import effect_interval, equivalence_p_value
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


def test_an_interval_reads_back_with_the_same_equivalence_test(store):
    """Its noise draws are stored as float32 and made float32 from the start, so the stored
    interval gives the bounds and p-values of the one computed."""
    rng = np.random.default_rng(2)
    a, b = rng.normal(size=(12, 8)), rng.normal(size=(12, 8)) + 0.3
    interval = effect_interval(a, b, confidence=0.9, n_bootstrap=300, rng=4)
    record = dataclasses.replace(make_record("t1"), k_a=12, k_b=12, interval=interval)
    store.add_tests([record])
    stored = store.effect_intervals(["t1", "t2"])
    assert list(stored) == ["t1"]
    back = stored["t1"].boundary
    np.testing.assert_array_equal(back.noise, interval.boundary.noise)
    np.testing.assert_array_equal(back.directions, interval.boundary.directions)
    np.testing.assert_array_equal(back.guard.margins, interval.boundary.guard.margins)
    np.testing.assert_array_equal(back.guard.p_values, interval.boundary.guard.p_values)
    assert back.guard.margins.size >= 1
    assert back.plug_in == interval.boundary.plug_in
    np.testing.assert_array_equal(stored["t1"].distances, interval.distances)
    for margin in np.geomspace(0.01, 10.0, 25):
        assert equivalence_p_value(stored["t1"], margin) == equivalence_p_value(interval, margin)
    assert store.existing_tests(["t1"]) == {"t1"}


@pytest.mark.parametrize(
    "older",
    [
        "noise = NULL, directions = NULL, plug_in = NULL, guard_margins = NULL, guard_p = NULL",
        "guard_margins = NULL, guard_p = NULL",
        "distances = NULL",
    ],
    ids=["before migration 6", "before migration 8", "before migration 11"],
)
def test_an_interval_from_before_the_current_equivalence_test_is_not_current(store, older):
    """A record written before migration 6 has intervals without noise draws, one written
    before migration 8 without the tilted guard, one written before migration 11 without
    the distances of the set-level test's joint guard: their test counts as not stored (it is run
    again), and a new interval replaces the old row."""
    rng = np.random.default_rng(3)
    interval = effect_interval(rng.normal(size=(6, 4)), rng.normal(size=(6, 4)), rng=1)
    record = dataclasses.replace(make_record("t1"), k_a=6, k_b=6, interval=interval)
    store.add_tests([record])
    store._connection.execute(f"UPDATE effect_intervals SET {older}")
    assert store.existing_tests(["t1"]) == set()
    assert store.effect_intervals(["t1"]) == {}
    store.add_tests([record])
    assert store.existing_tests(["t1"]) == {"t1"}
    assert store._rows("SELECT count(*) FROM effect_intervals") == [(1,)]


def _looked(store, stop: str | None, *, look: bool = True) -> None:
    """A running sequential run of one perturbation, its first look stored (unless not
    ``look``)."""
    from tests.storage.conftest import family_row

    store.start_run(
        "seq", audit="a", config={"k": 16}, config_hash="h", epoch="0", flow_run_id=None,
        versions={},
    )  # fmt: skip
    store.add_family("seq", [family_row("p", "o", "x", "p-at-16")])
    store.add_tests([make_record("p-at-8", "o", "x", 0.001)])
    if look:
        row = dict(perturbation_id="p", look=0, k=8, test_id="p-at-8", p_value=0.001, weight=0.3)
        store.add_sequential_looks("seq", "m", [row | {"stop": stop}])


@pytest.mark.parametrize("stop", ["changed", None])
def test_a_stop_at_a_look_shows_in_the_results_before_the_correction(store, stop):
    _looked(store, stop)
    (row,) = store.results("seq").itertuples()
    assert row.test_id == "p-at-8"  # the family points at the look's test
    assert bool(row.tested)
    assert pd.isna(row.adjusted_p)
    shown = (row.stop_reason, row.stopped_at)
    assert [None if pd.isna(v) else v for v in shown] == ([stop, 8] if stop else [None, None])
    assert [None if pd.isna(v) else v for v in store.sequential_looks("seq").stop] == [stop]
    # the correction's stop, once stored, is the one shown
    store.add_corrections(
        "seq", "m", "holm", 0.05, [Decision("p", 0.002, 0.002, True, True)], stops={"p": (8, "x")}
    )
    (row,) = store.results("seq").itertuples()
    assert (row.stop_reason, row.stopped_at) == ("x", 8)


def test_a_record_before_look_stops_reads_its_stops_from_the_corrections(target, monkeypatch):
    import storage._core
    from storage import MIGRATIONS, Store

    path = target
    with monkeypatch.context() as patch:
        patch.setattr(storage._core, "MIGRATIONS", MIGRATIONS[:6])
        with Store(path, serve_readers=False) as old:
            _looked(old, None, look=False)  # no stop column to write it in
            old.add_corrections(
                "seq", "m", "holm", 0.05, [Decision("p", 0.002, 0.002, True, True)],
                stops={"p": (8, "changed")},
            )  # fmt: skip
    with Store(path, read_only=True) as store:
        assert store.schema_version == 6
        (row,) = store.results("seq").itertuples()
        assert (row.stop_reason, row.stopped_at) == ("changed", 8)
        assert store.sequential_looks("seq").empty
