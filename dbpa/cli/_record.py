"""The commands that read the audit record: ``runs``, ``results``, ``report``, ``export``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer
from rich.table import Table

from ._common import (
    DEFAULT_DB,
    DbOption,
    ExitCode,
    RequireEquivalentOption,
    RunArgument,
    cell,
    err,
    fail,
    open_record,
    out,
    print_columns,
    print_whole,
    whole_table,
)
from ._validate import SUMMARY_OVER

DECISIONS = ("changed", "equivalent", "inconclusive", "no change", "pending", "not tested")
"""The decisions of a result, in the order the summary counts them."""
SHOWN_SMALLEST_P = 10
"""Results listed under the counts of a summarised family: those of smallest p-value."""

if TYPE_CHECKING:
    import pandas as pd


def print_results(db: str | Path, run_id: str) -> pd.DataFrame:
    """Print a run's table; returns its results."""
    with open_record(db) as store:
        row = store.run(run_id)
        df = store.results(row["run_id"])
        effects = set_effects(store, row["run_id"], df)
        arms = sorted({*df.original_arm.dropna(), *df.perturbed_arm.dropna()}) if len(df) else []
        usage = store.usage([str(a) for a in arms])
    show_results(row, df, effects=effects)
    line = cost_line(row, usage, len(df))
    if line:
        out.print(line, highlight=False)
    return df


def cost_line(row: dict[str, Any], usage: pd.DataFrame, perturbations: int) -> str | None:
    """What the run's outputs cost (``usage``: ``Store.usage`` of its arms), per
    perturbation, and which models were priced at their batch price; None when no output
    has a price (the embedded model)."""
    costs = usage.cost_usd.dropna() if "cost_usd" in usage else usage
    if len(costs) == 0:
        return None
    total = float(costs.sum())
    per = f" (${total / perturbations:.4f} per perturbation)" if perturbations else ""
    batched = [
        str(m.get("name") or m["model"]) for m in _config(row).get("models", []) if m.get("batch")
    ]
    at = (
        f"; in provider batches, at the batch price: {', '.join(batched)}"
        if batched
        else "; at list prices"
    )
    return f"cost: ${total:.4f} for {int(usage.outputs.sum()):,} outputs{per}{at}"


def check_gates(df: pd.DataFrame, fail_on_control_rejection: bool, require: list[str]) -> None:
    """The CI gates on a run's results: exit 3 if ``fail_on_control_rejection`` and a control
    was rejected; exit 4 unless every perturbation labelled one of ``require`` is equivalent."""
    rejected = int(((df.label == "control") & (df.reject == True)).sum())  # noqa: E712
    if fail_on_control_rejection and rejected:
        raise fail(
            ExitCode.CONTROL_REJECTED,
            f"{rejected} control perturbation(s) changed the output distribution",
        )
    for label in require:
        labelled = df[df.label == label]
        if labelled.empty:
            raise fail(
                ExitCode.BAD_INPUT, f"--require-equivalent: no perturbation is labelled {label!r}"
            )
        if "decision" not in df or df.decision.isna().all():
            raise fail(
                ExitCode.BAD_INPUT,
                "--require-equivalent: the run has no equivalence margin (set `equivalence:` "
                "in the config, e.g. --set equivalence=true)",
            )
        missed = labelled[labelled.decision != "equivalent"]
        if not missed.empty:
            names = ", ".join(missed.perturbation_id.astype(str).head(10))
            more = f" and {len(missed) - 10} more" if len(missed) > 10 else ""
            raise fail(
                ExitCode.NOT_EQUIVALENT,
                f"{len(missed)} of {len(labelled)} perturbation(s) labelled {label!r} not shown "
                f"equivalent: {names}{more}",
            )


