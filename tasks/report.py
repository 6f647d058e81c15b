"""Write a run's reports and show its outcome in the Prefect UI.

The artifacts land on the flow run the task runs in: the audit's own run under ``dbpa run``,
the tick's run under a schedule (its audit runs inline, see ``flows.scheduled``). Three keys
per audit: ``<audit>-results`` (the table), ``<audit>-summary`` (the decisions, the epoch,
drift once it ran, where the report is) and ``<audit>-report`` (a link to the report served
by ``dbpa view``; with no viewer running, how to open it: a browser does not open a
``file://`` link from a web page). Each key gets one version per outcome (``tasks.artifacts``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from prefect import get_run_logger, task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)

import storage
from tasks.artifacts import artifact_key, outcome_digest, publish_once

if TYPE_CHECKING:
    from dbpa.report import ReportData

__all__ = ["artifact_key", "write_reports"]


@task(name="report", task_run_name="report {run_id}")
def write_reports(
    db: str, run_id: str, out_dir: str | None = None, publish: bool = True
) -> dict[str, str]:
    """Write the HTML, Markdown and JSON reports (to ``out_dir``, default ``reports/`` next
    to the database); with ``publish``, show the outcome in the Prefect UI (see the module).

    The report package (matplotlib, jinja2) is imported here, when a run reports, so that
    importing the audit flow does not delay a run's first model request."""
    from dbpa.report import write_reports as write_files

    store = storage.get(db)
    data, paths = write_files(store, run_id, out_dir, db)
    store.set_report_path(data.run.run_id, paths["html"])
    if publish:
        published = _publish(data, paths, db)
        get_run_logger().info(
            "artifacts: %s", ", ".join(published) if published else "none new (same results)"
        )
    return paths


def _publish(data: ReportData, paths: dict[str, str], db: str) -> list[str]:
    """The run's artifacts, each key unless its latest version shows the same outcome."""
    from dbpa.report import results_table, summary_markdown, viewer_url

    run, audit = data.run, data.run.audit
    rows = results_table(data)
    drift = _drift_outcome(data)
    digest = outcome_digest(run.epoch, run.status, rows, drift)
    viewer = viewer_url(db)
    url = f"{viewer}/runs/{run.run_id}" if viewer else None
    where = (
        f"The HTML report, served by `dbpa view`: <{url}>"
        if url
        else _how_to_open(paths["html"], db, run.run_id)
    )
    files = "\n".join(f"- {fmt}: `{path}`" for fmt, path in paths.items())
    summary = (
        f"{summary_markdown(data)}\n- Epoch (tick): `{run.epoch}`\n\n## Report\n\n{where}\n\n"
        f"Files on the machine that ran the audit:\n\n{files}\n"
    )
    published = []
    if publish_once(
        create_table_artifact,
        artifact_key(audit, "results"),
        f"Per-perturbation results of run {run.run_id} (epoch {run.epoch})",
        digest,
        table=rows,
    ):
        published.append("results")
    if publish_once(
        create_markdown_artifact,
        artifact_key(audit, "summary"),
        f"Summary of run {run.run_id} (epoch {run.epoch}) and where its report is",
        digest,
        markdown=summary,
    ):
        published.append("summary")
    report = artifact_key(audit, "report")
    linked = outcome_digest(digest, url is not None)  # a viewer started since: a link now
    if url is not None:
        added = publish_once(
            create_link_artifact,
            report,
            f"The HTML report of run {run.run_id}",
            linked,
            link=url,
            link_text=f"HTML report of run {run.run_id}",
        )
    else:
        added = publish_once(
            create_markdown_artifact,
            report,
            f"How to open the HTML report of run {run.run_id}",
            linked,
            markdown=f"# The report of run `{run.run_id}`\n\n{where}\n",
        )
    if added:
        published.append("report")
    return published


def _how_to_open(html: str, db: str, run_id: str) -> str:
    """What to do when no viewer serves the record (no dead ``file://`` link)."""
    record = Path(db).resolve()
    return (
        "No `dbpa view` serves this record now, so there is no link to follow (a browser "
        "does not open a `file://` link from a web page). On the machine that ran the "
        f"audit, run `dbpa view --db {record}` and open `/runs/{run_id}` at the address it "
        f"prints; or open the file `{html}` there. Start the viewer with the worker "
        "(`deployments/worker.sh`) and the next run's artifact links to it."
    )


def _drift_outcome(data: ReportData) -> list[list[object]]:
    """What drift (per-tick tests, or the monitor) found at the run's epoch, as the digest
    sees it."""
    from dbpa.report import monitor_at

    monitored = [
        [p.series, p.baseline_epoch, p.alarm, round(p.log_e_value, 6)] for p in monitor_at(data)
    ]
    if data.drift is None:
        return monitored
    return monitored + [
        [against, p.label, p.reference_epoch, p.reject]
        for against, points in data.drift.at(data.drift.current).items()
        for p in points
    ]
