"""The concrete perturbation and the pieces every perturbation spec shares."""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, StringConstraints

from dbpa.specs import Message, ModelSpec, Spec

Label = Literal["control", "target"]
"""``control``: should not change the output distribution; ``target``: should."""

Identifier = Annotated[
    str,
    StringConstraints(pattern=r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?$"),
]
"""A slug-like id: letters, digits, ``.``, ``_`` and ``-``, at most 100 characters."""


@dataclass(frozen=True)
class Perturbation:
    """One perturbed arm of a family: what it is, and what changed against the original."""

    id: str
    """Stable across runs and machines (derived from the spec's content or given by the user);
    unique within the family."""
    kind: str
    """The ``kind`` of the spec it came from."""
    label: Label | None
    description: str
    """What changed, for people."""
    messages: tuple[Message, ...]
    """The chat messages of the perturbed arm (the original's where the prompt is unchanged)."""
    model: ModelSpec | None = None
    """Another model for the perturbed arm; None: the audited model."""
    params: dict[str, Any] = field(default_factory=dict)
    """Sampling parameters overriding the model's (e.g. ``{"temperature": 1.2}``)."""

    def arm_model(self, original: ModelSpec) -> ModelSpec:
        """The model and sampling parameters of the perturbed arm when ``original`` is audited."""
        model = self.model or original
        if not self.params:
            return model
        merged = {**model.params, **self.params}
        return ModelSpec.model_validate({**model.model_dump(), "params": merged})


class SpecBase(Spec):
    """Base of the perturbation specs and their items: attribute docstrings become descriptions."""

    model_config = ConfigDict(use_attribute_docstrings=True)


class Variant(SpecBase):
    """What every listed item of a spec may set."""

    id: Identifier | None = None
    """The perturbation's id, used as given (default: derived from the content)."""
    label: Label | None = None
    """Overrides the spec's ``label``."""
    description: str | None = None
    """Overrides the generated description."""


class FamilySpec(SpecBase):
    """A spec that expands into concrete perturbations of an original prompt."""

    prefix: Identifier | None = None
    """Start of the derived perturbation ids (default: depends on the kind)."""

    @abstractmethod
    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        """The concrete perturbations of ``original``; ValueError when they cannot apply."""
