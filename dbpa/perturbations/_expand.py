"""Perturbation specs as one discriminated union, and their expansion into a family."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from dbpa.specs import Message

from ._cardiovascular import CardiovascularSpec
from ._kinds import ModelSwapSpec, PromptSpec, SamplingSpec, SystemPromptSpec, TemplateSpec
from ._model import Perturbation
from ._noise import NoiseSpec
from ._paraphrase import ParaphraseSpec
from ._personas import PersonasSpec
from ._records import RecordSpec
from ._swap import SwapSpec

PerturbationSpec = Annotated[
    PromptSpec
    | TemplateSpec
    | PersonasSpec
    | SystemPromptSpec
    | ModelSwapSpec
    | SamplingSpec
    | RecordSpec
    | CardiovascularSpec
    | NoiseSpec
    | SwapSpec
    | ParaphraseSpec,
    Field(discriminator="kind"),
]
"""One entry of an audit's ``perturbations`` list, chosen by its ``kind``."""

_SPECS = TypeAdapter(list[PerturbationSpec])
_MESSAGES = TypeAdapter(tuple[Message, ...])


def parse_specs(data: Any) -> list[PerturbationSpec]:
    """Perturbation specs from plain data (a list of mappings, e.g. loaded from YAML)."""
    return _SPECS.validate_python(data)


def base_prompt(specs: Sequence[PerturbationSpec]) -> str | None:
    """The user prompt the record specs (``record``, ``cardiovascular``) render for the
    original, or None when there are none; ValueError when they render different prompts."""
    prompts = {
        i: spec.base_prompt
        for i, spec in enumerate(specs)
        if isinstance(spec, RecordSpec | CardiovascularSpec)
    }
    if len(set(prompts.values())) > 1:
        raise ValueError(
            f"perturbations {sorted(prompts)} render different original prompts: "
            "a family has one original"
        )
    return next(iter(prompts.values()), None)


def ungenerated(specs: Sequence[PerturbationSpec]) -> list[tuple[int, ParaphraseSpec]]:
    """(position, spec) of the specs whose perturbations a model must generate first."""
    return [
        (i, spec)
        for i, spec in enumerate(specs)
        if isinstance(spec, ParaphraseSpec) and not spec.is_generated
    ]


def expand(
    original: Sequence[Message],
    specs: Sequence[PerturbationSpec],
    *,
    skip_ungenerated: bool = False,
    prompt: str | None = None,
) -> list[Perturbation]:
    """The concrete perturbations of ``original``, spec by spec in order; ``prompt``: the id
    of ``original`` in a set of prompts (a paraphrase spec expands that prompt's texts).

    ValueError, naming the spec (``perturbations[i] (kind)``) or the ids, when a spec does
    not apply to ``original``, a perturbation changes nothing, or two share an id; and for a
    spec not generated yet (see :func:`ungenerated`) unless ``skip_ungenerated``.
    """
    pending = {i for i, _ in ungenerated(specs)} if skip_ungenerated else set()
    original = _MESSAGES.validate_python(original)
    family: list[Perturbation] = []
    origin: dict[str, list[int]] = {}
    for i, spec in enumerate(specs):
        if i in pending:
            continue
        try:
            if prompt is not None and isinstance(spec, ParaphraseSpec):
                perturbations = spec.expand_prompt(original, prompt)
            else:
                perturbations = spec.expand(original)
        except ValueError as error:
            raise ValueError(f"perturbations[{i}] ({spec.kind}): {error}") from None
        for p in perturbations:
            if p.messages == original and p.model is None and not p.params:
                raise ValueError(
                    f"perturbations[{i}] ({spec.kind}): {p.id!r} changes nothing "
                    f"against the original"
                )
            origin.setdefault(p.id, []).append(i)
        family.extend(perturbations)
    duplicates = {pid: where for pid, where in origin.items() if len(where) > 1}
    if duplicates:
        listed = "; ".join(
            f"{pid!r} from perturbations{where}" for pid, where in sorted(duplicates.items())
        )
        raise ValueError(
            f"duplicate perturbation ids: {listed}; give the items their own `id` "
            f"(or the specs a different `prefix`)"
        )
    return family
