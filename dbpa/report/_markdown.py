"""The report as Markdown (GitHub-flavoured tables), e.g. for a pull request or the Prefect UI."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Sequence

from dbpa.drift import EvidencePoint

from ._data import Exemplar, Family, ReportData, TestRow, TestView
from ._format import (
    MISSING,
    fmt_cost,
    fmt_count,
    fmt_effect,
    fmt_interval,
    fmt_omega,
    fmt_p,
    fmt_rate,
    fmt_time,
    p_floor,
)
from ._prompt_sets import prompt_set_markdown
from ._text import (
    MAX_NAMED,
    audited,
    equivalence_note,
    family_verdict,
    legend,
    perturbation_matrix,
)

__all__ = ["render_markdown", "summary_markdown"]

_INLINE = re.compile(r"([\\`*_\[\]|~])")
_BLOCK_START = re.compile(r"^([-+#>=])")
"""A first character that would start a list item, heading, quote or setext underline."""
_ORDERED_START = re.compile(r"^(\d{1,9})([.)])(?=\s|$)")
"""An ordered list item's number (``1. ``): its ``.`` or ``)`` is escaped, not the digit (a
backslash escapes punctuation only: ``\\1.`` would show it). ``1.106.2`` starts no item."""


def _md(text: object) -> str:
    """User text as literal Markdown on one line: HTML escaped, markup characters backslashed."""
    flat = " ".join(str(text).split())
    escaped = _INLINE.sub(r"\\\1", html.escape(flat, quote=False))
    return _ORDERED_START.sub(r"\1\\\2", _BLOCK_START.sub(r"\\\1", escaped))


def _code(text: object) -> str:
    """User text as an inline code span (literal: no escaping inside)."""
    flat = " ".join(str(text).split())
    ticks = "`" * (max((len(m) for m in re.findall(r"`+", flat)), default=0) + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def _fenced(text: str, info: str = "") -> str:
    """A code block whose fence is longer than any backtick run inside it."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _omega_cell(row: TestRow) -> str:
    if not row.tested:
        return "not tested"
    cell = f"{fmt_omega(row.omega)}{_md(row.stars)}"
    return f"**{cell}**" if row.reject else cell


def cost_summary(data: ReportData) -> str | None:
    """The run's cost, per perturbation, and at which price (None: no output had one)."""
    cost = data.total_usage.cost_usd
    if cost is None:
        return None
    perturbations = sum(len(f.rows) for f in data.families)
    per = f" (${cost / perturbations:.4f} per perturbation)" if perturbations else ""
    models = data.run.config.get("models") or []
    batched = [str(m.get("name") or m.get("model")) for m in models if m.get("batch")]
    price = (
        f"in provider batches at the batch price: {', '.join(batched)}"
        if batched
        else ("at list prices")
    )
    return f"Cost: ${cost:.4f} for {data.total_usage.outputs:,} outputs{per}, {price}"


