"""Prompt and system perturbations: prompt variants, templates, system prompts, model and
sampling-parameter swaps."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from dbpa.specs import Message, ModelSpec

from ._messages import user_prompt_index, with_content, with_system
from ._model import FamilySpec, Label, Perturbation, Variant
from ._templates import placeholders, render
from ._text import make_id, shorten


def _bare_string_as(key: str, data: Any) -> Any:
    """Lets a list item be written as a bare string: ``"x"`` means ``{key: "x"}``."""
    return {key: data} if isinstance(data, str) else data


class TextVariant(Variant):
    """A text, with an optional id, label and description; a bare string is the text."""

    text: str = Field(min_length=1)
    """The text: a user prompt or a system message."""

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return _bare_string_as("text", data)


class PromptSpec(FamilySpec):
    """Explicit prompt variants: each replaces the user prompt (the last user message)."""

    kind: Literal["prompt"] = "prompt"
    """Replace the user prompt."""
    variants: tuple[TextVariant, ...] = Field(min_length=1)
    """The replacement user prompts, one perturbation each."""
    label: Label | None = None
    """Label of the variants that do not set their own."""

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        index = user_prompt_index(original)
        prefix = self.prefix or "prompt"
        return [
            Perturbation(
                id=v.id or make_id(prefix, v.text),
                kind=self.kind,
                label=v.label or self.label,
                description=v.description or f"user prompt replaced by {shorten(v.text)!r}",
                messages=with_content(original, index, v.text),
            )
            for v in self.variants
        ]


class TemplateValue(Variant):
    """One value of a template's placeholder; a bare string is the value."""

    value: str
    """The text put in the template's placeholder."""

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return _bare_string_as("value", data)


Placement = Literal["prefix", "suffix", "full"]


class TemplateSpec(FamilySpec):
    """A template expanded over a list of values and placed with the user prompt:
    ``prefix`` puts ``rendered + separator`` before it, ``suffix`` puts ``separator + rendered``
    after it, ``full`` replaces it by the rendered template, whose ``{prompt}`` placeholder
    receives the original user prompt."""

    kind: Literal["template"] = "template"
    """A template over values."""
    template: str = Field(min_length=1)
    """One named placeholder for the values (e.g. ``Act as a {role}.``), and ``{prompt}``
    with placement ``full``."""
    values: tuple[TemplateValue, ...] = Field(min_length=1)
    """The placeholder's values, one perturbation each."""
    placement: Placement = "prefix"
    """``prefix`` or ``suffix`` of the user prompt, or ``full``: the template replaces it."""
    separator: str = " "
    """Between the rendered template and the user prompt (prefix, suffix)."""
    label: Label | None = None
    """Label of the values that do not set their own."""

    @model_validator(mode="after")
    def _check_template(self) -> TemplateSpec:
        names = placeholders(self.template)
        has_prompt = "prompt" in names
        if self.placement == "full" and not has_prompt:
            raise ValueError("template: placement 'full' needs a {prompt} placeholder")
        if self.placement != "full" and has_prompt:
            raise ValueError(
                f"template: {{prompt}} is only filled with placement 'full', not {self.placement!r}"
            )
        others = [n for n in names if n != "prompt"]
        if len(others) != 1:
            raise ValueError(
                f"template: needs exactly one placeholder for the values besides {{prompt}}, "
                f"found {others or 'none'}"
            )
        for value in self.values:
            render(self.template, {others[0]: value.value, "prompt": ""})
        return self

    @property
    def variable(self) -> str:
        """The placeholder the values fill."""
        return next(n for n in placeholders(self.template) if n != "prompt")

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        index = user_prompt_index(original)
        prompt = original[index].content
        prefix = self.prefix or self.variable
        perturbations = []
        for v in self.values:
            rendered = render(self.template, {self.variable: v.value, "prompt": prompt})
            if self.placement == "prefix":
                content = f"{rendered}{self.separator}{prompt}"
                what = f"{rendered!r} put before the user prompt"
            elif self.placement == "suffix":
                content = f"{prompt}{self.separator}{rendered}"
                what = f"{rendered!r} put after the user prompt"
            else:
                content = rendered
                what = f"user prompt placed in the template with {self.variable}={v.value!r}"
            perturbations.append(
                Perturbation(
                    id=v.id or make_id(prefix, v.value),
                    kind=self.kind,
                    label=v.label or self.label,
                    description=v.description or what,
                    messages=with_content(original, index, content),
                )
            )
        return perturbations