def show_results(
    row: dict[str, Any],
    df: pd.DataFrame,
    all_rows: bool = False,
    effects: dict[tuple[str, str], str] | None = None,
) -> None:
    """Print the table of a run's results (a family of more than ``SUMMARY_OVER`` as counts
    and its smallest p-values, unless ``all_rows``). A perturbation not yet decided (a
    running run) is ``pending`` (see ``decisions``). A run over a set of prompts shows each
    result's distance, a pooled one's from ``effects`` (see ``set_effects``), and says what
    each column is."""
    rows = _result_rows(df, decisions(row, df), effects or {})
    if is_set(df):  # how many of its prompts each perturbation moved, before its decision
        for cells, moved, n in zip(rows, df.prompts_moved, df.n_prompts, strict=True):
            cells.insert(-1, "-" if cell(n) == "" else f"{int(moved)}/{int(n)}")
    sequential = is_sequential(df, row)
    if sequential:  # where each test stopped, before its decision
        for cells, at, why in zip(rows, df.stopped_at, df.stop_reason, strict=True):
            cells.insert(-1, _stop_cell(at, why, cells[-1]))
    if len(df) <= SUMMARY_OVER:
        _print_results_table(row, df, rows)
    elif all_rows:
        _print_result_columns(row, df, rows)
    else:
        _print_results_summary(row, df, rows)
    pending = sum(r[-1] == "pending" for r in rows)
    if pending:
        when = "at a later look or " if sequential else ""
        out.print(
            f"{int(df.tested.sum())} of {len(df)} perturbations tested so far; {pending} pending: "
            f"decided {when}when the run corrects each model's family",
            highlight=False,
        )
    for line in [*_margin_lines(df), *_settling_lines(df), *_calls_lines(row, df)]:
        out.print(line, highlight=False, markup=False)


def set_effects(store: Any, run_id: str, df: pd.DataFrame) -> dict[tuple[str, str], str]:
    """The set-level effect of each pooled result of a run over a set of prompts, as its
    distance cell, by (family, perturbation): the mean over its prompts of each prompt's
    distance (their unbiased estimates, on the scale of a one-prompt result's distance) and,
    where the record has every prompt's interval (a record read here, not through a running
    run's writer), ``[≤ upper]``: the upper bound of that mean on the side of a prompt's
    90% interval (``dbpa.set_analysis.set_effect_upper``, the bound the set-level
    equivalence test inverts; no lower bound is computed). ``-`` without every prompt's
    estimate."""
    if not is_set(df):
        return {}
    from dbpa.analysis import INTERVAL_CONFIDENCE
    from dbpa.set_analysis import set_effect_upper

    prompts = store.prompt_results(run_id)
    if prompts.empty:
        return {}
    read = getattr(store, "effect_intervals", None)  # a local record's; a writer serves none
    intervals = read([str(t) for t in prompts.test_id.dropna()]) if read else {}
    effects = {}
    for (family, pid), group in prompts.groupby(["family", "perturbation_id"], sort=False):
        estimates = group.effect_estimate.astype(float)
        if estimates.isna().any():
            effects[(str(family), str(pid))] = "-"
            continue
        upper = (
            set_effect_upper([intervals.get(str(t)) for t in group.test_id], INTERVAL_CONFIDENCE)
            if intervals
            else None
        )
        effects[(str(family), str(pid))] = _mean_cell(float(estimates.mean()), upper)
    return effects


def _mean_cell(estimate: float, upper: float | None) -> str:
    """A pooled result's distance: the mean, clipped into ``[0, upper]`` as a prompt's
    estimate is into its interval, and ``[≤ upper]``."""
    import math

    if upper is None:
        return _number(max(estimate, 0.0))
    bound = _number(upper) if math.isfinite(upper) else "inf"
    return f"{_number(min(max(estimate, 0.0), upper))} [\N{LESS-THAN OR EQUAL TO}{bound}]"


def _number(value: float) -> str:
    """Two significant digits, as the distance cells show them."""
    import numpy as np

    return np.format_float_positional(value, precision=2, unique=False, fractional=False, trim="-")


