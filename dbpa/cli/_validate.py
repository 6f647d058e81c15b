"""``dbpa validate``, and the config loading that ``run`` and ``serve`` share with it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ._common import ConfigArgument, SetOption, out, parse_overrides

if TYPE_CHECKING:
    from dbpa.config import AuditConfig
    from dbpa.perturbations import Perturbation
    from dbpa.plan import AuditPlan

SUMMARY_OVER = 300
"""Families with more perturbations than this are summarised unless ``--all`` is given."""
SHOWN_AT_EACH_END = 5
"""Perturbations listed from the start and from the end of a summarised family."""

AllOption = Annotated[
    bool, typer.Option("--all", help="List every perturbation, however many there are.")
]


def load_audit(config: Path, pairs: list[str] | None = None) -> tuple[AuditConfig, AuditPlan]:
    """The validated config and its plan; a ``ConfigError`` names file, field and reason."""
    from dbpa.config import ConfigError, load_config
    from dbpa.plan import plan_audit

    try:
        cfg = load_config(config, parse_overrides(pairs))
        return cfg, plan_audit(cfg)
    except ConfigError:
        raise
    except ValueError as exc:
        raise ConfigError(f"{config}: {exc}") from None


def validate(config: ConfigArgument, set_: SetOption = None, all_: AllOption = False) -> None:
    """Check a config and show what it would sample and test (a family of more than 300
    perturbations as counts and its first and last ones; ``--all`` lists every one)."""
    cfg, plan = load_audit(config, set_)
    analysis = cfg.analysis
    out.print(
        f"[green]valid[/]: {cfg.name}: {len(plan.families)} model(s) x {len(cfg.family)} "
        f"perturbations = {len(plan.tests)} tests, {len(plan.arms)} arms x k={cfg.k} "
        f"= {len(plan.arms) * cfg.k} outputs; omega={analysis.omega}, "
        f"B={analysis.n_permutations}, {analysis.correction} at alpha={analysis.alpha}"
    )
    family = cfg.family
    if len(family) <= SUMMARY_OVER:
        out.print(_table(family))
    elif all_:
        _print_columns(family)
    else:
        _print_summary(family)


def _table(family: Sequence[Perturbation], gap_after: int | None = None) -> Table:
    """The perturbations as a table; with ``gap_after``, a row saying how many are left out
    follows the first ``gap_after`` of them."""
    table = Table("id", "kind", "label", "description")
    for i, p in enumerate(family):
        table.add_row(p.id, p.kind, p.label or "", escape(p.description))
        if i + 1 == gap_after:
            table.add_row("...", "", "", "", style="dim")
    return table


def _print_summary(family: Sequence[Perturbation]) -> None:
    """Counts per kind and label, then the first and last perturbations."""
    counts = Counter((p.kind, p.label or "") for p in family)
    by_kind = Table("kind", "label", "perturbations")
    for (kind, label), n in counts.items():  # in order of first appearance
        by_kind.add_row(kind, label, f"{n:,}")
    out.print(by_kind)
    n = SHOWN_AT_EACH_END
    out.print(
        f"the first {n} and the last {n} of {len(family):,} perturbations (--all lists every one):",
        highlight=False,
    )
    out.print(_table([*family[:n], *family[-n:]], gap_after=n))


def _print_columns(family: Sequence[Perturbation]) -> None:
    """Every perturbation on one line, in aligned columns (a table of thousands of rows
    takes the terminal library a minute to lay out; this takes a fraction of a second)."""
    rows = [("id", "kind", "label", "description")]
    rows += [(p.id, p.kind, p.label or "", p.description) for p in family]
    widths = [max(len(row[c]) for row in rows) for c in range(3)]
    lines = [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[3]])
        for row in rows
    ]
    out.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True)
