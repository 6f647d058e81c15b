"""The drift flow: an audit's latest epoch tested against earlier epochs, recorded in DuckDB.

Every arm of the audit at the tested epoch is compared with the same arm (model,
messages, parameters) at the previous epoch and at the baseline epoch, on the stored
embeddings; each comparison is one family for the correction. No model is called.
"""

from __future__ import annotations

from dataclasses import dataclass

from prefect import flow, get_run_logger
from prefect.artifacts import create_table_artifact

import storage
from dbpa.drift import (
    Comparison,
    DriftResult,
    decide,
    load_vectors,
    outdated,
    plan_drift,
    read_epochs,
)
from tasks.artifacts import artifact_key, outcome_digest, publish_once
from tasks.permutation import TestJob, run_tests


@dataclass(frozen=True)
class DriftSummary:
    """What one comparison found."""

    against: str
    epoch: str
    reference_epoch: str
    tested: int
    changed: int
    """Arms whose output distribution changed (after correction)."""
    skipped: int
    """Arms not sampled and embedded at both epochs."""


@flow(name="dbpa-drift", flow_run_name="drift {audit}", log_prints=True)
def drift(
    audit: str,
    db: str = "dbpa.duckdb",
    epoch: str = "latest",
    baseline: str = "first",
    publish: bool = True,
) -> list[DriftSummary]:
    """Test ``epoch`` of ``audit`` against the previous and the ``baseline`` epoch; store
    the tests and their corrected decisions, and (with ``publish``) show them as a table
    artifact."""
    logger = get_run_logger()
    summaries, table = [], []
    with storage.Store(db) as store:
        epochs = read_epochs(store, audit)
        comparisons = plan_drift(audit, epochs, epoch=epoch, baseline=baseline)
        if not comparisons:
            logger.info("drift: %s", nothing_to_compare(audit, [e.epoch for e in epochs]))
            return []
        for comparison in comparisons:
            results, skipped = _compare(store, comparison)
            for label, reason in skipped.items():
                logger.warning("drift: %s not tested: %s", label, reason)
            changed = [r.job.label for r in results if r.decision.reject]
            logger.info(
                "drift of %s at %s against the %s epoch %s: %d of %d arms changed%s",
                audit,
                comparison.epoch,
                comparison.against,
                comparison.reference_epoch,
                len(changed),
                len(results),
                f" ({', '.join(changed)})" if changed else "",
            )
            summaries.append(
                DriftSummary(
                    comparison.against,
                    comparison.epoch,
                    comparison.reference_epoch,
                    len(results),
                    len(changed),
                    len(skipped),
                )
            )
            table += [_table_row(comparison, r) for r in results]
    if not publish:
        return summaries
    publish_once(
        create_table_artifact,
        artifact_key(audit, "drift"),
        f"Drift of {audit} at epoch {comparisons[0].epoch} against "
        + ", ".join(f"the {c.against} epoch {c.reference_epoch}" for c in comparisons),
        outcome_digest([(c.against, c.epoch, c.reference_epoch) for c in comparisons], table),
        table=table,
    )
    return summaries


def outdated_epochs(audit: str, db: str, tick: str) -> tuple[str, ...]:
    """The epochs of ``audit`` after ``tick`` whose drift is to be tested again now that
    ``tick`` is recorded (``dbpa.drift.outdated``): a tick run late comes before them."""
    with storage.Store(db) as store:
        epochs = [e.epoch for e in read_epochs(store, audit)]
        rows = store.drift(audit)
    recorded: dict[str, dict[str, str]] = {}
    for r in rows.itertuples():
        recorded.setdefault(str(r.epoch), {})[str(r.against)] = str(r.reference_epoch)
    return outdated(epochs, recorded, tick) if tick in epochs else ()


def nothing_to_compare(audit: str, epochs: list[str]) -> str:
    """Why a drift run of ``audit`` tested nothing: one epoch, or the earliest one tested."""
    if len(epochs) == 1:
        return f"{audit} has a single epoch so far; nothing to compare"
    return (
        f"epoch {epochs[0]} is the earliest of the {len(epochs)} epochs of {audit} stored; "
        "nothing earlier to compare it with"
    )


def _compare(
    store: storage.Store, comparison: Comparison
) -> tuple[tuple[DriftResult, ...], dict[str, str]]:
    """Test every arm embedded at both epochs, correct the family and store it."""
    ready, skipped = load_vectors(store, comparison)
    jobs = [
        TestJob(job.test_id, job.reference_arm, job.arm, reference, current)
        for job, reference, current in ready
    ]
    label = f"drift {comparison.epoch} vs {comparison.against} {comparison.reference_epoch}"
    records = (
        run_tests(jobs, comparison.embedder, comparison.config.analysis, label) if jobs else []
    )
    store.add_tests(records)
    results = decide(comparison, [job for job, _, _ in ready], records)
    store.add_drift(
        comparison.audit, comparison.epoch, comparison.against, [r.row(comparison) for r in results]
    )
    return results, skipped


def _table_row(comparison: Comparison, result: DriftResult) -> dict[str, str]:
    """One row of the drift artifact: short cells, the decision early (the epochs are in
    the artifact's description, not repeated on every row)."""
    r = result.record
    return {
        "arm": result.job.label,
        "against": comparison.against,
        "decision": "changed" if result.decision.reject else "no change",
        "adjusted p": f"{result.decision.adjusted_p:.4f}",
        "p": f"{r.p_value:.4f}",
        "omega": f"{r.statistic:.3f}",
        "effect": f"{r.effect:+.3f}",
    }