def _set_legend(df: pd.DataFrame) -> str:
    """What each column of a run over a set of prompts shows."""
    prompts = int(df.n_prompts.dropna().max())
    return (
        "distance [90% CI]: energy distance between the outputs with and without the "
        "perturbation (0: unchanged); a pooled row's is the mean over its "
        f"{prompts} prompts of each prompt's distance, with [\N{LESS-THAN OR EQUAL TO} its upper "
        "95% bound] (no lower bound). p: the pooled permutation test's over the prompts; adj. "
        "p: adjusted within the model's family; prompts moved: those whose own change the "
        "drill-down confirms."
    )


def is_set(df: pd.DataFrame) -> bool:
    """The run audits a set of prompts: each result is a pooled test over them."""
    return "n_prompts" in df and bool(df.n_prompts.notna().any())


def is_sequential(df: pd.DataFrame, row: dict[str, Any] | None = None) -> bool:
    """The run stops its tests sequentially: its results say where and why, or (a running
    run before its first stop) its config says so."""
    if "stop_reason" in df and bool(df.stop_reason.notna().any()):
        return True
    return row is not None and _config(row).get("sequential") is not None


def _config(row: dict[str, Any]) -> dict[str, Any]:
    """A run's stored config (a JSON text read locally, a mapping through a live reader)."""
    config = row.get("config") or {}
    return dict(config) if not isinstance(config, str) else dict(json.loads(config))


def _stop_cell(at: Any, why: Any, decision: str) -> str:
    """Where a sequential test stopped: ``8 changed``, ``12 futile``, ``20`` (at k max);
    ``open`` while it goes on to the next look."""
    if cell(why) in ("", "not tested"):
        return "open" if decision == "pending" else "-"
    return f"{int(at)}" if why == "k_max" else f"{int(at)} {why}"


def decisions(row: dict[str, Any], df: pd.DataFrame) -> list[str]:
    """Each result's decision, as ``results`` shows it (every format).

    Corrected: ``changed`` or ``no change``, with a margin ``changed``, ``equivalent`` or
    ``inconclusive``; ``not tested`` where an arm could not be sampled (p = 1 in the
    correction). Not corrected yet (a running run): ``not tested`` where an arm failed
    (or the run ended without testing it), else ``pending``, except a sequential test
    that stopped at a look with its answer final: ``changed`` (its p-value is below the
    family's lone threshold, which every correction rejects; not with a margin, where it
    may still be shown equivalent) or ``no change`` (futile: p = 1)."""
    import numpy as np

    n = len(df)
    tested = np.asarray(df.tested == True)  # noqa: E712 (a nullable column)
    corrected = np.asarray(df.adjusted_p.notna())
    failed = np.asarray([v is True or v == 1 for v in _column(df, "arm_failed")])
    running = row.get("status") == "running"
    with_margin = _config(row).get("equivalence") is not None
    stop = np.asarray([cell(v) for v in _column(df, "stop_reason")], dtype=object)
    stored = np.asarray([cell(v) for v in _column(df, "decision")], dtype=object)
    plain = np.where(np.asarray(df.reject == True), "changed", "no change")  # noqa: E712
    found = np.full(n, "pending", dtype=object)
    found[stop == "futile"] = "no change"
    if not with_margin:
        found[stop == "changed"] = "changed"
    found[failed | (~tested & (not running))] = "not tested"
    decided = np.where(stored != "", stored, plain)
    found[corrected] = decided[corrected]
    found[corrected & ~tested] = "not tested"
    return [str(d) for d in found]


def _calls_lines(row: dict[str, Any], df: pd.DataFrame) -> list[str]:
    """A sequential run's outputs against the fixed-k design's."""
    used, fixed = row.get("outputs_used"), row.get("outputs_fixed")
    if not is_sequential(df) or cell(used) == "" or cell(fixed) == "":
        return []
    saved = 1 - int(used) / max(int(fixed), 1)
    config = row["config"] if isinstance(row["config"], dict) else json.loads(row["config"])
    return [
        f"sequential: {int(used):,} outputs sampled against {int(fixed):,} at a fixed "
        f"k={config['k']}: {100 * saved:.0f}% fewer model calls"
    ]


