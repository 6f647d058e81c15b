"""Migration 1: the audit record as first released (arms, samples, embeddings, tests, runs,
families, corrections). Released: never edit it; later changes are migrations of their own in
``_schema``."""

from __future__ import annotations

INITIAL: tuple[int, str, list[str]] = (
    1,
    "audit record: arms, samples, embeddings, tests, runs, families, corrections",
    [
        """
        CREATE TABLE meta (
            key VARCHAR PRIMARY KEY,
            value VARCHAR NOT NULL
        )
        """,
        """
        CREATE TABLE arms (
            arm_id VARCHAR PRIMARY KEY,
            model VARCHAR NOT NULL,
            api_base VARCHAR,
            params JSON NOT NULL,
            messages JSON NOT NULL,
            epoch VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
        )
        """,
        """
        CREATE TABLE samples (
            arm_id VARCHAR NOT NULL,
            idx INTEGER NOT NULL,
            text VARCHAR NOT NULL,
            text_hash VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            finish_reason VARCHAR,
            prompt_tokens INTEGER,
            completion_tokens INTEGER,
            cost_usd DOUBLE,
            latency_s DOUBLE,
            seed BIGINT,
            request_id VARCHAR,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (arm_id, idx)
        )
        """,
        """
        CREATE TABLE embeddings (
            text_hash VARCHAR NOT NULL,
            embedder VARCHAR NOT NULL,
            dim INTEGER NOT NULL,
            vector FLOAT[] NOT NULL,
            truncated BOOLEAN NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (text_hash, embedder)
        )
        """,
        """
        CREATE TABLE tests (
            test_id VARCHAR PRIMARY KEY,
            original_arm VARCHAR NOT NULL,
            perturbed_arm VARCHAR NOT NULL,
            embedder VARCHAR NOT NULL,
            similarity VARCHAR NOT NULL,
            omega VARCHAR NOT NULL,
            omega_options JSON NOT NULL,
            n_permutations INTEGER NOT NULL,
            seed BIGINT NOT NULL,
            statistic DOUBLE NOT NULL,
            p_value DOUBLE NOT NULL,
            null_mean DOUBLE NOT NULL,
            null_std DOUBLE NOT NULL,
            effect DOUBLE NOT NULL,
            z DOUBLE,
            evaluated INTEGER NOT NULL,
            exact BOOLEAN NOT NULL,
            k_a INTEGER NOT NULL,
            k_b INTEGER NOT NULL,
            null_distribution DOUBLE[] NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
        )
        """,
        """
        CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY,
            audit VARCHAR NOT NULL,
            status VARCHAR NOT NULL,
            config JSON NOT NULL,
            config_hash VARCHAR NOT NULL,
            epoch VARCHAR NOT NULL,
            flow_run_id VARCHAR,
            started_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
            finished_at TIMESTAMPTZ,
            message VARCHAR,
            versions JSON,
            report_path VARCHAR
        )
        """,
        """
        CREATE TABLE run_tests (
            run_id VARCHAR NOT NULL,
            family VARCHAR NOT NULL,
            perturbation_id VARCHAR NOT NULL,
            position INTEGER NOT NULL,
            kind VARCHAR NOT NULL,
            label VARCHAR,
            description VARCHAR NOT NULL,
            original_arm VARCHAR NOT NULL,
            perturbed_arm VARCHAR NOT NULL,
            test_id VARCHAR NOT NULL,
            PRIMARY KEY (run_id, family, perturbation_id)
        )
        """,
        """
        CREATE TABLE arm_failures (
            run_id VARCHAR NOT NULL,
            arm_id VARCHAR NOT NULL,
            model VARCHAR NOT NULL,
            reason VARCHAR NOT NULL,
            created_at TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
            PRIMARY KEY (run_id, arm_id)
        )
        """,
        """
        CREATE TABLE corrections (
            run_id VARCHAR NOT NULL,
            family VARCHAR NOT NULL,
            perturbation_id VARCHAR NOT NULL,
            method VARCHAR NOT NULL,
            alpha DOUBLE NOT NULL,
            p_value DOUBLE NOT NULL,
            adjusted_p DOUBLE NOT NULL,
            reject BOOLEAN NOT NULL,
            tested BOOLEAN NOT NULL,
            PRIMARY KEY (run_id, family, perturbation_id)
        )
        """,
    ],
)
