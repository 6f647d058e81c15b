"""Read a run from the audit record into a ``ReportData`` (no model call, no Prefect)."""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from dbpa.drift import HistoryReader, MonitorHistoryReader, read_history, read_monitor
from dbpa.stats import ModelChoice, best_model, roc_curve, tpr_at_fpr

from ._arms import ArmReader, gather_arms, usage_by_model
from ._data import (
    ALLOWED_FPR,
    Alignment,
    DroppedParaphrase,
    EffectBounds,
    EquivalenceView,
    Family,
    ReportData,
    RocView,
    RunInfo,
    SequentialView,
    Settings,
    StopView,
    TestRow,
)
from ._prompt_sets import gather_prompt_set
from ._values import as_bool, as_float, as_int, as_iso, as_json, as_str
from ._views import Texts, VectorsReader, gather_test_views

__all__ = ["SUMMARISE_OVER", "TOP_CHANGES", "ReportReader", "gather", "most_changed"]


@runtime_checkable
class ReportReader(ArmReader, VectorsReader, HistoryReader, Protocol):
    """What a report reads from the record (``storage.Store`` is one): the run, its results,
    tests and failures, besides the arms, vectors and drift history the parts read."""

    @property
    def path(self) -> Path:
        """The database file."""
        ...

    @property
    def database_id(self) -> str:
        """The database's id, kept across openings."""
        ...

    def run(self, run_id: str) -> dict[str, Any]:
        """One run's row (``latest`` accepted); ``LookupError`` when absent."""
        ...

    def results(self, run_id: str) -> pd.DataFrame:
        """Per-perturbation results of a run, in family order."""
        ...

    def arm_failures(self, run_id: str) -> pd.DataFrame:
        """Arms that failed in a run, with the reason."""
        ...

    def tests(self, test_ids: Sequence[str], *, nulls: bool = True) -> pd.DataFrame:
        """Stored test rows, with their null distributions unless ``nulls`` is False."""
        ...


SUMMARISE_OVER = 200
"""A run of more perturbations than this gets a summarised report (see ``gather``)."""
TOP_CHANGES = 50
"""Rows of each family shown in full in a summarised report."""


def gather(
    store: ReportReader,
    run_id: str,
    *,
    samples_per_arm: int = 3,
    max_test_figures: int = 200,
    summarise_over: int = SUMMARISE_OVER,
    top: int = TOP_CHANGES,
) -> ReportData:
    """Everything the report of ``run_id`` (or ``latest``) shows, read through ``store``.

    ``samples_per_arm`` outputs of each arm are included; per-test figures are drawn
    for the first ``max_test_figures`` tested perturbations (the tables list all). A run
    of more than ``summarise_over`` perturbations is summarised: the ``top`` most changed
    perturbations of each family (smallest adjusted p, then smallest p, then largest
    effect) get figures (at most ``max_test_figures`` in all) and outputs, every other one
    a summary row. Raises ``storage.UnknownRunError`` when the run is not recorded.
    """
    for name, value in (
        ("samples_per_arm", samples_per_arm),
        ("max_test_figures", max_test_figures),
        ("summarise_over", summarise_over),
        ("top", top),
    ):
        if value < 0:
            raise ValueError(f"{name}: must be at least 0, got {value}")
    run_row = store.run(run_id)
    run = _run_info(run_row, store)
    settings = _settings(run.config)
    results = store.results(run.run_id)
    failures = {str(r.arm_id): str(r.reason) for r in store.arm_failures(run.run_id).itertuples()}
    tests = store.tests(sorted(set(results.test_id)), nulls=False).set_index("test_id", drop=False)
    families = _families(results, tests, failures, run)
    if len(results) > summarise_over:
        families = tuple(replace(f, top=most_changed(f.rows, top)) for f in families)
    arms = gather_arms(store, results, failures, samples_per_arm)
    usage, total = usage_by_model(arms)

    def has_test(r: TestRow) -> bool:
        return r.tested and r.test_id in tests.index

    tested = sum(has_test(r) for f in families for r in f.rows)
    drawn = [r for f in families for r in (f.top or f.rows) if has_test(r)][:max_test_figures]
    stored = store.tests(sorted({r.test_id for r in drawn})).set_index("test_id", drop=False)
    views = gather_test_views(store, drawn, stored, _texts(store, drawn, stored))
    return ReportData(
        run=run,
        settings=settings,
        families=families,
        roc=tuple(v for f in families if (v := _roc(f)) is not None),
        best_models=_best_models(families),
        alignment=_alignment(families, {a.arm_id: a.model for a in arms}),
        arms=arms,
        usage=usage,
        total_usage=total,
        test_views=views,
        figures_omitted=tested - len(views),
        generator=f"dbpa {_dbpa_version()}",
        drift=read_history(store, run.audit, run.epoch),
        monitor=read_monitor(store, run.audit) if isinstance(store, MonitorHistoryReader) else None,
        dropped_paraphrases=_dropped_paraphrases(run.config),
        sequential=_sequential(run_row, settings),
        prompt_set=gather_prompt_set(
            store,
            run.run_id,
            run.config,
            families,
            str(tests["embedder"].iloc[0]) if len(tests) else "",
            settings.k,
        ),
    )