def summary_markdown(data: ReportData) -> str:
    """What was audited and what changed: the top of the report."""
    run = data.run
    lines = [
        f"# dbpa audit: {_md(run.audit)}",
        "",
        f"Run {_code(run.run_id)} · status **{_md(run.status)}**"
        f" · started {_md(fmt_time(run.started_at))} · finished {_md(fmt_time(run.finished_at))}",
    ]
    if run.description:
        lines += ["", _md(run.description)]
    if run.message:
        lines += ["", f"> {_md(run.message)}"]
    lines += ["", f"- Audited: {_md(audited(data))}"]
    lines += [
        f"- **{_md(f.name)}**: {_md(family_verdict(f, data.settings))}" for f in data.families
    ]
    if data.sequential is not None:
        sq = data.sequential
        lines.append(
            f"- Sequential audit: {sq.outputs:,} outputs sampled against {sq.fixed_outputs:,} "
            f"with every arm at k = {sq.k_max} ({100 * sq.saved:.0f}% fewer model calls); "
            "p-values are sequential p-values, valid under the stopping rule"
        )
    cost = cost_summary(data)
    if cost:
        lines.append(f"- {_md(cost)}")
    controls = [r for f in data.families for r in f.controls_changed]
    if controls:
        names = ", ".join(
            f"{_md(r.perturbation_id)} ({_md(r.family)})" for r in controls[:MAX_NAMED]
        )
        if len(controls) > MAX_NAMED:
            names += f" and {len(controls) - MAX_NAMED} more (see the results)"
        lines.append(
            f"- 🔴 **Control perturbations that changed the output** (they should not): {names}"
        )
    untested = [r for r in data.rows if r.decision == "not tested"]
    if untested:
        lines.append(f"- {len(untested)} perturbation(s) not tested (see the table)")
    for view, row in _changed_views(data)[:MAX_NAMED]:
        assert view.moved is not None
        lines.append(
            f"- What moved in **{_md(row.perturbation_id)}** ({_md(row.family)}): more typical "
            f"after: {_quote(view.moved.after[0])}; before: {_quote(view.moved.before[0])}"
        )
    if data.drift is not None:
        for against, points in data.drift.at(data.drift.current).items():
            changed = [_md(p.label) for p in points if p.reject]
            lines.append(
                f"- Drift against the {against} tick {_code(points[0].reference_epoch)}: "
                f"{len(changed)} of {len(points)} arms changed"
                + (f" ({', '.join(changed)})" if changed else "")
            )
    monitored = monitor_at(data)
    if monitored:
        alarmed = [_md(p.series) for p in monitored if p.alarm]
        lines.append(
            f"- Drift monitor at this tick: {len(alarmed)} of {len(monitored)} arms alarmed"
            + (f" ({', '.join(alarmed)})" if alarmed else "")
            + f"; highest evidence e = {max(p.e_value for p in monitored):.3g}, alarm line "
            f"{monitored[0].threshold:.3g}"
        )
    return "\n".join(lines)


def monitor_at(data: ReportData) -> list[EvidencePoint]:
    """The drift monitor's evidence of each arm at the run's epoch (none before its second
    tick, or where the monitor did not run)."""
    if data.monitor is None:
        return []
    return [p for p in data.monitor.points if p.epoch == data.run.epoch]


QUOTED_CHARS = 160
"""Characters of an output quoted in the summary and the answers that moved."""


def _quote(e: Exemplar) -> str:
    """An output as a one-line quote (shortened), its witness score and copies."""
    text = " ".join(e.text.split())
    if len(text) > QUOTED_CHARS:
        text = text[: QUOTED_CHARS - 1] + "…"
    copies = f", {e.copies} copies" if e.copies > 1 else ""
    return f"“{_md(text)}” ({e.score:+.3f}{copies})"


def _changed_views(data: ReportData) -> list[tuple[TestView, TestRow]]:
    """The per-test views with answers that moved of the perturbations that changed, most
    changed first (the order of the figures)."""
    rows = {(r.family, r.perturbation_id): r for r in data.rows}
    found = [(v, rows[(v.family, v.perturbation_id)]) for v in data.test_views if v.moved]
    changed = [(v, r) for v, r in found if r.reject]
    return sorted(changed, key=lambda vr: vr[1].adjusted_p or vr[1].p_value or 1.0)


def _moved(data: ReportData) -> list[str]:
    """The answers that moved, for every perturbation that changed."""
    changed = _changed_views(data)
    if not changed:
        return []
    lines = [
        "",
        "## The answers that moved",
        "",
        "For each perturbation that changed: the outputs whose mean similarity to the "
        "perturbed arm minus their mean similarity to the original arm (the witness of the "
        "comparison, in brackets) is largest (more typical after the perturbation) or "
        "smallest (more typical before). They describe the change; the test is above.",
    ]
    for view, row in changed:
        assert view.moved is not None
        lines += ["", f"### {_md(row.perturbation_id)} ({_md(row.family)})", ""]
        lines += ["More typical after the perturbation:", ""]
        lines += [f"- {_quote(e)}" for e in view.moved.after]
        lines += ["", "More typical before:", ""]
        lines += [f"- {_quote(e)}" for e in view.moved.before]
    return lines


def _results(data: ReportData) -> list[str]:
    out = ["## Results", "", _md(legend(data.settings))]
    if len(data.families) > 1:
        header = ["perturbation", "label", *(_md(f.name) for f in data.families)]
        rows = [
            [_md(pid), _md(label or ""), *(_omega_cell(c) if c else MISSING for c in cells)]
            for pid, label, cells in perturbation_matrix(data.families)
        ]
        out += ["", "### All models (ω with stars; bold: changed)", "", _table(header, rows)]
    for f in data.families:
        out += ["", f"### {_md(f.name)}"]
        note = equivalence_note(f, data.settings)
        if note:
            out += ["", _md(note)]
        if f.top:
            out += _summarised(f)
        else:
            out += ["", _table(_RESULT_HEADER, [_result_cells(r) for r in f.rows])]
    return out


