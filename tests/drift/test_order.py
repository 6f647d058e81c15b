"""Epoch order: a tick's previous epoch is the one before it in time, and the baseline the
earliest, whatever order the ticks ran in."""

from __future__ import annotations

from pathlib import Path

import pytest

from dbpa.drift import (
    epoch_order,
    outdated,
    plan_drift,
    read_epochs,
    read_history,
    run_comparison,
)
from storage import Store
from tests.drift.conftest import record_tick

# Run in this order: the 28th was run last (a late tick, a backfill).
RUN_ORDER = ("2026-11-27", "2026-11-29", "2026-11-28")


@pytest.mark.parametrize(
    ("recorded", "ordered"),
    [
        (RUN_ORDER, ("2026-11-27", "2026-11-28", "2026-11-29")),
        (  # scheduled ticks' epochs
            ("2026-11-29T03:00:00+00:00", "2026-11-27T03:00:00+00:00"),
            ("2026-11-27T03:00:00+00:00", "2026-11-29T03:00:00+00:00"),
        ),
        (  # zones compared as instants; one without a zone is UTC; dates and times mix
            ("2026-11-28T01:00:00+02:00", "2026-11-27T23:30:00", "2026-11-27"),
            ("2026-11-27", "2026-11-28T01:00:00+02:00", "2026-11-27T23:30:00"),
        ),
        (("10", "2", "1.5", "0"), ("0", "1.5", "2", "10")),  # numbers by value, not as text
        (("v2", "v10", "v1"), ("v2", "v10", "v1")),  # anything else: in the order first run
        (("0", "2026-11-27"), ("0", "2026-11-27")),  # a mix too
        (("2026-11-27", "2026-11-27T00:00:00+00:00"), ("2026-11-27", "2026-11-27T00:00:00+00:00")),
        ((), ()),
    ],
)
def test_epoch_order(recorded: tuple[str, ...], ordered: tuple[str, ...]) -> None:
    assert epoch_order(recorded) == ordered


@pytest.fixture
def backfilled(tmp_path: Path) -> Path:
    """Three ticks recorded in ``RUN_ORDER``, the 28th with the original arm moved."""
    path = tmp_path / "backfilled.duckdb"
    with Store(path) as store:
        for epoch in RUN_ORDER:
            shift = {"original": 4.0} if epoch == "2026-11-28" else None
            record_tick(store, epoch, shift=shift)
    return path


def _references(db: Path, epoch: str) -> dict[str, str]:
    with Store(db, read_only=True) as store:
        comparisons = plan_drift("drifty", read_epochs(store, "drifty"), epoch=epoch)
    return {c.against: f"{c.epoch} vs {c.reference_epoch}" for c in comparisons}


def test_a_tick_run_late_is_compared_with_the_epoch_before_it(backfilled: Path) -> None:
    with Store(backfilled, read_only=True) as store:
        assert [e.epoch for e in read_epochs(store, "drifty")] == sorted(RUN_ORDER)
    assert _references(backfilled, "2026-11-28") == {
        "previous": "2026-11-28 vs 2026-11-27",
        "baseline": "2026-11-28 vs 2026-11-27",
    }
    # The latest epoch is the 29th, run before the 28th; its previous epoch is the 28th.
    assert _references(backfilled, "latest") == {
        "previous": "2026-11-29 vs 2026-11-28",
        "baseline": "2026-11-29 vs 2026-11-27",
    }
    assert _references(backfilled, "2026-11-27") == {}  # the earliest: nothing before it


def test_the_history_of_a_tick_ends_with_it_in_epoch_order(backfilled: Path) -> None:
    with Store(backfilled) as store:
        for epoch in ("2026-11-28", "2026-11-29"):
            for comparison in plan_drift("drifty", read_epochs(store, "drifty"), epoch=epoch):
                results, _ = run_comparison(store, comparison)
                store.add_tests([r.record for r in results])
                store.add_drift(
                    "drifty", epoch, comparison.against, [r.row(comparison) for r in results]
                )
        history = read_history(store, "drifty", "2026-11-28")
    assert history is not None
    assert history.epochs == ("2026-11-27", "2026-11-28")  # not the 29th, run before it
    found = {(p.against, p.reference_epoch, p.reject) for p in history.at("2026-11-28")["previous"]}
    assert ("previous", "2026-11-27", True) in found  # the moved original, against the 27th


D27, D28, D29 = "2026-11-27", "2026-11-28", "2026-11-29"


@pytest.mark.parametrize(
    ("epochs", "recorded", "tick", "expected"),
    [
        # the 28th run after the 29th: the 29th's previous epoch is now the 28th
        ((D27, D28, D29), {D29: {"previous": D27, "baseline": D27}}, D28, (D29,)),
        # the latest tick: nothing after it
        ((D27, D28, D29), {D28: {"previous": D27}}, D29, ()),
        # a tick run again (a retry): what follows it already compares with it
        (
            (D27, D28, D29),
            {D28: {"previous": D27, "baseline": D27}, D29: {"previous": D28, "baseline": D27}},
            D28,
            (),
        ),
        # a new earliest tick: the next one's previous, and every later one's baseline
        (
            ("2026-11-26", D27, D28, D29),
            {D28: {"previous": D27, "baseline": D27}, D29: {"previous": D28, "baseline": D27}},
            "2026-11-26",
            (D27, D28, D29),
        ),
        # later epochs whose drift was never tested are left so, the next one is tested
        ((D27, D28, D29), {}, D27, (D28,)),
    ],
)
def test_the_epochs_a_tick_run_late_changes(epochs, recorded, tick, expected) -> None:
    assert outdated(epochs, recorded, tick) == expected
