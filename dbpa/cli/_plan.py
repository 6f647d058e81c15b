"""``dbpa plan``: how many outputs per arm an audit needs, from a stored pilot run."""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from ._common import (
    DEFAULT_DB,
    ConfigArgument,
    DbOption,
    SetOption,
    open_record,
    out,
    parse_overrides,
    print_whole,
)

if TYPE_CHECKING:
    from dbpa.config import AuditConfig
    from dbpa.set_sizing import SetBudget, SetSizes
    from dbpa.sizing import Budget, SizePlan


def plan(
    config: ConfigArgument,
    from_: Annotated[
        str, typer.Option("--from", metavar="RUN", help="Pilot run id, or 'latest'.")
    ] = "latest",
    db: DbOption = DEFAULT_DB,
    power: Annotated[float, typer.Option(help="Target power per perturbation.")] = 0.8,
    simulations: Annotated[
        int | None,
        typer.Option(
            help="Simulated audits per candidate k (more: tighter, slower); default 100, "
            "50 over a set of prompts (a pooled test costs a set's worth of tests)."
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of the simulations.")] = 0,
    format_: Annotated[
        Literal["table", "json"], typer.Option("--format", help="table or json.")
    ] = "table",
    set_: SetOption = None,
) -> None:
    """Estimate from a pilot run the k that reaches the target power for every perturbation.

    Also what the config's k can detect, and the model calls, tokens and dollars of the
    family; over a set of prompts, the k per prompt at the config's prompts and the prompts
    at its k.
    """
    from dbpa.set_sizing import SET_SIMULATIONS, estimate_set_sizes
    from dbpa.sizing import estimate_sizes

    if not 0 < power < 1:
        raise ValueError(f"--power: {power} is not a probability in (0, 1)")
    if simulations is not None and simulations < 10:
        raise ValueError(f"--simulations: {simulations} is too few (at least 10)")
    from dbpa.launch import load_audit

    cfg, planned = load_audit(config, parse_overrides(set_), db)  # paraphrases: the pilot's
    if planned is not None:
        from dbpa.spend import check_lowest, is_capped

        if is_capped(cfg):
            check_lowest(cfg, planned)
    with open_record(db) as store:
        if cfg.prompts is not None:
            set_sizes = estimate_set_sizes(
                store,
                from_,
                cfg,
                power=power,
                n_simulations=simulations or SET_SIMULATIONS,
                rng=seed,
            )
        else:
            sizes = estimate_sizes(
                store, from_, cfg, power=power, n_simulations=simulations or 100, rng=seed
            )
    if cfg.prompts is not None:
        if format_ == "json":
            out.print_json(json.dumps(_set_json(set_sizes)))
        else:
            _print_set(set_sizes)
    elif format_ == "json":
        out.print_json(json.dumps(_as_json(sizes)))
    else:
        _print(sizes)
    configured = set_sizes.configured if cfg.prompts is not None else sizes.configured
    if format_ != "json" and configured.cost_usd is not None:
        _print_batch_cost(cfg, configured.cost_usd)
    if configured.cost_usd is not None:  # shown above, then refused
        check_estimate_at_k(cfg, configured.cost_usd)


def _print_batch_cost(cfg: AuditConfig, cost_usd: float) -> None:
    """The estimate at k at list prices and in provider batches (``batch: true``)."""
    from dbpa.spend import batch_share

    share = batch_share(cfg)
    if share is None:
        return
    batched = sum(m.batch for m in cfg.models)
    now = f"{batched} of {len(cfg.models)} models have batch: true" if batched else "none has"
    out.print(
        f"cost at k={cfg.k}: ${cost_usd:,.2f} at list prices, ${cost_usd * share:,.2f} with "
        f"every model in provider batches (x{share:.2f}: litellm's batch prices, else 50% of "
        f"list; {now})",
        highlight=False,
    )


def check_estimate_at_k(cfg: AuditConfig, cost_usd: float) -> None:
    """Refuse a cap below the pilot's estimate of the run at the config's k."""
    from dbpa.spend import check_estimate

    check_estimate(cfg, cost_usd, f"the pilot's estimate of the run at k={cfg.k}")


def _as_json(sizes: SizePlan) -> dict[str, object]:
    data = asdict(sizes)
    for row, size in zip(data["perturbations"], sizes.perturbations, strict=True):
        row.pop("plan")
        row["k"] = size.k
        row["detectable_share"] = size.detectable_share
        row["detectable"] = size.detectable
        row["power_curve"] = (
            []
            if size.plan is None
            else [
                {"k": c.k, "power": c.power, "ci": [c.ci_low, c.ci_high], "fitted": f}
                for c, f in zip(size.plan.curve, size.plan.fitted, strict=True)
            ]
        )
    return data


MDE_MARKS = {
    "not_detected": "> 100%",
    "pilot_too_small": "-",
    "not_embedded": "not embedded",
}


def _print(sizes: SizePlan) -> None:
    out.print(
        f"pilot run {sizes.pilot_run}: omega={sizes.omega}, {sizes.correction} over "
        f"m={sizes.m} tests per model at alpha={sizes.alpha}, target power {sizes.power:.2f} "
        f"({sizes.n_simulations} simulated audits of each family per k, the audit's "
        f"B={sizes.n_permutations})",
        highlight=False,
    )
    if sizes.resolution_permutations is not None:
        out.print(
            f"note: at B={sizes.n_permutations} p-values move in steps of 1/(B+1) = "
            f"{1 / (sizes.n_permutations + 1):.2g}, coarse against the {sizes.level:.3g} a lone "
            f"change must pass, and power at a given k is lower than with finer steps; "
            f"B >= {sizes.resolution_permutations:,} resolves it (steps of at most a tenth).",
            highlight=False,
        )
    header = ["perturbation", "label", "pilot k", "k needed", f"MDE at k={sizes.audit_k}"]
    rows = []
    marks = set()
    for s in sizes.perturbations:
        if s.plan is None:
            k = "not embedded"
        else:
            k = str(s.k) if s.k is not None else f"> {s.plan.pilot_limit}"
            if s.k is None:
                marks.add("beyond")
        share = s.detectable_share
        mde = f"{share:.0%}" if share is not None else MDE_MARKS.get(s.detectable, "")
        marks.add(s.detectable)
        rows.append([s.perturbation_id, s.label or "", str(s.pilot_k), k, mde])
    _print_sizes(header, rows)
    for line in _footnotes(sizes, marks):
        out.print(line, highlight=False)
    out.print(f"at the config's k: {_budget(sizes.configured)}", highlight=False)
    if sizes.recommended is None:
        out.print("no perturbation reaches the target power within the pilot")
    else:
        out.print(f"at the recommended k: {_budget(sizes.recommended)}", highlight=False)


def _print_sizes(header: list[str], rows: list[list[str]]) -> None:
    """A plan's table, every cell whole (ids above all, which a user types back): a table
    where the terminal is wide enough, else aligned lines (as ``results``)."""
    print_whole([(name, True, "left" if c < 2 else "right") for c, name in enumerate(header)], rows)


def _footnotes(sizes: SizePlan, marks: set[str]) -> list[str]:
    """What the columns say, and what each mark shown in the table means."""
    k = sizes.audit_k
    lines = [
        f"k needed: the smallest k per arm at which the perturbation is rejected in "
        f"{sizes.power:.0%} of simulated audits of its whole family at that k ({sizes.correction} "
        f"over m={sizes.m}: a lone change must pass p <= {sizes.level:.3g}, one among several "
        "may pass more easily; the tests the pilot lacks count as p = 1).",
        f"MDE: the smallest share of outputs that must change (as the pilot's changed) for "
        f"k={k} to detect it with power {sizes.power:.2f}, the rest of the family as in the pilot.",
    ]
    if "beyond" in marks:
        lines.append(
            "'> N': not reached within the pilot's N outputs per arm (arms are resampled "
            "without replacement); a larger pilot tells."
        )
    if "not_detected" in marks:
        lines.append(
            f"'> 100%': even every output changed as the pilot's is detected with power below "
            f"{sizes.power:.2f} at k={k}."
        )
    if "pilot_too_small" in marks:
        lines.append(
            f"'-': the pilot is too small to estimate the MDE at k={k}: the share search draws "
            f"up to {2 * k} outputs of the original arm (2k) and {k} of the perturbed one, "
            "more than the pilot has (its k per arm is in the table)."
        )
    if "not_embedded" in marks:
        lines.append("'not embedded': the pilot stored no embeddings for this pair.")
    return lines


def _budget(b: Budget) -> str:
    tokens = "unknown tokens" if b.tokens is None else f"{b.tokens:,} tokens"
    cost = "unknown cost" if b.cost_usd is None else f"${b.cost_usd:,.2f}"
    return f"k={b.k}: {b.calls:,} model calls ({b.arms} arms), {tokens}, {cost}"


def _set_json(sizes: SetSizes) -> dict[str, object]:
    data = asdict(sizes)
    for row, size in zip(data["perturbations"], sizes.perturbations, strict=True):
        row.pop("plan")
        plan = size.plan
        row["k"] = size.k
        row["prompts"] = size.prompts
        row["k_status"] = "not_embedded" if plan is None else plan.k_status
        row["prompts_status"] = "not_embedded" if plan is None else plan.prompts_status
        row["k_curve"] = (
            []
            if plan is None
            else [
                {"k": p.k, "power": p.power, "ci": [p.ci_low, p.ci_high], "fitted": f}
                for p, f in zip(plan.k_curve, plan.k_fitted, strict=True)
            ]
        )
        row["prompt_curve"] = (
            []
            if plan is None
            else [
                {"prompts": p.n_prompts, "power": p.power, "ci": [p.ci_low, p.ci_high], "fitted": f}
                for p, f in zip(plan.prompt_curve, plan.prompt_fitted, strict=True)
            ]
        )
    return data


def _print_set(sizes: SetSizes) -> None:
    out.print(
        f"pilot run {sizes.pilot_run}: a set of {sizes.n_prompts} prompts at k={sizes.audit_k}, "
        f"omega={sizes.omega} pooled by {sizes.combination}, {sizes.correction} over "
        f"m={sizes.m} perturbations per model at alpha={sizes.alpha} (a lone change passes "
        f"p <= {sizes.level:.3g}), target power {sizes.power:.2f} ({sizes.n_simulations} "
        f"simulated audits per point, the audit's B={sizes.n_permutations})",
        highlight=False,
    )
    if sizes.resolution_permutations is not None:
        out.print(
            f"note: at B={sizes.n_permutations} p-values move in steps of 1/(B+1) = "
            f"{1 / (sizes.n_permutations + 1):.2g}, coarse against {sizes.level:.3g}; "
            f"B >= {sizes.resolution_permutations:,} resolves it (steps of at most a tenth).",
            highlight=False,
        )
    header = [
        "perturbation",
        "label",
        "pilot",
        f"k at {sizes.n_prompts} prompts",
        f"prompts at k={sizes.audit_k}",
        "calls",
    ]
    rows = []
    marks: set[str] = set()
    arms = sizes.configured.arms
    for s in sizes.perturbations:
        pilot = f"{s.pilot_prompts} x {s.pilot_k}"
        if s.plan is None:
            marks.add("not_embedded")
            rows.append([s.perturbation_id, s.label or "", pilot, "not embedded", "", ""])
            continue
        plan = s.plan
        k = _size_cell(plan.k, plan.k_status, plan.simulation.pilot_k, marks)
        n = _size_cell(plan.prompts, plan.prompts_status, plan.simulation.pilot_prompts, marks)
        calls = "" if plan.k is None else f"{arms * plan.k:,}"
        rows.append([s.perturbation_id, s.label or "", pilot, k, n, calls])
    _print_sizes(header, rows)
    for line in _set_footnotes(sizes, marks):
        out.print(line, highlight=False)
    out.print(f"at the config's prompts and k: {_set_budget(sizes.configured)}", highlight=False)
    if sizes.recommended is not None:
        out.print(f"at the largest k needed: {_set_budget(sizes.recommended)}", highlight=False)
    if sizes.fewest_prompts is not None:
        out.print(
            f"at the config's k, the most prompts needed: {_set_budget(sizes.fewest_prompts)}",
            highlight=False,
        )
    if sizes.recommended is None and sizes.fewest_prompts is None:
        out.print("no perturbation reaches the target power within the pilot")


def _size_cell(value: int | None, status: str, limit: int, marks: set[str]) -> str:
    marks.add(status)
    if value is not None:
        return str(value)
    return f"> {limit}" if status == "not_reached" else "-"


def _set_footnotes(sizes: SetSizes, marks: set[str]) -> list[str]:
    """What the columns say, and what each mark shown in the table means."""
    n, k = sizes.n_prompts, sizes.audit_k
    lines = [
        f"pilot: the pilot's prompts with both arms embedded x its outputs per arm; prompts and "
        f"outputs are resampled without replacement, so no more than the pilot's are simulated. "
        f"k at {n} prompts: the smallest k per arm of every prompt at which the pooled test "
        f"over {n} prompts rejects in {sizes.power:.0%} of simulated audits; prompts at k={k}: "
        f"the fewest prompts at which it does at k={k}; calls: the audit's model calls at "
        f"{n} prompts and that k ({sizes.configured.arms} arms x k).",
    ]
    if "not_reached" in marks:
        lines.append("'> N': not reached within the pilot's N outputs per arm, or N prompts.")
    if "beyond_pilot" in marks:
        lines.append(
            f"'-': the size it is read at is beyond the pilot ({n} prompts, or k={k} outputs "
            "per arm, more than the pilot has); a larger pilot tells."
        )
    if "not_embedded" in marks:
        lines.append("'not embedded': no prompt of the pilot has both arms embedded.")
    return lines


def _set_budget(b: SetBudget) -> str:
    return f"{b.prompts} prompt{'' if b.prompts == 1 else 's'} x {_budget(b)}"
