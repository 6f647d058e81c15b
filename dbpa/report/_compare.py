"""Two runs of the same family side by side: each perturbation's effect in both, their
difference with an interval, and the decisions that flipped (``dbpa compare``).

Runs are paired by model: by the models' names when both runs audited the same ones, or
the one model of each when each audited a single one (two models, or a model before and
after an update); within a model, perturbations pair by id. The effect is the energy
distance between the arms' outputs (``dbpa.stats.effect_interval``, stored with every
test); the difference's interval comes from both runs' stored bootstrap replicates
(``dbpa.stats.effect_difference``), exactly 0 when both runs used the same test.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from dbpa.stats import EffectDifference, effect_difference

from ._data import EffectBounds
from ._differences import ConfigDifference, config_differences
from ._gather import effect_bounds
from ._values import as_float, as_iso, as_json, as_str

__all__ = [
    "CompareReader",
    "ComparedRow",
    "ComparedRun",
    "Comparison",
    "compare_runs",
    "comparison_dict",
]

CONFIDENCE = 0.90
"""Two-sided level of the difference's interval (that of each run's own interval)."""


class CompareReader(Protocol):
    """What a comparison reads from the record (``storage.Store`` and ``RemoteRecord`` are)."""

    def run(self, run_id: str) -> dict[str, Any]: ...

    def results(self, run_id: str) -> pd.DataFrame: ...

    def interval_replicates(self, test_ids: list[str]) -> pd.DataFrame: ...


@dataclass(frozen=True)
class ComparedRun:
    """One of the two runs."""

    run_id: str
    audit: str
    status: str
    epoch: str
    started_at: str
    models: tuple[str, ...]


@dataclass(frozen=True)
class ComparedRow:
    """One perturbation of one model in both runs."""

    model_a: str
    model_b: str
    perturbation_id: str
    label: str | None
    effect_a: EffectBounds | None
    """The effect in run a (None: not tested there, or stored without an interval)."""
    effect_b: EffectBounds | None
    difference: EffectDifference | None
    """Run a's effect minus run b's, with its interval; None when either is missing."""
    decision_a: str
    decision_b: str
    p_a: float | None
    p_b: float | None

    @property
    def flipped(self) -> bool:
        """The decision differs between the runs (both runs decided it)."""
        undecided = {"not tested", "pending"}
        return (
            self.decision_a != self.decision_b
            and not {
                self.decision_a,
                self.decision_b,
            }
            & undecided
        )


@dataclass(frozen=True)
class Comparison:
    """Run a against run b."""

    run_a: ComparedRun
    run_b: ComparedRun
    pairing: str
    """How the models were paired, in words."""
    rows: tuple[ComparedRow, ...]
    only_a: tuple[tuple[str, str], ...]
    """(model, perturbation) of run a that run b has not."""
    only_b: tuple[tuple[str, str], ...]
    differences: tuple[ConfigDifference, ...] = ()
    """The settings in which the runs' stored configs differ (the models, k, the seed...)."""

    @property
    def flipped(self) -> tuple[ComparedRow, ...]:
        """The rows whose decision flipped."""
        return tuple(r for r in self.rows if r.flipped)


def compare_runs(reader: CompareReader, run_a: str, run_b: str) -> Comparison:
    """Compare two runs of a record (ids, or ``latest``); ``ValueError`` saying why two runs
    cannot be compared."""
    row_a, row_b = reader.run(run_a), reader.run(run_b)
    if row_a["run_id"] == row_b["run_id"]:
        raise ValueError(f"RUN_B: {row_b['run_id']} is RUN_A too; name two different runs")
    df_a, df_b = reader.results(row_a["run_id"]), reader.results(row_b["run_id"])
    pairs, pairing = _pair_models(df_a, df_b, row_a["run_id"], row_b["run_id"])
    keyed_a = {(str(r.family), str(r.perturbation_id)): r for r in df_a.itertuples()}
    keyed_b = {(str(r.family), str(r.perturbation_id)): r for r in df_b.itertuples()}
    matched = [
        (keyed_a[(ma, pid)], keyed_b[(mb, pid)])
        for ma, mb in pairs
        for (model, pid) in keyed_a
        if model == ma and (mb, pid) in keyed_b
    ]
    if not matched:
        raise ValueError(
            f"runs {row_a['run_id']} and {row_b['run_id']} have no perturbation in common "
            f"({pairing}); compare runs of the same family"
        )
    test_ids = sorted({str(r.test_id) for pair in matched for r in pair})
    replicates = _replicates(reader.interval_replicates(test_ids))
    seen_a = {(str(a.family), str(a.perturbation_id)) for a, _ in matched}
    seen_b = {(str(b.family), str(b.perturbation_id)) for _, b in matched}
    return Comparison(
        run_a=_run(row_a, df_a),
        run_b=_run(row_b, df_b),
        pairing=pairing,
        rows=tuple(
            _row(a, b, replicates, (row_a["status"] == "running", row_b["status"] == "running"))
            for a, b in matched
        ),
        only_a=tuple(key for key in keyed_a if key not in seen_a),
        only_b=tuple(key for key in keyed_b if key not in seen_b),
        differences=config_differences(as_json(row_a["config"]), as_json(row_b["config"])),
    )


