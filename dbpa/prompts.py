"""A set of prompts: what an audit over many prompts asks (``prompts:`` in a config).

``prompts:`` is a list (each item a string, a list of chat messages, or a mapping with an
optional ``id`` and its ``prompt``) or a dataset, ``{path, template, id, sample, seed}``:
a JSONL, CSV or Parquet file read with pandas, each row rendered into a user prompt by
``template`` (``{column}`` placeholders), ``sample`` rows drawn with ``seed``. A dataset is
read when the config is loaded and stored as the list it gives, so a stored config holds
the prompts it audited. Every perturbation is expanded for every prompt
(:func:`expand_set`): one family of perturbations, each with one perturbed arm per prompt.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, model_validator

from dbpa.analysis import AnalysisSpec
from dbpa.perturbations import Identifier, Perturbation, PerturbationSpec, expand
from dbpa.specs import Message, Spec

ID_PATTERN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?")
"""What a prompt's id may be (as a perturbation's: it names the prompt in tables)."""
READERS = (".jsonl", ".json", ".csv", ".parquet")
"""File suffixes a prompt dataset may have."""


class PromptItem(Spec):
    """One prompt of a set: its messages and its id (default: its position, ``p1``, ...)."""

    id: Identifier | None = None
    """The prompt's id in tables and reports (default: ``p1``, ``p2``, ...)."""
    prompt: list[Message] = Field(min_length=1)
    """The prompt as chat messages (a string is one user message)."""

    @model_validator(mode="before")
    @classmethod
    def _shorthands(cls, data: Any) -> Any:
        """A bare string or message list is the prompt; a string prompt one user message."""
        if isinstance(data, str | list):
            data = {"prompt": data}
        if isinstance(data, Mapping) and isinstance(data.get("prompt"), str):
            if not data["prompt"].strip():
                raise ValueError("empty prompt")
            data = {**data, "prompt": [{"role": "user", "content": data["prompt"]}]}
        return data


class PromptDataset(Spec):
    """Prompts read from a file, one per row."""

    path: str = Field(min_length=1)
    """A .jsonl, .json (JSON lines), .csv or .parquet file; relative to the config's folder."""
    template: str = Field(min_length=1)
    """The user prompt, ``{column}`` placeholders filled from each row."""
    id: str | None = None
    """The column holding each prompt's id (default: ``row-N``, N its 1-based row)."""
    sample: int | None = Field(default=None, ge=1)
    """Draw this many rows (seeded, kept in file order); default: every row."""
    seed: int = Field(default=0, ge=0)


def ids_filled(items: Sequence[PromptItem]) -> list[PromptItem]:
    """The items with a position id (``p1``, ...) where they have none; ValueError naming
    two items that share an id."""
    filled = [
        item if item.id else item.model_copy(update={"id": f"p{i + 1}"})
        for i, item in enumerate(items)
    ]
    seen: dict[str, int] = {}
    for i, item in enumerate(filled):
        assert item.id is not None
        if item.id in seen:
            raise ValueError(f"[{i}]: id {item.id!r} is also the id of item [{seen[item.id]}]")
        seen[item.id] = i
    return filled


def read_dataset(spec: PromptDataset, base: Path | None = None) -> list[dict[str, Any]]:
    """The dataset's prompts as ``{"id", "prompt"}`` items; ValueError naming the file, and
    the row and column of the first bad value: an unreadable file, a column the template or
    ``id`` names that it lacks, an empty or duplicate id, a row whose prompt is empty."""
    file = Path(spec.path)
    if base is not None and not file.is_absolute():
        file = base / file
    try:
        fields = _template_fields(spec.template)
    except ValueError as exc:
        raise ValueError(f"{file}: {exc}") from None
    frame = _read(file)
    wanted = [*fields, *([spec.id] if spec.id else [])]
    for column in wanted:
        if column not in frame.columns:
            found = ", ".join(map(str, frame.columns)) or "none"
            raise ValueError(f"{file}: no column {column!r} (its columns: {found})")
    rows = list(range(len(frame)))
    if spec.sample is not None:
        if spec.sample > len(rows):
            raise ValueError(f"{file}: sample {spec.sample} asked, the file has {len(rows)} rows")
        import numpy as np

        drawn = np.random.default_rng(spec.seed).choice(len(rows), spec.sample, replace=False)
        rows = sorted(int(r) for r in drawn)
    items: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for row in rows:
        record = frame.iloc[row]
        where = f"{file}: row {row + 1}"
        values = {}
        for column in fields:
            text = _text(record[column])
            if not text.strip():
                raise ValueError(f"{where}, column {column!r}: empty (no text to ask)")
            values[column] = text
        prompt = spec.template.format_map(values)
        pid = f"row-{row + 1}"
        if spec.id:
            pid = _text(record[spec.id]).strip()
            if not pid:
                raise ValueError(f"{where}, column {spec.id!r}: empty id")
            if not ID_PATTERN.fullmatch(pid):
                raise ValueError(
                    f"{where}, column {spec.id!r}: id {pid!r} is not an id (letters, digits, "
                    "'.', '_', '-'; at most 100 characters)"
                )
            if pid in seen:
                raise ValueError(
                    f"{where}, column {spec.id!r}: id {pid!r} is also the id of row {seen[pid]}"
                )
        seen[pid] = row + 1
        items.append({"id": pid, "prompt": prompt})
    if not items:
        raise ValueError(f"{file}: no rows")
    return items


