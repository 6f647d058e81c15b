"""The DuckDB schema as an ordered list of migrations.

A migration is applied once, inside a transaction, and recorded in ``schema_migrations``.
Never edit a released migration: append a new one.
"""

from __future__ import annotations

from ._schema_initial import INITIAL

MONITOR = 9
"""The migration that adds the drift monitor's tables."""
PROMPT_SETS = 10
"""The migration that adds the prompt-set tables and columns (readers of older records skip
them)."""
SET_GUARD = 11
"""The migration that keeps each effect interval's distances between the pooled outputs (the
set-level equivalence test's joint guard); an interval stored before is computed again."""

PROVIDER_BATCHES = 12
"""The migration that adds the provider batches of ``batch: true`` models and their requests."""

MIGRATIONS: list[tuple[int, str, list[str]]] = [
    INITIAL,
    (
        2,
        "drift: each arm of an audit tested against the same arm at an earlier epoch",
        [
            """
            CREATE TABLE drift_tests (
                audit VARCHAR NOT NULL,
                epoch VARCHAR NOT NULL,
                against VARCHAR NOT NULL,
                reference_epoch VARCHAR NOT NULL,
                arm_id VARCHAR NOT NULL,
                reference_arm VARCHAR NOT NULL,
                family VARCHAR NOT NULL,
                role VARCHAR NOT NULL,
                test_id VARCHAR NOT NULL,
                method VARCHAR NOT NULL,
                alpha DOUBLE NOT NULL,
                adjusted_p DOUBLE NOT NULL,
                reject BOOLEAN NOT NULL,
                created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
                PRIMARY KEY (audit, epoch, against, arm_id)
            )
            """,
        ],
    ),
    (
        3,
        "combined omega: the component that drove a test and every component's own result",
        [
            "ALTER TABLE tests ADD COLUMN driver VARCHAR",
            "ALTER TABLE tests ADD COLUMN components JSON",
        ],
    ),
    (
        4,
        "equivalence: each test's effect interval; each decision's margin and equivalence test",
        [
            """
            CREATE TABLE effect_intervals (
                test_id VARCHAR PRIMARY KEY,
                omega VARCHAR NOT NULL,
                confidence DOUBLE NOT NULL,
                method VARCHAR NOT NULL,
                estimate DOUBLE NOT NULL,
                low DOUBLE NOT NULL,
                high DOUBLE NOT NULL,
                n_bootstrap INTEGER NOT NULL,
                bootstrap FLOAT[] NOT NULL,
                created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
            )
            """,
            "ALTER TABLE corrections ADD COLUMN decision VARCHAR",
            "ALTER TABLE corrections ADD COLUMN equivalence_p DOUBLE",
            "ALTER TABLE corrections ADD COLUMN adjusted_equivalence_p DOUBLE",
            "ALTER TABLE corrections ADD COLUMN margin DOUBLE",
            "ALTER TABLE corrections ADD COLUMN margin_source VARCHAR",
            "ALTER TABLE corrections ADD COLUMN margin_quantile DOUBLE",
            "ALTER TABLE corrections ADD COLUMN margin_pairs INTEGER",
        ],
    ),
    (
        5,
        "sequential audits: each look of a test, where and why each test stopped, calls used",
        [
            """
            CREATE TABLE sequential_looks (
                run_id VARCHAR NOT NULL,
                family VARCHAR NOT NULL,
                perturbation_id VARCHAR NOT NULL,
                look INTEGER NOT NULL,
                k INTEGER NOT NULL,
                test_id VARCHAR NOT NULL,
                p_value DOUBLE NOT NULL,
                weight DOUBLE NOT NULL,
                PRIMARY KEY (run_id, family, perturbation_id, look)
            )
            """,
            "ALTER TABLE corrections ADD COLUMN stopped_at INTEGER",
            "ALTER TABLE corrections ADD COLUMN stop_reason VARCHAR",
            "ALTER TABLE runs ADD COLUMN outputs_used BIGINT",
            "ALTER TABLE runs ADD COLUMN outputs_fixed BIGINT",
        ],
    ),
    (
        6,
        "effect intervals: the bootstrap draws behind the least-favourable equivalence test; "
        "a calibrated margin's multiple",
        [
            "ALTER TABLE effect_intervals ADD COLUMN plug_in DOUBLE",
            "ALTER TABLE effect_intervals ADD COLUMN noise FLOAT[]",
            "ALTER TABLE effect_intervals ADD COLUMN directions FLOAT[]",
            "ALTER TABLE corrections ADD COLUMN margin_multiple DOUBLE",
        ],
    ),
    (
        7,
        "sequential audits: why a test stopped at a look, stored with the look as it is taken",
        ["ALTER TABLE sequential_looks ADD COLUMN stop VARCHAR"],
    ),
    (
        8,
        "effect intervals: the tilted-bootstrap guard of the equivalence test, its p-value "
        "on a grid of margins",
        [
            "ALTER TABLE effect_intervals ADD COLUMN guard_margins DOUBLE[]",
            "ALTER TABLE effect_intervals ADD COLUMN guard_p DOUBLE[]",
        ],
    ),
    (
        MONITOR,
        "drift monitor: each arm's evidence at each tick against its baseline, and the resets "
        "that start a new baseline",
        [
            """
            CREATE TABLE monitor_ticks (
                audit VARCHAR NOT NULL,
                series VARCHAR NOT NULL,
                baseline_epoch VARCHAR NOT NULL,
                epoch VARCHAR NOT NULL,
                tick INTEGER NOT NULL,
                arm_id VARCHAR NOT NULL,
                reference_arm VARCHAR NOT NULL,
                form VARCHAR NOT NULL,
                alpha DOUBLE NOT NULL,
                tolerance DOUBLE NOT NULL,
                e_value DOUBLE NOT NULL,
                log_e_value DOUBLE NOT NULL,
                threshold DOUBLE NOT NULL,
                alarm BOOLEAN NOT NULL,
                alarm_tick INTEGER,
                pairs INTEGER NOT NULL,
                stake DOUBLE NOT NULL,
                created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
                PRIMARY KEY (audit, series, baseline_epoch, epoch)
            )
            """,
            """
            CREATE TABLE monitor_resets (
                audit VARCHAR NOT NULL,
                series VARCHAR NOT NULL,
                epoch VARCHAR NOT NULL,
                created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
                PRIMARY KEY (audit, series, epoch)
            )
            """,
        ],
    ),
    (
        PROMPT_SETS,
        "prompt sets: each run's per-prompt tests, a pooled test's prompts with their "
        "p-values from its permutations, each run's drill-down to the prompts that moved",
        [
            """
            CREATE TABLE run_prompt_tests (
                run_id VARCHAR NOT NULL,
                family VARCHAR NOT NULL,
                perturbation_id VARCHAR NOT NULL,
                prompt_id VARCHAR NOT NULL,
                prompt_position INTEGER NOT NULL,
                original_arm VARCHAR NOT NULL,
                perturbed_arm VARCHAR NOT NULL,
                test_id VARCHAR NOT NULL,
                PRIMARY KEY (run_id, family, perturbation_id, prompt_id)
            )
            """,
            "ALTER TABLE tests ADD COLUMN combination VARCHAR",
            "ALTER TABLE tests ADD COLUMN n_prompts INTEGER",
            """
            CREATE TABLE set_prompts (
                set_test_id VARCHAR NOT NULL,
                position INTEGER NOT NULL,
                prompt_id VARCHAR NOT NULL,
                test_id VARCHAR NOT NULL,
                p_value DOUBLE NOT NULL,
                statistic DOUBLE NOT NULL,
                effect DOUBLE NOT NULL,
                z DOUBLE,
                degenerate BOOLEAN NOT NULL,
                PRIMARY KEY (set_test_id, position)
            )
            """,
            """
            CREATE TABLE prompt_decisions (
                run_id VARCHAR NOT NULL,
                family VARCHAR NOT NULL,
                perturbation_id VARCHAR NOT NULL,
                prompt_id VARCHAR NOT NULL,
                set_test_id VARCHAR NOT NULL,
                position INTEGER NOT NULL,
                within VARCHAR NOT NULL,
                level DOUBLE NOT NULL,
                adjusted_p DOUBLE,
                moved BOOLEAN NOT NULL,
                PRIMARY KEY (run_id, family, perturbation_id, prompt_id)
            )
            """,
        ],
    ),
    (
        SET_GUARD,
        "effect intervals: the distances between the pooled outputs, for the set-level "
        "equivalence test's joint guard",
        ["ALTER TABLE effect_intervals ADD COLUMN distances DOUBLE[]"],
    ),
    (
        PROVIDER_BATCHES,
        "provider batches: each batch of a batch: true model as soon as the provider created "
        "it, the requests it holds, and whether its answers are stored",
        [
            """
            CREATE TABLE provider_batches (
                batch_id VARCHAR PRIMARY KEY,
                model VARCHAR NOT NULL,
                input_file_id VARCHAR NOT NULL,
                requests INTEGER NOT NULL,
                reserved_usd DOUBLE,
                deadline TIMESTAMPTZ NOT NULL,
                status VARCHAR NOT NULL,
                collected BOOLEAN NOT NULL,
                created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
                collected_at TIMESTAMPTZ
            )
            """,
            """
            CREATE TABLE batch_requests (
                batch_id VARCHAR NOT NULL,
                custom_id VARCHAR NOT NULL,
                arm_id VARCHAR NOT NULL,
                indices VARCHAR NOT NULL,
                seed BIGINT,
                PRIMARY KEY (batch_id, custom_id)
            )
            """,
        ],
    ),
]
"""(version, description, statements) in the order they are applied."""
