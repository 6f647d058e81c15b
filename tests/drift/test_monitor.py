"""The monitor replayed over an audit's ticks: quiet arms stay quiet, a moved arm alarms,
a replay is the same every time (a re-run tick never counts twice), resets start a new
baseline and keep the history, and the config's ``monitor.conformal`` chooses the design."""

from __future__ import annotations

import numpy as np
import pytest

from dbpa.drift import DriftError, replay_monitor
from storage import Store
from tests.drift.conftest import DIM, ROLES, record_tick

EPOCHS = [f"2026-11-{day:02d}T03:00:00+00:00" for day in range(1, 13)]
MOVED = "prompt-sky-blue"


def record(store: Store, upto: int = len(EPOCHS), moved_from: int | None = None) -> None:
    for i, epoch in enumerate(EPOCHS[:upto]):
        shift = {MOVED: 4.0} if moved_from is not None and i >= moved_from else None
        record_tick(store, epoch, shift=shift)


def by_series(replay):
    found: dict[str, list] = {}
    for t in replay.ticks:
        found.setdefault(t.series.split(" ")[0], []).append(t)
    return found


def test_quiet_ticks_raise_no_alarm_and_every_arm_is_monitored(tmp_path):
    with Store(tmp_path / "a.duckdb") as store:
        record(store, upto=6)
        replay = replay_monitor(store, "drifty")
    series = by_series(replay)
    assert sorted(series) == sorted(ROLES)
    assert replay.arms == 3
    assert replay.arm_alpha == pytest.approx(0.05 / 3)
    for ticks in series.values():
        assert [t.state.ticks for t in ticks] == [1, 2, 3, 4, 5]
        assert [t.epoch for t in ticks] == EPOCHS[1:6]
        assert {t.baseline_epoch for t in ticks} == {EPOCHS[0]}
        assert not any(t.state.alarm for t in ticks)


def test_a_moved_arm_alarms_and_the_others_do_not(tmp_path):
    with Store(tmp_path / "a.duckdb") as store:
        record(store, moved_from=3)
        replay = replay_monitor(store, "drifty")
    series = by_series(replay)
    assert series[MOVED][-1].state.alarm
    raised = [t for t in series[MOVED] if t.raised]
    assert len(raised) == 1
    assert EPOCHS.index(raised[0].epoch) >= 3
    assert not any(t.state.alarm for role in ROLES if role != MOVED for t in series[role])


def test_a_replay_is_the_same_every_time_and_stored_once(tmp_path):
    with Store(tmp_path / "a.duckdb") as store:
        record(store, upto=8, moved_from=4)
        first = replay_monitor(store, "drifty")
        second = replay_monitor(store, "drifty")
        store.add_monitor_ticks("drifty", [t.row(first) for t in first.ticks])
        store.add_monitor_ticks("drifty", [t.row(second) for t in second.ticks])  # a re-run
        stored = store.monitor_ticks("drifty")
    assert first == second
    assert len(stored) == len(first.ticks) == 3 * 7
    assert stored.groupby("series").tick.max().tolist() == [7, 7, 7]


def test_a_replay_through_an_earlier_epoch_stops_there(tmp_path):
    with Store(tmp_path / "a.duckdb") as store:
        record(store, upto=6)
        replay = replay_monitor(store, "drifty", epoch=EPOCHS[3])
        with pytest.raises(DriftError, match=r"^epoch:"):
            replay_monitor(store, "drifty", epoch="nope")
    assert {t.epoch for t in replay.ticks} == set(EPOCHS[1:4])


