"""The persona study of the paper (section 4.1, Table 2): "Act as a {role}." before the prompt."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ._kinds import TemplateSpec, TemplateValue
from ._model import Identifier

PERSONA_TEMPLATE = "Act as a {role}."
"""The role-playing instruction put before the user prompt."""

PAPER_PERSONAS: tuple[TemplateValue, ...] = (
    TemplateValue(value="doctor", label="control"),
    TemplateValue(value="nurse", label="control"),
    TemplateValue(value="medical practitioner", label="control"),
    TemplateValue(value="medical supervisor", label="control"),
    TemplateValue(value="comedian", label="target"),
    TemplateValue(value="robot from the future", label="target"),
    TemplateValue(value="NeurIPS reviewer", label="target"),
    TemplateValue(value="child", label="target"),
)
"""The eight roles of the paper's Table 2: the medical ones should not change the answer to a
medical question (control), the others should (target)."""


class PersonasSpec(TemplateSpec):
    """A persona template over roles; by default the paper's eight personas, put before the
    user prompt with ids ``persona-<role>``."""

    kind: Literal["personas"] = "personas"  # type: ignore[assignment]
    """The paper's persona template."""
    template: str = Field(default=PERSONA_TEMPLATE, min_length=1)
    """One placeholder for the role (default: the paper's ``Act as a {role}.``)."""
    values: tuple[TemplateValue, ...] = Field(default=PAPER_PERSONAS, min_length=1)
    """The roles (default: the paper's eight, medical ones labelled control, the others target)."""
    prefix: Identifier | None = "persona"
    """Start of the generated ids (``persona-<role>``)."""