def _margin_lines(df: pd.DataFrame) -> list[str]:
    """One line per family with an equivalence margin: its value and how it was set."""
    if "margin_source" not in df:
        return []
    lines = []
    several = df.family.nunique() > 1
    for family, group in df.groupby("family", sort=False):
        sources = group.margin_source.dropna()
        if sources.empty:
            continue
        source, margin = sources.iloc[0], group.margin.dropna()
        value = f"{margin.iloc[0]:.4g}" if not margin.empty else "not available"
        basis = "set in the config"
        if source != "fixed":
            quantile = float(group.margin_quantile.dropna().iloc[0])
            pairs = (
                int(group.margin_pairs.dropna().iloc[0]) if group.margin_pairs.notna().any() else 0
            )
            what = (
                f"{pairs} pairs of samples of the unperturbed model"
                if source == "replicates"
                else f"the original and {pairs} control(s)"
            )
            if "n_prompts" in group and group.n_prompts.notna().any():
                prompts = int(group.n_prompts.dropna().iloc[0])
                what += f", each the mean over the {prompts} prompts"
            basis = f"the {100 * quantile:g}th percentile of the distances between {what}"
            multiple = group.margin_multiple.dropna()
            if not multiple.empty and multiple.iloc[0] != 1.0:
                basis = f"{multiple.iloc[0]:g} x {basis}"
            if not margin.empty and margin.iloc[0] == 0:
                from dbpa.analysis import ZERO_MARGIN

                basis += f" ({ZERO_MARGIN})"
        where = f" ({family})" if several else ""
        lines.append(f"equivalence margin{where}: {value} on the distance scale, {basis}")
    return lines


def _result_rows(
    df: pd.DataFrame, decided: list[str], effects: dict[tuple[str, str], str]
) -> list[list[str]]:
    """The cells of each result, the model first when there are several; its decision
    (``decided``, see ``decisions``) last. In a run over a set of prompts, one distance
    column in place of omega and effect: a pooled result's from ``effects``."""
    from dbpa.analysis import stars

    several = df.family.nunique() > 1
    columns = ("family", "perturbation_id", "label", "tested", "statistic", "effect", "p_value")
    columns += ("adjusted_p", "reject", "decision", "effect_estimate", "effect_low", "effect_high")
    columns += ("margin", "interval_confidence", "k_a", "k_b", "alpha", "equivalence_p")
    columns += ("adjusted_equivalence_p",)
    with_margin = has_margin(df)
    pooled = is_set(df)
    rows = []
    # Column lists, not itertuples: iterating Arrow-backed rows costs 60 us a row.
    values = zip(*(_column(df, c) for c in columns), strict=True)
    for r, decision in zip(map(_Result._make, values), decided, strict=True):
        first = [r.family] if several else []
        if not r.tested:
            dashes = "---" if pooled else "----"
            rows.append([*first, r.perturbation_id, cell(r.label), *dashes, decision])
            continue
        if pooled:  # a pooled statistic is on no scale of its own: the mean distance instead
            distance = effects.get((r.family, r.perturbation_id)) or _interval_cell(r)
            tested = [distance, f"{r.p_value:.4f}"]
        else:  # with a margin, the distance and its interval take the place of the effect
            effect = _interval_cell(r) if with_margin else f"{r.effect:+.3f}"
            tested = [f"{r.statistic:.3f}{stars(r.p_value)}", effect, f"{r.p_value:.4f}"]
        adjusted = "-" if cell(r.adjusted_p) == "" else f"{r.adjusted_p:.4f}"
        rows.append([*first, r.perturbation_id, cell(r.label), *tested, adjusted, decision])
    return rows


