"""The drift record: the v2 migration, epochs and drift tests."""

from __future__ import annotations

import numpy as np
import pytest

import storage._core
from dbpa.analysis import AnalysisSpec, run_test
from storage import MIGRATIONS, Store

CONFIG = {"name": "a", "k": 4}


def _row(arm: str, test_id: str, reject: bool = False) -> dict[str, object]:
    return {
        "reference_epoch": "e1",
        "arm_id": arm,
        "reference_arm": f"{arm}-then",
        "family": "m",
        "role": "original",
        "test_id": test_id,
        "method": "holm",
        "alpha": 0.05,
        "adjusted_p": 0.5,
        "reject": reject,
    }


def _record(test_id: str):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 3)).astype(np.float32)
    return run_test(
        test_id,
        x,
        x + 1,
        original_arm="then",
        perturbed_arm="now",
        embedder="emb",
        analysis=AnalysisSpec(n_permutations=9),
    )


def _run(store: Store, run_id: str, epoch: str, status: str = "completed") -> None:
    store.start_run(
        run_id,
        audit="a",
        config=CONFIG,
        config_hash="h",
        epoch=epoch,
        flow_run_id=None,
        versions={},
    )
    store.finish_run(run_id, status)


def test_epochs_are_those_with_a_completed_run_oldest_first(target):
    with Store(target) as store:
        _run(store, "r1", "e1")
        _run(store, "r2", "e2", status="failed")
        _run(store, "r3", "e0")
        _run(store, "r4", "e1")  # a re-run of e1: e1 stays first, its latest run is r4
        epochs = store.audit_epochs("a")
    assert list(epochs.epoch) == ["e1", "e0"]
    assert list(epochs.run_id) == ["r4", "r3"]


def test_a_drift_family_is_replaced_as_a_whole(target):
    with Store(target) as store:
        _run(store, "r1", "e1")
        _run(store, "r2", "e2")
        store.add_tests([_record("a1"), _record("b2")])
        store.add_drift("a", "e2", "baseline", [_row("x", "a1"), _row("y", "b2")])
        store.add_drift("a", "e2", "previous", [_row("x", "a1")])
        store.add_drift("a", "e2", "baseline", [_row("x", "a1", reject=True)])
        drift = store.drift("a")
    assert sorted(zip(drift.against, drift.arm_id, drift.reject, strict=True)) == [
        ("baseline", "x", True),
        ("previous", "x", False),
    ]
    assert drift.p_value.between(0, 1).all()
    assert (drift.k_a == 4).all()


def test_a_version_1_database_migrates_and_reads_without_drift(target, monkeypatch):
    path = target
    with monkeypatch.context() as patch:
        patch.setattr(storage._core, "MIGRATIONS", MIGRATIONS[:1])
        with Store(path) as store:
            _run(store, "r1", "e1")
    with Store(path, read_only=True) as store:
        assert store.schema_version == 1
        assert store.drift("a").empty
        assert "test_id" in store.drift("a").columns
    with Store(path) as store:
        assert store.schema_version == MIGRATIONS[-1][0]
        assert store.drift("a").empty
        assert list(store.audit_epochs("a").epoch) == ["e1"]


@pytest.mark.parametrize("against", ["baseline", "previous"])
def test_an_empty_family_clears_what_was_stored(target, against):
    with Store(target) as store:
        _run(store, "r1", "e1")
        store.add_tests([_record("a1")])
        store.add_drift("a", "e2", against, [_row("x", "a1")])
        store.add_drift("a", "e2", against, [])
        assert store.drift("a").empty
