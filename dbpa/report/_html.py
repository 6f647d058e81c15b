"""The report as one self-contained HTML file.

Every string from the record (model outputs, prompts, names, descriptions) goes
through Jinja2's autoescaping, and the page's Content-Security-Policy allows one script,
its own (``report.js``, inlined and allowed by its sha256 hash: the interactive
thresholds, sorting and filtering): it opens offline, loads nothing, and runs nothing else.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files

import jinja2
from markupsafe import Markup

from dbpa.analysis import AnalysisSpec
from dbpa.stats import CORRECTIONS

from ._chart import Chart
from ._compare import CONFIDENCE as COMPARE_CONFIDENCE
from ._compare import Comparison
from ._data import Alignment, ArmView, ReportData, Settings
from ._format import (
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
from ._prompt_sets import cell_text, heat_class
from ._roc import roc_figure
from ._svg import test_figure
from ._text import (
    MAX_NAMED,
    audited,
    equivalence_note,
    family_verdict,
    legend,
    perturbation_matrix,
)

__all__ = ["CONTENT_SECURITY_POLICY", "render_html"]


def _report_script() -> str:
    """The page's own script, checked to be inlinable as it is."""
    script = files("dbpa.report").joinpath("report.js").read_text(encoding="utf-8")
    for closing in ("</script", "<!--"):  # would end (or confuse) the inline script element
        if closing in script.lower():
            raise ValueError(f"report.js: must not contain {closing!r}")
    return script


_SCRIPT = _report_script()
_SCRIPT_HASH = base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode()

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
    f"script-src 'sha256-{_SCRIPT_HASH}'"
)
"""No requests, and no script but the report's own (by its hash): images only as data URIs,
styles only inline."""

_METHOD_TITLES = {
    "holm": "Holm",
    "bonferroni": "Bonferroni",
    "bh": "Benjamini-Hochberg",
    "by": "Benjamini-Yekutieli",
}


@dataclass(frozen=True)
class _Thresholds:
    """The interactive controls' initial state (the run's) and choices."""

    alpha: float
    method: str
    methods: tuple[tuple[str, str], ...]
    """(name in ``dbpa.stats.CORRECTIONS``, title) of every correction."""


def _thresholds(settings: Settings) -> _Thresholds:
    defaults = AnalysisSpec()
    return _Thresholds(
        alpha=settings.alpha if settings.alpha is not None else defaults.alpha,
        method=settings.correction or defaults.correction,
        methods=tuple((name, _METHOD_TITLES.get(name, name)) for name in CORRECTIONS),
    )


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("dbpa.report", "templates"),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
_ENV.filters.update(
    omega=fmt_omega,
    effect=fmt_effect,
    interval=fmt_interval,
    p=fmt_p,
    rate=fmt_rate,
    count=fmt_count,
    cost=fmt_cost,
    json=lambda value: json.dumps(value, sort_keys=True, ensure_ascii=False),
    when=fmt_time,
    shell=shlex.quote,
)
_ENV.globals.update(p_floor=p_floor)
_ENV.tests["moved_cell"] = lambda cell: cell is not None and cell.moved


@dataclass(frozen=True)
class _Figures:
    """The charts of one report."""

    roc: Chart | None
    tpr_by_fpr: Chart | None
    alignment: Mapping[str, Chart]
    """Reference family -> chart."""
    tests: Mapping[tuple[str, str], Chart]
    """(family, perturbation id) -> chart."""
    drift: Chart | None
    """Effect and p over the audit's ticks."""
    monitor: Chart | None
    """The drift monitor's evidence over the ticks."""


def _figures(data: ReportData) -> _Figures:
    references: dict[str, list[Alignment]] = {}
    for a in data.alignment:
        if a.row.tested:
            references.setdefault(a.reference, []).append(a)
    tpr_by_fpr = drift = monitor = None
    alignment: dict[str, Chart] = {}
    if data.best_models or references or data.drift or data.monitor:
        # Drawn on matplotlib, imported here: a report without these figures (most of them)
        # does not pay for its import, about a second.
        from ._drift import drift_figure
        from ._evidence import evidence_figure
        from ._figures import alignment_figure, tpr_by_fpr_figure

        tpr_by_fpr = tpr_by_fpr_figure(data.best_models) if data.best_models else None
        alignment = {ref: alignment_figure(rows_) for ref, rows_ in references.items()}
        drift = drift_figure(data.drift) if data.drift else None
        monitor = evidence_figure(data.monitor) if data.monitor else None
    return _Figures(
        roc=roc_figure(data.roc) if data.roc else None,
        tpr_by_fpr=tpr_by_fpr,
        alignment=alignment,
        tests={(v.family, v.perturbation_id): test_figure(v) for v in data.test_views},
        drift=drift,
        monitor=monitor,
    )


def _shown_arms(data: ReportData) -> tuple[ArmView, ...]:
    """Every arm; in a summarised report the originals and the arms of the top rows."""
    if not data.summarised:
        return data.arms
    wanted = {r.original_arm for r in data.rows}
    wanted |= {r.perturbed_arm for f in data.families for r in f.top}
    return tuple(a for a in data.arms if a.arm_id in wanted)


def render_html(data: ReportData) -> str:
    """The whole report, figures included, as one HTML document. A summarised run (see
    ``gather``) shows its top rows in full and every other one as a summary row."""
    rows = data.rows
    return _ENV.get_template("report.html.j2").render(
        data=data,
        run=data.run,
        settings=data.settings,
        figures=_figures(data),
        csp=CONTENT_SECURITY_POLICY,
        script=Markup(_SCRIPT),  # our own file, not data from the record
        thresholds=_thresholds(data.settings),
        legend=legend(data.settings),
        audited=audited(data),
        verdicts={f.name: family_verdict(f, data.settings) for f in data.families},
        notes={f.name: equivalence_note(f, data.settings) for f in data.families},
        matrix=perturbation_matrix(data.families),
        rows={(r.family, r.perturbation_id): r for r in rows},
        controls_changed=[r for f in data.families for r in f.controls_changed],
        untested=[r for r in rows if r.decision == "not tested"],
        named=MAX_NAMED,
        shown_arms=_shown_arms(data),
        samples_shown=max((len(a.outputs) for a in data.arms), default=0),
        anchors={(v.family, v.perturbation_id): f"fig-{i}" for i, v in enumerate(data.test_views)},
        provenance_rows=[r for f in data.families for r in f.top] if data.summarised else rows,
        config_json=json.dumps(data.run.config, indent=2, sort_keys=True, ensure_ascii=False),
        prompt_rows=list(zip(data.prompt_set.prompts, data.prompt_set.cells, strict=True))
        if data.prompt_set
        else [],
        heat=heat_class,
        heat_text=cell_text,
    )


def render_comparison_html(comparison: Comparison) -> str:
    """``dbpa compare``'s page: both runs, every perturbation in both, the flips."""
    return _ENV.get_template("compare.html.j2").render(
        c=comparison, csp=CONTENT_SECURITY_POLICY, confidence=COMPARE_CONFIDENCE
    )
