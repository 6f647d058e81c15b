"""The run record: runs and their families, arm failures, corrections, sequential looks,
results and usage.

A run's family (``run_tests``) points at the shared tests; its corrections are stored per
family.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from dbpa.analysis import Decision, Margin

from ._core import StoreCore, retried
from ._errors import UnknownRunError
from ._results import results_sql, runs_sql

_FAMILY_KEYS = (
    "family",
    "perturbation_id",
    "position",
    "kind",
    "label",
    "description",
    "original_arm",
    "perturbed_arm",
    "test_id",
)


_RUN_LOCKS = 500_002
"""The class of PostgreSQL's advisory locks by which the process running a run says it is
alive (the second key: the hash of the run's id)."""
_CRASHED = "the process running it stopped before it finished (killed or crashed)"


class RunRecord(StoreCore):
    """Runs, run families, arm failures, corrections, sequential looks, results and usage.

    On a PostgreSQL record the process running a run holds an advisory lock of its own
    (``_RUN_LOCKS``, the run's id) on its connection until it finishes the run; the server
    lets go of it when that connection ends, so a run left running whose lock is free had
    a process that died, wherever it ran."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._live_runs: set[str] = set()
        """Runs this store started and has not finished (on PostgreSQL: their locks, held
        once each)."""
        super().__init__(*args, **kwargs)

    def _reconnected(self) -> None:
        """The locks of this store's live runs, taken again on the new connection (the
        server let go of them with the old one). Another process's ``mark_interrupted_runs``
        may have marked a run crashed meanwhile; its status is written again when it ends."""
        super()._reconnected()
        for run_id in sorted(self._live_runs):  # on the connection itself: no replay again
            self._connection.execute(
                "SELECT pg_try_advisory_lock(?, hashtext(?))", [_RUN_LOCKS, run_id]
            )

    @retried
    def start_run(
        self,
        run_id: str,
        *,
        audit: str,
        config: Mapping[str, Any],
        config_hash: str,
        epoch: str,
        flow_run_id: str | None,
        versions: Mapping[str, str],
    ) -> None:
        """Record a run as running (a retried flow run keeps its row); the runs of the same
        audit and epoch left ``waiting`` for provider batches become ``continued``, by this
        one (which collects their batches)."""
        with self._transaction() as con:
            con.execute(
                "UPDATE runs SET status = 'continued', "
                "message = 'continued by run ' || ? || COALESCE('; ' || message, '') "
                "WHERE audit = ? AND epoch = ? AND status = 'waiting' AND run_id <> ?",
                [run_id, audit, epoch, run_id],
            )
            con.execute(
                "INSERT INTO runs (run_id, audit, status, config, config_hash, epoch, "
                "flow_run_id, versions) VALUES (?, ?, 'running', ?, ?, ?, ?, ?) "
                "ON CONFLICT (run_id) DO UPDATE SET status = 'running', finished_at = NULL, "
                "message = NULL",
                [
                    run_id,
                    audit,
                    json.dumps(config, sort_keys=True),
                    config_hash,
                    epoch,
                    flow_run_id,
                    json.dumps(dict(versions), sort_keys=True),
                ],
            )
        if self.postgres and run_id not in self._live_runs:
            self._rows("SELECT pg_try_advisory_lock(?, hashtext(?))", [_RUN_LOCKS, run_id])
        self._live_runs.add(run_id)

    @retried
    def mark_interrupted_runs(self) -> int:
        """Runs left 'running' by a process that died become 'crashed'; returns how many.

        On PostgreSQL not the runs of another live process, on any machine (their locks are
        held); this store's own count as interrupted, as on a file (the flow asks before it
        starts its run)."""
        if self.postgres:
            with self._transaction() as con:
                crashed = con.execute(
                    "UPDATE runs SET status = 'crashed', message = ? WHERE status = 'running' "
                    "AND pg_try_advisory_xact_lock(?, hashtext(run_id)) RETURNING run_id",
                    [_CRASHED, _RUN_LOCKS],
                ).fetchall()
            return len(crashed)
        with self._transaction() as con:
            (count,) = con.execute(
                "SELECT count(*) FROM runs WHERE status = 'running'"
            ).fetchone() or (0,)
            con.execute(
                "UPDATE runs SET status = 'crashed', message = ? WHERE status = 'running'",
                [_CRASHED],
            )
        return int(count)

    @retried
    def finish_run(
        self, run_id: str, status: str, message: str | None = None, report_path: str | None = None
    ) -> None:
        """Record how a run ended."""
        with self._transaction() as con:
            con.execute(
                "UPDATE runs SET status = ?, message = ?, report_path = COALESCE(?, report_path), "
                "finished_at = current_timestamp WHERE run_id = ?",
                [status, message, report_path, run_id],
            )
        if self.postgres and run_id in self._live_runs:
            self._rows("SELECT pg_advisory_unlock(?, hashtext(?))", [_RUN_LOCKS, run_id])
        self._live_runs.discard(run_id)

    @retried
    def set_report_path(self, run_id: str, report_path: str) -> None:
        """Remember where the run's report was written."""
        with self._transaction() as con:
            con.execute("UPDATE runs SET report_path = ? WHERE run_id = ?", [report_path, run_id])

    def runs(self) -> pd.DataFrame:
        """Every run, newest first; a running run with its progress so far (outputs stored of
        those planned, tests stored of those planned, whether it is sequential: then the
        planned outputs are a maximum; missing for the others); every run's ``cost_usd``
        (its arms' first k outputs; missing without a known price)."""
        return self._df(runs_sql(self.schema_version, postgres=self.postgres))

    def run(self, run_id: str) -> dict[str, Any]:
        """One run's row; ``UnknownRunError`` naming the id when absent. ``latest`` is accepted."""
        return dict(self.run_frame(run_id).iloc[0])

    def run_frame(self, run_id: str) -> pd.DataFrame:
        """One run's row as a one-row frame (see ``run``)."""
        if run_id == "latest":
            df = self._df("SELECT * FROM runs ORDER BY started_at DESC LIMIT 1")
        else:
            df = self._df("SELECT * FROM runs WHERE run_id = ?", [run_id])
        if df.empty:
            raise UnknownRunError(
                f"run {run_id!r} is not in {self.location}; `dbpa runs` lists them"
            )
        return df

    # ---------------------------------------------------------------------- a run's family

    @retried
    def add_family(self, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """The perturbations tested by a run (keys: family, perturbation_id, position, kind,
        label, description, original_arm, perturbed_arm, test_id)."""
        values = [{"run_id": run_id, **{key: row[key] for key in _FAMILY_KEYS}} for row in rows]
        with self._transaction() as con:
            self._insert(con, "run_tests", pa.Table.from_pylist(values), "ON CONFLICT DO NOTHING")

    @retried
    def add_arm_failure(self, run_id: str, arm_id: str, model: str, reason: str) -> None:
        """Record that an arm could not be sampled in this run."""
        with self._transaction() as con:
            con.execute(
                "INSERT INTO arm_failures (run_id, arm_id, model, reason) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING",
                [run_id, arm_id, model, reason],
            )

    def arm_failures(self, run_id: str) -> pd.DataFrame:
        """Arms that failed in a run, with the reason."""
        return self._df("SELECT * FROM arm_failures WHERE run_id = ? ORDER BY arm_id", [run_id])

    @retried
    def add_corrections(
        self,
        run_id: str,
        family: str,
        method: str,
        alpha: float,
        decisions: Sequence[Decision],
        margin: Margin | None = None,
        stops: Mapping[str, tuple[int | None, str]] | None = None,
    ) -> None:
        """Store (or replace) the corrected decisions of one family of a run, with the
        family's equivalence ``margin`` when it has one and, in a sequential audit, where
        and why each test stopped (perturbation id -> (outputs per arm, reason))."""
        stopped = stops or {}
        calibration = {
            "margin_source": margin.source if margin else None,
            "margin_quantile": margin.quantile if margin else None,
            "margin_multiple": margin.multiple if margin else None,
            "margin_pairs": margin.pairs if margin and margin.source != "fixed" else None,
        }
        with self._transaction() as con:
            con.execute("DELETE FROM corrections WHERE run_id = ? AND family = ?", [run_id, family])
            rows = [
                {
                    "run_id": run_id,
                    "family": family,
                    "perturbation_id": d.perturbation_id,
                    "method": method,
                    "alpha": alpha,
                    "p_value": d.p_value,
                    "adjusted_p": d.adjusted_p,
                    "reject": d.reject,
                    "tested": d.tested,
                    "decision": d.decision,
                    "equivalence_p": d.equivalence_p,
                    "adjusted_equivalence_p": d.adjusted_equivalence_p,
                    "margin": d.margin,
                    **calibration,
                    "stopped_at": stopped.get(d.perturbation_id, (None, None))[0],
                    "stop_reason": stopped.get(d.perturbation_id, (None, None))[1],
                }
                for d in decisions
            ]
            self._insert(con, "corrections", pa.Table.from_pylist(rows, schema=_CORRECTIONS))

    @retried
    def add_sequential_looks(
        self, run_id: str, family: str, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        """Store (or replace) the looks of one family of a sequential run (keys:
        perturbation_id, look, k, test_id, p_value, weight, and stop: why the test stopped at
        that look, None where it went on), and point each perturbation of the run's family
        at the test of its last look (the test it stopped at, or its latest while open).
        Written after every look, so a running run's results show the stops so far."""
        values = [{"run_id": run_id, "family": family, "stop": None, **row} for row in rows]
        last = {row["perturbation_id"]: row["test_id"] for row in rows}
        with self._transaction() as con:
            con.execute(
                "DELETE FROM sequential_looks WHERE run_id = ? AND family = ?", [run_id, family]
            )
            if values:
                self._insert(con, "sequential_looks", pa.Table.from_pylist(values, _LOOKS))
            # one statement: a family of thousands updated row by row took seconds
            con.execute(
                "UPDATE run_tests SET test_id = l.test_id FROM (SELECT "
                "unnest(CAST(? AS VARCHAR[])) AS perturbation_id, "
                "unnest(CAST(? AS VARCHAR[])) AS test_id) AS l "
                "WHERE run_tests.run_id = ? AND run_tests.family = ? "
                "AND run_tests.perturbation_id = l.perturbation_id",
                [list(last), list(last.values()), run_id, family],
            )

    def sequential_looks(self, run_id: str) -> pd.DataFrame:
        """Every look of a sequential run, in family and look order (empty for a fixed-k
        run, or a record before sequential audits); ``stop`` None in a record before
        migration 7."""
        if self.schema_version < 5:
            return pd.DataFrame(columns=[name for name in _LOOKS.names if name != "run_id"])
        stop = "stop" if self.schema_version >= 7 else "NULL::VARCHAR AS stop"
        return self._df(
            f"SELECT family, perturbation_id, look, k, test_id, p_value, weight, {stop} "
            "FROM sequential_looks WHERE run_id = ? ORDER BY family, perturbation_id, look",
            [run_id],
        )

    @retried
    def set_run_outputs(self, run_id: str, used: int, fixed: int) -> None:
        """Outputs per arm a sequential run's design asked for, summed over its arms
        (``used``), and what the fixed-k design asks (``fixed``)."""
        with self._transaction() as con:
            con.execute(
                "UPDATE runs SET outputs_used = ?, outputs_fixed = ? WHERE run_id = ?",
                [used, fixed, run_id],
            )

    def results(self, run_id: str) -> pd.DataFrame:
        """Per-perturbation results of a run, in family order."""
        return self._df(
            results_sql(self.schema_version)
            + " WHERE rt.run_id = ? ORDER BY rt.family, rt.position",
            [run_id],
        )

    def usage(self, arm_ids: Sequence[str]) -> pd.DataFrame:
        """Outputs, tokens and cost per arm."""
        return self._df(
            "SELECT arm_id, count(*) AS outputs, "
            "count(*) FILTER (WHERE status = 'empty') AS empty, "
            "count(*) FILTER (WHERE status = 'filtered') AS filtered, "
            "sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens, "
            "sum(cost_usd) AS cost_usd, avg(latency_s) AS mean_latency_s "
            "FROM samples WHERE arm_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) "
            "GROUP BY arm_id ORDER BY arm_id",
            [list(arm_ids)],
        )


_CORRECTIONS = pa.schema(
    [
        ("run_id", pa.string()),
        ("family", pa.string()),
        ("perturbation_id", pa.string()),
        ("method", pa.string()),
        ("alpha", pa.float64()),
        ("p_value", pa.float64()),
        ("adjusted_p", pa.float64()),
        ("reject", pa.bool_()),
        ("tested", pa.bool_()),
        ("decision", pa.string()),
        ("equivalence_p", pa.float64()),
        ("adjusted_equivalence_p", pa.float64()),
        ("margin", pa.float64()),
        ("margin_source", pa.string()),
        ("margin_quantile", pa.float64()),
        ("margin_pairs", pa.int32()),
        ("margin_multiple", pa.float64()),
        ("stopped_at", pa.int32()),
        ("stop_reason", pa.string()),
    ]
)
"""Column types of a correction row (its equivalence columns are NULL without a margin,
its stop columns in a fixed-k run)."""

_LOOKS = pa.schema(
    [
        ("run_id", pa.string()),
        ("family", pa.string()),
        ("perturbation_id", pa.string()),
        ("look", pa.int32()),
        ("k", pa.int32()),
        ("test_id", pa.string()),
        ("p_value", pa.float64()),
        ("weight", pa.float64()),
        ("stop", pa.string()),
    ]
)
"""Column types of a sequential look's row (``stop``: migration 7)."""