def has_margin(df: pd.DataFrame) -> bool:
    """The run decided with an equivalence margin (its results carry three-way decisions)."""
    return "decision" in df and bool(df.decision.notna().any())


def _column(df: pd.DataFrame, name: str) -> list[Any]:
    """A column's values, or NULLs for a column a record of an older schema lacks."""
    return df[name].tolist() if name in df else [None] * len(df)


def _interval_cell(r: _Result) -> str:
    """The distance's estimate, clipped into its interval, and the 90% interval, as in the
    reports (``dbpa.report.shown_estimate``; the JSON and CSV keep the raw estimate)."""
    import numpy as np

    if cell(r.effect_estimate) == "":
        return "-"
    low, high = float(r.effect_low), float(r.effect_high)  # type: ignore[arg-type]
    shown = min(max(float(r.effect_estimate), low), high)  # type: ignore[arg-type]
    est, low_cell, high_cell = (
        np.format_float_positional(v, precision=2, unique=False, fractional=False, trim="-")
        for v in (shown, low, high)
    )
    return f"{est} [{low_cell}, {high_cell}]"


class _Result(NamedTuple):
    """The fields of a result that its row shows."""

    family: str
    perturbation_id: str
    label: str | None
    tested: bool
    statistic: float
    effect: float
    p_value: float
    adjusted_p: float | None
    reject: bool | None
    decision: str | None
    effect_estimate: float | None
    effect_low: float | None
    effect_high: float | None
    margin: float | None
    interval_confidence: float | None
    k_a: int | None
    k_b: int | None
    alpha: float | None
    equivalence_p: float | None
    adjusted_equivalence_p: float | None


def _settling_lines(df: pd.DataFrame) -> list[str]:
    """A line per inconclusive decision (the first ``SHOWN_SMALLEST_P``): the outputs per
    arm that would likely settle it."""
    if not has_margin(df) or not (df.decision == "inconclusive").any():
        return []
    lines = []
    inconclusive = df[df.decision == "inconclusive"]
    columns = _Result._fields
    for r in map(_Result._make, zip(*(_column(inconclusive, c) for c in columns), strict=True)):
        settling = _settling(r)
        if settling is not None:
            lines.append(
                f"{r.perturbation_id}: inconclusive; k={settling.k} outputs per arm would likely "
                f"show it {settling.towards}"
            )
    if len(lines) > SHOWN_SMALLEST_P:
        lines = [
            *lines[:SHOWN_SMALLEST_P],
            f"and {len(lines) - SHOWN_SMALLEST_P} more inconclusive",
        ]
    return lines


def _settling(r: _Result) -> Any:
    """``settling_k`` of an inconclusive row, None when its numbers are missing."""
    from dbpa.stats import corrected_level, settling_k  # scipy: inconclusive rows only

    if "" in (cell(r.effect_estimate), cell(r.margin), cell(r.k_a), cell(r.k_b)):
        return None
    if float(r.margin) == 0:  # type: ignore[arg-type]  # no k shows a distance below 0
        return None
    if not float(r.effect_high) < float("inf"):  # type: ignore[arg-type]  # outputs bound nothing
        return None
    return settling_k(
        float(r.effect_estimate),  # type: ignore[arg-type]
        float(r.effect_low),  # type: ignore[arg-type]
        float(r.effect_high),  # type: ignore[arg-type]
        float(r.margin),  # type: ignore[arg-type]
        min(int(r.k_a), int(r.k_b)),  # type: ignore[arg-type]
        confidence=float(r.interval_confidence or 0.9),
        level=None
        if "" in (cell(r.alpha), cell(r.equivalence_p), cell(r.adjusted_equivalence_p))
        else corrected_level(r.alpha, r.equivalence_p, r.adjusted_equivalence_p),  # type: ignore[arg-type]
    )


