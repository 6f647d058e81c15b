"""The report as JSON: every number as stored (full precision), for programs."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from typing import Any

from ._data import EquivalenceView, ReportData, TestRow
from ._prompt_sets import prompt_set_dict

__all__ = ["FORMAT_VERSION", "render_json", "report_dict"]

FORMAT_VERSION = 1
"""Bumped when a key changes meaning or disappears."""


def _jsonable(value: Any) -> Any:
    """Dataclasses, mappings and sequences as plain JSON values; NaN and infinities as null."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _jsonable(value.item())
    return value


def _row(row: TestRow) -> dict[str, Any]:
    return {
        **_jsonable(row),
        "stars": row.stars,
        "decision": row.decision,
        "settling": _jsonable(row.settling),
        "p_floor": row.p_floor,
        "changed_aspect": row.changed_aspect,
    }


def _margin(view: EquivalenceView | None) -> dict[str, Any] | None:
    """A family's equivalence margin and how it was set."""
    if view is None:
        return None
    return {
        "value": view.margin,
        "source": view.source,
        "quantile": view.quantile,
        "pairs": view.pairs,
        "multiple": view.multiple,
        "basis": view.basis,
    }


def report_dict(data: ReportData) -> dict[str, Any]:
    """The report as plain data (what ``render_json`` writes)."""
    run = _jsonable(data.run)
    config, versions = run.pop("config"), run.pop("versions")
    return {
        "format": "dbpa-report",
        "format_version": FORMAT_VERSION,
        "generator": data.generator,
        "run": run,
        "settings": _jsonable(data.settings),
        "sequential": None
        if data.sequential is None
        else {**_jsonable(data.sequential), "saved": data.sequential.saved},
        "summary": {
            "perturbations": len(data.rows),
            "tested": sum(f.tested for f in data.families),
            "changed": sum(f.changed for f in data.families),
            "equivalent": sum(f.equivalent for f in data.families),
            "controls_changed": [
                {"family": r.family, "perturbation_id": r.perturbation_id}
                for f in data.families
                for r in f.controls_changed
            ],
        },
        "families": [
            {
                "name": f.name,
                "tested": f.tested,
                "changed": f.changed,
                "equivalent": f.equivalent,
                "margin": _margin(f.margin),
                "results": [_row(r) for r in f.rows],
            }
            for f in data.families
        ],
        **({"prompt_set": prompt_set_dict(data.prompt_set)} if data.prompt_set else {}),
        "moved": [
            {
                "family": v.family,
                "perturbation_id": v.perturbation_id,
                "after": _jsonable(v.moved.after),
                "before": _jsonable(v.moved.before),
            }
            for v in data.test_views
            if v.moved is not None
        ],
        **(
            {"dropped_paraphrases": _jsonable(data.dropped_paraphrases)}
            if data.dropped_paraphrases
            else {}
        ),
        "roc": _jsonable(data.roc),
        "best_models": _jsonable(data.best_models),
        "alignment": [
            {
                "reference": a.reference,
                "model": a.model,
                "perturbation_id": a.row.perturbation_id,
                "omega": a.row.omega,
                "effect": a.row.effect,
                "p_value": a.row.p_value,
                "adjusted_p": a.row.adjusted_p,
                "decision": a.row.decision,
            }
            for a in data.alignment
        ],
        "usage": {"total": _jsonable(data.total_usage), "models": _jsonable(data.usage)},
        "drift": _jsonable(data.drift),
        "monitor": _jsonable(data.monitor),
        "arms": _jsonable(data.arms),
        "provenance": {"config": config, "versions": versions},
    }


def render_json(data: ReportData) -> str:
    """The report as an indented JSON document."""
    return json.dumps(report_dict(data), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