def test_a_reset_starts_a_new_baseline_and_keeps_the_history(tmp_path):
    with Store(tmp_path / "a.duckdb") as store:
        record(store, moved_from=3)
        before = replay_monitor(store, "drifty")
        store.add_monitor_ticks("drifty", [t.row(before) for t in before.ticks])
        label = by_series(before)[MOVED][0].series
        store.add_monitor_reset("drifty", label, EPOCHS[5])
        after = replay_monitor(store, "drifty")
        store.add_monitor_ticks("drifty", [t.row(after) for t in after.ticks])
        stored = store.monitor_ticks("drifty")
    moved = by_series(after)[MOVED]
    assert {t.baseline_epoch for t in moved} == {EPOCHS[5]}
    assert [t.epoch for t in moved] == EPOCHS[6:]
    assert not any(t.state.alarm for t in moved)  # moved before the new baseline: no change since
    others = [t for t in after.ticks if t.series != label]
    assert {t.baseline_epoch for t in others} == {EPOCHS[0]}
    kept = stored[stored.series == label]
    assert set(kept.baseline_epoch) == {EPOCHS[0], EPOCHS[5]}  # the alarmed history stays
    assert kept[kept.baseline_epoch == EPOCHS[0]].alarm.any()


def test_a_reset_of_every_arm(tmp_path):
    with Store(tmp_path / "a.duckdb") as store:
        record(store, upto=6)
        store.add_monitor_reset("drifty", "*", EPOCHS[2])
        store.add_monitor_reset("drifty", "*", EPOCHS[2])  # stored once
        replay = replay_monitor(store, "drifty")
        resets = store.monitor_resets("drifty")
    assert {t.baseline_epoch for t in replay.ticks} == {EPOCHS[2]}
    assert len(resets) == 1


KINDS = np.eye(4, DIM) * 2.0
"""Answer types as directions; the baseline gives the first three."""
BASELINE_SHARES = (0.5, 0.3, 0.2, 0.0)
REWEIGHTED = (0.1, 0.2, 0.7, 0.0)
"""The baseline's own answer types in other shares (total variation 0.5): no new answer."""


def record_reweighted(store: Store, quiet: int, changed: int, **config) -> None:
    """The baseline tick, ``quiet`` ticks like it, then ``changed`` ticks in which the
    original arm's answers take the ``REWEIGHTED`` shares (k = 12 per tick)."""
    rng = np.random.default_rng(0)
    for i in range(1 + quiet + changed):
        shares = BASELINE_SHARES if i <= quiet else REWEIGHTED
        kinds = KINDS[rng.choice(len(shares), size=12, p=shares)]
        outputs = (kinds + 0.5 * rng.normal(size=(12, DIM))).astype(np.float32)
        epoch = f"2026-{1 + i // 28:02d}-{1 + i % 28:02d}T03:00:00+00:00"
        record_tick(store, epoch, outputs={"original": outputs}, **config)


def test_the_default_tick_processes_alarm_on_shares_the_outputs_design_misses(tmp_path):
    """12 quiet ticks, then 6 in which the original arm's familiar answers change shares:
    the default design (``monitor.conformal: both``) alarms after the change; replayed with
    ``outputs`` the same ticks raise no alarm."""
    with Store(tmp_path / "a.duckdb") as store:
        record_reweighted(store, quiet=12, changed=6)
        both = replay_monitor(store, "drifty")
        outputs = replay_monitor(store, "drifty", conformal="outputs")
    assert (both.conformal, outputs.conformal) == ("both", "outputs")
    found = {r.conformal: by_series(r) for r in (both, outputs)}
    (raised,) = [t for t in found["both"]["original"] if t.raised]
    assert 12 < raised.state.ticks <= 18
    assert not any(t.state.alarm for t in found["outputs"]["original"])
    assert found["outputs"]["original"][-1].state.ticks == 18
    for design in found.values():
        assert not any(t.state.alarm for r in ROLES if r != "original" for t in design[r])


def test_an_unknown_design_is_named(tmp_path):
    with Store(tmp_path / "a.duckdb") as store:
        record(store, upto=2)
        assert replay_monitor(store, "drifty").conformal == "both"  # the default
        with pytest.raises(DriftError, match=r"^conformal: unknown 'pairs'"):
            replay_monitor(store, "drifty", conformal="pairs")
