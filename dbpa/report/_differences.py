"""What differs between two runs' stored configs, setting by setting, in words
(``dbpa compare``): the models, k, the seed, the correction... so that a reader of a
comparison knows what changed besides the outputs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ConfigDifference", "config_differences"]


@dataclass(frozen=True)
class ConfigDifference:
    """One setting that differs between run a's config and run b's."""

    setting: str
    """As a reader names it (``k``, ``seed``, ``correction``, ``model(s)``...)."""
    a: str
    """Its value in run a, in words (``none`` when unset)."""
    b: str


_IDLE = ("api_key_env", "max_concurrency", "timeout_s", "max_retries", "batch_size")
"""Keys of a model or embedder that change how it is called, never what it answers."""
NOT_COMPARED = ("description",)
"""Top-level keys that say nothing about the results."""


def _compact(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(", ", ": "))


def _endpoint(spec: Mapping[str, Any]) -> str:
    """A model or embedder as what answers: its string, its settings, its server."""
    text = str(spec.get("model"))
    named = (*_IDLE, "backend", "model", "name", "api_base")
    settings = {k: v for k, v in spec.items() if k not in named}
    settings = {k: v for k, v in settings.items() if v not in (None, {}, [])}
    if settings:
        text += f" {_compact(settings)}"
    if spec.get("api_base"):
        text += f" at {spec['api_base']}"
    return text


def _models(config: Mapping[str, Any]) -> str:
    found = []
    for m in config.get("models") or ():
        name = m.get("name")
        found.append(f"{name}: {_endpoint(m)}" if name and name != m.get("model") else _endpoint(m))
    return "; ".join(found) or "none"


def _embedder(config: Mapping[str, Any]) -> str:
    spec = config.get("embedder") or {}
    backend = spec.get("backend", "?")
    return f"{backend}/{_endpoint(spec)}" if spec else "none"


def _omega(config: Mapping[str, Any]) -> str:
    options = config.get("omega_options") or {}
    return f"{config.get('omega')} {_compact(options)}" if options else str(config.get("omega"))


def _prompt(config: Mapping[str, Any]) -> str:
    messages = config.get("prompt") or ()
    text = " / ".join(f"{m.get('role')}: {m.get('content')}" for m in messages)
    return text if len(text) <= 120 else text[:119] + "…"


def _perturbations(config: Mapping[str, Any]) -> str:
    specs = config.get("perturbations") or ()
    kinds = ", ".join(str(s.get("kind")) for s in specs)
    return f"{len(specs)} spec(s): {kinds}" if specs else "none"


def _key(name: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda config: _compact(config.get(name))


SETTINGS: tuple[tuple[str, tuple[str, ...], Callable[[Mapping[str, Any]], str]], ...] = (
    ("model(s)", ("models",), _models),
    ("epoch", ("epoch",), _key("epoch")),
    ("k", ("k",), _key("k")),
    ("seed", ("seed",), _key("seed")),
    ("correction", ("correction",), _key("correction")),
    ("alpha", ("alpha",), _key("alpha")),
    ("omega", ("omega", "omega_options"), _omega),
    ("similarity", ("similarity",), _key("similarity")),
    ("B (permutations)", ("n_permutations",), _key("n_permutations")),
    ("embedder", ("embedder",), _embedder),
    ("equivalence", ("equivalence",), _key("equivalence")),
    ("sequential", ("sequential",), _key("sequential")),
    ("prompt", ("prompt",), _prompt),
    ("perturbations", ("perturbations",), _perturbations),
    ("audit", ("name",), _key("name")),
)
"""(setting, the config keys it covers, its value in words), in the order they are said."""


def _meaningful(value: Any) -> Any:
    """A config value without the keys that change how a model is called (``_IDLE``)."""
    if isinstance(value, Mapping):
        return {k: _meaningful(v) for k, v in value.items() if k not in _IDLE}
    if isinstance(value, list):
        return [_meaningful(v) for v in value]
    return value


def config_differences(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[ConfigDifference, ...]:
    """The settings in which two stored configs differ, in ``SETTINGS`` order, then any other
    key (by name). How a model is called (its concurrency, timeout, key) is no difference;
    a difference that the words do not show (a long prompt's end) says so."""
    found = []
    covered = {*NOT_COMPARED}
    for setting, keys, words in SETTINGS:
        covered.update(keys)
        if any(_meaningful(a.get(key)) != _meaningful(b.get(key)) for key in keys):
            said_a, said_b = words(a), words(b)
            if said_a == said_b:
                said_b += " (differs in what is not shown)"
            found.append(ConfigDifference(setting, said_a, said_b))
    for key in sorted((set(a) | set(b)) - covered):
        if a.get(key) != b.get(key):
            found.append(ConfigDifference(key, _compact(a.get(key)), _compact(b.get(key))))
    return tuple(found)
