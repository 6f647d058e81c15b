"""The bounded YAML reader of config files (``dbpa._yaml``) with libyaml's parser: the same
values and the same messages as PyYAML's pure-Python loader, within the same bounds."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from dbpa import _yaml
from dbpa.config import ConfigError, load_config

from .conftest import BASE, EXAMPLES
from .test_fuzz import CASES
from .test_inputs import BAD_FILES

pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")


def _read(text: str) -> str:
    """What ``load_yaml`` makes of ``text``: the value, or the message, as text."""
    try:
        return repr(_yaml.load_yaml(text))
    except ValueError as exc:
        return f"ValueError: {exc}"


def _texts() -> list[str]:
    texts = [p.read_text() for p in EXAMPLES]
    texts += [c for c, _ in BAD_FILES.values() if isinstance(c, str)]
    for _, content in CASES:
        with contextlib.suppress(UnicodeDecodeError):  # refused before YAML is read
            texts.append(content.decode("utf-8"))
    odd = ["a: b\tc\n", "- |#\n  x\n", "a: !\n", "{a: what now?}\n", "a: 1\r\nb: [2]\r\n"]
    return texts + odd + ["\ufeffa: 1\n", "a: \u2028b\n", "%YAML 1.2\n---\na: 1\n"]


def test_libyaml_reads_what_the_pure_loader_reads_and_refuses_what_it_refuses(monkeypatch):
    texts = _texts()
    with_libyaml = [_read(text) for text in texts]
    monkeypatch.setattr(_yaml, "_FAST_LOADER", None)
    without = [_read(text) for text in texts]
    differ = [t for t, a, b in zip(texts, with_libyaml, without, strict=True) if a != b]
    assert not differ, differ[:3]
    assert sum(r.startswith("ValueError") for r in without) > 50  # the refusals were compared


def _pure_loader_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str) -> Any:
        raise AssertionError("read by the pure-Python loader")

    monkeypatch.setattr(_yaml, "_load", refuse)


def test_a_block_style_family_of_ten_thousand_is_read_by_libyaml(monkeypatch, tmp_path: Path):
    family = [{"kind": "prompt", "variants": [f"Question {i}: what now?" for i in range(10_000)]}]
    path = tmp_path / "family.yaml"
    path.write_text(yaml.safe_dump(BASE | {"perturbations": family, "n_permutations": 200_000}))
    _pure_loader_refused(monkeypatch)
    assert len(load_config(path).perturbations[0].variants) == 10_000


def _nested(levels: int) -> str:
    """A block mapping ``levels`` deep."""
    return "".join(f"{'  ' * i}l{i}:\n" for i in range(levels)) + f"{'  ' * levels}x: 1\n"


def _block_laughs(levels: int) -> str:
    """A billion laughs in block style: each level lists the one below it nine times."""
    lines = ["l0: &l0", *["- lol"] * 9]
    for i in range(1, levels):
        lines += [f"l{i}: &l{i}", *[f"- *l{i - 1}"] * 9]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (_nested(150), r"line 100, column 199: not valid YAML \(nested more than 100 levels"),
        (_block_laughs(9), r": more than 1,000,000 values once its aliases are expanded"),
        ("a: &a\n- *a\n", r": an alias refers to a list or mapping that contains it"),
        ("k: 2024-13-01\n", r"line 1, column 4: not valid YAML \(cannot read '2024-13-01'"),
        ("k: " + "9" * 5000 + "\n", r"line 1, column 4: not valid YAML \(cannot read '9999"),
        ("a: 1\n---\nb: 2\n", r"expected a single document in the stream, but found another"),
        ('a: "\\ud800"\n', r"line 1, column 4: not valid YAML \('\\ud800' holds an escaped lone"),
        ("a: b\n c: d\n", r"line 2, column 3: not valid YAML \(mapping values are not allowed"),
    ],
)
def test_block_style_documents_keep_the_bounds_and_messages(tmp_path, content, message):
    path = tmp_path / "audit.yaml"
    path.write_text(content)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_the_bounds_hold_in_the_libyaml_reader_itself(monkeypatch):
    """Deep nesting stops libyaml's reader at the bound, before any recursion runs deep;
    an alias bomb is measured after it, without being walked."""
    _pure_loader_refused(monkeypatch)
    assert _yaml._fast_load("- " * 100_000 + "x\n") is _yaml._REFUSED
    assert _yaml._fast_load(_nested(101)) is _yaml._REFUSED
    bomb = _yaml._fast_load(_block_laughs(9))
    with pytest.raises(ValueError, match="more than 1,000,000 values"):
        _yaml.check_bounds(bomb)