def _pair_models(
    df_a: pd.DataFrame, df_b: pd.DataFrame, run_a: str, run_b: str
) -> tuple[list[tuple[str, str]], str]:
    models_a = list(dict.fromkeys(df_a.family.astype(str)))
    models_b = list(dict.fromkeys(df_b.family.astype(str)))
    if set(models_a) & set(models_b):
        common = [m for m in models_a if m in models_b]
        return [(m, m) for m in common], f"model{'s' if len(common) > 1 else ''} " + ", ".join(
            common
        )
    if len(models_a) == 1 and len(models_b) == 1:
        return [(models_a[0], models_b[0])], f"model {models_a[0]} against {models_b[0]}"
    raise ValueError(
        f"cannot pair the models of {run_a} ({', '.join(models_a) or 'none'}) with those of "
        f"{run_b} ({', '.join(models_b) or 'none'}): compare runs of the same models, or of "
        "one model each"
    )


def _replicates(frame: pd.DataFrame) -> dict[str, np.ndarray]:
    return {
        str(t): np.asarray(b, dtype=np.float64)
        for t, b in zip(frame.test_id, frame.bootstrap, strict=True)
    }


def _run(row: Mapping[str, Any], df: pd.DataFrame) -> ComparedRun:
    return ComparedRun(
        run_id=str(row["run_id"]),
        audit=str(row["audit"]),
        status=str(row["status"]),
        epoch=str(row["epoch"]),
        started_at=as_iso(row["started_at"]) or "",
        models=tuple(dict.fromkeys(df.family.astype(str))),
    )


def _decision(r: Any, running: bool) -> str:
    """As ``dbpa results`` says it: a perturbation a running run has not tested yet (no arm
    of it failed) is pending, as is a tested one not corrected yet."""
    if not bool(r.tested):
        failed = bool(getattr(r, "arm_failed", False))
        return "pending" if running and not failed else "not tested"
    if as_float(r.adjusted_p) is None:
        return "pending"
    stored = as_str(getattr(r, "decision", None))
    return stored or ("changed" if bool(r.reject) else "no change")


def _row(
    a: Any, b: Any, replicates: Mapping[str, np.ndarray], running: tuple[bool, bool]
) -> ComparedRow:
    effect_a, effect_b = (effect_bounds(r) if bool(r.tested) else None for r in (a, b))
    difference = None
    if effect_a is not None and effect_b is not None:
        if a.test_id == b.test_id:  # the same test: the same outputs, no difference
            difference = EffectDifference(0.0, 0.0, 0.0, CONFIDENCE, 0)
        elif str(a.test_id) in replicates and str(b.test_id) in replicates:
            difference = effect_difference(
                effect_a.estimate,
                replicates[str(a.test_id)],
                effect_b.estimate,
                replicates[str(b.test_id)],
                confidence=CONFIDENCE,
            )
    return ComparedRow(
        model_a=str(a.family),
        model_b=str(b.family),
        perturbation_id=str(a.perturbation_id),
        label=as_str(a.label) or as_str(b.label),
        effect_a=effect_a,
        effect_b=effect_b,
        difference=difference,
        decision_a=_decision(a, running[0]),
        decision_b=_decision(b, running[1]),
        p_a=as_float(a.p_value),
        p_b=as_float(b.p_value),
    )


def comparison_dict(c: Comparison) -> dict[str, Any]:
    """The comparison as plain data (``dbpa compare --format json``)."""

    def bounds(b: EffectBounds | None) -> dict[str, float] | None:
        return None if b is None else {"estimate": b.estimate, "low": b.low, "high": b.high}

    def run(r: ComparedRun) -> dict[str, Any]:
        return {
            "run_id": r.run_id,
            "audit": r.audit,
            "status": r.status,
            "epoch": r.epoch,
            "started_at": r.started_at,
            "models": list(r.models),
        }

    return {
        "format": "dbpa-compare",
        "format_version": 1,
        "run_a": run(c.run_a),
        "run_b": run(c.run_b),
        "pairing": c.pairing,
        "confidence": CONFIDENCE,
        "rows": [
            {
                "model_a": r.model_a,
                "model_b": r.model_b,
                "perturbation_id": r.perturbation_id,
                "label": r.label,
                "effect_a": bounds(r.effect_a),
                "effect_b": bounds(r.effect_b),
                "difference": None
                if r.difference is None
                else {
                    "estimate": r.difference.estimate,
                    "low": r.difference.low,
                    "high": r.difference.high,
                },
                "decision_a": r.decision_a,
                "decision_b": r.decision_b,
                "flipped": r.flipped,
                "p_value_a": r.p_a,
                "p_value_b": r.p_b,
            }
            for r in c.rows
        ],
        "flipped": [r.perturbation_id for r in c.flipped],
        "only_in_a": [{"model": m, "perturbation_id": p} for m, p in c.only_a],
        "only_in_b": [{"model": m, "perturbation_id": p} for m, p in c.only_b],
        "differences": [{"setting": d.setting, "a": d.a, "b": d.b} for d in c.differences],
    }
