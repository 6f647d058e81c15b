"""The test record: permutation tests and their effect intervals, keyed by content id.

A test is shared by every run that plans it; its interval keeps the bootstrap draws behind
``dbpa compare`` and the equivalence test of any margin.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa

from dbpa.analysis import PerturbationTestRecord
from dbpa.stats import INTERVAL_MIN_ROWS, BoundaryDraws, EffectInterval, TiltedSteps

from ._core import StoreCore, retried
from ._schema import PROMPT_SETS, SET_GUARD


def _current_interval(schema_version: int) -> str:
    """SQL for "the test's stored interval is current" in a record of this schema version."""
    if schema_version >= SET_GUARD:
        return "ei.guard_p IS NOT NULL AND ei.distances IS NOT NULL"
    return "ei.guard_p IS NOT NULL" if schema_version >= 8 else "FALSE"


class PermutationRecord(StoreCore):
    """Permutation tests and their effect intervals."""

    def existing_tests(self, test_ids: Iterable[str]) -> set[str]:
        """Which of these tests are stored with a current effect interval (a test stored
        before intervals were, or with an interval whose equivalence test has since been
        replaced, is run again: the same result, and its interval)."""
        ids = sorted(set(test_ids))
        if not ids:
            return set()
        current = _current_interval(self.schema_version)
        if (
            self.schema_version >= PROMPT_SETS
        ):  # a pooled test over prompts has no interval of its own
            current += " OR t.n_prompts IS NOT NULL"
        rows = self._rows(
            "SELECT t.test_id FROM tests t LEFT JOIN effect_intervals ei USING (test_id) "
            f"WHERE t.test_id = ANY(?) AND ({current} OR least(t.k_a, t.k_b) < ?)",
            [ids, INTERVAL_MIN_ROWS],
        )
        return {t for (t,) in rows}

    @retried
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
                "combination": pa.array([r.combination for r in records], pa.string()),
                "n_prompts": pa.array([r.n_prompts for r in records], pa.int32()),
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
                    "WHERE (guard_p IS NULL OR distances IS NULL) AND test_id = ANY(?)",
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
            "WHERE test_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) "
            "ORDER BY test_id",
            [list(test_ids)],
        )

    def effect_intervals(self, test_ids: Sequence[str]) -> dict[str, EffectInterval]:
        """test_id -> the stored effect interval of those of these tests that have a current
        one (with the noise draws of its equivalence test)."""
        if not test_ids or self.schema_version < 8:
            return {}
        distances = "ei.distances" if self.schema_version >= SET_GUARD else "NULL"
        rows = self._rows(
            "SELECT ei.test_id, ei.estimate, ei.low, ei.high, ei.confidence, ei.omega, "
            "ei.method, ei.n_bootstrap, ei.bootstrap, ei.plug_in, ei.noise, "
            f"ei.directions, ei.guard_margins, ei.guard_p, t.k_a, t.k_b, {distances} "
            "FROM effect_intervals ei JOIN tests t USING (test_id) "
            "WHERE ei.test_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) "
            f"AND {_current_interval(self.schema_version)}",
            [list(test_ids)],
        )
        found = {}
        for row in rows:
            test_id, estimate, low, high, level, omega, method, n_boot = row[:8]
            boot, plug_in, noise, directions, guard_margins, guard_p, k_a, k_b = row[8:16]
            pooled = None if row[16] is None else _read_only(row[16]).reshape(k_a + k_b, -1)
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
                distances=pooled,
            )
        return found

    def test_p_values(self, test_ids: Sequence[str]) -> dict[str, float]:
        """test_id -> p-value of the stored ones among these tests (no null distributions)."""
        if not test_ids:
            return {}
        rows = self._rows(
            "SELECT test_id, p_value FROM tests "
            "WHERE test_id IN (SELECT unnest(CAST(? AS VARCHAR[])))",
            [list(test_ids)],
        )
        return {str(t): float(p) for t, p in rows}

    def tests(self, test_ids: Sequence[str], *, nulls: bool = True) -> pd.DataFrame:
        """Stored test rows, with their null distributions unless ``nulls`` is False (at
        B permutations a null is B numbers: a family of thousands is better read without)."""
        columns = "*"
        if not nulls and self.postgres:  # PostgreSQL has no EXCLUDE: the columns by name
            columns = ", ".join(
                c for c in self._connection.columns("tests") if c != "null_distribution"
            )
        elif not nulls:
            columns = "* EXCLUDE (null_distribution)"
        return self._df(
            f"SELECT {columns} FROM tests WHERE test_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) "
            "ORDER BY test_id",
            [list(test_ids)],
        )


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
            "distances": _double_lists([np.ravel(i.distances) for _, i in kept]),
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
