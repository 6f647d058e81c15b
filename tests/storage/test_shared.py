"""Many processes writing one PostgreSQL record at once (issue 50): nothing lost, nothing
duplicated, no writer fails (a write that loses to another is run again)."""

from __future__ import annotations

import multiprocessing
import os
import re
import threading
import time

import numpy as np
import pyarrow as pa
import pytest

from dbpa.specs import EmbeddingBatch, text_hash
from storage import RecordUnreachableError, Store
from storage._core import retried
from tests.storage.conftest import family_row, make_arm, make_gen, make_record, postgres_url

WRITERS = 4
ARMS = 6
OUTPUTS = 20
TESTS = 8


def _texts(arm_id: str) -> list[str]:
    return [f"{arm_id} output {i}" for i in range(OUTPUTS)]


def _write_audit(url: str, password: str, writer: int, barrier: object) -> None:
    """One writer's share: every arm, output, vector and test of the audit (the others
    write the same), in an order and batches of its own, and a run of its own."""
    os.environ["PGPASSWORD"] = password
    rng = np.random.default_rng(writer)
    arms = [make_arm(f"prompt {a}") for a in range(ARMS)]
    with Store(url) as store:
        barrier.wait(timeout=60)  # type: ignore[attr-defined]
        store.add_arms([arms[a] for a in rng.permutation(ARMS)])
        store.start_run(
            f"run-{writer}", audit="shared", config={"k": OUTPUTS}, config_hash="h",
            epoch="0", flow_run_id=None, versions={},
        )  # fmt: skip
        store.add_family(
            f"run-{writer}",
            [
                family_row(f"p{t}", arms[0].arm_id, arms[1 + t % 5].arm_id, f"t{t}")
                for t in range(TESTS)
            ],
        )
        for a in rng.permutation(ARMS):
            arm_id, texts = arms[a].arm_id, _texts(arms[a].arm_id)
            order = rng.permutation(OUTPUTS)
            for batch in np.array_split(order, rng.integers(1, 6)):
                store.add_samples(arm_id, [make_gen(int(i), texts[i]) for i in batch])
            vectors = np.tile(np.arange(4, dtype=np.float32), (OUTPUTS, 1)) + a
            hashes = [text_hash(t) for t in texts]
            for batch in np.array_split(order, rng.integers(1, 4)):
                store.add_embeddings(
                    "emb",
                    [hashes[i] for i in batch],
                    EmbeddingBatch(vectors[batch], np.zeros(len(batch), dtype=bool)),
                )
        tests = [make_record(f"t{t}", arms[0].arm_id, arms[1 + t % 5].arm_id) for t in range(TESTS)]
        store.add_tests([tests[t] for t in rng.permutation(TESTS)])
        store.finish_run(f"run-{writer}", "completed")


def test_writers_of_one_audit_at_once_lose_and_duplicate_nothing(postgres, monkeypatch):
    url = postgres_url(postgres, postgres.create_database())
    # fresh interpreters, as separate workers are: a fork of a test process that has run
    # other tests (threads, open connections) failed every writer in the full suite
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(WRITERS)
    writers = [
        spawn.Process(target=_write_audit, args=(url, postgres.password, w, barrier))
        for w in range(WRITERS)
    ]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)
    assert [w.exitcode for w in writers] == [0] * WRITERS

    monkeypatch.setenv("PGPASSWORD", postgres.password)
    arms = [make_arm(f"prompt {a}") for a in range(ARMS)]
    with Store(url, read_only=True) as store:
        samples = store.samples()
        assert len(samples) == ARMS * OUTPUTS
        expected = {(arm.arm_id, i, t) for arm in arms for i, t in enumerate(_texts(arm.arm_id))}
        assert set(zip(samples.arm_id, samples.idx, samples.text, strict=True)) == expected
        assert len(store.arms()) == ARMS
        for a, arm in enumerate(arms):
            vectors = store.arms_vectors([arm.arm_id], "emb", OUTPUTS)[arm.arm_id]
            np.testing.assert_array_equal(vectors, np.tile(np.arange(4) + a, (OUTPUTS, 1)))
        assert store._rows("SELECT count(*), count(DISTINCT text_hash) FROM embeddings") == [
            (ARMS * OUTPUTS, ARMS * OUTPUTS)
        ]
        assert sorted(store.test_p_values([f"t{t}" for t in range(TESTS)])) == sorted(
            f"t{t}" for t in range(TESTS)
        )
        assert store._rows("SELECT count(*) FROM tests") == [(TESTS,)]
        runs = store.runs()
        assert sorted(runs.run_id) == [f"run-{w}" for w in range(WRITERS)]
        assert set(runs.status) == {"completed"}
        for w in range(WRITERS):
            assert len(store.results(f"run-{w}")) == TESTS


class _Lost(Exception):
    def __init__(self, sqlstate: str) -> None:
        super().__init__(sqlstate)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(("sqlstate", "calls"), [("40P01", 3), ("40001", 3), ("23505", 1)])
def test_a_write_that_lost_to_another_runs_again(sqlstate, calls):
    """Deadlocks and serialization failures are run again; other errors are raised."""
    made = []

    @retried
    def write() -> str:
        made.append(1)
        if len(made) < 3:
            raise _Lost(sqlstate)
        return "written"

    if calls == 1:
        with pytest.raises(_Lost):
            write()
    else:
        assert write() == "written"
    assert len(made) == calls