def _sequential(row: Mapping[str, Any], settings: Settings) -> SequentialView | None:
    used, fixed = as_int(row.get("outputs_used")), as_int(row.get("outputs_fixed"))
    if used is None or fixed is None or settings.k is None:
        return None
    return SequentialView(outputs=used, fixed_outputs=fixed, k_max=settings.k)


def _stop(r: Any) -> StopView | None:
    reason = as_str(getattr(r, "stop_reason", None))
    if reason is None:
        return None
    return StopView(at=as_int(r.stopped_at), reason=reason)


def _dropped_paraphrases(config: Mapping[str, Any]) -> tuple[DroppedParaphrase, ...]:
    """The generated paraphrases the run's config marks dropped, in spec, prompt (of a set)
    and output order."""
    found = []
    for i, spec in enumerate(config.get("perturbations") or ()):
        if not (isinstance(spec, Mapping) and spec.get("kind") == "paraphrase"):
            continue
        per_prompt = spec.get("generated_per_prompt") or {None: spec.get("generated") or ()}
        found += [
            DroppedParaphrase(
                spec=i,
                number=int(p["index"]) + 1,
                text=str(p["text"]),
                reason=str(p["dropped"]),
                prompt=None if pid is None else str(pid),
            )
            for pid, paraphrases in per_prompt.items()
            for p in paraphrases
            if p.get("dropped") is not None
        ]
    return tuple(found)


def _texts(store: ReportReader, rows: Sequence[TestRow], tests: pd.DataFrame) -> Texts:
    """The first k output texts of the arms of ``rows`` (k: the largest the tests used)."""
    if not rows:
        return {}
    k = int(max(tests.k_a.max(), tests.k_b.max()))
    arm_ids = sorted({a for r in rows for a in (r.original_arm, r.perturbed_arm)})
    texts: dict[str, dict[int, str]] = {}
    for s in store.samples(arm_ids, first=k).itertuples():
        texts.setdefault(str(s.arm_id), {})[int(s.idx)] = str(s.text)
    return texts


def most_changed(rows: Iterable[TestRow], n: int) -> tuple[TestRow, ...]:
    """The ``n`` rows that changed most: smallest adjusted p (raw p where not corrected),
    then smallest p, then largest effect; untested rows last."""

    def rank(r: TestRow) -> tuple[float, float, float, int]:
        p = r.p_value if r.p_value is not None else math.inf
        adjusted = r.adjusted_p if r.adjusted_p is not None else p
        effect = -r.effect if r.effect is not None and not math.isnan(r.effect) else math.inf
        return (adjusted, p, effect, r.position)

    return tuple(heapq.nsmallest(n, rows, key=rank))


