"""``dbpa plan``: how many outputs per arm an audit needs, from a stored pilot run."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Literal

import typer
from rich import box
from rich.table import Table

from ._common import (
    DEFAULT_DB,
    ConfigArgument,
    DbOption,
    SetOption,
    open_record,
    out,
    parse_overrides,
)

if TYPE_CHECKING:
    from dbpa.sizing import Budget, SizePlan


def plan(
    config: ConfigArgument,
    from_: Annotated[
        str, typer.Option("--from", metavar="RUN", help="Pilot run id, or 'latest'.")
    ] = "latest",
    db: DbOption = DEFAULT_DB,
    power: Annotated[float, typer.Option(help="Target power per perturbation.")] = 0.8,
    simulations: Annotated[
        int, typer.Option(help="Simulated audits per candidate k (more: tighter, slower).")
    ] = 100,
    seed: Annotated[int, typer.Option(help="Seed of the simulations.")] = 0,
    format_: Annotated[
        Literal["table", "json"], typer.Option("--format", help="table or json.")
    ] = "table",
    set_: SetOption = None,
) -> None:
    """Estimate the k that reaches the target power for every perturbation of a pilot run,
    what the config's k can detect, and the model calls, tokens and dollars of the family."""
    from dbpa.sizing import estimate_sizes

    if not 0 < power < 1:
        raise ValueError(f"--power: {power} is not a probability in (0, 1)")
    if simulations < 10:
        raise ValueError(f"--simulations: {simulations} is too few (at least 10)")
    from dbpa.launch import load_audit

    cfg, _ = load_audit(config, parse_overrides(set_), db)  # paraphrases: the pilot's
    with open_record(db) as store:
        sizes = estimate_sizes(store, from_, cfg, power=power, n_simulations=simulations, rng=seed)
    if format_ == "json":
        out.print_json(json.dumps(_as_json(sizes)))
    else:
        _print(sizes)


def _as_json(sizes: SizePlan) -> dict[str, object]:
    data = asdict(sizes)
    for row, size in zip(data["perturbations"], sizes.perturbations, strict=True):
        row.pop("plan")
        row["k"] = size.k
        row["detectable_share"] = size.detectable_share
        row["power_curve"] = (
            []
            if size.plan is None
            else [
                {"k": c.k, "power": c.power, "ci": [c.ci_low, c.ci_high]} for c in size.plan.curve
            ]
        )
    return data


def _print(sizes: SizePlan) -> None:
    out.print(
        f"pilot run {sizes.pilot_run}: omega={sizes.omega}, {sizes.correction} over "
        f"m={sizes.m} tests at alpha={sizes.alpha}, target power {sizes.power:.2f} "
        f"({sizes.n_simulations} simulated audits per k, B={sizes.n_permutations})",
        highlight=False,
    )
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1))
    table.add_column("perturbation", overflow="fold")
    table.add_column("label")
    table.add_column("pilot k", justify="right")
    table.add_column("k needed", justify="right")
    table.add_column(f"MDE at k={sizes.audit_k}", justify="right")
    for s in sizes.perturbations:
        if s.plan is None:
            table.add_row(s.perturbation_id, s.label or "", str(s.pilot_k), "not embedded", "-")
            continue
        k = str(s.k) if s.k is not None else f"> {s.plan.pilot_limit}"
        share = s.detectable_share
        table.add_row(
            s.perturbation_id,
            s.label or "",
            str(s.pilot_k),
            k,
            f"{share:.0%}" if share is not None else "-",
        )
    out.print(table)
    out.print(
        f"MDE: the smallest share of outputs that must change (as the pilot's changed) for "
        f"k={sizes.audit_k} to detect it with power {sizes.power:.2f}.",
        highlight=False,
    )
    out.print(
        "'> N': not reached within the pilot's N outputs per arm (arms are resampled without "
        "replacement); a larger pilot tells. '-': the pilot is too small to estimate the MDE "
        "at this k (it needs 2k outputs of the original arm).",
        highlight=False,
    )
    out.print(f"at the config's k: {_budget(sizes.configured)}", highlight=False)
    if sizes.recommended is None:
        out.print("no perturbation reaches the target power within the candidates")
    else:
        out.print(f"at the recommended k: {_budget(sizes.recommended)}", highlight=False)


def _budget(b: Budget) -> str:
    tokens = "unknown tokens" if b.tokens is None else f"{b.tokens:,} tokens"
    cost = "unknown cost" if b.cost_usd is None else f"${b.cost_usd:,.2f}"
    return f"k={b.k}: {b.calls:,} model calls ({b.arms} arms), {tokens}, {cost}"