def _print_results_table(row: dict[str, Any], df: pd.DataFrame, rows: list[list[str]]) -> None:
    """The results under their run's title: a table with every id whole, or aligned lines
    where the terminal is too narrow for one (as ``runs`` and ``compare``)."""
    _print_title(row, df)
    print_whole(_result_columns(df, row), rows, styles={"changed": "red"})


def _print_title(row: dict[str, Any], df: pd.DataFrame) -> None:
    """The run's id and status; for a run over a set of prompts, what each column shows."""
    out.print(f"run {row['run_id']} ({row['status']})", highlight=False, markup=False)
    if is_set(df):
        out.print(_set_legend(df), highlight=False, markup=False)


def _result_columns(df: pd.DataFrame, row: dict[str, Any]) -> list[tuple[str, bool, str]]:
    """The results' columns as ``whole_table`` takes them: (name, kept whole, justify)."""
    columns = [*([("model", True, "left")] if df.family.nunique() > 1 else [])]
    columns += [("perturbation", True, "left"), ("label", False, "left")]
    distance = "distance [90% CI]"
    if is_set(df):
        tested = [distance, "p", "adj. p"]
    else:
        tested = ["omega", distance if has_margin(df) else "effect", "p", "adj. p"]
    columns += [(name, True, "right") for name in tested]
    columns += [("prompts moved", False, "right")] if is_set(df) else []
    columns += [("stopped", True, "left")] if is_sequential(df, row) else []
    return [*columns, ("decision", False, "left")]


def _print_results_summary(row: dict[str, Any], df: pd.DataFrame, rows: list[list[str]]) -> None:
    """Decisions counted per model and label, then the results of smallest p-value."""
    import numpy as np

    several = df.family.nunique() > 1
    decisions = [cells[-1] for cells in rows]
    counts = Counter(
        (family if several else "", cell(label), decision)
        for family, label, decision in zip(df.family, df.label, decisions, strict=True)
    )
    groups = dict.fromkeys((family, label) for family, label, _ in counts)  # in family order
    shown = [name for name in DECISIONS if any(d == name for *_, d in counts)]
    table = Table(
        *(["model"] if several else []),
        "label",
        "perturbations",
        *shown,
        title=f"run {row['run_id']} ({row['status']}): {len(df):,} perturbations",
        title_justify="left",
    )
    for family, label in groups:
        n = [counts[(family, label, name)] for name in shown]
        table.add_row(*([family] if several else []), label, f"{sum(n):,}", *(f"{c:,}" for c in n))
    out.print(table)
    adjusted, p = (df[c].astype(float).fillna(2.0).to_numpy() for c in ("adjusted_p", "p_value"))
    by_p = np.lexsort((p, adjusted))[:SHOWN_SMALLEST_P]
    out.print(
        f"the {len(by_p)} of smallest adjusted p, then p (--all lists every one; --format csv "
        "or json gives every field):",
        highlight=False,
    )
    _print_results_table(row, df.iloc[by_p], [rows[i] for i in by_p])


def _print_result_columns(row: dict[str, Any], df: pd.DataFrame, rows: list[list[str]]) -> None:
    """Every result on one line, in aligned columns."""
    columns = _result_columns(df, row)
    header = [name for name, _, _ in columns]
    _print_title(row, df)
    print_columns(header, rows, {i for i, (_, _, j) in enumerate(columns) if j == "right"})


def runs(db: DbOption = DEFAULT_DB) -> None:
    """List the runs recorded in the database (a running run with its progress so far)."""
    with open_record(db) as store:
        df = store.runs()
        writing = store.writer_pid is not None
    rows = [
        _RunLine(
            r.run_id,
            r.audit,
            r.status,
            r.epoch,
            f"{r.started_at:%Y-%m-%d %H:%M:%S}",
            _progress(r, writing) if r.status == "running" else cell(r.message),
            "" if cell(r.cost_usd) == "" else f"${r.cost_usd:.4f}",
        )
        for r in df.itertuples()
    ]
    table = _runs_table(rows)
    if table is not None:
        out.print(table)
        return
    for r in rows:  # one line per id, never cut: a terminal wraps it without breaking it
        out.print(r.run_id, highlight=False, markup=False, soft_wrap=True)
        details = f"{r.status} · audit {r.audit} · epoch {r.epoch} · started {r.started}"
        details += f" · cost {r.cost}" if r.cost else ""
        out.print(f"    {details}", highlight=False, markup=False, soft_wrap=True)
        if r.message:
            out.print(f"    {r.message}", highlight=False, markup=False, soft_wrap=True)


