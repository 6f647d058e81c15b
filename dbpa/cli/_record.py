"""The commands that read the audit record: ``runs``, ``results``, ``report``, ``export``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from ._common import (
    DEFAULT_DB,
    DbOption,
    ExitCode,
    RunArgument,
    cell,
    err,
    fail,
    open_record,
    out,
)

if TYPE_CHECKING:
    import pandas as pd


def print_results(db: Path, run_id: str) -> int:
    """Print a run's table; returns how many control perturbations were rejected."""
    with open_record(db) as store:
        row = store.run(run_id)
        df = store.results(row["run_id"])
    return show_results(row, df)


def show_results(row: dict[str, Any], df: pd.DataFrame) -> int:
    """Print the table of a run's results; returns how many control perturbations were
    rejected. A perturbation tested but not yet corrected (a running run) is ``pending``."""
    from dbpa.analysis import stars

    families = df.family.unique()
    table = Table(
        title=f"run {row['run_id']} ({row['status']})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,  # the box's blank divider alone separates columns: 30-character ids fit 80
    )
    if len(families) > 1:
        table.add_column("model", overflow="fold")
    table.add_column("perturbation", overflow="fold")
    table.add_column("label", no_wrap=True, min_width=7)
    for numeric in ("omega", "effect", "p", "adj. p"):
        table.add_column(numeric, justify="right", no_wrap=True, min_width=6)
    table.add_column("decision", no_wrap=True, min_width=9)
    pending = 0
    for r in df.itertuples():
        first = [r.family] if len(families) > 1 else []
        if not r.tested:
            table.add_row(*first, r.perturbation_id, cell(r.label), *"----", "not tested")
            continue
        tested = [f"{r.statistic:.3f}{stars(r.p_value)}", f"{r.effect:+.3f}", f"{r.p_value:.4f}"]
        if cell(r.adjusted_p) == "":
            pending += 1
            table.add_row(*first, r.perturbation_id, cell(r.label), *tested, "-", "pending")
            continue
        table.add_row(
            *first,
            r.perturbation_id,
            cell(r.label),
            *tested,
            f"{r.adjusted_p:.4f}",
            "[red]changed[/]" if r.reject else "no change",
        )
    out.print(table)
    if pending:
        out.print(
            f"{int(df.tested.sum())} of {len(df)} perturbations tested so far; {pending} pending: "
            "decided when the run corrects each model's family",
            highlight=False,
        )
    return int(((df.label == "control") & (df.reject == True)).sum())  # noqa: E712


def runs(db: DbOption = DEFAULT_DB) -> None:
    """List the runs recorded in the database (a running run with its progress so far)."""
    with open_record(db) as store:
        df = store.runs()
        writing = store.writer_pid is not None
    table = Table("run", "audit", "status", "epoch", "started", "message")
    for r in df.itertuples():
        table.add_row(
            r.run_id,
            r.audit,
            r.status,
            r.epoch,
            f"{r.started_at:%Y-%m-%d %H:%M:%S}",
            _progress(r, writing) if r.status == "running" else cell(r.message),
        )
    out.print(table)


def _progress(run: Any, writing: bool) -> str:
    """What a running run has done so far; without a writing process, that it stopped."""
    if cell(run.outputs_planned) == "":
        done = "starting"
    else:
        done = (
            f"{int(run.outputs_stored)}/{int(run.outputs_planned)} outputs, "
            f"{int(run.tests_stored)}/{int(run.tests_planned)} tests so far"
        )
    if writing:
        return done
    return f"interrupted ({done}): no process is writing the record; the next run marks it crashed"


def results(
    run_id: RunArgument,
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
) -> None:
    """Show a run's per-perturbation results."""
    if fmt not in ("table", "csv", "json"):
        raise fail(ExitCode.BAD_INPUT, f"--format: unknown {fmt!r}; choose table, csv or json")
    with open_record(db) as store:
        row = store.run(run_id)
        df = store.results(row["run_id"])
    if fmt == "table":
        show_results(row, df)
    elif fmt == "csv":
        sys.stdout.write(df.to_csv(index=False))
    else:
        sys.stdout.write(json.dumps(json.loads(df.to_json(orient="records")), indent=2) + "\n")


def export(
    db: DbOption = DEFAULT_DB,
    table: Annotated[
        list[str] | None, typer.Option(help="Table to export (repeatable); default all.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="parquet or csv.")] = "parquet",
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for the files.")] = Path(
        "export"
    ),
    salvage: Annotated[
        bool,
        typer.Option(
            "--salvage",
            help="From a damaged record: every table, and every part of a table, that can "
            "still be read (exit 2 if some could not).",
        ),
    ] = False,
) -> None:
    """Export tables of the audit record to Parquet or CSV."""
    from storage import EXPORTS

    if salvage:
        if table:
            raise fail(ExitCode.BAD_INPUT, "--salvage exports every table; leave out --table")
        _salvage(db, out_dir, fmt)
        return
    with open_record(db) as store:
        for name in table or list(EXPORTS):
            path = store.export(name, out_dir / f"{name}.{fmt}", fmt)
            out.print(f"{name}: {path}")


def _salvage(db: Path, out_dir: Path, fmt: str) -> None:
    from storage import salvage

    found = salvage(db, out_dir, fmt)
    for t in found.tables:
        if t.problem is None:
            out.print(f"{t.name}: {t.path}")
        elif t.path is not None:
            total = f"{t.total:,}" if t.total is not None else "?"
            out.print(f"{t.name}: {t.path} ({t.rows:,} of {total} rows)", highlight=False)
    lost = [t for t in found.tables if t.problem is not None]
    for t in lost:
        what = "some rows of " if t.rows else ""
        err.print(f"could not read {what}{t.name}: {t.problem}", highlight=False)
    if lost:
        raise fail(
            ExitCode.BAD_INPUT,
            f"{len(lost)} table(s) of {db} could not be read in full; the files written hold "
            "what could",
        )


def report(
    run_id: RunArgument,
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="html, md or json.")] = "html",
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="File to write (or a directory); default RUN.FORMAT in reports/ next to the db.",
        ),
    ] = None,
) -> None:
    """Regenerate a run's report from the record (no model call)."""
    from dbpa.report import RENDERERS, default_report_dir, gather, report_path

    if fmt not in RENDERERS:
        raise fail(ExitCode.BAD_INPUT, f"--format: unknown {fmt!r}; choose {', '.join(RENDERERS)}")
    with open_record(db) as store:
        data = gather(store, run_id)
    if out_path is None or out_path.is_dir():
        path = report_path(out_path or default_report_dir(db), data.run.run_id, fmt)
    else:
        path = out_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RENDERERS[fmt](data), encoding="utf-8")
    out.print(f"{fmt} report of run {data.run.run_id}: {path}", highlight=False)
