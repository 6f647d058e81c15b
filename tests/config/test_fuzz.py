"""A few hundred malformed configs through ``dbpa validate``: exit 2 (or 0 when a mutation
happens to stay valid) and never a traceback.

The configs come from a seeded generator (the same ones on every run): random YAML
structures, a wrong type at every known field, and mutations of the examples (keys dropped,
values swapped for another type, random unicode, truncation, flipped bytes).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbpa.config import AuditConfig
from dbpa.specs import EmbedderSpec, ModelSpec

from .conftest import BASE, EXAMPLES, Validate

SEED = 20_261_123
CASES_PER_KIND = 45


def _unicode(rng: random.Random, length: int) -> str:
    """Letters, YAML and Markdown punctuation, controls, emoji, lone surrogates."""
    pools = [
        "abcxyz019 _-./",
        ":{}[],&*#?|>!%@`'\"\\\n\t",
        "".join(map(chr, range(0x00, 0x20))) + "\x7f\x85\u2028\ufeff",
        "éßж漢字🙂\u200b\u0301",
        "\ud800\udfff",
    ]
    return "".join(rng.choice(rng.choice(pools)) for _ in range(length))


def _value(rng: random.Random, depth: int = 0) -> Any:
    """A random YAML-able value."""
    kinds = ["int", "float", "str", "bool", "none", "big", "unicode"]
    if depth < 4:
        kinds += ["list", "dict"]
    kind = rng.choice(kinds)
    if kind == "int":
        return rng.choice([0, -1, 1, 2, 10**30, -(10**6)])
    if kind == "float":
        return rng.choice([0.5, -0.0, 1e308, float("inf"), float("nan")])
    if kind == "str":
        return rng.choice(["", "x", "jsd", "holm", "openai/gpt-4o-mini", "local/", "control"])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "none":
        return None
    if kind == "big":
        return "y" * rng.choice([1_000, 100_000])
    if kind == "unicode":
        return _unicode(rng, rng.randint(0, 12))
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    keys = ["name", "model", "kind", "k", "values", _unicode(rng, 4)]
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randint(0, 4))}


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path into a parsed config."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield (*prefix, key)
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield (*prefix, i)
            yield from _paths(value, (*prefix, i))


def _at(node: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        node = node[part]
    return node


def _sources() -> list[tuple[str, dict[str, Any]]]:
    examples = [(p.stem, yaml.safe_load(p.read_text())) for p in EXAMPLES]
    return [("base", copy.deepcopy(BASE)), *examples]


def _wrong_types(rng: random.Random) -> Iterator[tuple[str, Any]]:
    """Each known field of the config, a model and the embedder set to a wrong-typed value."""
    wrong: list[Any] = [[], {}, "text", -3, 2.5, True, None, [[1, 2]], {"a": {"b": 1}}]
    for field in AuditConfig.model_fields.keys() - {"analysis"} | set(BASE) | {"omega"}:
        for value in rng.sample(wrong, 3):
            yield f"top {field}={value!r}", BASE | {field: value}
    for field in ModelSpec.model_fields:
        value = rng.choice(wrong)
        yield f"model {field}={value!r}", BASE | {"models": [{"model": "openai/x", field: value}]}
    for field in EmbedderSpec.model_fields:
        value = rng.choice(wrong)
        yield f"embedder {field}={value!r}", BASE | {"embedder": {field: value}}


def _mutated(rng: random.Random, name: str, raw: dict[str, Any]) -> tuple[str, Any]:
    raw = copy.deepcopy(raw)
    paths = list(_paths(raw))
    path = rng.choice(paths)
    parent, key = _at(raw, path[:-1]), path[-1]
    how = rng.choice(["drop", "swap", "unicode", "unknown-key"])
    if how == "drop":
        del parent[key]
    elif how == "swap":
        parent[key] = _value(rng)
    elif how == "unicode":
        parent[key] = _unicode(rng, rng.randint(1, 30))
    elif isinstance(parent, dict):
        parent[_unicode(rng, 6)] = _value(rng)
    return f"{name}: {how} {path}", raw


def _text_mutated(rng: random.Random, example: Path) -> tuple[str, bytes]:
    data = example.read_bytes()
    how = rng.choice(["truncate", "flip", "insert"])
    at = rng.randrange(len(data))
    if how == "truncate":
        return f"{example.stem}: truncated at {at}", data[:at]
    if how == "flip":
        return f"{example.stem}: byte {at} flipped", data[:at] + bytes([data[at] ^ 0xFF]) + data[
            at + 1 :
        ]
    noise = _unicode(rng, rng.randint(1, 8)).encode("utf-8", "surrogatepass")
    return f"{example.stem}: noise at {at}", data[:at] + noise + data[at:]


def _dumped(value: Any) -> bytes:
    text = yaml.safe_dump(value, allow_unicode=True, sort_keys=False)
    return text.encode("utf-8", "surrogatepass")


def fuzz_cases() -> list[tuple[str, bytes]]:
    """(what was done, file content): the same list on every run."""
    rng = random.Random(SEED)
    cases = [(f"wrong type: {what}", _dumped(raw)) for what, raw in _wrong_types(rng)]
    for _ in range(CASES_PER_KIND):
        structure = _value(rng)
        cases.append((f"random structure {structure!r:.60}", _dumped(structure)))
    sources = _sources()
    for _ in range(3 * CASES_PER_KIND):
        what, raw = _mutated(rng, *rng.choice(sources))
        cases.append((what, _dumped(raw)))
    for _ in range(2 * CASES_PER_KIND):
        cases.append(_text_mutated(rng, rng.choice(EXAMPLES)))
    for _ in range(CASES_PER_KIND // 4):
        garbage = bytes(rng.randrange(256) for _ in range(rng.randint(1, 400)))
        cases.append(("random bytes", garbage))
    return cases


CASES = fuzz_cases()


def test_the_generator_makes_a_few_hundred_distinct_configs():
    assert len(CASES) >= 300
    assert len({content for _, content in CASES}) > 0.9 * len(CASES)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_malformed_configs_exit_2_without_a_traceback(tmp_path: Path, validate: Validate):
    codes = []
    for i, (what, content) in enumerate(CASES):
        path = tmp_path / f"case-{i}.yaml"
        path.write_bytes(content)
        try:
            result = validate(path)
        except AssertionError as error:
            raise AssertionError(f"{what}: {error}") from error
        assert result.exit_code in (0, 2), f"{what}: exit {result.exit_code}\n{result.output}"
        if result.exit_code == 2:
            assert "error:" in result.output, what
        codes.append(result.exit_code)
    assert codes.count(2) > 0.8 * len(codes)