class _RunLine(NamedTuple):
    """What ``runs`` shows of one run."""

    run_id: str
    audit: str
    status: str
    epoch: str
    started: str
    message: str
    cost: str = ""
    """What its outputs cost ("": no known price)."""


def _runs_table(rows: list[_RunLine]) -> Table | None:
    """The runs as a table, ids whole (see ``whole_table``); the audit column left out when
    every id starts with its audit's name (as every id the flow makes does)."""
    named = all(r.run_id.startswith(f"{r.audit}-") for r in rows)
    columns = [("run", True, "left"), *([] if named else [("audit", False, "left")])]
    columns += [("status", True, "left"), ("epoch", True, "left"), ("started", False, "left")]
    priced = any(r.cost for r in rows)  # a cost column once a run has a known price
    columns += [("cost", True, "right")] if priced else []
    columns += [("message", False, "left")]
    return whole_table(
        columns,
        [
            [r.run_id, *([] if named else [r.audit]), r.status, r.epoch, r.started]
            + ([r.cost] if priced else [])
            + [r.message]
            for r in rows
        ],
    )


def _progress(run: Any, writing: bool) -> str:
    """What a running run has done so far; without a writing process, that it stopped."""
    if cell(run.outputs_planned) == "":
        done = "starting"
    elif run.sequential:  # its tests stop early: the planned outputs are a maximum
        done = f"{int(run.outputs_stored)} of at most {int(run.outputs_planned)} outputs so far"
    else:
        done = (
            f"{int(run.outputs_stored)}/{int(run.outputs_planned)} outputs, "
            f"{int(run.tests_stored)}/{int(run.tests_planned)} tests so far"
        )
    if writing:
        return done
    return f"interrupted ({done}): no process is writing the record; the next run marks it crashed"


def results(
    run_id: RunArgument,
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json.")] = "table",
    all_: Annotated[
        bool, typer.Option("--all", help="List every perturbation in the table, however many.")
    ] = False,
    require_equivalent: RequireEquivalentOption = None,
) -> None:
    """Show a run's per-perturbation results.

    A family of more than 300 perturbations is shown as counts per label and decision and
    its smallest p-values (``--all`` lists every one); csv and json always hold every
    result, with ``decision`` filled in.
    """
    if fmt not in ("table", "csv", "json"):
        raise fail(ExitCode.BAD_INPUT, f"--format: unknown {fmt!r}; choose table, csv or json")
    with open_record(db) as store:
        row = store.run(run_id)
        df = store.results(row["run_id"])
        prompts = store.prompt_results(row["run_id"]) if is_set(df) and fmt == "json" else None
        effects = set_effects(store, row["run_id"], df) if fmt == "table" else {}
    if not is_set(df):  # a run of one prompt: its fields as before prompt sets
        df = df.drop(columns=["n_prompts", "prompts_moved"], errors="ignore")
    if fmt == "table":
        show_results(row, df, all_, effects)
    elif fmt == "csv":
        sys.stdout.write(df.assign(decision=decisions(row, df)).to_csv(index=False))
    else:
        records = json.loads(df.assign(decision=decisions(row, df)).to_json(orient="records"))
        if prompts is not None:
            _nest_prompts(records, prompts)
        sys.stdout.write(json.dumps(records, indent=2) + "\n")
    check_gates(df, False, require_equivalent or [])


