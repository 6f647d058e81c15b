"""The prompt-set record: each pooled test's prompts, each run's drill-down to the prompts
that moved (migration ``PROMPT_SETS``).

A pooled test is a row of ``tests`` like any other (``n_prompts`` set, its arms the first
prompt's); ``set_prompts`` holds what it found per prompt (its p-value from the pooled
test's relabellings), and ``prompt_decisions`` which prompts each run called moved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import pyarrow as pa

from dbpa.set_analysis import SetTestRecord

from ._core import StoreCore, retried
from ._schema import PROMPT_SETS

_MEMBER_KEYS = (
    "family",
    "perturbation_id",
    "prompt_id",
    "prompt_position",
    "original_arm",
    "perturbed_arm",
    "test_id",
)
_DECISION_KEYS = ("prompt_id", "set_test_id", "position", "within", "level", "adjusted_p", "moved")


class SetRecord(StoreCore):
    """Pooled tests' prompts and runs' drill-downs."""

    @retried
    def add_prompt_tests(self, run_id: str, rows: Sequence[Mapping[str, Any]]) -> None:
        """A run's per-prompt tests (keys: family, perturbation_id, prompt_id,
        prompt_position, original_arm, perturbed_arm, test_id): its arms, for its progress."""
        values = [{"run_id": run_id, **{key: row[key] for key in _MEMBER_KEYS}} for row in rows]
        if values:
            with self._transaction() as con:
                self._insert(
                    con, "run_prompt_tests", pa.Table.from_pylist(values), "ON CONFLICT DO NOTHING"
                )

    @retried
    def add_set_tests(self, records: Sequence[SetTestRecord]) -> None:
        """Store pooled tests (idempotent): their prompts first, so a stored test always has
        its prompts."""
        rows = [{"set_test_id": r.test.test_id, **vars(p)} for r in records for p in r.prompts]
        if rows:
            table = pa.Table.from_pylist(
                rows,
                schema=pa.schema(
                    [
                        ("set_test_id", pa.string()),
                        ("position", pa.int32()),
                        ("prompt_id", pa.string()),
                        ("test_id", pa.string()),
                        ("p_value", pa.float64()),
                        ("statistic", pa.float64()),
                        ("effect", pa.float64()),
                        ("z", pa.float64()),
                        ("degenerate", pa.bool_()),
                    ]
                ),
            )
            with self._transaction() as con:
                self._insert(con, "set_prompts", table, "ON CONFLICT DO NOTHING")
        self.add_tests([r.test for r in records])  # type: ignore[attr-defined]

    def set_prompt_p_values(self, set_test_ids: Sequence[str]) -> dict[str, list[float]]:
        """set_test_id -> its prompts' p-values, in prompt order."""
        if not set_test_ids or self.schema_version < PROMPT_SETS:
            return {}
        found: dict[str, list[float]] = {}
        for set_id, p in self._rows(
            "SELECT set_test_id, p_value FROM set_prompts "
            "WHERE set_test_id IN (SELECT unnest(CAST(? AS VARCHAR[]))) "
            "ORDER BY set_test_id, position",
            [list(set_test_ids)],
        ):
            found.setdefault(str(set_id), []).append(float(p))
        return found

    @retried
    def add_prompt_decisions(
        self, run_id: str, family: str, rows: Sequence[Mapping[str, Any]]
    ) -> None:
        """Store (or replace) one family's drill-down of a run (keys: perturbation_id,
        prompt_id, set_test_id, position, within, level, adjusted_p, moved)."""
        values = [
            {
                "run_id": run_id,
                "family": family,
                "perturbation_id": row["perturbation_id"],
                **{key: row[key] for key in _DECISION_KEYS},
            }
            for row in rows
        ]
        with self._transaction() as con:
            con.execute(
                "DELETE FROM prompt_decisions WHERE run_id = ? AND family = ?", [run_id, family]
            )
            if values:
                self._insert(con, "prompt_decisions", pa.Table.from_pylist(values))

    def prompt_results(self, run_id: str) -> pd.DataFrame:
        """Per perturbation and prompt of a run over a set of prompts: the prompt's p-value
        from the pooled test, its effect there, its own test's effect interval, whether the
        drill-down called it moved (empty for a run of one prompt)."""
        if self.schema_version < PROMPT_SETS:
            return pd.DataFrame()
        return self._df(PROMPT_RESULTS_SQL, [run_id])


PROMPT_RESULTS_SQL = """
    SELECT rt.run_id, rt.family, rt.position, rt.perturbation_id, rt.kind, rt.label,
           sp.position AS prompt_position, sp.prompt_id, sp.p_value, pd.adjusted_p,
           COALESCE(pd.moved, FALSE) AS moved, pd.level, pd.within, sp.statistic, sp.effect,
           sp.z, sp.degenerate, ei.estimate AS effect_estimate, ei.low AS effect_low,
           ei.high AS effect_high, pt.original_arm, pt.perturbed_arm, sp.test_id,
           rt.test_id AS set_test_id
    FROM run_tests rt
    JOIN set_prompts sp ON sp.set_test_id = rt.test_id
    LEFT JOIN tests pt ON pt.test_id = sp.test_id
    LEFT JOIN effect_intervals ei ON ei.test_id = sp.test_id
    LEFT JOIN prompt_decisions pd
      ON pd.run_id = rt.run_id AND pd.family = rt.family
     AND pd.perturbation_id = rt.perturbation_id AND pd.prompt_id = sp.prompt_id
    WHERE rt.run_id = ?
    ORDER BY rt.family, rt.position, sp.position
"""
"""A run's prompts per perturbation (shared with the export)."""
