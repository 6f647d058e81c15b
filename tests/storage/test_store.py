"""The DuckDB record: migrations, idempotent writes, single writer, exports."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from dbpa.analysis import Decision, PerturbationTestRecord
from dbpa.arms import Arm
from dbpa.specs import EmbeddingBatch, Generation, Message, ModelSpec, text_hash
from storage import EXPORTS, MIGRATIONS, DatabaseInUseError, Store, UnknownRunError


def _arm(prompt="hello", epoch="0"):
    return Arm.of(ModelSpec(model="openai/m"), [Message(role="user", content=prompt)], epoch)


def _gen(i, text=None):
    return Generation(i, text or f"text {i}", "ok", "stop", 5, 7, 0.001, 0.2, 100 + i, f"r{i}")


def _record(test_id="t1", arm_a="a", arm_b="b", p=0.01):
    return PerturbationTestRecord(
        test_id,
        arm_a,
        arm_b,
        "emb",
        "cosine",
        "jsd",
        {"bins": 30},
        100,
        1,
        0.3,
        p,
        0.1,
        0.05,
        0.2,
        4.0,
        100,
        False,
        5,
        5,
        np.linspace(0, 1, 100),
    )


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "audit.duckdb") as s:
        yield s


def _count(store, table):
    return len(store._df(EXPORTS[table]))


def test_migrations_apply_once_and_the_database_keeps_its_id(tmp_path):
    path = tmp_path / "a.duckdb"
    with Store(path) as s:
        first_id = s.database_id
        assert s.schema_version == MIGRATIONS[-1][0]
    with Store(path) as s:
        assert s.database_id == first_id
        versions = s._rows("SELECT version FROM schema_migrations")
    assert versions == [(v,) for v, _, _ in MIGRATIONS]


def test_writes_are_idempotent(store):
    arm = _arm()
    for _ in range(2):
        store.add_arms([arm, arm])
        store.add_samples(arm.arm_id, [_gen(0), _gen(1)])
        store.add_tests([_record()])
        store.add_family(
            "run",
            [
                dict(
                    family="m",
                    perturbation_id="p",
                    position=0,
                    kind="variant",
                    label=None,
                    description="d",
                    original_arm="a",
                    perturbed_arm="b",
                    test_id="t1",
                )
            ],
        )
    assert _count(store, "arms") == 1
    assert _count(store, "samples") == 2
    assert _count(store, "tests") == 1
    assert _count(store, "run_tests") == 1


def test_first_write_wins_for_a_sample(store):
    arm = _arm()
    store.add_samples(arm.arm_id, [_gen(0, "first")])
    store.add_samples(arm.arm_id, [_gen(0, "second")])
    assert store.samples([arm.arm_id]).text.tolist() == ["first"]


def test_failed_transaction_leaves_nothing(store, monkeypatch):
    arm = _arm()
    bad = _gen(1)
    object.__setattr__(bad, "index", "not an int")
    with pytest.raises(duckdb.Error):
        store.add_samples(arm.arm_id, [_gen(0), bad])
    assert store.sample_indices([arm.arm_id]) == {arm.arm_id: set()}


def test_embeddings_are_cached_per_text_and_embedder(store):
    arm = _arm()
    store.add_samples(arm.arm_id, [_gen(0, "same"), _gen(1, "same"), _gen(2, "other")])
    hashes = sorted({text_hash("same"), text_hash("other")})
    assert store.missing_embeddings("emb", hashes) == set(hashes)
    vectors = np.array([[1, 0], [0, 1]], dtype=np.float32)
    store.add_embeddings("emb", hashes, EmbeddingBatch(vectors, np.array([False, True])))
    assert store.missing_embeddings("emb", hashes) == set()
    assert store.missing_embeddings("another", hashes) == set(hashes)
    got = store.arm_vectors(arm.arm_id, "emb", 3)
    expected = {h: v for h, v in zip(hashes, vectors, strict=True)}
    np.testing.assert_array_equal(got, [expected[text_hash(t)] for t in ["same", "same", "other"]])
    truncated = {h: t for h, t in zip(hashes, [False, True], strict=True)}
    expected_truncated = sum(truncated[text_hash(t)] for t in ["same", "same", "other"])
    assert store.truncated_counts([arm.arm_id], "emb", 3) == {arm.arm_id: expected_truncated}
    with pytest.raises(LookupError, match="has 3 embedded outputs of the 4 needed"):
        store.arm_vectors(arm.arm_id, "emb", 4)


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
    store.add_tests([_record("t1", p=0.01), _record("t2", p=0.5)])
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
    assert _count(store, "corrections") == 3


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


def test_threads_share_the_store(store):
    arms = [_arm(f"p{i}") for i in range(8)]

    def write(arm):
        for i in range(20):
            store.add_samples(arm.arm_id, [_gen(i)])

    threads = [threading.Thread(target=write, args=(a,)) for a in arms]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert _count(store, "samples") == 160


def test_a_second_process_gets_a_clear_message(tmp_path):
    path = tmp_path / "busy.duckdb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, time
            from storage import Store
            s = Store({str(path)!r})
            print("open", flush=True)
            sys.stdin.readline()
        """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(DatabaseInUseError, match=f"database {path} is in use by another run"):
            Store(path)
        with pytest.raises(DatabaseInUseError):
            Store(path, read_only=True)
    finally:
        holder.communicate("\n", timeout=30)


def test_read_only_needs_an_existing_database(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        Store(tmp_path / "missing.duckdb", read_only=True)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_every_table_exports(store, tmp_path, fmt):
    arm = _arm()
    store.add_arms([arm])
    store.add_samples(arm.arm_id, [_gen(0)])
    store.add_embeddings(
        "emb", [text_hash("text 0")], EmbeddingBatch(np.ones((1, 3), np.float32), np.array([False]))
    )
    store.add_tests([_record()])
    for table in EXPORTS:
        out = store.export(table, tmp_path / f"{table}.{fmt}", fmt)
        if fmt == "parquet":
            assert pq.read_table(out).num_rows == _count(store, table)
        else:
            assert len(pd.read_csv(out)) == _count(store, table)
    if fmt == "csv":
        vectors = pd.read_csv(tmp_path / "embeddings.csv").vector
        assert json.loads(vectors.iloc[0]) == [1.0, 1.0, 1.0]


def test_export_rejects_unknown_names(store, tmp_path):
    with pytest.raises(ValueError, match="table: unknown 'secrets'"):
        store.export("secrets", tmp_path / "x")
    with pytest.raises(ValueError, match="format: unknown 'xlsx'"):
        store.export("runs", tmp_path / "x", "xlsx")
