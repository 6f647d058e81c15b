"""The analysis record: tests, runs and their families, arm failures, corrections, results.

Tests are keyed by their content id and shared by every run that plans them; a run's
family (``run_tests``) points at them, and its corrections are stored per family.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from dbpa.analysis import Decision, Margin, PerturbationTestRecord
from dbpa.stats import INTERVAL_MIN_ROWS, BoundaryDraws, EffectInterval, TiltedSteps

from ._core import StoreCore
from ._errors import UnknownRunError

_DRIVER_COLUMNS = {True: "t.driver, t.components", False: "NULL AS driver, NULL AS components"}
"""The combined omega's columns (migration 3), or NULLs for a record opened read-only
before that migration."""
_EQUIVALENCE_COLUMNS = (
    "decision",
    "equivalence_p",
    "adjusted_equivalence_p",
    "margin",
    "margin_source",
    "margin_quantile",
    "margin_pairs",
)
_INTERVAL_COLUMNS = {
    True: "ei.estimate AS effect_estimate, ei.low AS effect_low, ei.high AS effect_high, "
    "ei.confidence AS interval_confidence, "
    + ", ".join(f"c.{name}" for name in _EQUIVALENCE_COLUMNS),
    False: "NULL AS effect_estimate, NULL AS effect_low, NULL AS effect_high, "
    "NULL AS interval_confidence, " + ", ".join(f"NULL AS {name}" for name in _EQUIVALENCE_COLUMNS),
}
"""Each test's effect interval and each decision's equivalence columns (migration 4)."""
_INTERVAL_JOIN = {True: "LEFT JOIN effect_intervals ei ON ei.test_id = rt.test_id", False: ""}
_MULTIPLE_COLUMN = {True: "c.margin_multiple", False: "NULL AS margin_multiple"}
"""A calibrated margin's multiple of its quantile (migration 6)."""
_STOP_COLUMNS = {
    7: "CASE WHEN c.stop_reason IS NULL THEN sl.k ELSE c.stopped_at END AS stopped_at, "
    "COALESCE(c.stop_reason, sl.stop) AS stop_reason, t.p_value AS look_p_value",
    5: "c.stopped_at, c.stop_reason, t.p_value AS look_p_value",
    0: "NULL AS stopped_at, NULL AS stop_reason, NULL AS look_p_value",
}
"""Where and why a sequential test stopped, and the permutation p-value of its last look
(migration 5); NULL for a fixed-k run. From migration 7 a running run's tests that have
stopped at a look say so before the run corrects its families (``sequential_looks.stop``)."""
_LOOK_JOIN = {
    7: "LEFT JOIN sequential_looks sl ON sl.run_id = rt.run_id AND sl.family = rt.family "
    "AND sl.perturbation_id = rt.perturbation_id AND sl.stop IS NOT NULL",
    0: "",
}
"""The look at which a test stopped (at most one per test: a stopped test has no later look)."""
_P_VALUE = {
    True: "CASE WHEN c.stop_reason IS NULL OR NOT c.tested THEN t.p_value ELSE c.p_value END "
    "AS p_value",
    False: "t.p_value",
}
"""A test's p-value: its permutation test's, or a sequential test's sequential p-value."""


def results_sql(schema_version: int) -> str:
    """The results query for a record at ``schema_version`` (no WHERE, no ORDER BY)."""
    return (
        RESULTS_SQL.replace("{driver}", _DRIVER_COLUMNS[schema_version >= 3])
        .replace("{interval}", _INTERVAL_COLUMNS[schema_version >= 4])
        .replace("{interval_join}", _INTERVAL_JOIN[schema_version >= 4])
        .replace("{stops}", _STOP_COLUMNS[_at_least(schema_version, _STOP_COLUMNS)])
        .replace("{look_join}", _LOOK_JOIN[_at_least(schema_version, _LOOK_JOIN)])
        .replace("{p_value}", _P_VALUE[schema_version >= 5])
        .replace("{multiple}", _MULTIPLE_COLUMN[schema_version >= 6])
    )


def _at_least(schema_version: int, variants: Mapping[int, str]) -> int:
    """The newest of ``variants`` (keyed by the migration that allows it) the record has."""
    return max(v for v in variants if v <= schema_version)