_RESULT_HEADER = (
    "#",
    "perturbation",
    "kind",
    "label",
    "description",
    "ω",
    "effect",
    "distance [90% CI]",
    "p",
    "adj. p",
    "decision",
)


def _result_cells(r: TestRow) -> list[str]:
    return [
        str(r.position + 1),
        _md(r.perturbation_id),
        _md(r.kind),
        _md(r.label or ""),
        _md(r.description),
        _omega_cell(r),
        fmt_effect(r.effect),
        fmt_interval(r.interval),
        fmt_p(r.p_value, r.p_floor),
        fmt_p(r.adjusted_p),
        _md(_decision_cell(r)),
    ]


def _summarised(f: Family) -> list[str]:
    """A family of hundreds: counts per kind and label, its top rows in full, then every
    perturbation in a short row."""
    kinds = [
        [
            _md(c.kind),
            _md(c.label or ""),
            *(fmt_count(n) for n in (c.perturbations, c.tested, c.changed)),
        ]
        for c in f.by_kind
    ]
    compact = [
        [
            str(r.position + 1),
            _md(r.perturbation_id),
            _md(r.label or ""),
            _omega_cell(r),
            fmt_p(r.p_value, r.p_floor),
            fmt_p(r.adjusted_p),
            _md(r.decision),
        ]
        for r in f.rows
    ]
    return [
        "",
        _table(["kind", "label", "perturbations", "tested", "changed"], kinds),
        "",
        f"The {len(f.top)} of {fmt_count(len(f.rows))} perturbations that changed most "
        "(smallest adjusted p, then p, then largest effect):",
        "",
        _table(_RESULT_HEADER, [_result_cells(r) for r in f.top]),
        "",
        f"All {fmt_count(len(f.rows))} perturbations, one row each:",
        "",
        _table(["#", "perturbation", "label", "ω", "p", "adj. p", "decision"], compact),
    ]


def _roc(data: ReportData) -> list[str]:
    if not data.roc:
        return []
    header = [
        "model",
        "controls",
        "targets",
        "AUC",
        *(f"TPR at FPR ≤ {fmt_rate(p.max_fpr)}" for p in data.roc[0].points),
    ]
    rows = [
        [
            _md(v.family),
            str(v.n_control),
            str(v.n_target),
            f"{v.auc:.3f}",
            *(fmt_rate(p.tpr) for p in v.points),
        ]
        for v in data.roc
    ]
    out = ["", "## Control vs target perturbations", "", _table(header, rows)]
    if data.best_models:
        out.append("")
    out += [
        f"- Best model at an allowed FPR of {fmt_rate(c.max_fpr)}: "
        f"**{_md(c.model)}** (TPR {fmt_rate(c.points[c.model].tpr)})"
        for c in data.best_models
    ]
    return out


def _alignment(data: ReportData) -> list[str]:
    if not data.alignment:
        return []
    rows = [
        [
            _md(a.reference),
            _md(a.model),
            _omega_cell(a.row),
            fmt_p(a.row.p_value, a.row.p_floor),
            fmt_p(a.row.adjusted_p),
            _md(a.row.decision),
        ]
        for a in data.alignment
    ]
    header = ["reference", "model", "ω", "p", "adj. p", "decision"]
    return ["", "## Alignment with the reference model", "", _table(header, rows)]


def _drift(data: ReportData) -> list[str]:
    if data.drift is None:
        return []
    d = data.drift
    out = ["", "## Drift between ticks", ""]
    out.append(
        f"Every arm of this tick ({_code(d.current)}) against the same arm at an earlier tick; "
        f"{len(d.epochs)} ticks recorded since {_code(d.epochs[0])}."
    )
    for against, points in d.at(d.current).items():
        rows = [
            [
                _md(p.label),
                fmt_omega(p.omega),
                fmt_effect(p.effect),
                fmt_p(p.p_value, p_floor(p.evaluated, p.exact)),
                fmt_p(p.adjusted_p),
                "**changed**" if p.reject else "no change",
            ]
            for p in points
        ]
        header = ["arm", "ω", "effect", "p", "adj. p", "decision"]
        title = f"### Against the {against} tick {_code(points[0].reference_epoch)}"
        out += ["", title, "", _table(header, rows)]
    return out


