"""The drift record: tests of one arm across epochs of an audit (migration 2).

The tests themselves are stored with ``add_tests``; ``drift_tests`` holds which arms they
compare and the corrected decision of each, one family per (audit, epoch, against).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from ._core import StoreCore, replaced

_DRIFT_KEYS = (
    "reference_epoch",
    "arm_id",
    "reference_arm",
    "family",
    "role",
    "test_id",
    "method",
    "alpha",
    "adjusted_p",
    "reject",
)
_DRIFT_COLUMNS = (
    "d.epoch, d.against, d.reference_epoch, d.family, d.role, d.arm_id, d.reference_arm, "
    "d.test_id, d.method, d.alpha, d.adjusted_p, d.reject, t.statistic, t.effect, "
    "t.p_value, t.null_mean, t.evaluated, t.exact, t.k_a, t.k_b"
)


class DriftRecord(StoreCore):
    """The epochs of an audit and the drift tests between them."""

    def audit_epochs(self, audit: str) -> pd.DataFrame:
        """The epochs of ``audit`` that have a completed run, oldest first (by the start of
        their first run): epoch, started_at, and the run_id and config of the latest one."""
        return self._df(
            "SELECT epoch, started_at, run_id, config FROM (SELECT epoch, run_id, config, "
            "min(started_at) OVER (PARTITION BY epoch) AS started_at, row_number() OVER "
            "(PARTITION BY epoch ORDER BY started_at DESC, run_id DESC) AS newest FROM runs "
            "WHERE audit = ? AND status = 'completed') AS completed WHERE newest = 1 "
            "ORDER BY 2, 1",
            [audit],
        )

    @replaced
    def add_drift(
        self, audit: str, epoch: str, against: str, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        """Store (or replace) one family of drift tests: the arms of ``audit`` at ``epoch``
        against an earlier epoch (``against``: previous or baseline). Keys of ``rows``:
        reference_epoch, arm_id, reference_arm, family, role, test_id, method, alpha,
        adjusted_p, reject; the tests themselves are stored with ``add_tests``."""
        with self._transaction() as con:
            con.execute(
                "DELETE FROM drift_tests WHERE audit = ? AND epoch = ? AND against = ?",
                [audit, epoch, against],
            )
            values = [
                {
                    "audit": audit,
                    "epoch": epoch,
                    "against": against,
                    **{k: row[k] for k in _DRIFT_KEYS},
                }
                for row in rows
            ]
            self._insert(con, "drift_tests", pa.Table.from_pylist(values))

    def drift(self, audit: str) -> pd.DataFrame:
        """The stored drift tests of ``audit`` with their statistics, in epoch order (empty
        for a database opened read-only before the drift migration)."""
        if self.schema_version < 2:
            return pd.DataFrame(columns=[c.strip()[2:] for c in _DRIFT_COLUMNS.split(",")])
        return self._df(
            "WITH epochs AS (SELECT epoch, min(started_at) AS started_at FROM runs "
            "WHERE audit = ? AND status = 'completed' GROUP BY epoch) "
            f"SELECT {_DRIFT_COLUMNS} FROM drift_tests d JOIN tests t ON t.test_id = d.test_id "
            "LEFT JOIN epochs e ON e.epoch = d.epoch WHERE d.audit = ? "
            "ORDER BY e.started_at, d.epoch, d.against, d.family, d.role",
            [audit, audit],
        )