PROMPT_FIELDS = (
    "prompt_id",
    "p_value",
    "adjusted_p",
    "moved",
    "effect",
    "z",
    "effect_estimate",
    "effect_low",
    "effect_high",
    "original_arm",
    "perturbed_arm",
    "test_id",
)
"""What ``results --format json`` says of each prompt of a pooled test."""


def _nest_prompts(records: list[dict[str, Any]], prompts: pd.DataFrame) -> None:
    """Each result of a set of prompts gets ``prompts``: a row per prompt, with its
    ``prompt_id``, its p-value from the pooled test, adjusted by the drill-down, and whether
    it moved."""
    rows = json.loads(
        prompts[["family", "perturbation_id", *PROMPT_FIELDS]].to_json(orient="records")
    )
    of: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        of.setdefault((r.pop("family"), r.pop("perturbation_id")), []).append(r)
    for record in records:
        record["prompts"] = of.get((record["family"], record["perturbation_id"]), [])


def export(
    db: DbOption = DEFAULT_DB,
    table: Annotated[
        list[str] | None, typer.Option(help="Table to export (repeatable); default all.")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help="parquet or csv.")] = "parquet",
    out_dir: Annotated[Path, typer.Option("--out", help="Directory for the files.")] = Path(
        "export"
    ),
    salvage: Annotated[
        bool,
        typer.Option(
            "--salvage",
            help="From a damaged record: every table, and every part of a table, that can "
            "still be read (exit 2 if some could not).",
        ),
    ] = False,
) -> None:
    """Export tables of the audit record to Parquet or CSV."""
    from storage import EXPORTS

    if salvage:
        if table:
            raise fail(ExitCode.BAD_INPUT, "--salvage exports every table; leave out --table")
        _salvage(db, out_dir, fmt)
        return
    with open_record(db) as store:
        for name in table or list(EXPORTS):
            path = store.export(name, out_dir / f"{name}.{fmt}", fmt)
            out.print(f"{name}: {path}")


def _salvage(db: str, out_dir: Path, fmt: str) -> None:
    from storage import is_postgres_url, salvage

    if is_postgres_url(db):
        raise fail(
            ExitCode.BAD_INPUT,
            "--salvage reads a damaged DuckDB file; --db names a PostgreSQL record",
        )

    found = salvage(Path(db), out_dir, fmt)
    for t in found.tables:
        if t.problem is None:
            out.print(f"{t.name}: {t.path}")
        elif t.path is not None:
            total = f"{t.total:,}" if t.total is not None else "?"
            out.print(f"{t.name}: {t.path} ({t.rows:,} of {total} rows)", highlight=False)
    lost = [t for t in found.tables if t.problem is not None]
    for t in lost:
        what = "some rows of " if t.rows else ""
        err.print(f"could not read {what}{t.name}: {t.problem}", highlight=False)
    if lost:
        raise fail(
            ExitCode.BAD_INPUT,
            f"{len(lost)} table(s) of {db} could not be read in full; the files written hold "
            "what could",
        )


def report(
    run_id: RunArgument,
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[str, typer.Option("--format", help="html, md or json.")] = "html",
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="File to write (or a directory); default RUN.FORMAT in reports/ next to the db.",
        ),
    ] = None,
) -> None:
    """Regenerate a run's report from the record (no model call)."""
    from dbpa.report import RENDERERS, default_report_dir, gather, report_path

    if fmt not in RENDERERS:
        raise fail(ExitCode.BAD_INPUT, f"--format: unknown {fmt!r}; choose {', '.join(RENDERERS)}")
    with open_record(db) as store:
        data = gather(store, run_id)
    if out_path is None or out_path.is_dir():
        path = report_path(out_path or default_report_dir(db), data.run.run_id, fmt)
    else:
        path = out_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(RENDERERS[fmt](data), encoding="utf-8")
    out.print(f"{fmt} report of run {data.run.run_id}: {path}", highlight=False)