def _read(file: Path) -> Any:
    """The file as a pandas frame (text kept as text); ValueError saying why it cannot be."""
    import pandas as pd

    suffix = file.suffix.lower()
    if suffix not in READERS:
        raise ValueError(f"{file}: unknown file type {suffix!r}; use one of {', '.join(READERS)}")
    if not file.is_file():
        raise ValueError(f"{file}: no such file")
    try:
        if suffix == ".csv":
            return pd.read_csv(file, dtype=str, keep_default_na=False)
        if suffix == ".parquet":
            return pd.read_parquet(file)
        return pd.read_json(file, lines=True, dtype=False)
    except Exception as exc:  # pandas raises many types for a file it cannot parse
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{file}: cannot be read as {suffix[1:]} ({reason})") from None


def _template_fields(template: str) -> list[str]:
    """The ``{column}`` names of a template; ValueError for a positional or malformed one."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise ValueError(f"template {template!r}: {exc}") from None
    names = [name for _, name, _, _ in parsed if name is not None]
    if not names or any(not name for name in names):
        raise ValueError(f"template {template!r}: name a column in braces, e.g. {{question}}")
    return list(dict.fromkeys(names))


def _text(value: Any) -> str:
    """A cell as text: missing values are empty, whole floats lose their ``.0``."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def drilldown_notes(analysis: AnalysisSpec, m: int, prompts: int) -> tuple[str, ...]:
    """What B allows the drill-down over ``prompts`` prompts: a prompt's p-value from the
    pooled test is at least 1/(B+1), and Holm over a perturbation's prompts, at R alpha / m,
    calls a lone prompt moved at alpha / (m P) when one perturbation of ``m`` is selected."""
    threshold = analysis.alpha / (m * prompts)
    needed = math.ceil(1.0 / threshold - 1.0 - 1e-9)
    if prompts < 2 or analysis.n_permutations >= needed:
        return ()
    return (
        f"n_permutations: the drill-down tests each of {prompts} prompts at alpha R/(m P); at "
        f"B={analysis.n_permutations} a prompt's p-value 1/(B+1) calls a lone prompt moved "
        f"only when more perturbations change (one of {m} alone needs B >= {needed})",
    )


@dataclass(frozen=True)
class SetFamily:
    """A family expanded over a set of prompts."""

    family: tuple[Perturbation, ...]
    """One entry per perturbation (its id, kind, label; messages and description from the
    first prompt)."""
    per_prompt: tuple[tuple[Perturbation, ...], ...]
    """Per prompt, its perturbations in the order of ``family``."""


def expand_set(
    prompts: Sequence[tuple[str, tuple[Message, ...]]], specs: Sequence[PerturbationSpec]
) -> SetFamily:
    """Every spec expanded for every prompt. A perturbation is identified by its position:
    each prompt must expand into the same number of perturbations per spec; its id is the
    one every prompt gives it, else ``<kind>-<n>``. A paraphrase spec expands each prompt's
    own generated texts (the j-th kept paraphrase of each prompt is ``<prefix>-<j>``).
    ValueError naming the prompt."""
    expanded: list[list[Perturbation]] = []
    for pid, messages in prompts:
        try:
            expanded.append(expand(messages, specs, prompt=pid))
        except ValueError as exc:
            raise ValueError(f"prompt {pid!r}: {exc}") from None
    first = expanded[0]
    for (pid, _), found in zip(prompts, expanded, strict=True):
        if len(found) != len(first):
            raise ValueError(
                f"prompt {pid!r}: its perturbations are {len(found)}, the first prompt's "
                f"{len(first)}; every prompt needs the same perturbations"
            )
    family = []
    counts: dict[str, int] = {}
    for j, p in enumerate(first):
        ids = {found[j].id for found in expanded}
        kinds = {found[j].kind for found in expanded}
        if len(kinds) > 1:
            raise ValueError(f"perturbation {j}: kinds {sorted(kinds)} differ between prompts")
        counts[p.kind] = counts.get(p.kind, 0) + 1
        pid = p.id if len(ids) == 1 else f"{p.kind}-{counts[p.kind]}"
        description = p.description if len(ids) == 1 else f"{p.kind} variant {counts[p.kind]}"
        family.append(
            Perturbation(pid, p.kind, p.label, description, p.messages, p.model, p.params)
        )
    ids = [p.id for p in family]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate perturbation ids over the prompts: {ids}")
    per_prompt = tuple(
        tuple(
            Perturbation(f.id, p.kind, p.label, p.description, p.messages, p.model, p.params)
            for f, p in zip(family, found, strict=True)
        )
        for found in expanded
    )
    return SetFamily(tuple(family), per_prompt)
