"""``dbpa drift``: an audit's epochs tested against each other from the record alone."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.table import Table

from ._common import DEFAULT_DB, DbOption, ExitCode, fail, open_record, out

if TYPE_CHECKING:
    from dbpa.drift import Comparison, DriftResult


def drift(
    audit: Annotated[str, typer.Argument(metavar="AUDIT", help="Audit name (the config's name).")],
    db: DbOption = DEFAULT_DB,
    epoch: Annotated[str, typer.Option(help="Epoch to test, or 'latest'.")] = "latest",
    baseline: Annotated[str, typer.Option(help="Baseline epoch, or 'first'.")] = "first",
    against: Annotated[
        list[str] | None,
        typer.Option(help="previous or baseline (repeatable; default both)."),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
) -> None:
    """Test an audit's epoch against the previous and the baseline epoch, arm by arm.

    Uses the stored embeddings only: no model call, nothing written.
    """
    from dbpa.drift import AGAINST, plan_drift, read_epochs, run_comparison

    if fmt not in ("table", "json"):
        raise fail(ExitCode.BAD_INPUT, f"--format: unknown {fmt!r}; choose table or json")
    with open_record(db) as store:
        comparisons = plan_drift(
            audit,
            read_epochs(store, audit),
            epoch=epoch,
            baseline=baseline,
            against=against or AGAINST,
        )
        found = [(c, *run_comparison(store, c)) for c in comparisons]
    if fmt == "json":
        sys.stdout.write(json.dumps([_drift_json(*f) for f in found], indent=2) + "\n")
        return
    if not found:
        out.print(f"{audit}: a single epoch is recorded; nothing to compare yet")
    for comparison, results, skipped in found:
        _print_drift(comparison, results, skipped)


def _drift_json(
    comparison: Comparison, results: Sequence[DriftResult], skipped: dict[str, str]
) -> dict[str, Any]:
    c = comparison
    return {
        "audit": c.audit,
        "epoch": c.epoch,
        "against": c.against,
        "reference_epoch": c.reference_epoch,
        "k": c.k,
        "correction": c.config.analysis.correction,
        "alpha": c.config.analysis.alpha,
        "results": [
            {
                "family": r.job.family,
                "role": r.job.role,
                "arm": r.job.arm,
                "reference_arm": r.job.reference_arm,
                "test_id": r.job.test_id,
                "omega": r.record.statistic,
                "effect": r.record.effect,
                "p_value": r.record.p_value,
                "adjusted_p": r.decision.adjusted_p,
                "reject": r.decision.reject,
            }
            for r in results
        ],
        "skipped": skipped,
    }


def _print_drift(
    comparison: Comparison, results: Sequence[DriftResult], skipped: dict[str, str]
) -> None:
    c, analysis = comparison, comparison.config.analysis
    table = Table(
        title=f"{c.audit}: epoch {c.epoch} against the {c.against} epoch {c.reference_epoch} "
        f"({analysis.correction} at alpha={analysis.alpha}, k={c.k}, "
        f"B={analysis.n_permutations})",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    table.add_column("arm", overflow="fold")
    for numeric in ("omega", "effect", "p", "adj. p"):
        table.add_column(numeric, justify="right", no_wrap=True, min_width=6)
    table.add_column("decision", no_wrap=True, min_width=9)
    for r in results:
        table.add_row(
            r.job.label,
            f"{r.record.statistic:.3f}",
            f"{r.record.effect:+.3f}",
            f"{r.record.p_value:.4f}",
            f"{r.decision.adjusted_p:.4f}",
            "[red]changed[/]" if r.decision.reject else "no change",
        )
    out.print(table)
    for label, reason in skipped.items():
        out.print(f"not tested: {label}: {reason}", highlight=False)
