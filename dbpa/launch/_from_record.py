"""A finished audit decided from the record alone, without Prefect.

When every output, vector and test of a plan is stored, a run has nothing left for
Prefect's tasks to do: it only records itself, corrects each family and writes the
reports. With Prefect's temporary server (no ``PREFECT_API_URL``), starting that server
and a flow run would be most of its time, and nothing would watch the run once this
process exits; ``dbpa run`` then does that bookkeeping here, with the same code the flow
uses (``flows.record``), and says so. With a Prefect server configured, every run goes
through the flow, so that the UI sees it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dbpa.config import AuditConfig
    from dbpa.plan import AuditPlan

MESSAGE = "decided from the record: nothing to sample, embed or test (Prefect not started)"
"""The message of such a run in ``dbpa runs``."""
RUN_ID_SUFFIX = "record"
"""The end of such a run's id, where a flow run's id would be."""


@dataclass(frozen=True)
class RecordedRun:
    """A run decided from the record: its id and its reports."""

    run_id: str
    reports: dict[str, str]
    """format -> path of the written report."""


def decide_from_record(
    config: AuditConfig,
    plan: AuditPlan,
    db: str | Path,
    out_dir: Path | None,
    warn: Callable[[str], None],
) -> RecordedRun:
    """Record a run of ``plan``, correct its families from the stored tests and write its
    reports, as the audit flow would with nothing to sample, embed or test (``warn`` says
    what the flow would log as a warning)."""
    import storage
    from dbpa.analysis import decide_family
    from dbpa.report import write_reports
    from flows import record

    def correct(family, p_values, analysis, equivalence_p, margin):  # type: ignore[no-untyped-def]
        return decide_family(p_values, analysis, equivalence_p, margin)

    run_id = record.new_run_id(config, datetime.now(UTC), RUN_ID_SUFFIX)
    with storage.Store(db) as store:
        record.start_run(store, plan, config, run_id, None, warn)
        try:
            record.correct_families(plan, store, config, run_id, correct, warn)
            store.finish_run(run_id, "completed", MESSAGE)
            _, reports = write_reports(store, run_id, out_dir, db)
            store.set_report_path(run_id, reports["html"])
        except BaseException as exc:
            store.finish_run(run_id, "failed", f"{type(exc).__name__}: {exc}")
            raise
    return RecordedRun(run_id, reports)
