"""``dbpa compare RUN_A RUN_B``: two runs of the same family, perturbation by perturbation."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ._common import (
    DEFAULT_DB,
    DbOption,
    ExitCode,
    fail,
    open_record,
    out,
    print_columns,
    print_whole,
)
from ._record import DECISIONS
from ._validate import SUMMARY_OVER

if TYPE_CHECKING:
    from dbpa.report import ComparedRow, Comparison

FORMATS = ("table", "json")


SHOWN_FLIPS = 20
"""Flipped perturbations listed in a summarised comparison (those of largest difference)."""


def compare(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="Run id, or 'latest'.")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="Run id, or 'latest'.")],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table or json.")] = "table",
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the comparison as an HTML page.")
    ] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="List every perturbation in the table, however many.")
    ] = False,
) -> None:
    """Compare two runs of the same family (two models, two dates, two configs).

    Shows the settings that differ, each perturbation's effect in both, their difference
    with a 90% interval, and the decisions that flipped (no model call). More than 300
    perturbations are summarised: the flips, then the decisions counted; ``--all`` lists
    every one.
    """
    from dbpa.report import compare_runs, comparison_dict, render_comparison_html

    if fmt not in FORMATS:
        raise fail(ExitCode.BAD_INPUT, f"--format: unknown {fmt!r}; choose table or json")
    with open_record(db) as store:
        comparison = compare_runs(store, run_a, run_b)
    if fmt == "json":
        sys.stdout.write(json.dumps(comparison_dict(comparison), indent=2) + "\n")
    else:
        _print(comparison, all_)
    if html is not None:
        html.parent.mkdir(parents=True, exist_ok=True)
        html.write_text(render_comparison_html(comparison), encoding="utf-8")
        out.print(f"html: {html}", highlight=False)


def _say(text: str) -> None:
    out.print(text, highlight=False, markup=False, soft_wrap=True)


def _print(c: Comparison, all_rows: bool) -> None:
    several = len(c.run_a.models) > 1 or any(r.model_a != r.model_b for r in c.rows)
    for name, run in (("a", c.run_a), ("b", c.run_b)):
        _say(f"{name}: {run.run_id} ({run.status})")
    if c.differences:
        _say("settings that differ (a -> b):")
        for d in c.differences:
            _say(f"  {d.setting}: {d.a} -> {d.b}")
    else:
        _say("the same settings in both runs' configs")
    header = [*(["model"] if several else []), "perturbation", "label", "effect a", "effect b"]
    header += ["a - b [90% CI]", "decision a", "decision b"]
    rows = [_cells(r, several) for r in c.rows]
    if len(rows) <= SUMMARY_OVER:
        _print_rows(header, rows)
    elif all_rows:
        print_columns(header, rows, _numeric(header))
    else:
        _print_summary(c, header, rows, several)
    _say(
        f"{c.pairing}; {len(c.rows):,} perturbation(s) in both runs, {len(c.flipped):,} whose "
        "decision flipped. Effect: the energy distance between the arms' outputs, shown "
        "clipped into its interval; a - b is the difference of the unclipped estimates (as "
        "in --format json)."
    )
    for name, only in (("a", c.only_a), ("b", c.only_b)):
        if only:
            listed = ", ".join(pid for _, pid in only[:10])
            more = f" and {len(only) - 10} more" if len(only) > 10 else ""
            _say(f"only in run {name}: {listed}{more}")


def _cells(r: ComparedRow, several: bool) -> list[str]:
    from dbpa.report import fmt_interval

    model = r.model_a if r.model_a == r.model_b else f"{r.model_a} / {r.model_b}"
    return [
        *([model] if several else []),
        r.perturbation_id,
        r.label or "",
        fmt_interval(r.effect_a).split(" [")[0],
        fmt_interval(r.effect_b).split(" [")[0],
        fmt_interval(r.difference),
        r.decision_a,
        f"{r.decision_b} (flipped)" if r.flipped else r.decision_b,
    ]


def _numeric(header: list[str]) -> set[int]:
    return {
        i for i, name in enumerate(header) if name.startswith(("effect", "a - b", "perturbations"))
    }


def _print_rows(header: list[str], rows: list[list[str]]) -> None:
    """A table with every id whole, or aligned lines where the terminal is too narrow."""
    numeric = _numeric(header)
    print_whole(
        [(name, True, "right" if i in numeric else "left") for i, name in enumerate(header)], rows
    )


def _print_summary(c: Comparison, header: list[str], rows: list[list[str]], several: bool) -> None:
    """The flips first (the ``SHOWN_FLIPS`` of largest difference), then the pairs of
    decisions counted per model, as ``dbpa results`` summarises a large family."""
    flipped = [i for i, r in enumerate(c.rows) if r.flipped]
    if flipped:
        flipped.sort(key=lambda i: -abs(_estimate(c.rows[i])))
        shown = flipped[:SHOWN_FLIPS]
        which = f"; the {len(shown)} of largest |a - b|" if len(shown) < len(flipped) else ""
        _say(f"{len(flipped):,} decision(s) flipped{which} (--all lists every perturbation):")
        _print_rows(header, [rows[i] for i in shown])
    else:
        _say("no decision flipped (--all lists every perturbation)")
    counts = Counter((r.model_a if several else "", r.decision_a, r.decision_b) for r in c.rows)
    order = {name: i for i, name in enumerate(DECISIONS)}
    pairs = sorted(counts, key=lambda k: (k[0], order.get(k[1], 99), order.get(k[2], 99)))
    _say(f"decisions in a and b, counted over {len(c.rows):,} perturbations:")
    _print_rows(
        [*(["model"] if several else []), "decision a", "decision b", "perturbations"],
        [[*([m] if several else []), a, b, f"{counts[(m, a, b)]:,}"] for m, a, b in pairs],
    )


def _estimate(r: ComparedRow) -> float:
    return 0.0 if r.difference is None else float(r.difference.estimate)