RESULTS_SQL = """
    SELECT rt.run_id, rt.family, rt.position, rt.perturbation_id, rt.kind, rt.label,
           rt.description, t.omega, t.similarity, t.embedder, t.statistic, t.effect, t.z,
           t.null_mean, t.null_std, {p_value}, c.adjusted_p, c.reject, c.method, c.alpha,
           COALESCE(c.tested, t.test_id IS NOT NULL) AS tested,
           t.k_a, t.k_b, t.n_permutations, t.evaluated, t.exact, {driver},
           rt.original_arm, rt.perturbed_arm, rt.test_id, {interval}, {multiple}, {stops},
           EXISTS (SELECT 1 FROM arm_failures f WHERE f.run_id = rt.run_id
                   AND f.arm_id IN (rt.original_arm, rt.perturbed_arm)) AS arm_failed
    FROM run_tests rt
    LEFT JOIN tests t ON t.test_id = rt.test_id
    LEFT JOIN corrections c
      ON c.run_id = rt.run_id AND c.family = rt.family AND c.perturbation_id = rt.perturbation_id
    {interval_join}
    {look_join}
"""
"""Per-perturbation results: a run's family joined with its tests, their effect intervals,
its corrections and, in a sequential run, the look a test stopped at (``{driver}``,
``{interval}``, ``{multiple}``, ``{stops}``, ``{look_join}``: see ``results_sql``);
``arm_failed``: an arm of the perturbation could not be sampled in this run."""

RUNS_SQL = """
    WITH running AS (
        SELECT run_id, TRY_CAST(json_extract_string(config, '$.k') AS INTEGER) AS k,
               json_extract(config, '$.sequential') IS NOT NULL AS sequential
        FROM runs WHERE status = 'running'),
    run_arms AS (
        SELECT DISTINCT rt.run_id, arm.arm_id, r.k
        FROM running r JOIN run_tests rt USING (run_id),
        LATERAL (VALUES (rt.original_arm), (rt.perturbed_arm)) AS arm(arm_id)),
    sampled AS (
        SELECT a.run_id, count(DISTINCT a.arm_id) * any_value(a.k) AS outputs_planned,
               count(s.idx) AS outputs_stored
        FROM run_arms a LEFT JOIN samples s ON s.arm_id = a.arm_id AND s.idx < a.k
        GROUP BY a.run_id),
    tested AS (
        SELECT rt.run_id, count(*) AS tests_planned, count(t.test_id) AS tests_stored
        FROM running r JOIN run_tests rt USING (run_id)
        LEFT JOIN tests t ON t.test_id = rt.test_id GROUP BY rt.run_id)
    SELECT r.run_id, r.audit, r.status, r.epoch, r.started_at, r.finished_at, r.message,
           r.report_path, s.outputs_stored, s.outputs_planned, t.tests_stored, t.tests_planned,
           g.sequential
    FROM runs r LEFT JOIN sampled s USING (run_id) LEFT JOIN tested t USING (run_id)
    LEFT JOIN running g USING (run_id)
    ORDER BY r.started_at DESC
"""
"""Every run, with the progress of the running ones."""

_CURRENT_INTERVAL = {
    False: "FALSE",
    True: "ei.guard_p IS NOT NULL",
}
"""SQL for "the test's stored interval is current", by whether the record has the columns."""

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