def _monitor(data: ReportData) -> list[str]:
    if data.monitor is None:
        return []
    rows = [
        [
            _md(p.series),
            f"{p.e_value:.3g}",
            f"{p.threshold:.3g}",
            str(p.tick),
            "**alarm**" if p.alarm else "no alarm",
            _code(p.baseline_epoch),
        ]
        for p in data.monitor.latest()
    ]
    header = ["arm", "e-value", "alarm line", "ticks", "monitor", "baseline"]
    return [
        "",
        "## Drift monitor",
        "",
        "Each arm's evidence against its baseline, accumulated over the ticks (over a set of "
        "prompts, each perturbation's and model's arms on every prompt pooled into one "
        "series, their evidence multiplied); a series without a change ever reaches its "
        "alarm line with probability at most alpha (all series together).",
        "",
        _table(header, rows),
    ]


def _usage(data: ReportData) -> list[str]:
    rows = [
        [
            _md(m.model),
            str(m.arms),
            fmt_count(m.usage.outputs),
            fmt_count(m.usage.prompt_tokens),
            fmt_count(m.usage.completion_tokens),
            fmt_cost(m.usage.cost_usd),
        ]
        for m in data.usage
    ]
    t = data.total_usage
    rows.append(
        [
            "**total**",
            str(sum(m.arms for m in data.usage)),
            fmt_count(t.outputs),
            fmt_count(t.prompt_tokens),
            fmt_count(t.completion_tokens),
            fmt_cost(t.cost_usd),
        ]
    )
    header = ["model", "arms", "outputs", "prompt tokens", "completion tokens", "cost"]
    return ["", "## Tokens and cost", "", _table(header, rows)]


def _provenance(data: ReportData) -> list[str]:
    run, s = data.run, data.settings
    facts = [
        ("run", run.run_id),
        ("flow run", run.flow_run_id or "-"),
        ("epoch", run.epoch),
        ("seed", s.seed),
        ("embedder", s.embedder),
        ("config hash", run.config_hash),
        ("database", run.database),
        ("database id", run.database_id),
        ("report", data.generator),
    ]
    versions = _table(["package", "version"], [[_md(k), _md(v)] for k, v in run.versions.items()])
    return [
        "",
        "## Provenance",
        "",
        *(f"- {name}: {_code(value)}" for name, value in facts),
        "",
        versions,
        "",
        _fenced(json.dumps(run.config, indent=2, sort_keys=True, ensure_ascii=False), "json"),
    ]


def render_markdown(data: ReportData) -> str:
    """The whole report (without figures) as Markdown."""
    parts = [
        summary_markdown(data),
        "",
        *_results(data),
        *prompt_set_markdown(data.prompt_set),
        *_moved(data),
        *_dropped(data),
        *_roc(data),
        *_alignment(data),
        *_drift(data),
        *_monitor(data),
        *_usage(data),
        *_provenance(data),
    ]
    return "\n".join(parts) + "\n"


def _dropped(data: ReportData) -> list[str]:
    """The generated paraphrases left out of the family, and why."""
    if not data.dropped_paraphrases:
        return []
    of_set = any(d.prompt is not None for d in data.dropped_paraphrases)
    rows = [
        (
            f"perturbations[{d.spec}]",
            *((_code(d.prompt),) if of_set else ()),
            str(d.number),
            _md(d.reason),
            _md(d.text),
        )
        for d in data.dropped_paraphrases
    ]
    header = ("spec", *(("prompt",) if of_set else ()), "paraphrase", "why", "text")
    return ["", "## Dropped paraphrases", "", _table(header, rows), ""]


def _decision_cell(r: TestRow) -> str:
    """The decision, why it was not tested, or which component of ``auto`` led it; where
    a sequential test stopped."""
    if r.reason:
        return f"not tested: {r.reason}"
    if r.settling is not None:
        text = f"inconclusive (k = {r.settling.k} would likely show it {r.settling.towards})"
    else:
        text = f"{r.decision} (led by {r.changed_aspect})" if r.changed_aspect else r.decision
    return f"{text}; {r.stop.text}" if r.stop is not None else text
