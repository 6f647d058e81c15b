"""dbpa.report: audit reports as HTML, Markdown and JSON, regenerated from the record.

Pure rendering, no Prefect and no model call::

    from pathlib import Path

    from storage import Store
    from dbpa.report import gather, render_html

    with Store("dbpa.duckdb", read_only=True) as store:
        data = gather(store, "latest")
    Path("report.html").write_text(render_html(data))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbpa.drift import DriftHistory, DriftPoint

from ._compare import ComparedRow, Comparison, compare_runs, comparison_dict
from ._data import (
    ALLOWED_FPR,
    Alignment,
    ArmView,
    DroppedParaphrase,
    EffectBounds,
    EquivalenceView,
    Exemplar,
    Family,
    KindCount,
    ModelUsage,
    MovedAnswers,
    NullView,
    Output,
    ReportData,
    RocView,
    RunInfo,
    Settings,
    SimilarityView,
    TestRow,
    TestView,
    Usage,
)
from ._differences import ConfigDifference, config_differences
from ._format import fmt_interval, shown_estimate
from ._gather import SUMMARISE_OVER, TOP_CHANGES, ReportReader, gather, most_changed
from ._html import CONTENT_SECURITY_POLICY, render_comparison_html, render_html
from ._json import render_json, report_dict
from ._markdown import monitor_at, render_markdown, summary_markdown
from ._text import results_table
from ._viewer import RecordViewer, address_file, viewer_url
from ._views import moved_answers

if TYPE_CHECKING:
    from ._evidence import evidence_figure

__all__ = [
    "ALLOWED_FPR",
    "CONTENT_SECURITY_POLICY",
    "RENDERERS",
    "SUMMARISE_OVER",
    "TOP_CHANGES",
    "Alignment",
    "ArmView",
    "ComparedRow",
    "Comparison",
    "ConfigDifference",
    "DriftHistory",
    "DriftPoint",
    "DroppedParaphrase",
    "EffectBounds",
    "EquivalenceView",
    "Exemplar",
    "Family",
    "KindCount",
    "ModelUsage",
    "MovedAnswers",
    "NullView",
    "Output",
    "RecordViewer",
    "ReportData",
    "ReportReader",
    "RocView",
    "RunInfo",
    "Settings",
    "SimilarityView",
    "TestRow",
    "TestView",
    "Usage",
    "address_file",
    "compare_runs",
    "comparison_dict",
    "config_differences",
    "default_report_dir",
    "evidence_figure",
    "fmt_interval",
    "gather",
    "monitor_at",
    "most_changed",
    "moved_answers",
    "render_comparison_html",
    "render_html",
    "render_json",
    "render_markdown",
    "report_dict",
    "report_path",
    "results_table",
    "shown_estimate",
    "summary_markdown",
    "viewer_url",
    "write_reports",
]

RENDERERS: dict[str, Callable[[ReportData], str]] = {
    "html": render_html,
    "md": render_markdown,
    "json": render_json,
}
"""Report format (also the file extension) -> renderer."""


def __getattr__(name: str) -> Any:
    """``evidence_figure`` is loaded on first use: it draws with matplotlib (PEP 562)."""
    if name == "evidence_figure":
        from ._evidence import evidence_figure

        return evidence_figure
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def default_report_dir(db: str | Path) -> Path:
    """Where a run's reports go when no directory is named: ``reports/`` next to its database
    file; for a shared record (a URL), ``reports/`` in the working directory."""
    if "://" in str(db):
        return Path("reports")
    return Path(db).parent / "reports"


def report_path(out_dir: str | Path, run_id: str, fmt: str) -> Path:
    """``out_dir/<run_id>.<fmt>``, with the run id reduced to a safe file name."""
    if fmt not in RENDERERS:
        raise ValueError(f"format: unknown {fmt!r}; choose one of {', '.join(RENDERERS)}")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id).strip("._") or "run"
    return Path(out_dir) / f"{name}.{fmt}"


def write_reports(
    store: ReportReader, run_id: str, out_dir: str | Path | None, db: str | Path
) -> tuple[ReportData, dict[str, str]]:
    """Write a run's HTML, Markdown and JSON reports (to ``out_dir``, default ``reports/``
    next to the database ``db``); returns what they show and format -> absolute path."""
    data = gather(store, run_id)
    paths: dict[str, str] = {}
    for fmt, render in RENDERERS.items():
        path = report_path(out_dir or default_report_dir(db), data.run.run_id, fmt)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(data), encoding="utf-8")
        paths[fmt] = str(path.resolve())
    return data, paths