def _dbpa_version() -> str:
    """The installed dbpa's version."""
    try:
        return version("dbpa")
    except PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------------- run and settings


def _run_info(row: Mapping[str, Any], store: ReportReader) -> RunInfo:
    config = as_json(row["config"])
    return RunInfo(
        run_id=str(row["run_id"]),
        audit=str(row["audit"]),
        description=str(config.get("description") or ""),
        status=str(row["status"]),
        message=as_str(row["message"]),
        started_at=as_iso(row["started_at"]),
        finished_at=as_iso(row["finished_at"]),
        flow_run_id=as_str(row["flow_run_id"]),
        epoch=str(row["epoch"]),
        config_hash=str(row["config_hash"]),
        prompt=tuple(
            (str(m.get("role", "user")), str(m.get("content", "")))
            for m in config.get("prompt") or ()
            if isinstance(m, Mapping)
        ),
        config=config,
        versions={str(k): str(v) for k, v in as_json(row["versions"]).items()},
        database=str(store.path),
        database_id=store.database_id,
    )


def _settings(config: Mapping[str, Any]) -> Settings:
    embedder = config.get("embedder") or {}
    return Settings(
        k=as_int(config.get("k")),
        embedder=f"{embedder.get('backend', '?')}/{embedder.get('model', '?')}",
        similarity=str(config.get("similarity", "cosine")),
        omega=str(config.get("omega", "jsd")),
        omega_options=dict(config.get("omega_options") or {}),
        n_permutations=as_int(config.get("n_permutations")),
        alpha=as_float(config.get("alpha")),
        correction=as_str(config.get("correction")),
        seed=as_int(config.get("seed")),
    )


def _model_order(config: Mapping[str, Any]) -> list[str]:
    """Family names (model labels) in the order the config lists the models."""
    return [str(m.get("name") or m.get("model")) for m in config.get("models") or []]


# ---------------------------------------------------------------------- results


def _not_tested_reason(row: Any, failures: Mapping[str, str]) -> str:
    for arm, role in ((row.perturbed_arm, "perturbed"), (row.original_arm, "original")):
        if arm in failures:
            return f"the {role} arm could not be sampled: {failures[arm]}"
    return "no test result is stored (the run stopped before testing it)"


def _families(
    results: pd.DataFrame, tests: pd.DataFrame, failures: Mapping[str, str], run: RunInfo
) -> tuple[Family, ...]:
    rows: dict[str, list[TestRow]] = {}
    running = run.status == "running"
    with_margin = run.config.get("equivalence") is not None
    for r in results.itertuples():
        tested = bool(r.tested)
        failed = r.original_arm in failures or r.perturbed_arm in failures
        pending = not tested and running and not failed
        seed = as_int(tests.at[r.test_id, "seed"]) if r.test_id in tests.index else None
        stop = _stop(r)
        rows.setdefault(str(r.family), []).append(
            TestRow(
                family=str(r.family),
                position=int(r.position),
                perturbation_id=str(r.perturbation_id),
                kind=str(r.kind),
                label=as_str(r.label),
                description=str(r.description),
                tested=tested,
                omega=as_float(r.statistic),
                effect=as_float(r.effect),
                z=as_float(r.z),
                null_mean=as_float(r.null_mean),
                null_std=as_float(r.null_std),
                p_value=as_float(r.p_value) if tested else None,
                adjusted_p=as_float(r.adjusted_p) if tested else None,
                reject=as_bool(r.reject) if tested else None,
                evaluated=as_int(r.evaluated),
                exact=as_bool(r.exact),
                k_a=as_int(r.k_a),
                k_b=as_int(r.k_b),
                seed=seed,
                test_id=str(r.test_id),
                original_arm=str(r.original_arm),
                perturbed_arm=str(r.perturbed_arm),
                reason=None if tested or pending else _not_tested_reason(r, failures),
                pending=pending,
                early=_early(stop, with_margin) if tested and not failed else None,
                driver=as_str(r.driver),
                components=as_json(r.components),
                interval=effect_bounds(r) if tested else None,
                equivalence=_equivalence(r) if tested else None,
                stop=stop,
            )
        )
    rank = {name: i for i, name in enumerate(_model_order(run.config))}
    names = sorted(rows, key=lambda n: (rank.get(n, len(rank)), n))
    return tuple(Family(n, tuple(sorted(rows[n], key=lambda r: r.position))) for n in names)


