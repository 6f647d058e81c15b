"""The audit configuration: one YAML file validated into one ``AuditConfig``.

It is also the audit flow's parameter, so a deployment can override any field when a
run is triggered. Unknown keys and wrong types are errors that name the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from dbpa.analysis import AnalysisSpec
from dbpa.perturbations import Perturbation, PerturbationSpec, base_prompt, expand
from dbpa.specs import EmbedderSpec, Message, ModelSpec, Spec, content_hash
from dbpa.stats import min_permutations

ANALYSIS_KEYS = tuple(AnalysisSpec.model_fields)
"""The top-level keys of a config file that are analysis settings (``omega``, ``alpha``, ...)."""


class ConfigError(ValueError):
    """A configuration file that cannot be used: says which file, which field and why."""


class AuditConfig(Spec):
    """Everything an audit needs; see ``examples/`` for complete files.

    The analysis settings (similarity, omega and its options, B, alpha, correction) are
    flat in the file and in ``model_dump()`` (``omega: jsd`` at the top level) and held
    here as one ``AnalysisSpec``: ``config.analysis.omega``.
    """

    analysis: AnalysisSpec = Field(default_factory=AnalysisSpec)
    """The analysis settings alone (what a test's id and a task's cache key depend on)."""
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=80)
    """Audit name: letters, digits, ``-``, ``_``, ``.``; it names runs, reports and deployments."""
    description: str = ""
    models: list[ModelSpec] = Field(min_length=1)
    """The models under audit; every perturbation is tested for each (one family per model)."""
    prompt: list[Message] | None = None
    """The original prompt as chat messages (a string is one user message); optional when a
    ``record`` or ``cardiovascular`` perturbation renders it."""
    perturbations: list[PerturbationSpec] = Field(min_length=1)
    """The family of perturbations (see the README for every kind)."""
    k: int = Field(default=20, ge=2, le=10_000)
    """Outputs sampled per arm."""
    embedder: EmbedderSpec = Field(default_factory=EmbedderSpec)
    seed: int = Field(default=0, ge=0)
    """Seeds the sampling requests and the permutations: the same seed gives the same results."""
    epoch: str = "0"
    """Part of every arm's identity: a new epoch samples fresh outputs (a scheduled run's tick)."""

    @model_validator(mode="before")
    @classmethod
    def _gather_analysis(cls, data: Any) -> Any:
        """The flat analysis keys of a mapping become its ``analysis``."""
        if not isinstance(data, Mapping):
            return data  # an AuditConfig already, or a wrong type that validation reports
        if "analysis" in data:
            raise ValueError("analysis: unknown key (check its spelling)")
        settings = {key: data[key] for key in ANALYSIS_KEYS if key in data}
        rest = {key: value for key, value in data.items() if key not in ANALYSIS_KEYS}
        return {"analysis": settings, **rest}

    @model_serializer(mode="wrap")
    def _flat_analysis(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The analysis settings dumped flat, first, as in the file."""
        data = handler(self)
        return {**data.pop("analysis"), **data}

    @classmethod
    def __get_pydantic_json_schema__(
        cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The schema of the file (and of a flow parameter): the analysis settings flat."""
        schema = handler(core_schema)
        target = handler.resolve_ref_schema(schema)
        properties = target.get("properties", {})
        if "analysis" in properties:
            analysis = handler.resolve_ref_schema(properties.pop("analysis"))
            target["properties"] = {**analysis["properties"], **properties}
        return schema

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_shorthand(cls, value: Any) -> Any:
        """A plain string is one user message."""
        if isinstance(value, str):
            return [{"role": "user", "content": value}]
        return value

    @field_validator("models")
    @classmethod
    def _unique_model_names(cls, value: list[ModelSpec]) -> list[ModelSpec]:
        labels = [m.label for m in value]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"two models are named {dupes[0]!r}; give them distinct `name`s")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> AuditConfig:
        rendered = base_prompt(self.perturbations)
        if self.prompt is None:
            if rendered is None:
                raise ValueError("prompt: missing; give the original prompt (or a record spec)")
            object.__setattr__(self, "prompt", [Message(role="user", content=rendered)])
        if not self.prompt:
            raise ValueError("prompt: needs at least one message")
        analysis = self.analysis
        m = len(self.family)
        needed = min_permutations(m, analysis.alpha, analysis.correction)
        if math.comb(2 * self.k, self.k) - 1 < needed:
            enough = next(k for k in range(self.k, 10_000) if math.comb(2 * k, k) - 1 >= needed)
            raise ValueError(
                f"k: with {self.k} outputs per arm there are only {math.comb(2 * self.k, self.k)} "
                f"distinct splits, so no p-value can pass {analysis.correction} over {m} tests at "
                f"alpha={analysis.alpha}; use k >= {enough}"
            )
        if analysis.n_permutations < needed:
            raise ValueError(
                f"n_permutations: {analysis.n_permutations} permutations cannot reject anything "
                f"in a family of {m} with {analysis.correction} at alpha={analysis.alpha} (the "
                f"smallest p-value is 1/(B+1)); use at least {needed}"
            )
        return self

    @cached_property
    def family(self) -> list[Perturbation]:
        """The perturbations, expanded from their specs (stable ids, in order)."""
        return expand(self.messages, self.perturbations)

    @property
    def messages(self) -> tuple[Message, ...]:
        """The original prompt's messages."""
        assert self.prompt is not None  # set by validation
        return tuple(self.prompt)

    def fingerprint(self) -> str:
        """Content hash of the whole configuration."""
        return content_hash(self.model_dump(mode="json"))


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> AuditConfig:
    """Read and validate a YAML config; ``overrides`` set dotted keys (``embedder.model``).

    Raises ``ConfigError`` naming the file, the field and the reason.
    """
    file = Path(path)
    try:
        raw = yaml.safe_load(file.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such file") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"{file}: {where}not valid YAML ({problem})") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{file}: expected a mapping of settings at the top level")
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value)
    return parse_config(raw, source=str(file))


def parse_config(raw: Mapping[str, Any], source: str = "config") -> AuditConfig:
    """Validate a mapping into an ``AuditConfig``; errors are ``ConfigError``."""
    try:
        return AuditConfig.model_validate(raw)
    except ValidationError as exc:
        lines = [f"{source}: {_where(e['loc'])}{_reason(e)}" for e in exc.errors()]
        raise ConfigError("\n".join(lines)) from None


def _where(loc: tuple[int | str, ...]) -> str:
    """The field path as written in the file: the analysis settings are top-level keys there."""
    if loc[:1] == ("analysis",):
        loc = loc[1:]
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not re.fullmatch(r"[a-z_]+\[.*\]|function-.*|tagged-union\[.*\]", str(part)):
            path += f".{part}" if path else str(part)
    return f"{path}: " if path else ""


def _reason(error: Mapping[str, Any]) -> str:
    msg = str(error["msg"])
    if error["type"] == "extra_forbidden":
        return "unknown key (check its spelling)"
    return msg.removeprefix("Value error, ")


def _set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    node = raw
    parts = key.split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {key}: {part} is not a mapping")
        node = child
    node[parts[-1]] = value
