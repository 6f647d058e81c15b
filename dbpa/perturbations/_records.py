"""Structured prompts: a record of named fields rendered by a template, edited one field at a time.

An edit sets one field to a new value and renders the template again, so the rest of the
prompt stays byte-identical; nothing in the rendered text is searched or replaced (a name
"Ann" is never touched inside "Annual").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field, StrictFloat, StrictInt, StrictStr, model_validator

from dbpa.specs import Message

from ._messages import user_prompt_index, with_content
from ._model import FamilySpec, Label, Perturbation, Variant
from ._templates import placeholders, render
from ._text import make_id

FieldValue = StrictStr | StrictInt | StrictFloat
"""A field value: text or a number (write yes/no as quoted text)."""


class RecordEdit(Variant):
    """One field of the record set to another value."""

    field: str
    """The field edited."""
    value: FieldValue
    """Its new value."""


def check_record(template: str, fields: Mapping[str, FieldValue]) -> None:
    """ValueError unless the template's placeholders are exactly the record's fields."""
    names = set(placeholders(template))
    missing = sorted(names - set(fields))
    unused = sorted(set(fields) - names)
    if missing:
        raise ValueError(f"template: placeholders {missing} are not fields of the record")
    if unused:
        raise ValueError(f"fields {unused} do not appear in the template")
    render(template, fields)


def record_perturbations(
    original: tuple[Message, ...],
    *,
    kind: str,
    template: str,
    fields: Mapping[str, FieldValue],
    edits: Sequence[RecordEdit],
    prefix: str,
    label: Label | None = None,
) -> list[Perturbation]:
    """One perturbation per edit of a record whose rendering is the original user prompt."""
    index = user_prompt_index(original)
    if original[index].content != render(template, fields):
        raise ValueError(
            "the original user prompt is not the rendered record: leave the original out "
            "and use base_prompt(...) as its user message, or make them equal"
        )
    perturbations = []
    for edit in edits:
        old = render(f"{{{edit.field}}}", fields)
        new = render(f"{{{edit.field}}}", {edit.field: edit.value})
        perturbations.append(
            Perturbation(
                id=edit.id or make_id(prefix, f"{edit.field} {edit.value}"),
                kind=kind,
                label=edit.label or label,
                description=edit.description or f"{edit.field}: {old} -> {new}",
                messages=with_content(
                    original, index, render(template, {**fields, edit.field: edit.value})
                ),
            )
        )
    return perturbations


class RecordSpec(FamilySpec):
    """A record of named fields rendered into the user prompt by a template, and edits that
    each change one field. The original user prompt is the rendered record."""

    kind: Literal["record"] = "record"
    """A structured prompt, edited one field at a time."""
    template: str = Field(min_length=1)
    """``str.format`` template whose placeholders are exactly the field names."""
    fields: dict[str, FieldValue] = Field(min_length=1)
    """The record's fields and their original values."""
    edits: tuple[RecordEdit, ...] = Field(min_length=1)
    """The edits, one perturbation each."""
    label: Label | None = None
    """Label of the edits that do not set their own."""

    @model_validator(mode="after")
    def _check_edits(self) -> RecordSpec:
        check_record(self.template, self.fields)
        for i, edit in enumerate(self.edits):
            if edit.field not in self.fields:
                raise ValueError(
                    f"edits[{i}]: no field {edit.field!r} (fields: {sorted(self.fields)})"
                )
            base = render(self.template, self.fields)
            if render(self.template, {**self.fields, edit.field: edit.value}) == base:
                raise ValueError(
                    f"edits[{i}]: {edit.field}={edit.value!r} does not change the prompt"
                )
        return self

    @property
    def base_prompt(self) -> str:
        """The rendered record: the original user prompt."""
        return render(self.template, self.fields)

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        return record_perturbations(
            original,
            kind=self.kind,
            template=self.template,
            fields=self.fields,
            edits=self.edits,
            prefix=self.prefix or "record",
            label=self.label,
        )
