"""Sentences and tables shared by the HTML and Markdown reports (plain text, unescaped)."""

from __future__ import annotations

from collections.abc import Sequence

from ._data import Family, ReportData, Settings, TestRow
from ._format import fmt_effect, fmt_interval, fmt_omega, fmt_p

__all__ = [
    "MAX_NAMED",
    "audited",
    "equivalence_note",
    "family_verdict",
    "legend",
    "perturbation_matrix",
    "results_table",
]

MAX_NAMED = 20
"""Perturbations named in one sentence of a summary (changed controls, untested ones)."""


def _level(s: Settings) -> str:
    correction = s.correction or "no"
    alpha = "?" if s.alpha is None else f"{s.alpha:g}"
    return f"{correction} correction at \N{GREEK SMALL LETTER ALPHA} = {alpha}"


def legend(s: Settings) -> str:
    """One line on what each column means."""
    return (
        "ω: discrepancy between P0 (similarities among the original outputs) and P1 "
        "(original \N{MULTIPLICATION SIGN} perturbed outputs); "
        "effect: ω minus its mean under the permutation null (ω is biased upward at small k); "
        "p: permutation p-value (never below 1/(B+1)); "
        f"adj. p: p adjusted within the model's family ({s.correction or 'none'}); "
        "stars: * p<0.05, ** p<0.01, *** p<0.001 on the raw p, as in the paper; "
        "distance [90% CI]: energy distance between the two arms' output distributions on "
        "the embeddings (0 when nothing changed; unbiased estimate; its upper bound holds "
        "whatever the direction of the change); "
        f"changed: rejected after correction ({_level(s)})."
    )


def equivalence_note(f: Family, s: Settings) -> str | None:
    """How a family's margin was set and what "equivalent" means; None without a margin."""
    view = f.margin
    if view is None:
        return None
    margin = "not available" if view.margin is None else f"{view.margin:.4g}"
    alpha = "?" if s.alpha is None else f"{s.alpha:g}"
    return (
        f"Equivalence margin {margin} on the distance scale: {view.basis}. Equivalent: the "
        "distance is shown to be below the margin (a test of distance "
        f"\N{GREATER-THAN OR EQUAL TO} margin at its least favourable direction, "
        "its p-values corrected by "
        f"{s.correction or 'none'} at \N{GREEK SMALL LETTER ALPHA} = {alpha} like the "
        "change p-values); changed: rejected and not shown equivalent; inconclusive: neither."
    )


def audited(data: ReportData) -> str:
    """What was audited, in one line."""
    s = data.settings
    models = ", ".join(f.name for f in data.families) or "no models"
    count = len({r.perturbation_id for r in data.rows})
    k = "?" if s.k is None else s.k
    b = "?" if s.n_permutations is None else f"{s.n_permutations:,}"
    return (
        f"{models}; {count} perturbations; k = {k} outputs per arm; ω = {s.omega} of "
        f"{s.similarity} similarities ({s.embedder}); B = {b} permutations; {_level(s)}"
    )


def family_verdict(f: Family, s: Settings) -> str:
    """How many perturbations changed one model's outputs (and, with a margin, how many
    were shown equivalent)."""
    text = f"{f.changed} of {f.tested} tested perturbations changed the output distribution"
    if f.margin is not None:
        inconclusive = sum(r.decision == "inconclusive" for r in f.rows)
        text += f", {f.equivalent} equivalent within the margin, {inconclusive} inconclusive"
    untested = sum(r.decision == "not tested" for r in f.rows)
    if untested:
        text += f"; {untested} not tested"
    if pending := sum(r.decision == "pending" for r in f.rows):
        text += f"; {pending} pending (the run goes on)"
    controls, targets = f.labelled("control"), f.labelled("target")
    if controls or targets:
        text += (
            f"; controls changed {sum(r.reject is True for r in controls)}/{len(controls)}, "
            f"targets changed {sum(r.reject is True for r in targets)}/{len(targets)}"
        )
    return text


def perturbation_matrix(
    families: Sequence[Family],
) -> list[tuple[str, str | None, list[TestRow | None]]]:
    """Rows = perturbations (in family order), columns = families, as in the paper's Table 2."""
    order: dict[str, tuple[int, str | None]] = {}
    cells: dict[tuple[str, str], TestRow] = {}
    for f in families:
        for r in f.rows:
            order.setdefault(r.perturbation_id, (r.position, r.label))
            cells[(r.perturbation_id, f.name)] = r
    ids = sorted(order, key=lambda pid: order[pid][0])
    return [(pid, order[pid][1], [cells.get((pid, f.name)) for f in families]) for pid in ids]


def results_table(data: ReportData) -> list[dict[str, str]]:
    """Every perturbation as one row of formatted cells (e.g. for a Prefect table artifact)."""
    return [
        {
            "model": r.family,
            "perturbation": r.perturbation_id,
            "label": r.label or "",
            "omega": f"{fmt_omega(r.omega)}{r.stars}",
            "effect": fmt_effect(r.effect),
            "p": fmt_p(r.p_value, r.p_floor),
            "adjusted p": fmt_p(r.adjusted_p),
            "distance [90% CI]": fmt_interval(r.interval),
            "decision": f"not tested: {r.reason}" if r.reason else r.decision,
            **({"stopped": r.stop.text} if r.stop is not None else {}),
        }
        for r in data.rows
    ]
