"""Provider batches in the record (on a DuckDB file and on PostgreSQL): stored at once, open
until collected, found again by the arms they serve."""

from __future__ import annotations

from datetime import UTC, datetime

from storage import Store, StoredRequest

DEADLINE = datetime(2026, 12, 7, 3, 0, tzinfo=UTC)


def _requests(arm: str, blocks: range) -> list[StoredRequest]:
    return [StoredRequest(f"{arm}/{b}", arm, (2 * b, 2 * b + 1), 100 + b) for b in blocks]


def test_a_batch_is_open_until_collected_and_found_by_its_arms(store: Store) -> None:
    store.add_batch("b1", "m", "f1", _requests("a1", range(2)), 0.25, DEADLINE, "in_progress")
    store.add_batch("b2", "m", "f2", _requests("a2", range(1)), None, DEADLINE, "in_progress")
    store.add_batch("b1", "m", "f1", _requests("a1", range(2)), 0.25, DEADLINE, "x")  # again
    (found,) = store.open_batches(["a1", "zz"])
    assert (found.batch_id, found.model, found.input_file_id) == ("b1", "m", "f1")
    assert found.requests == tuple(_requests("a1", range(2)))
    assert found.reserved_usd == 0.25
    assert found.deadline == DEADLINE
    assert (found.status, found.collected) == ("in_progress", False)
    assert [b.batch_id for b in store.open_batches(["a1", "a2"])] == ["b1", "b2"]
    store.update_batch("b1", "completed", collected=True)
    assert [b.batch_id for b in store.open_batches(["a1", "a2"])] == ["b2"]
    store.update_batch("b2", "expired")
    (b2,) = store.open_batches(["a2"])
    assert (b2.status, b2.collected, b2.reserved_usd) == ("expired", False, None)
    assert [(b.batch_id, b.collected) for b in store.batches()] == [("b1", True), ("b2", False)]
    assert store.open_batches([]) == []


def _start(store: Store, run_id: str, epoch: str, audit: str = "flu") -> None:
    store.start_run(
        run_id,
        audit=audit,
        config={},
        config_hash="h",
        epoch=epoch,
        flow_run_id=None,
        versions={},
    )


def test_a_run_waiting_for_batches_is_continued_by_the_next_run_of_its_tick(store: Store) -> None:
    for run_id, audit, epoch in [("w1", "flu", "e1"), ("w2", "flu", "e2"), ("w3", "cold", "e1")]:
        _start(store, run_id, epoch, audit)
        store.finish_run(run_id, "waiting", "BatchesPending: waiting for 1 provider batch(es)")
    _start(store, "f1", "e1")
    runs = store.runs().set_index("run_id")
    assert runs.loc["w1", "status"] == "continued"
    assert runs.loc["w1", "message"] == (
        "continued by run f1; BatchesPending: waiting for 1 provider batch(es)"
    )
    assert list(runs.loc[["w2", "w3"], "status"]) == ["waiting", "waiting"]  # other ticks
    assert runs.loc["f1", "status"] == "running"
    _start(store, "f1", "e1")  # a retried flow run keeps its row, and the first one's
    assert store.runs().set_index("run_id").loc["f1", "status"] == "running"
    assert store.runs().set_index("run_id").loc["w1", "status"] == "continued"