def _wait_until_gone(store: Store, pid: int) -> None:
    """A closed connection's server process ends (and frees its locks) a moment later, longer
    under load: the state a crashed process leaves once PostgreSQL has noticed."""
    deadline = time.monotonic() + 30
    while store._rows("SELECT count(*) FROM pg_stat_activity WHERE pid = ?", [pid]) != [(0,)]:
        assert time.monotonic() < deadline, f"backend {pid} still there after 30 s"
        time.sleep(0.05)


def _start(store: Store, run_id: str) -> None:
    store.start_run(
        run_id, audit="shared", config={"k": 4}, config_hash="h", epoch="0",
        flow_run_id=None, versions={},
    )  # fmt: skip


def test_only_runs_whose_process_is_gone_are_marked_crashed(postgres, monkeypatch):
    """On a shared record another machine's running run is alive, not interrupted: only a
    run whose process has gone (its connection closed) is marked crashed."""
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    url = postgres_url(postgres, postgres.create_database())
    with Store(url) as elsewhere, Store(url) as here:
        _start(elsewhere, "elsewhere")
        with Store(url) as died:
            _start(died, "died")  # its process stops without finishing it
            ((gone,),) = died._rows("SELECT pg_backend_pid()")
        _wait_until_gone(here, gone)
        _start(here, "done")
        here.finish_run("done", "completed")
        assert here.mark_interrupted_runs() == 1
        status = dict(here._rows("SELECT run_id, status FROM runs"))
        assert status == {"elsewhere": "running", "died": "crashed", "done": "completed"}
        elsewhere.finish_run("elsewhere", "completed")
        _start(elsewhere, "again")  # its lock is taken again
        assert here.mark_interrupted_runs() == 0
        assert here.run("again")["status"] == "running"


def test_a_url_never_carries_the_password_and_errors_name_only_host_and_port(postgres, monkeypatch):
    """Refused (a password in the URL, a login or database refused): ValueError; not reached
    within the connect budget: RecordUnreachableError; each naming host and port only."""
    dbname = postgres.create_database()
    url = postgres_url(postgres, dbname)
    secret = postgres.password
    where = f"127.0.0.1:{postgres.port}"
    with pytest.raises(ValueError, match="must not hold the password") as held:
        Store(url.replace(f"{postgres.user}@", f"{postgres.user}:{secret}@"))
    assert secret not in str(held.value)
    monkeypatch.setenv("PGPASSWORD", "wrong-" + secret)
    refused_login = f"PostgreSQL at {where} refused the login (check PGPASSWORD or ~/.pgpass)"
    with pytest.raises(ValueError, match=re.escape(refused_login)) as refused:
        Store(url)
    assert refused.value.__suppress_context__
    monkeypatch.setenv("PGPASSWORD", secret)
    with pytest.raises(ValueError, match=rf"^PostgreSQL at {where} has no database 'nowhere'"):
        Store(url.replace(dbname, "nowhere"))
    with pytest.raises(
        RecordUnreachableError,
        match=r"^PostgreSQL at 127.0.0.1:1 cannot be reached \(tried for up to 10 s\)$",
    ):
        Store(f"postgresql://{postgres.user}@127.0.0.1:1/{dbname}")
    with Store(url) as store:
        assert store.location == f"postgresql://127.0.0.1:{postgres.port}/{dbname}"
    with Store(url, read_only=True) as store, pytest.raises(Exception, match="read-only"):
        store.add_arms([make_arm()])


def test_a_reader_reads_one_snapshot_while_another_writes(postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    url = postgres_url(postgres, postgres.create_database())
    with Store(url) as writer:
        writer.add_arms([make_arm("first")])
        with Store(url, read_only=True) as reader:
            assert len(reader.arms()) == 1
            writer.add_arms([make_arm("second")])
            assert len(reader.arms()) == 1  # the snapshot of its first read
        with Store(url, read_only=True) as reader:
            assert len(reader.arms()) == 2


def test_a_database_no_audit_wrote_is_no_record_yet(postgres, monkeypatch):
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    dbname = postgres.create_database()
    with pytest.raises(
        FileNotFoundError, match=r"holds no audit record yet \(run an audit first\)"
    ):
        Store(postgres_url(postgres, dbname), read_only=True)


TICK = {
    "series": "s", "baseline_epoch": "0", "epoch": "1", "tick": 1, "arm_id": "a1",
    "reference_arm": "a0", "form": "energy", "alpha": 0.05, "tolerance": 0.0,
    "e_value": 1.5, "log_e_value": 0.4, "threshold": 20.0, "alarm": False,
    "alarm_tick": None, "pairs": 6, "stake": 0.1,
}  # fmt: skip


def test_a_tick_two_workers_write_at_once_is_stored_once(postgres, monkeypatch):
    """The monitor's evidence of one tick, written by two workers whose transactions
    overlap: the second waits on the first's row, fails on its key, runs again and replaces
    it (one row, no error)."""
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    url = postgres_url(postgres, postgres.create_database())
    failed: list[BaseException] = []
    with Store(url) as first, Store(url) as second:
        with first._transaction() as con:  # the first worker's write, not committed yet
            con.execute("DELETE FROM monitor_ticks WHERE audit = ?", ["a"])
            first._insert(con, "monitor_ticks", pa.Table.from_pylist([{"audit": "a", **TICK}]))

            def write() -> None:
                try:
                    second.add_monitor_ticks("a", [TICK | {"stake": 0.2}])
                except BaseException as exc:
                    failed.append(exc)

            overlapping = threading.Thread(target=write)
            overlapping.start()
            time.sleep(0.5)  # its INSERT waits on the uncommitted row
        overlapping.join(timeout=30)
        assert failed == []
        assert first._rows("SELECT stake FROM monitor_ticks") == [(0.2,)]
