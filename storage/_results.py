"""The SQL of the results view and of the list of runs, as a record's schema version has it.

Shared by the run record (``results``, ``runs``) and the export (the ``results`` table).
"""

from __future__ import annotations

from collections.abc import Mapping

from ._schema import PROMPT_SETS

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
_SET_COLUMNS = {
    True: "t.n_prompts, (SELECT count(*) FROM prompt_decisions pd WHERE pd.run_id = rt.run_id "
    "AND pd.family = rt.family AND pd.perturbation_id = rt.perturbation_id AND pd.moved) "
    "AS prompts_moved",
    False: "NULL AS n_prompts, NULL AS prompts_moved",
}
"""A pooled test over a set of prompts: how many, and how many the drill-down called moved
(migration ``PROMPT_SETS``); NULL for a test of one prompt (``prompts_moved`` 0)."""
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
        .replace("{sets}", _SET_COLUMNS[schema_version >= PROMPT_SETS])
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
           {sets},
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
        SELECT run_id, {k} AS k, {sequential} AS sequential
        FROM runs WHERE status = 'running'),
    run_arms AS (
        SELECT DISTINCT rt.run_id, arm.arm_id, r.k
        FROM running r JOIN {family_tests} rt USING (run_id),
        LATERAL (VALUES (rt.original_arm), (rt.perturbed_arm)) AS arm(arm_id)),
    sampled AS (
        SELECT a.run_id, count(DISTINCT a.arm_id) * max(a.k) AS outputs_planned,
               count(s.idx) AS outputs_stored
        FROM run_arms a LEFT JOIN samples s ON s.arm_id = a.arm_id AND s.idx < a.k
        GROUP BY a.run_id),
    tested AS (
        SELECT rt.run_id, count(*) AS tests_planned, count(t.test_id) AS tests_stored
        FROM running r JOIN {all_tests} rt USING (run_id)
        LEFT JOIN tests t ON t.test_id = rt.test_id GROUP BY rt.run_id),
    every_arm AS (
        SELECT DISTINCT rt.run_id, arm.arm_id, {k} AS k
        FROM runs JOIN {family_tests} rt USING (run_id),
        LATERAL (VALUES (rt.original_arm), (rt.perturbed_arm)) AS arm(arm_id)),
    spent AS (
        SELECT a.run_id, sum(x.cost_usd) AS cost_usd
        FROM every_arm a JOIN samples x ON x.arm_id = a.arm_id AND (a.k IS NULL OR x.idx < a.k)
        GROUP BY a.run_id)
    SELECT r.run_id, r.audit, r.status, r.epoch, r.started_at, r.finished_at, r.message,
           r.report_path, s.outputs_stored, s.outputs_planned, t.tests_stored, t.tests_planned,
           g.sequential, c.cost_usd
    FROM runs r LEFT JOIN sampled s USING (run_id) LEFT JOIN tested t USING (run_id)
    LEFT JOIN running g USING (run_id) LEFT JOIN spent c USING (run_id)
    ORDER BY r.started_at DESC
"""
"""Every run, with the progress of the running ones (``{family_tests}``, ``{all_tests}``:
see ``runs_sql``) and what its arms' outputs cost (their first k each; NULL: no price)."""


_RUN_CONFIG = {
    False: (
        "TRY_CAST(json_extract_string(config, '$.k') AS INTEGER)",
        "json_extract(config, '$.sequential') IS NOT NULL",
    ),
    True: (
        "CASE WHEN (config::jsonb ->> 'k') ~ '^-?[0-9]+$' "
        "THEN (config::jsonb ->> 'k')::integer END",
        "(config::jsonb -> 'sequential') IS NOT NULL",
    ),
}
"""A running run's k and whether it is sequential, from its config: DuckDB's, PostgreSQL's."""


def runs_sql(schema_version: int, *, postgres: bool = False) -> str:
    """The runs query for a record at ``schema_version`` (on PostgreSQL if ``postgres``):
    from migration ``PROMPT_SETS`` a run over a set of prompts counts every prompt's arms
    and tests, the pooled tests too."""
    k, sequential = _RUN_CONFIG[postgres]
    sql = RUNS_SQL.replace("{k}", k).replace("{sequential}", sequential)
    if schema_version < PROMPT_SETS:
        return sql.replace("{family_tests}", "run_tests").replace("{all_tests}", "run_tests")
    members = (
        "(SELECT run_id, original_arm, perturbed_arm, test_id FROM run_tests UNION ALL "
        "SELECT run_id, original_arm, perturbed_arm, test_id FROM run_prompt_tests)"
    )
    return sql.replace("{family_tests}", members).replace("{all_tests}", members)
