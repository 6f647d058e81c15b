"""``dbpa validate``, and the config loading that ``run`` and ``serve`` share with it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from ._common import (
    DB_ENV,
    ConfigArgument,
    SetOption,
    out,
    parse_overrides,
    print_whole,
    record_target,
)

if TYPE_CHECKING:
    from dbpa.analysis import EquivalenceSpec
    from dbpa.config import AuditConfig
    from dbpa.perturbations import GeneratedParaphrase, Perturbation
    from dbpa.plan import AuditPlan

SUMMARY_OVER = 300
"""Families with more perturbations than this are summarised unless ``--all`` is given."""
SHOWN_AT_EACH_END = 5
"""Perturbations listed from the start and from the end of a summarised family."""
GAP = "..."
"""The id cell of the row that stands for the perturbations a summary leaves out."""

AllOption = Annotated[
    bool, typer.Option("--all", help="List every perturbation, however many there are.")
]
RecordOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="PATH|URL",
        parser=record_target,
        envvar=DB_ENV,
        show_envvar=True,
        help="A record (file or URL) whose stored paraphrases to show (read-only; default: none).",
    ),
]


def validate(
    config: ConfigArgument, set_: SetOption = None, all_: AllOption = False, db: RecordOption = None
) -> None:
    """Check a config and show what it would sample and test.

    A family of more than 300 perturbations is shown as counts and its first and last ones
    (``--all`` lists every one). Paraphrases not generated yet are announced; ``--db`` shows
    those a record holds.
    """
    from dbpa.launch import load_audit

    cfg, plan = load_audit(config, parse_overrides(set_), db)
    if plan is None:
        _print_ungenerated(cfg, all_)
        return
    _check_cap(cfg, plan)
    analysis = cfg.analysis
    prompts = f" x {len(cfg.prompt_set)} prompts" if cfg.prompts is not None else ""
    tests = f"{len(plan.tests)} tests"
    if plan.set_members:
        tests = f"{len(plan.tests)} pooled tests over {len(plan.prompt_tests)} prompt tests"
    out.print(
        f"[green]valid[/]: {cfg.name}: {len(plan.families)} model(s) x {len(cfg.family)} "
        f"perturbations{prompts} = {tests}, {len(plan.arms)} arms x k={cfg.k} "
        f"= {len(plan.arms) * cfg.k} outputs; omega={analysis.omega}, "
        f"B={analysis.n_permutations}, {analysis.correction} at alpha={analysis.alpha}"
    )
    if cfg.equivalence is not None:
        n_prompts = None if cfg.prompts is None else len(cfg.prompts)
        out.print(_equivalence_line(cfg.equivalence, n_prompts), highlight=False)
    _print_notes(cfg)
    _print_family(cfg.family, all_)
    _print_dropped(cfg)


def _check_cap(cfg: AuditConfig, plan: AuditPlan) -> None:
    """Refuse a cap (the run's or a model's) below the least the requests it holds can
    cost (every request's prompt alone)."""
    from dbpa.spend import check_lowest, is_capped, model_cap_keys

    if not is_capped(cfg):
        return
    lowest = check_lowest(cfg, plan)
    caps = [f"{key}=${usd:g}" for key, usd in model_cap_keys(cfg).values()]
    if cfg.max_cost_usd is not None:
        caps.insert(0, f"max_cost_usd=${cfg.max_cost_usd:g}")
    out.print(
        f"spend cap: {', '.join(caps)}, at least ${lowest:.4f} for the prompts "
        "(the answers cost more: dbpa plan estimates them from a pilot)",
        highlight=False,
    )


def _print_notes(cfg: AuditConfig) -> None:
    """What B and k allow only in part (``AuditConfig.budget``)."""
    for note in cfg.budget.notes:
        out.print(f"[yellow]note[/]: {escape(note)}", highlight=False)


def _equivalence_line(spec: EquivalenceSpec, prompts: int | None = None) -> str:
    """What the equivalence margin will be (over a set of ``prompts``: of their mean)."""
    decisions = "each perturbation changed, equivalent or inconclusive"
    if not isinstance(spec.margin, str):
        return f"equivalence margin {spec.margin:g} (distance scale): {decisions}"
    between = (
        f"every two samples of the unperturbed model ({spec.replicates} replicate arm(s) of "
        "each original, sampled too)"
        if spec.margin == "replicates"
        else "the original and each control"
    )
    if prompts is not None:
        between += f", each distance the mean over the {prompts} prompts"
    share = f"the {100 * spec.quantile:g}th percentile"
    if spec.multiple != 1.0:
        share = f"{spec.multiple:g} x {share}"
    return f"equivalence margin: {share} of the distances between {between}: {decisions}"


def _print_family(family: Sequence[Perturbation], all_: bool) -> None:
    if len(family) <= SUMMARY_OVER:
        _print_table(family)
    elif all_:
        _print_columns(family)
    else:
        _print_summary(family)


def _print_ungenerated(cfg: AuditConfig, all_: bool) -> None:
    """A config whose paraphrases are still to be generated: the counts as asked, the
    generators, and the perturbations known already."""
    known = cfg.ready_part().family
    pending = cfg.ungenerated
    asked = sum(spec.n for _, spec in pending)
    m = len(known) + asked
    analysis = cfg.analysis
    prompts = len(cfg.prompt_set)
    over = "" if cfg.prompts is None else f" x {prompts} prompts"
    tests = "tests" if cfg.prompts is None else "pooled tests"
    out.print(
        f"[green]valid[/]: {cfg.name}: {len(cfg.models)} model(s) x {m} perturbations{over} "
        f"= {len(cfg.models) * m} {tests} (at most: paraphrases may be dropped), k={cfg.k}; "
        f"omega={analysis.omega}, B={analysis.n_permutations}, {analysis.correction} at "
        f"alpha={analysis.alpha}"
    )
    _print_notes(cfg)
    for i, spec in pending:
        kept = (
            ""
            if spec.min_similarity is None
            else (f", kept at embedding similarity >= {spec.min_similarity}")
        )
        asked_of = f"{spec.n} paraphrases"
        if cfg.prompts is not None:  # one generator arm per prompt; the fewest kept count
            asked_of = (
                f"{spec.n} paraphrases x {prompts} prompts = {spec.n * prompts} (one "
                "generator arm per prompt; the set keeps as many as the prompt keeping fewest)"
            )
        out.print(
            f"perturbations[{i}]: {asked_of} to be generated by "
            f"{escape(spec.model.label)} (seed {spec.seed}){kept}",
            highlight=False,
        )
    if known:
        _print_family(known, all_)


def _print_dropped(cfg: AuditConfig) -> None:
    """The generated paraphrases the family leaves out, and why."""
    from dbpa.generation import dropped_paraphrases

    dropped = dropped_paraphrases(cfg)
    if dropped:
        out.print(f"{len(dropped)} generated paraphrase(s) dropped:", highlight=False)
        out.print(_dropped_table(dropped))


def _dropped_table(dropped: Sequence[tuple[int, str | None, GeneratedParaphrase]]) -> Table:
    """The dropped paraphrases; over a set of prompts with the prompt of each."""
    of_set = any(prompt is not None for _, prompt, _ in dropped)
    table = Table("spec", *(("prompt",) if of_set else ()), "paraphrase", "why", "text")
    for position, prompt, p in dropped:
        table.add_row(
            f"perturbations[{position}]",
            *((escape(str(prompt)),) if of_set else ()),
            str(p.index + 1),
            escape(str(p.dropped)),
            escape(p.text),
        )
    return table


def _print_table(family: Sequence[Perturbation], gap_after: int | None = None) -> None:
    """The perturbations as a table, ids whole (or aligned lines where the terminal is too
    narrow for one, as ``results``); with ``gap_after``, a row saying how many are left out
    follows the first ``gap_after`` of them."""
    rows = [(p.id, p.kind, p.label or "", p.description) for p in family]
    if gap_after is not None:
        rows.insert(gap_after, (GAP, "", "", ""))
    columns = [("id", True, "left"), ("kind", True, "left"), ("label", True, "left")]
    print_whole([*columns, ("description", False, "left")], rows, styles={GAP: "dim"})


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
    _print_table([*family[:n], *family[-n:]], gap_after=n)


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