def _early(stop: StopView | None, with_margin: bool) -> str | None:
    """The decision a sequential test's stop makes final before its family is corrected:
    ``changed`` (its p-value is below the family's lone threshold, which every correction
    rejects; not with a margin, where it may still be shown equivalent) or ``no change``
    (futile: p = 1)."""
    if stop is None:
        return None
    if stop.reason == "futile":
        return "no change"
    return "changed" if stop.reason == "changed" and not with_margin else None


def _labelled_p_values(family: Family) -> tuple[list[float], list[str]] | None:
    """Raw p-values and labels of the tested control and target perturbations."""
    controls, targets = family.labelled("control"), family.labelled("target")
    if not controls or not targets:
        return None
    rows = controls + targets
    p_values = [r.p_value for r in rows if r.p_value is not None]  # all of them: see labelled()
    return p_values, [str(r.label) for r in rows]


def _roc(family: Family) -> RocView | None:
    labelled = _labelled_p_values(family)
    if labelled is None:
        return None
    p, labels = labelled
    curve = roc_curve(p, labels)
    untested = sum(1 for r in family.rows if r.label and not r.tested)
    return RocView(
        family=family.name,
        fpr=tuple(float(x) for x in curve.fpr),
        tpr=tuple(float(x) for x in curve.tpr),
        auc=curve.auc,
        points=tuple(tpr_at_fpr(p, labels, a) for a in ALLOWED_FPR),
        n_control=curve.n_control,
        n_target=curve.n_target,
        n_untested=untested,
    )


def _best_models(families: Iterable[Family]) -> tuple[ModelChoice, ...]:
    labelled = {f.name: pl for f in families if (pl := _labelled_p_values(f)) is not None}
    if len(labelled) < 2:
        return ()
    return tuple(best_model(labelled, a) for a in ALLOWED_FPR)


def _alignment(families: Iterable[Family], arm_models: Mapping[str, str]) -> tuple[Alignment, ...]:
    found = []
    for f in families:
        swaps = [r for r in f.rows if r.kind == "model"]
        models = [arm_models.get(r.perturbed_arm, r.perturbation_id) for r in swaps]
        times = Counter(models)
        for r, model in zip(swaps, models, strict=True):
            name = model if times[model] == 1 else f"{model} ({r.perturbation_id})"
            found.append(Alignment(reference=f.name, model=name, row=r))
    return tuple(found)


def effect_bounds(r: Any) -> EffectBounds | None:
    """A result row's effect interval; None when none is stored."""
    estimate = as_float(getattr(r, "effect_estimate", None))
    if estimate is None:
        return None
    return EffectBounds(
        estimate=estimate,
        low=float(r.effect_low),
        high=float(r.effect_high),
        confidence=float(r.interval_confidence),
    )


def _equivalence(r: Any) -> EquivalenceView | None:
    decision = as_str(getattr(r, "decision", None))
    if decision is None:
        return None
    return EquivalenceView(
        decision=decision,
        p_value=float(r.equivalence_p),
        adjusted_p=float(r.adjusted_equivalence_p),
        margin=as_float(r.margin),
        source=str(r.margin_source),
        quantile=as_float(r.margin_quantile),
        pairs=as_int(r.margin_pairs),
        multiple=as_float(r.margin_multiple),
        alpha=as_float(r.alpha),
        prompts=as_int(getattr(r, "n_prompts", None)),
    )
