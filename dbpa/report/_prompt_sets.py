"""A run over a set of prompts in the report: the prompt x perturbation heatmap, the prompts
that moved most under each perturbation (with the answers that moved), as data, Markdown
and JSON (the HTML is in the template's ``prompt-set`` section)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import pandas as pd

from ._data import Family, PromptCell, PromptColumn, PromptMover, PromptSetView
from ._values import as_bool, as_float, as_str
from ._views import VectorsReader, moved_answers

MOVERS_SHOWN = 3
"""Prompts listed (with their answers that moved) per perturbation."""
HEAT_STEPS = (1.0, 2.0, 3.0, 5.0)
"""A heatmap cell's shade: its z against these steps (``h0`` below the first, ``h4`` above
the last; ``hn`` where the statistic never varies)."""


@runtime_checkable
class PromptSetReader(VectorsReader, Protocol):
    """What the prompt-set section reads: the run's prompts and their outputs' texts."""

    def prompt_results(self, run_id: str) -> pd.DataFrame: ...
    def samples(
        self, arm_ids: Sequence[str] | None = None, *, first: int | None = None
    ) -> pd.DataFrame: ...


def gather_prompt_set(
    store: Any,
    run_id: str,
    config: Mapping[str, Any],
    families: Sequence[Family],
    embedder: str,
    k: int | None,
) -> PromptSetView | None:
    """The heatmap and movers of a run over a set of prompts; None for a run of one prompt
    (or a record or reader without prompt sets)."""
    if not config.get("prompts") or not isinstance(store, PromptSetReader):
        return None
    frame = store.prompt_results(run_id)
    if frame.empty:
        return None
    prompts = tuple((str(p["id"]), _user_text(p.get("prompt") or ())) for p in config["prompts"])
    texts = dict(prompts)
    rows = {(r.family, r.perturbation_id): r for f in families for r in f.rows}
    cells: dict[tuple[str, str], dict[str, PromptCell]] = {}
    arms: dict[tuple[str, str, str], tuple[str, str]] = {}
    for r in frame.itertuples():
        key = (str(r.family), str(r.perturbation_id))
        cells.setdefault(key, {})[str(r.prompt_id)] = PromptCell(
            p_value=float(r.p_value),
            adjusted_p=as_float(r.adjusted_p),
            moved=bool(as_bool(r.moved)),
            z=as_float(r.z),
            estimate=as_float(r.effect_estimate),
            low=as_float(r.effect_low),
            high=as_float(r.effect_high),
        )
        arms[(*key, str(r.prompt_id))] = (str(r.original_arm), str(r.perturbed_arm))
    chosen = {key: _movers(of) for key, of in cells.items()}
    answers = _answers(store, arms, chosen, embedder, k)
    columns = tuple(
        PromptColumn(
            family=key[0],
            perturbation_id=key[1],
            label=rows[key].label if key in rows else None,
            decision=rows[key].decision if key in rows else "pending",
            moved=sum(c.moved for c in of.values()),
            movers=tuple(
                PromptMover(pid, texts.get(pid, ""), of[pid], answers.get((*key, pid)))
                for pid in chosen[key]
            ),
        )
        for key, of in cells.items()
    )
    within = as_str(frame.within.dropna().iloc[0]) if frame.within.notna().any() else None
    return PromptSetView(
        prompts=prompts,
        columns=columns,
        cells=tuple(
            tuple(cells[(c.family, c.perturbation_id)].get(pid) for c in columns)
            for pid, _ in prompts
        ),
        within=within,
    )


def _user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The last user message of a prompt (what differs between the prompts of a set)."""
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""


def _movers(cells: Mapping[str, PromptCell]) -> list[str]:
    """The prompts that moved most: moved first, then smallest p, then largest z."""

    def rank(pid: str) -> tuple[bool, float, float]:
        c = cells[pid]
        return (not c.moved, c.p_value, -(c.z if c.z is not None else -math.inf))

    return sorted(cells, key=rank)[:MOVERS_SHOWN]


