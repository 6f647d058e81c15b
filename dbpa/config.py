"""The audit configuration: one YAML file validated into one ``AuditConfig``.

It is also the audit flow's parameter, so a deployment can override any field when a
run is triggered. Unknown keys and wrong types are errors that name the field.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    Field,
    GetJsonSchemaHandler,
    SerializerFunctionWrapHandler,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from dbpa._yaml import check_bounds, load_yaml
from dbpa.analysis import (
    AnalysisSpec,
    EquivalenceSpec,
    FamilyBudget,
    MonitorSpec,
    SequentialSpec,
    family_budget,
    monitor_notes,
)
from dbpa.llm import check_model_string
from dbpa.perturbations import (
    ModelSwapSpec,
    ParaphraseSpec,
    Perturbation,
    PerturbationSpec,
    base_prompt,
    expand,
    ungenerated,
)
from dbpa.prompts import (
    PromptDataset,
    PromptItem,
    SetFamily,
    drilldown_notes,
    expand_set,
    ids_filled,
    read_dataset,
)
from dbpa.specs import EmbedderSpec, Message, ModelSpec, Spec, content_hash

ANALYSIS_KEYS = tuple(AnalysisSpec.model_fields)
"""The top-level keys of a config file that are analysis settings (``omega``, ``alpha``, ...)."""

MAX_CONFIG_BYTES = 10_000_000
"""Largest config file read (10 MB); a real one is a few kilobytes."""
MAX_ERRORS_SHOWN = 20
"""Validation errors listed in a ``ConfigError``; the rest are counted."""


SET_KINDS_REFUSED = {
    "record": "renders its own prompt from a record",
    "cardiovascular": "renders its own prompt from a patient record",
}
"""The perturbation kinds a set of prompts refuses, and why."""


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
    """Free text shown in the reports."""
    models: list[ModelSpec] = Field(min_length=1)
    """The models under audit; every perturbation is tested for each (one family per model)."""
    prompt: list[Message] | None = None
    """The original prompt as chat messages (a string is one user message); optional when a
    ``record`` or ``cardiovascular`` perturbation renders it."""
    prompts: list[PromptItem] | None = None
    """A set of prompts instead of ``prompt``: a list (strings, message lists, or ``{id,
    prompt}``) or a dataset ``{path, template, id, sample, seed}`` (``dbpa.prompts``), read
    when the config is loaded. Every perturbation applies to every prompt; each is tested
    by one pooled test over the prompts, with a drill-down to the prompts that moved."""
    perturbations: list[PerturbationSpec] = Field(min_length=1)
    """The family of perturbations (every kind: docs/reference/perturbations.md)."""
    k: int = Field(default=20, ge=2, le=10_000)
    """Outputs sampled per arm."""
    embedder: EmbedderSpec = Field(default_factory=EmbedderSpec)
    """The embedding model (default: all-MiniLM-L6-v2, packaged, offline)."""
    seed: int = Field(default=0, ge=0)
    """Seeds the sampling requests and the permutations: the same seed gives the same results."""
    epoch: str = "0"
    """Part of every arm's identity: a new epoch samples fresh outputs (a scheduled run's tick)."""
    equivalence: EquivalenceSpec | None = None
    """A margin under which a perturbation is judged *equivalent* (``true`` for the defaults:
    calibrated on 3 replicate arms); without it every decision is changed or no change."""
    sequential: SequentialSpec | None = None
    """Sample in rounds and stop each test once its answer is clear (``true`` for the
    defaults); ``k`` is then the most outputs an arm gets."""
    monitor: MonitorSpec = Field(default_factory=MonitorSpec)
    """The drift monitor over the audit's ticks (left out of the dump at its defaults, so a
    config's fingerprint is what it was before the key existed)."""
    max_cost_usd: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Most a run may spend on sampling, in USD at litellm's prices (or a model's
    ``input_cost_per_token``/``output_cost_per_token``), counting what its arms' stored
    outputs cost and reserving each request's most before it is sent (docs/how-to/planning.md)."""

    @field_validator("equivalence", "sequential", mode="before")
    @classmethod
    def _on_off_shorthand(cls, value: Any) -> Any:
        """``true`` is the default settings, ``false`` none."""
        if value is True:
            return {}
        return None if value is False else value

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
        for optional in (
            "equivalence",
            "sequential",
            "prompts",
            "max_cost_usd",
        ):  # absent: dumped as before
            if data.get(optional, ...) is None:
                del data[optional]
        if self.monitor == MonitorSpec():  # absent when a dump's include/exclude left it out
            data.pop("monitor", None)
        if "prompts" in data:  # ``prompt`` is then the first prompt's, filled in
            del data["prompt"]
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

    @field_validator("prompts", mode="before")
    @classmethod
    def _prompt_dataset(cls, value: Any, info: ValidationInfo) -> Any:
        """A dataset mapping is read into its list of prompts (relative to ``base``, the
        config file's folder, in the validation context)."""
        if isinstance(value, Mapping) and "path" in value:
            spec = PromptDataset.model_validate(value)
            base = (info.context or {}).get("base")
            return read_dataset(spec, None if base is None else Path(base))
        if isinstance(value, list) and not value:
            raise ValueError("needs at least one prompt")
        return value

    @field_validator("prompts")
    @classmethod
    def _prompt_ids(cls, value: list[PromptItem] | None) -> list[PromptItem] | None:
        return None if value is None else ids_filled(value)

    @field_validator("models")
    @classmethod
    def _unique_model_names(cls, value: list[ModelSpec]) -> list[ModelSpec]:
        labels = [m.label for m in value]
        dupes = sorted({x for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"two models are named {dupes[0]!r}; give them distinct `name`s")
        return value

    @model_validator(mode="after")
    def _routable_models(self) -> AuditConfig:
        """Every model string litellm could route, as far as is known without litellm."""
        for where, model, api_base, local in self._model_strings():
            try:
                check_model_string(model, api_base, local=local)
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}") from None
        return self

    def _model_strings(self) -> Iterator[tuple[str, str, str | None, bool]]:
        """(field as written in the file, model string, api_base, whether local/ is allowed)."""
        for i, model in enumerate(self.models):
            yield f"models[{i}].model", model.model, model.api_base, True
        for i, spec in enumerate(self.perturbations):
            if isinstance(spec, ModelSwapSpec):
                for j, variant in enumerate(spec.models):
                    where = f"perturbations[{i}].models[{j}].model"
                    yield where, variant.model.model, variant.model.api_base, True
            if isinstance(spec, ParaphraseSpec):
                yield f"perturbations[{i}].model", spec.model.model, spec.model.api_base, True
        if self.embedder.backend == "litellm":
            yield "embedder.model", self.embedder.model, self.embedder.api_base, False

    @model_validator(mode="after")
    def _consistent(self) -> AuditConfig:
        if self.prompts is not None:
            self._set_consistent()
        rendered = base_prompt(self.perturbations)
        if self.prompt is None:
            if rendered is None:
                raise ValueError("prompt: missing; give the original prompt (or a record spec)")
            object.__setattr__(self, "prompt", [Message(role="user", content=rendered)])
        if not self.prompt:
            raise ValueError("prompt: needs at least one message")
        pending = self.ungenerated
        for i, spec in pending:
            for pid, messages in self.prompt_set:
                try:
                    spec.generation_messages(messages)
                except ValueError as exc:
                    of = "" if self.prompts is None else f" prompt {pid!r}:"
                    raise ValueError(f"perturbations[{i}] (paraphrase):{of} {exc}") from None
        labels = self._labels()
        calibrated_on_controls = self.equivalence and self.equivalence.margin == "controls"
        if calibrated_on_controls and "control" not in labels:
            raise ValueError(
                "equivalence.margin: controls calibrates the margin on the perturbations "
                "labelled control, and there is none; label some, or use replicates or a number"
            )
        if self.budget.error is not None:
            raise ValueError(self.budget.error)
        return self

    def _set_consistent(self) -> None:
        """A prompt set: no ``prompt`` beside it, kinds that apply to every prompt; ``prompt``
        becomes the first prompt's (what a view of one prompt shows)."""
        assert self.prompts is not None
        first = list(self.prompts[0].prompt)
        if self.prompt is not None and self.prompt != first:  # equal: validated before
            raise ValueError("prompt and prompts: give one of them (prompts: a set of prompts)")
        for i, spec in enumerate(self.perturbations):
            if spec.kind in SET_KINDS_REFUSED:
                raise ValueError(
                    f"perturbations[{i}] ({spec.kind}): {SET_KINDS_REFUSED[spec.kind]}; "
                    "it does not apply to a set of prompts"
                )
        object.__setattr__(self, "prompt", first)

    def _labels(self) -> list[str | None]:
        """The label of every perturbation of a family, paraphrases still to generate counted
        as asked (the filter may drop some, never add)."""
        pending = self.ungenerated
        if not pending:
            return [p.label for p in self.family]
        first = None if self.prompts is None else self.prompt_set[0][0]
        ready = expand(self.messages, self.perturbations, skip_ungenerated=True, prompt=first)
        return [p.label for p in ready] + [spec.label for _, spec in pending for _ in range(spec.n)]

    @cached_property
    def budget(self) -> FamilyBudget:
        """B and k against each model's family (the config is refused when nothing could
        ever be rejected); its ``notes`` say what they allow only in part."""
        sequential = self.sequential is not None
        m = len(self._labels())
        budget = family_budget(self.analysis, m, self.k, sequential=sequential)
        if budget.error is not None:
            return budget
        prompts = 1 if self.prompts is None else len(self.prompts)
        series = len(self.models) * (m + 1) * (prompts if self.monitor.pool == "arms" else 1)
        notes = monitor_notes(self.monitor, self.analysis.alpha, series, self.k, prompts)
        if self.prompts is not None:
            notes = (*drilldown_notes(self.analysis, m, prompts), *notes)
        return FamilyBudget(None, (*budget.notes, *notes))

    @cached_property
    def family(self) -> list[Perturbation]:
        """The perturbations, expanded from their specs (stable ids, in order); over a set
        of prompts one per perturbation of every prompt (``set_family``)."""
        if self.prompts is not None:
            return list(self.set_family.family)
        return expand(self.messages, self.perturbations)

    @cached_property
    def set_family(self) -> SetFamily:
        """The family expanded for every prompt of ``prompts`` (ValueError without them)."""
        return expand_set(self.prompt_set, self.perturbations)

    @property
    def prompt_set(self) -> list[tuple[str, tuple[Message, ...]]]:
        """(id, messages) of every prompt: ``prompts``, else the one ``prompt`` (id ``prompt``)."""
        if self.prompts is None:
            return [("prompt", self.messages)]
        return [(str(item.id), tuple(item.prompt)) for item in self.prompts]

    @property
    def ungenerated(self) -> list[tuple[int, ParaphraseSpec]]:
        """(position, spec) of the paraphrase specs whose texts are not generated yet; while
        there are any, ``family`` raises ValueError naming them."""
        return ungenerated(self.perturbations)

    def ready_part(self) -> AuditConfig:
        """This config without the specs still to generate: what can be planned, and
        sampled, while they are generated (not validated again: its family may be empty)."""
        pending = {i for i, _ in self.ungenerated}
        kept = [s for i, s in enumerate(self.perturbations) if i not in pending]
        return self.model_copy(update={"perturbations": kept})

    def with_generated(self, specs: dict[int, ParaphraseSpec]) -> AuditConfig:
        """This config with the specs at the given positions replaced (by their generated
        versions), validated again."""
        perturbations = [specs.get(i, spec) for i, spec in enumerate(self.perturbations)]
        return AuditConfig.model_validate({**self.model_dump(), "perturbations": perturbations})

    @property
    def messages(self) -> tuple[Message, ...]:
        """The original prompt's messages."""
        assert self.prompt is not None  # set by validation
        return tuple(self.prompt)

    def fingerprint(self) -> str:
        """Content hash of the whole configuration."""
        return content_hash(self.model_dump(mode="json"))


