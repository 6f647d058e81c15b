"""The drift monitor's record: each arm's evidence per tick, and its resets (migration 9).

A row of ``monitor_ticks`` is keyed by (audit, series, baseline epoch, epoch): the monitor is
replayed from the stored embeddings, so a retried or re-run tick writes the same row again
(replacing it), and never adds its evidence twice. ``monitor_resets`` keeps every reset
(the epoch that became the series' baseline, ``*`` for every series); the earlier rows stay.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from ._core import StoreCore, replaced, retried
from ._schema import MONITOR

_TICK_KEYS = (
    "series",
    "baseline_epoch",
    "epoch",
    "tick",
    "arm_id",
    "reference_arm",
    "form",
    "alpha",
    "tolerance",
    "e_value",
    "log_e_value",
    "threshold",
    "alarm",
    "alarm_tick",
    "pairs",
    "stake",
)


class MonitorRecord(StoreCore):
    """The monitor's evidence per arm and tick, and the resets of its baselines."""

    @replaced
    def add_monitor_ticks(self, audit: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """Store (or replace, by series, baseline epoch and epoch) monitor states of
        ``audit``; keys of ``rows``: those of ``monitor_ticks`` but audit and created_at."""
        if not rows:
            return
        values = [{"audit": audit, **{k: row[k] for k in _TICK_KEYS}} for row in rows]
        with self._transaction() as con:
            for row in values:
                con.execute(
                    "DELETE FROM monitor_ticks WHERE audit = ? AND series = ? "
                    "AND baseline_epoch = ? AND epoch = ?",
                    [audit, row["series"], row["baseline_epoch"], row["epoch"]],
                )
            self._insert(con, "monitor_ticks", pa.Table.from_pylist(values))

    def monitor_ticks(self, audit: str) -> pd.DataFrame:
        """Every stored monitor state of ``audit`` (empty before migration 9), by series,
        baseline and tick."""
        columns = ["audit", *_TICK_KEYS, "created_at"]
        if self.schema_version < MONITOR:
            return pd.DataFrame(columns=columns)
        return self._df(
            f"SELECT {', '.join(columns)} FROM monitor_ticks WHERE audit = ? "
            "ORDER BY series, baseline_epoch, tick",
            [audit],
        )

    @retried
    def add_monitor_reset(self, audit: str, series: str, epoch: str) -> None:
        """Start a new baseline at ``epoch`` for ``series`` of ``audit`` (``*``: every
        arm); a repeated reset is stored once."""
        with self._transaction() as con:
            con.execute(
                "INSERT INTO monitor_resets (audit, series, epoch) VALUES (?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                [audit, series, epoch],
            )

    def monitor_resets(self, audit: str) -> pd.DataFrame:
        """The resets of ``audit``: series, epoch, created_at, oldest first (empty before
        migration 9)."""
        if self.schema_version < MONITOR:
            return pd.DataFrame(columns=["series", "epoch", "created_at"])
        return self._df(
            "SELECT series, epoch, created_at FROM monitor_resets WHERE audit = ? "
            "ORDER BY created_at, series",
            [audit],
        )