def _answers(
    store: PromptSetReader,
    arms: Mapping[tuple[str, str, str], tuple[str, str]],
    chosen: Mapping[tuple[str, str], Sequence[str]],
    embedder: str,
    k: int | None,
) -> dict[tuple[str, str, str], Any]:
    """The answers that moved for every chosen prompt whose arms have vectors and texts."""
    if k is None:
        return {}
    wanted = {(*key, pid): arms[(*key, pid)] for key, pids in chosen.items() for pid in pids}
    arm_ids = sorted({a for pair in wanted.values() for a in pair})
    if not arm_ids:
        return {}
    vectors = store.arms_vectors(arm_ids, embedder, k)
    texts: dict[str, dict[int, str]] = {}
    for s in store.samples(arm_ids, first=k).itertuples():
        texts.setdefault(str(s.arm_id), {})[int(s.idx)] = str(s.text)
    found = {}
    for key, (a, b) in wanted.items():
        if a in vectors and b in vectors:
            ta, tb = texts.get(a, {}), texts.get(b, {})
            if all(i in ta for i in range(len(vectors[a]))) and all(
                i in tb for i in range(len(vectors[b]))
            ):
                found[key] = moved_answers(vectors[a], vectors[b], ta, tb)
    return found


def heat_class(cell: PromptCell | None) -> str:
    """The shade of a heatmap cell by its z (``hn``: no z)."""
    if cell is None or cell.z is None:
        return "hn"
    return f"h{sum(cell.z >= step for step in HEAT_STEPS)}"


def cell_text(cell: PromptCell | None) -> str:
    """A heatmap cell: its z (``-`` when not stored), starred when the prompt moved."""
    if cell is None:
        return "-"
    z = "·" if cell.z is None else f"{cell.z:+.1f}"
    return f"{z}*" if cell.moved else z


def prompt_set_markdown(view: PromptSetView | None) -> list[str]:
    """The heatmap as a table (z per prompt and perturbation; * moved) and the movers."""
    if view is None:
        return []
    header = ["prompt", *(f"{c.perturbation_id} ({c.family})" for c in view.columns)]
    rows = [
        [f"`{pid}`", *(cell_text(c) for c in cells)]
        for (pid, _), cells in zip(view.prompts, view.cells, strict=True)
    ]
    out = [
        "",
        "## Prompts x perturbations",
        "",
        f"{len(view.prompts)} prompts. Each cell: the prompt's standardised effect (z) in its "
        "perturbation's pooled test; * the drill-down called it moved "
        f"(within a selected perturbation, {view.within or 'holm'} at R alpha / m).",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]
    for c in view.columns:
        out += [
            "",
            f"### {c.perturbation_id} ({c.family}): {c.moved} of {len(view.prompts)} "
            f"prompts moved, {c.decision}",
            "",
        ]
        for m in c.movers:
            state = "moved" if m.cell.moved else "not moved"
            out.append(f"- `{m.prompt_id}` ({state}, p = {m.cell.p_value:.4f}): {m.prompt}")
            if m.moved_answers is not None:
                for e in m.moved_answers.after[:1]:
                    out.append(f"  - after: {e.text.strip()[:200]!r}")
                for e in m.moved_answers.before[:1]:
                    out.append(f"  - before: {e.text.strip()[:200]!r}")
    return out


def prompt_set_dict(view: PromptSetView | None) -> dict[str, Any] | None:
    """The heatmap and movers as plain data (``report_dict``'s ``prompt_set``)."""
    if view is None:
        return None

    def cell(c: PromptCell | None) -> dict[str, Any] | None:
        return None if c is None else {key: _finite(v) for key, v in vars(c).items()}

    return {
        "within": view.within,
        "prompts": [{"prompt_id": pid, "prompt": text} for pid, text in view.prompts],
        "perturbations": [
            {
                "family": c.family,
                "perturbation_id": c.perturbation_id,
                "label": c.label,
                "decision": c.decision,
                "prompts_moved": c.moved,
                "cells": [
                    {"prompt_id": pid, **(cell(cells[j]) or {})}
                    for (pid, _), cells in zip(view.prompts, view.cells, strict=True)
                ],
                "movers": [
                    {
                        "prompt_id": m.prompt_id,
                        "prompt": m.prompt,
                        **(cell(m.cell) or {}),
                        "after": []
                        if m.moved_answers is None
                        else [vars(e) for e in m.moved_answers.after],
                        "before": []
                        if m.moved_answers is None
                        else [vars(e) for e in m.moved_answers.before],
                    }
                    for m in c.movers
                ],
            }
            for j, c in enumerate(view.columns)
        ],
    }


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value