def load_config(path: str | Path, overrides: Mapping[str, Any] | None = None) -> AuditConfig:
    """Read and validate a YAML config; ``overrides`` set dotted keys (``embedder.model``,
    ``models.0.params.temperature``: a number addresses a list item).

    Raises ``ConfigError`` naming the file, the field and the reason, for any file: missing,
    a directory, unreadable, over ``MAX_CONFIG_BYTES``, not UTF-8, not YAML, nested or
    aliased beyond the bounds of ``dbpa._yaml``, or not a valid config.
    """
    file = Path(path)
    try:
        raw = load_yaml(_read_text(file))
    except ValueError as exc:
        raise ConfigError(f"{file}: {exc}") from None
    if not isinstance(raw, dict):
        found = "an empty file" if raw is None else f"a {_kind(raw)}"
        raise ConfigError(f"{file}: expected a mapping of settings at the top level, found {found}")
    for key, value in (overrides or {}).items():
        _set_dotted(raw, key, value)
    try:
        check_bounds(raw)  # the overrides' values too
    except ValueError as exc:
        raise ConfigError(f"{file}: {exc}") from None
    return parse_config(raw, source=str(file), base=file.parent)


def parse_overrides(pairs: Iterable[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs (``--set``) as overrides for :func:`load_config`; each value is
    read as YAML (numbers, booleans, lists), within the same bounds as a file, and takes the
    type of the key it sets: a key that holds text keeps the text as typed where YAML reads
    another type the key does not take (``epoch=2026-01-05T03:00:00+00:00``, ``epoch=1``,
    ``name=yes``) or cannot read it at all."""
    found: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set {pair!r}: expected KEY=VALUE (e.g. k=30)")
        takes = _key_types(key)
        try:
            value = load_yaml(text)
        except ValueError as exc:
            if str not in takes:
                raise ConfigError(f"--set {key}: {exc}") from None
            value = text
        found[key] = text if str in takes and not _takes(takes, value) else value
    return found


def _key_types(key: str) -> set[Any]:
    """The types a dotted key of a config holds (``str``, ``int``, ``type(None)``, ``list``,
    ``dict``...); empty when a key is not a field (a typo: validation names it) or holds
    anything (``models.0.params.temperature``), where its value is read as YAML alone."""
    reached = _reached(key.split("."))
    kinds = {kind for annotation in reached for kind in _alternatives(annotation)}
    if Any in kinds:
        return set()
    literals = {type(v) for kind in kinds if get_origin(kind) is Literal for v in get_args(kind)}
    return {
        get_origin(kind) or kind for kind in kinds if get_origin(kind) is not Literal
    } | literals


def _reached(path: Sequence[int | str]) -> list[Any]:
    """The annotations a path into a config reaches (a dotted key's parts, or a validation
    error's location): a model's fields (the analysis settings at the top level), a list's
    items, a mapping's values, and in a union tagged by ``kind`` the member of the kind
    named (pydantic puts the tag in an error's location)."""
    reached: list[Any] = [AuditConfig]
    for part in map(str, path):
        found: list[Any] = []
        for annotation in reached:
            for kind in _alternatives(annotation):
                if isinstance(kind, type) and issubclass(kind, BaseModel):
                    owner = AnalysisSpec if kind is AuditConfig and part in ANALYSIS_KEYS else kind
                    field = owner.model_fields.get(part)
                    tag = kind.model_fields.get("kind")
                    if field is not None:
                        found.append(field.annotation)
                    elif tag is not None and part in get_args(tag.annotation):
                        found.append(kind)
                elif get_origin(kind) is list and part.isdecimal():
                    found.append(get_args(kind)[0])
                elif get_origin(kind) is dict:
                    found.append(get_args(kind)[1])
        reached = found
    return reached


def _alternatives(annotation: Any) -> list[Any]:
    """The types of a union (``X | None``: ``X`` and ``NoneType``), Annotated's type unwrapped."""
    if get_origin(annotation) is Annotated:
        return _alternatives(get_args(annotation)[0])
    if get_origin(annotation) in (Union, UnionType):
        return [kind for arg in get_args(annotation) for kind in _alternatives(arg)]
    return [annotation]


def _takes(kinds: set[Any], value: Any) -> bool:
    """Whether a key holding ``kinds`` takes the YAML value ``value`` as it is (a number for
    a float or an int, a mapping for a settings model)."""
    if isinstance(value, bool):
        return bool in kinds
    if isinstance(value, int | float):
        return bool(kinds & {int, float})
    if isinstance(value, dict):
        return dict in kinds or any(isinstance(k, type) and issubclass(k, BaseModel) for k in kinds)
    return any(isinstance(k, type) and isinstance(value, k) for k in kinds)


def _read_text(file: Path) -> str:
    """The file's text; ValueError saying why it cannot be read as a config."""
    try:
        with file.open("rb") as stream:
            data = stream.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ValueError("no such file") from None
    except IsADirectoryError:
        raise ValueError("is a directory, not a config file") from None
    except PermissionError:
        raise ValueError("cannot be read (permission denied)") from None
    except OSError as exc:
        raise ValueError(f"cannot be read ({exc.strerror or exc})") from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ValueError(
            f"larger than {MAX_CONFIG_BYTES // 1_000_000} MB: not an audit config "
            "(one is a few kilobytes)"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - data.rfind(b"\n", 0, exc.start)
        raise ValueError(
            f"line {line}, column {column}: not UTF-8 text (byte 0x{data[exc.start]:02x}); "
            "a config is a YAML text file"
        ) from None


def parse_config(
    raw: Mapping[str, Any], source: str = "config", base: Path | None = None
) -> AuditConfig:
    """Validate a mapping into an ``AuditConfig``; errors are ``ConfigError`` (one line per
    error, the first ``MAX_ERRORS_SHOWN`` of them). A prompt dataset's relative path is
    read from ``base`` (the config file's folder; default: the working directory)."""
    try:
        context = None if base is None else {"base": str(base)}
        return AuditConfig.model_validate(raw, context=context)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        lines = [f"{source}: {_where(e['loc'])}{_reason(e)}" for e in errors[:MAX_ERRORS_SHOWN]]
        if len(errors) > MAX_ERRORS_SHOWN:
            lines.append(f"{source}: ... and {len(errors) - MAX_ERRORS_SHOWN} more errors")
        raise ConfigError("\n".join(lines)) from None


def _where(loc: tuple[int | str, ...]) -> str:
    """The field path as written in the file: the analysis settings are top-level keys there."""
    if loc[:1] == ("analysis",):
        loc = loc[1:]
    if loc[:1] == ("perturbations",) and len(loc) > 2 and isinstance(loc[1], int):
        loc = loc[:2] + loc[3:]  # the spec's kind, which pydantic puts in the path
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif not re.fullmatch(r"[a-z_]+\[.*\]|function-.*|tagged-union\[.*\]", str(part)):
            name = _shown_key(str(part))
            path += f".{name}" if path else name
    return f"{path}: " if path else ""


def _shown_key(key: str) -> str:
    """A key of the file as it appears in a message: on one line and at most 40 characters."""
    if key.isprintable() and len(key) <= 40:
        return key
    shown = repr(key)
    return shown if len(shown) <= 40 else f"{shown[:36]}...{shown[-1]}"


def _reason(error: Mapping[str, Any]) -> str:
    msg = str(error["msg"])
    if error["type"] == "extra_forbidden":
        *where, key = error["loc"]
        known = sorted(_keys_at(tuple(where)))
        close = difflib.get_close_matches(str(key), known, n=1, cutoff=0.75)
        return (
            f"unknown key (did you mean {close[0]}?)"
            if close
            else "unknown key (check its spelling)"
        )
    return msg.removeprefix("Value error, ")


def _keys_at(loc: tuple[int | str, ...]) -> set[str]:
    """The keys the file may hold at ``loc`` (a validation error's path to a mapping); none
    where the path does not lead to a settings mapping."""
    keys: set[str] = set()
    for annotation in _reached(loc):
        for kind in _alternatives(annotation):
            if kind is AuditConfig:  # the analysis settings are top-level keys in the file
                keys |= (set(kind.model_fields) - {"analysis"}) | set(ANALYSIS_KEYS)
            elif isinstance(kind, type) and issubclass(kind, BaseModel):
                keys |= {field.alias or name for name, field in kind.model_fields.items()}
    return keys


def _kind(value: Any) -> str:
    """What a YAML value is, in words."""
    if isinstance(value, list | tuple | set):
        return "list"
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    return "string" if isinstance(value, str) else type(value).__name__


def _set_dotted(raw: dict[str, Any], key: str, value: Any) -> None:
    """Set ``key``, dotted; a number addresses a list item (``models.0.params.temperature``).
    Missing mappings on the way are created; the lists and mappings on the way are copied,
    so an override never edits a value that YAML aliases share with another place."""
    parts = key.split(".")
    if not all(parts):
        raise ConfigError(f"override {key}: an empty name between dots")
    node: Any = raw
    for depth, part in enumerate(parts):
        slot = _slot(node, part, f"override {key}: {'.'.join(parts[:depth])}")
        if depth == len(parts) - 1:
            node[slot] = value
            return
        child = node[slot] if isinstance(slot, int) else node.get(slot)
        if child is None:
            child = {}
        elif isinstance(child, dict | list):
            child = copy.copy(child)
        node[slot] = child
        node = child


def _slot(node: Any, part: str, where: str) -> int | str:
    """The key of ``part`` in a mapping, or its index in a list; ``where`` starts an error."""
    if isinstance(node, dict):
        return part
    if not isinstance(node, list):
        raise ConfigError(f"{where} is a {_kind(node)}, not a mapping or a list")
    if not part.isdecimal():
        items = f"0 to {len(node) - 1}" if node else "it has none"
        raise ConfigError(f"{where} is a list; address its items by number ({items}), not {part!r}")
    if int(part) >= len(node):
        raise ConfigError(
            f"{where} has {len(node)} item(s), so no item {part} (items are numbered from 0)"
        )
    return int(part)