class AnalysisRecord(StoreCore):
    """Tests, runs, run families, arm failures, corrections, results and usage."""

    # ---------------------------------------------------------------------- tests

    def existing_tests(self, test_ids: Iterable[str]) -> set[str]:
        """Which of these tests are stored with a current effect interval (a test stored
        before intervals were, or with an interval whose equivalence test has since been
        replaced, is run again: the same result, and its interval)."""
        ids = sorted(set(test_ids))
        if not ids:
            return set()
        current = _CURRENT_INTERVAL[self.schema_version >= 8]
        rows = self._rows(
            "SELECT t.test_id FROM tests t LEFT JOIN effect_intervals ei USING (test_id) "
            f"WHERE list_contains(?, t.test_id) AND ({current} OR least(t.k_a, t.k_b) < ?)",
            [ids, INTERVAL_MIN_ROWS],
        )
        return {t for (t,) in rows}

    def add_tests(self, records: Sequence[PerturbationTestRecord]) -> None:
        """Store test results (idempotent)."""
        if not records:
            return
        nulls = [np.asarray(r.null_distribution, dtype=np.float64) for r in records]
        table = pa.table(
            {
                "test_id": [r.test_id for r in records],
                "original_arm": [r.original_arm for r in records],
                "perturbed_arm": [r.perturbed_arm for r in records],
                "embedder": [r.embedder for r in records],
                "similarity": [r.similarity for r in records],
                "omega": [r.omega for r in records],
                "omega_options": [
                    json.dumps(dict(r.omega_options), sort_keys=True) for r in records
                ],
                "n_permutations": [r.n_permutations for r in records],
                "seed": pa.array([r.seed for r in records], pa.int64()),
                "statistic": [r.statistic for r in records],
                "p_value": [r.p_value for r in records],
                "null_mean": [r.null_mean for r in records],
                "null_std": [r.null_std for r in records],
                "effect": [r.effect for r in records],
                "z": pa.array([None if np.isnan(r.z) else r.z for r in records], pa.float64()),
                "evaluated": [r.evaluated for r in records],
                "exact": [r.exact for r in records],
                "k_a": [r.k_a for r in records],
                "k_b": [r.k_b for r in records],
                "null_distribution": pa.ListArray.from_arrays(
                    np.cumsum([0] + [len(n) for n in nulls]), pa.array(np.concatenate(nulls))
                ),
                "driver": pa.array([r.driver for r in records], pa.string()),
                "components": pa.array(
                    [
                        json.dumps(r.components, sort_keys=True) if r.components else None
                        for r in records
                    ],
                    pa.string(),
                ),
            }
        )
        intervals = _intervals_table(records)
        with self._transaction() as con:
            self._insert(con, "tests", table, "ON CONFLICT DO NOTHING")
            if intervals.num_rows:  # one from before the current equivalence test is replaced
                con.execute(
                    "DELETE FROM effect_intervals "
                    "WHERE guard_p IS NULL AND list_contains(?, test_id)",
                    [intervals.column("test_id").to_pylist()],
                )
                self._insert(con, "effect_intervals", intervals, "ON CONFLICT DO NOTHING")

    def interval_replicates(self, test_ids: Sequence[str]) -> pd.DataFrame:
        """``test_id``, ``bootstrap``: the replicates behind the stored effect intervals of
        these tests (none in a record from before intervals)."""
        if self.schema_version < 4:
            return pd.DataFrame({"test_id": [], "bootstrap": []})
        return self._df(
            "SELECT test_id, bootstrap FROM effect_intervals "
            "WHERE test_id IN (SELECT unnest(?)) ORDER BY test_id",
            [list(test_ids)],
        )

    def effect_intervals(self, test_ids: Sequence[str]) -> dict[str, EffectInterval]:
        """test_id -> the stored effect interval of those of these tests that have a current
        one (with the noise draws of its equivalence test)."""
        if not test_ids or self.schema_version < 8:
            return {}
        rows = self._rows(
            "SELECT ei.test_id, ei.estimate, ei.low, ei.high, ei.confidence, ei.omega, "
            "ei.method, ei.n_bootstrap, ei.bootstrap, ei.plug_in, ei.noise, "
            "ei.directions, ei.guard_margins, ei.guard_p, t.k_a, t.k_b "
            "FROM effect_intervals ei JOIN tests t USING (test_id) "
            "WHERE ei.test_id IN (SELECT unnest(?)) AND ei.guard_p IS NOT NULL",
            [list(test_ids)],
        )
        found = {}
        for row in rows:
            test_id, estimate, low, high, level, omega, method, n_boot = row[:8]
            boot, plug_in, noise, directions, guard_margins, guard_p, k_a, k_b = row[8:]
            squared = _read_only(noise)
            boundary = BoundaryDraws(
                plug_in=float(plug_in),
                noise=squared,
                directions=_read_only(directions).reshape(-1, squared.size).T,
                guard=TiltedSteps(_read_only(guard_margins), _read_only(guard_p)),
            )
            found[str(test_id)] = EffectInterval(
                estimate=float(estimate),
                low=float(low),
                high=float(high),
                confidence=float(level),
                omega=str(omega),
                method=str(method),
                n_bootstrap=int(n_boot),
                bootstrap=_read_only(boot),
                boundary=boundary,
                k_a=int(k_a),
                k_b=int(k_b),
            )
        return found

    def test_p_values(self, test_ids: Sequence[str]) -> dict[str, float]:
        """test_id -> p-value of the stored ones among these tests (no null distributions)."""
        if not test_ids:
            return {}
        rows = self._rows(
            "SELECT test_id, p_value FROM tests WHERE test_id IN (SELECT unnest(?))",
            [list(test_ids)],
        )
        return {str(t): float(p) for t, p in rows}

    def tests(self, test_ids: Sequence[str], *, nulls: bool = True) -> pd.DataFrame:
        """Stored test rows, with their null distributions unless ``nulls`` is False (at
        B permutations a null is B numbers: a family of thousands is better read without)."""
        columns = "*" if nulls else "* EXCLUDE (null_distribution)"
        return self._df(
            f"SELECT {columns} FROM tests WHERE test_id IN (SELECT unnest(?)) ORDER BY test_id",
            [list(test_ids)],
        )

    # ---------------------------------------------------------------------- runs

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
        """Record a run as running (a retried flow run keeps its row)."""
        with self._transaction() as con:
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

    def mark_interrupted_runs(self) -> int:
        """Runs left 'running' by a process that died become 'crashed'; returns how many."""
        with self._transaction() as con:
            (count,) = con.execute(
                "SELECT count(*) FROM runs WHERE status = 'running'"
            ).fetchone() or (0,)
            con.execute(
                "UPDATE runs SET status = 'crashed', message = "
                "'the process running it stopped before it finished (killed or crashed)' "
                "WHERE status = 'running'"
            )
        return int(count)

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

    def set_report_path(self, run_id: str, report_path: str) -> None:
        """Remember where the run's report was written."""
        with self._transaction() as con:
            con.execute("UPDATE runs SET report_path = ? WHERE run_id = ?", [report_path, run_id])

    def runs(self) -> pd.DataFrame:
        """Every run, newest first; a running run with its progress so far (outputs stored of
        those planned, tests stored of those planned, whether it is sequential: then the
        planned outputs are a maximum; missing for the others)."""
        return self._df(RUNS_SQL)

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
            raise UnknownRunError(f"run {run_id!r} is not in {self.path}; `dbpa runs` lists them")
        return df

    # ---------------------------------------------------------------------- a run's family

    def add_family(self, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """The perturbations tested by a run (keys: family, perturbation_id, position, kind,
        label, description, original_arm, perturbed_arm, test_id)."""
        values = [{"run_id": run_id, **{key: row[key] for key in _FAMILY_KEYS}} for row in rows]
        with self._transaction() as con:
            self._insert(con, "run_tests", pa.Table.from_pylist(values), "ON CONFLICT DO NOTHING")

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
        pointers = pa.table(
            {"perturbation_id": list(last), "test_id": list(last.values())},
            pa.schema([("perturbation_id", pa.string()), ("test_id", pa.string())]),
        )
        with self._transaction() as con:
            con.execute(
                "DELETE FROM sequential_looks WHERE run_id = ? AND family = ?", [run_id, family]
            )
            if values:
                self._insert(con, "sequential_looks", pa.Table.from_pylist(values, _LOOKS))
            con.register("last_looks", pointers)
            try:  # one statement: a family of thousands updated row by row took seconds
                con.execute(
                    "UPDATE run_tests SET test_id = l.test_id FROM last_looks l "
                    "WHERE run_tests.run_id = ? AND run_tests.family = ? "
                    "AND run_tests.perturbation_id = l.perturbation_id",
                    [run_id, family],
                )
            finally:
                con.unregister("last_looks")

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
            "FROM samples WHERE arm_id IN (SELECT unnest(?)) GROUP BY arm_id ORDER BY arm_id",
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


def _intervals_table(records: Sequence[PerturbationTestRecord]) -> pa.Table:
    """The effect intervals of the records that have one, as ``effect_intervals`` rows
    (each direction's coordinates one after the other in ``directions``)."""
    kept = [(r.test_id, r.interval) for r in records if r.interval is not None]
    boots = [i.bootstrap for _, i in kept]
    squared = [i.boundary.noise for _, i in kept]
    directions = [i.boundary.directions.T.ravel() for _, i in kept]
    return pa.table(
        {
            "test_id": pa.array([t for t, _ in kept], pa.string()),
            "omega": pa.array([i.omega for _, i in kept], pa.string()),
            "confidence": pa.array([i.confidence for _, i in kept], pa.float64()),
            "method": pa.array([i.method for _, i in kept], pa.string()),
            "estimate": pa.array([i.estimate for _, i in kept], pa.float64()),
            "low": pa.array([i.low for _, i in kept], pa.float64()),
            "high": pa.array([i.high for _, i in kept], pa.float64()),
            "n_bootstrap": pa.array([i.n_bootstrap for _, i in kept], pa.int32()),
            "bootstrap": _float_lists(boots),
            "plug_in": pa.array([i.boundary.plug_in for _, i in kept], pa.float64()),
            "noise": _float_lists(squared),
            "directions": _float_lists(directions),
            "guard_margins": _double_lists([i.boundary.guard.margins for _, i in kept]),
            "guard_p": _double_lists([i.boundary.guard.p_values for _, i in kept]),
        }
    )


def _float_lists(arrays: Sequence[np.ndarray]) -> pa.ListArray:
    """A FLOAT[] column: one list of float32 values per array."""
    flat = [np.asarray(a, dtype=np.float32) for a in arrays]
    return pa.ListArray.from_arrays(
        np.cumsum([0] + [len(a) for a in flat]).astype(np.int32),
        pa.array(np.concatenate(flat) if flat else np.empty(0, np.float32)),
    )


def _double_lists(arrays: Sequence[np.ndarray]) -> pa.ListArray:
    """A DOUBLE[] column: one list per array (kept exact: the guard's p-values decide)."""
    flat = [np.asarray(a, dtype=np.float64) for a in arrays]
    return pa.ListArray.from_arrays(
        np.cumsum([0] + [len(a) for a in flat]).astype(np.int32),
        pa.array(np.concatenate(flat) if flat else np.empty(0, np.float64)),
    )


def _read_only(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(values, dtype=np.float64)
    array.setflags(write=False)
    return array
