"""``dbpa validate``, and the config loading that ``run`` and ``serve`` share with it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape
from rich.table import Table

from ._common import ConfigArgument, SetOption, out, parse_overrides

if TYPE_CHECKING:
    from dbpa.config import AuditConfig
    from dbpa.plan import AuditPlan


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


def validate(config: ConfigArgument, set_: SetOption = None) -> None:
    """Check a config and show what it would sample and test."""
    cfg, plan = load_audit(config, set_)
    analysis = cfg.analysis
    out.print(
        f"[green]valid[/]: {cfg.name}: {len(plan.families)} model(s) x {len(cfg.family)} "
        f"perturbations = {len(plan.tests)} tests, {len(plan.arms)} arms x k={cfg.k} "
        f"= {len(plan.arms) * cfg.k} outputs; omega={analysis.omega}, "
        f"B={analysis.n_permutations}, {analysis.correction} at alpha={analysis.alpha}"
    )
    table = Table("id", "kind", "label", "description")
    for p in cfg.family:
        table.add_row(p.id, p.kind, p.label or "", escape(p.description))
    out.print(table)
