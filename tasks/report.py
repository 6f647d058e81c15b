"""Write a run's reports and show its results in the Prefect UI."""

from __future__ import annotations

import re
from pathlib import Path

from prefect import task
from prefect.artifacts import (
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)

import storage

__all__ = ["artifact_key", "write_reports"]


def artifact_key(audit: str, suffix: str) -> str:
    """A Prefect artifact key from the audit name: lower-case letters, digits and dashes."""
    slug = re.sub(r"[^a-z0-9]+", "-", audit.lower()).strip("-") or "audit"
    return f"{slug}-{suffix}"


@task(name="report", task_run_name="report {run_id}")
def write_reports(
    db: str, run_id: str, out_dir: str | None = None, publish: bool = True
) -> dict[str, str]:
    """Write the HTML, Markdown and JSON reports (to ``out_dir``, default ``reports/`` next
    to the database); with ``publish``, show them in the Prefect UI: a results table, a
    summary and a link to the HTML report (served by ``dbpa view`` when one serves the
    record, else the file) (one version of each key per run: a caller that
    rewrites the reports of a run already published passes ``publish=False``).

    The report package (matplotlib, jinja2) is imported here, when a run reports, so that
    importing the audit flow does not delay a run's first model request."""
    from dbpa.report import results_table, summary_markdown, viewer_url
    from dbpa.report import write_reports as write_files

    store = storage.get(db)
    data, paths = write_files(store, run_id, out_dir, db)
    store.set_report_path(data.run.run_id, paths["html"])
    if not publish:
        return paths
    viewer = viewer_url(db)  # `dbpa view` serving this record: link to it, else to the file
    create_link_artifact(
        link=f"{viewer}/runs/{data.run.run_id}" if viewer else Path(paths["html"]).as_uri(),
        link_text=f"HTML report of run {data.run.run_id}",
        key=artifact_key(data.run.audit, "report"),
        description=f"The HTML report of run {data.run.run_id}",
    )
    create_table_artifact(
        table=results_table(data),
        key=artifact_key(data.run.audit, "results"),
        description=f"Per-perturbation results of run {data.run.run_id}",
    )
    where = "\n".join(f"- {fmt}: `{path}`" for fmt, path in paths.items())
    create_markdown_artifact(
        markdown=f"{summary_markdown(data)}\n\n## Reports\n\n{where}\n",
        key=artifact_key(data.run.audit, "summary"),
        description=f"Summary of run {data.run.run_id} and where its reports are",
    )
    return paths