class SystemPromptSpec(FamilySpec):
    """System-prompt variants: each becomes the system message, replacing the original's or,
    when it has none, added before the first message."""

    kind: Literal["system_prompt"] = "system_prompt"
    """Replace or add the system message."""
    variants: tuple[TextVariant, ...] = Field(min_length=1)
    """The system messages, one perturbation each."""
    label: Label | None = None
    """Label of the variants that do not set their own."""

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        prefix = self.prefix or "system"
        perturbations = []
        for v in self.variants:
            messages, replaced = with_system(original, v.text)
            verb = "replaced by" if replaced else "added:"
            perturbations.append(
                Perturbation(
                    id=v.id or make_id(prefix, v.text),
                    kind=self.kind,
                    label=v.label or self.label,
                    description=v.description or f"system message {verb} {shorten(v.text)!r}",
                    messages=messages,
                )
            )
        return perturbations


class ModelVariant(Variant):
    """Another model for the perturbed arm. Written flat: the model spec's keys next to the
    optional ``id``, ``label`` and ``description`` (or a bare model string). Its ``params``
    are its own, not merged with the audited model's."""

    model: ModelSpec
    """The model of the perturbed arm (its keys written flat beside ``id``, ``label``)."""

    @model_validator(mode="before")
    @classmethod
    def _from_flat(cls, data: Any) -> Any:
        if isinstance(data, str):
            return {"model": {"model": data}}
        if isinstance(data, dict) and not isinstance(data.get("model"), dict | ModelSpec):
            own = {k: data[k] for k in ("id", "label", "description") if k in data}
            rest = {k: v for k, v in data.items() if k not in own}
            return {**own, "model": rest}
        return data


class ModelSwapSpec(FamilySpec):
    """Model swaps: the same messages sent to another model (alignment with a reference)."""

    kind: Literal["model"] = "model"
    """The same messages to another model."""
    models: tuple[ModelVariant, ...] = Field(min_length=1)
    """The other models, one perturbation each."""
    label: Label | None = None
    """Label of the models that do not set their own."""

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        prefix = self.prefix or "model"
        perturbations = []
        for v in self.models:
            spec = v.model
            detail = None
            if spec.name is None and (spec.api_base is not None or spec.params):
                detail = json.dumps([spec.api_base, spec.params], sort_keys=True, default=str)
            perturbations.append(
                Perturbation(
                    # A display name is the readable id; without one, the model string and
                    # a hash of what else distinguishes the endpoint.
                    id=v.id or make_id(prefix, spec.name or spec.model, detail=detail),
                    kind=self.kind,
                    label=v.label or self.label,
                    description=v.description or f"model {spec.label} instead of the audited one",
                    messages=original,
                    model=spec,
                )
            )
        return perturbations


class SamplingVariant(Variant):
    """Sampling parameters overriding the audited model's, e.g. ``{temperature: 1.2}``."""

    params: dict[str, Any] = Field(min_length=1)
    """Sampling parameters merged over the audited model's (e.g. ``{temperature: 1.2}``)."""

    @field_validator("params")
    @classmethod
    def _accepted_by_model_specs(cls, params: dict[str, Any]) -> dict[str, Any]:
        # One source of truth for the names a model spec reserves (model, n, stream, ...).
        ModelSpec.model_validate({"model": "-", "params": params})
        return params


def _plain_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


class SamplingSpec(FamilySpec):
    """Sampling-parameter swaps: the same model and messages with other parameters."""

    kind: Literal["sampling"] = "sampling"
    """Other sampling parameters for the audited model."""
    variants: tuple[SamplingVariant, ...] = Field(min_length=1)
    """The parameter sets, one perturbation each."""
    label: Label | None = None
    """Label of the variants that do not set their own."""

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        prefix = self.prefix or "sampling"
        perturbations = []
        for v in self.variants:
            pairs = sorted(v.params.items())
            readable = " ".join(f"{k} {value}" for k, value in pairs)
            # Names and non-negative numbers survive the slug; anything else gets a digest.
            lossless = all(k.isidentifier() and _plain_number(value) for k, value in pairs)
            detail = None if lossless else json.dumps(pairs, default=str)
            perturbations.append(
                Perturbation(
                    id=v.id or make_id(prefix, readable, detail=detail),
                    kind=self.kind,
                    label=v.label or self.label,
                    description=v.description
                    or ", ".join(f"{k} = {value!r}" for k, value in pairs),
                    messages=original,
                    params=dict(v.params),
                )
            )
        return perturbations
