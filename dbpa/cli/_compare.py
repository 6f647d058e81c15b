"""``dbpa compare RUN_A RUN_B``: two runs of the same family, perturbation by perturbation."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich import box
from rich.table import Table

from ._common import DEFAULT_DB, DbOption, ExitCode, fail, open_record, out

if TYPE_CHECKING:
    from dbpa.report import Comparison

FORMATS = ("table", "json")


def compare(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="Run id, or 'latest'.")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="Run id, or 'latest'.")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the comparison as an HTML page.")
    ] = None,
) -> None:
    """Compare two runs of the same family (two models, two dates, two configs): each
    perturbation's effect in both, their difference with a 90% interval, and the decisions
    that flipped (no model call)."""
    from dbpa.report import compare_runs, comparison_dict, render_comparison_html

    if fmt not in FORMATS:
        raise fail(ExitCode.BAD_INPUT, f"--format: unknown {fmt!r}; choose table or json")
    with open_record(db) as store:
        comparison = compare_runs(store, run_a, run_b)
    if fmt == "json":
        sys.stdout.write(json.dumps(comparison_dict(comparison), indent=2) + "\n")
    else:
        _print(comparison)
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_comparison_html(comparison), encoding="utf-8")
        out.print(f"html: {html}", highlight=False)


def _print(c: Comparison) -> None:
    from dbpa.report import fmt_interval

    several = len(c.run_a.models) > 1 or any(r.model_a != r.model_b for r in c.rows)
    table = Table(
        title=f"a: {c.run_a.run_id} ({c.run_a.status})\nb: {c.run_b.run_id} ({c.run_b.status})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=0,
    )
    if several:
        table.add_column("model", overflow="fold")
    table.add_column("perturbation", overflow="fold")
    table.add_column("label", no_wrap=True)
    for name in ("effect a", "effect b", "a - b [90% CI]"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("decision a", no_wrap=True)
    table.add_column("decision b", no_wrap=True)
    for r in c.rows:
        model = [r.model_a if r.model_a == r.model_b else f"{r.model_a} / {r.model_b}"]
        decision_b = f"[bold yellow]{r.decision_b}[/] (flipped)" if r.flipped else r.decision_b
        table.add_row(
            *(model if several else []),
            r.perturbation_id,
            r.label or "",
            fmt_interval(r.effect_a).split(" [")[0],
            fmt_interval(r.effect_b).split(" [")[0],
            fmt_interval(r.difference),
            r.decision_a,
            decision_b,
        )
    out.print(table)
    out.print(
        f"{c.pairing}; {len(c.rows)} perturbation(s) in both runs, {len(c.flipped)} whose "
        "decision flipped. Effect: the energy distance between the arms' outputs.",
        highlight=False,
    )
    for name, only in (("a", c.only_a), ("b", c.only_b)):
        if only:
            listed = ", ".join(pid for _, pid in only[:10])
            more = f" and {len(only) - 10} more" if len(only) > 10 else ""
            out.print(f"only in run {name}: {listed}{more}", highlight=False, markup=False)
