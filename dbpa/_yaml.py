"""YAML read with bounds, for config files: every failure is a ValueError saying where and why.

PyYAML's safe loader recurses once per nesting level (a deeply nested document ends in a
RecursionError), lets an anchor contain its own alias (a cyclic value), and shares an anchored
value between its aliases, so a few hundred bytes can stand for a tree of a billion values
("billion laughs") that validation and hashing would then walk in full. Here nesting is capped
while the document is read, and the value is measured (aliases expanded, without walking the
expansion) before anyone walks it.

With libyaml (``yaml.__with_libyaml__``) its C parser makes the events: the same nodes, six
to eight times faster than PyYAML's pure-Python scanner on a family of thousands of values.
The composing and constructing, with the bounds above, stay PyYAML's. A document the C parser
refuses (or that breaks a bound) is read again by the pure-Python loader, so every message
about a bad file is PyYAML's own, as it is without libyaml.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.resolver import Resolver

MAX_DEPTH = 100
"""Deepest nesting of lists and mappings in a config (a real one is under ten levels deep)."""
MAX_VALUES = 1_000_000
"""Most values (scalars, lists and mappings) in a config, with every alias expanded."""


class _Bounds:
    """Refuses nesting deeper than ``MAX_DEPTH`` while composing and locates bad values while
    constructing: mixed into a loader before PyYAML's composer and constructor."""

    _depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                mark = self.peek_event().start_mark
                raise yaml.MarkedYAMLError(
                    problem=f"nested more than {MAX_DEPTH} levels deep", problem_mark=mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            data = super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # a date like 2024-13-01, a 5000-digit int
            problem = f"cannot read {_shown(node.value)}: {str(exc).split(';')[0]}"
            raise ConstructorError(problem=problem, problem_mark=node.start_mark) from None
        if isinstance(data, str) and not _is_text(data):
            problem = f"{_shown(data)} holds an escaped lone surrogate, which is no character"
            raise ConstructorError(problem=problem, problem_mark=node.start_mark)
        return data


class _Unsure(yaml.YAMLError):  # type: ignore[misc]  # no stubs for yaml
    """A document libyaml and PyYAML may read differently: left to PyYAML."""


class _BoundedLoader(_Bounds, yaml.SafeLoader):  # type: ignore[misc]  # no stubs for yaml
    """The safe loader, within the bounds."""


if yaml.__with_libyaml__:
    from yaml.cyaml import CParser

    _LIBYAML_BASES = (_Bounds, Composer, SafeConstructor, Resolver, CParser)

    class _FastBoundedLoader(*_LIBYAML_BASES):  # type: ignore[misc]  # no stubs for yaml
        """libyaml's parser under PyYAML's composer and safe constructor, within the bounds
        (libyaml's own composer would recurse in C, unbounded, on deep nesting).

        Tags and flow collections (``[a, b]``, ``{a: 1}``) are left to PyYAML: libyaml
        reads an empty tag, and a ``?`` inside a plain scalar in a flow collection, otherwise.
        """

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            Composer.__init__(self)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()
            if getattr(event, "tag", None) is not None or getattr(event, "flow_style", False):
                raise _Unsure(f"a tag or a flow collection at {event.start_mark}")
            return super().compose_node(parent, index)

    _FAST_LOADER: type | None = _FastBoundedLoader
else:  # pragma: no cover - PyYAML built without libyaml
    _FAST_LOADER = None


def _shown(value: object) -> str:
    """``value`` quoted, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:36]}...{text[-1]}"


def _is_text(value: str) -> bool:
    """No lone surrogate (``"\\ud800"`` in YAML): every character can be written as UTF-8."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def load_yaml(text: str) -> Any:
    """The one document in ``text``, within the bounds above; ValueError naming the line and
    column (where known) and the reason."""
    data = _fast_load(text)
    if data is _REFUSED:
        data = _load(text)
    check_bounds(data)
    return data


_REFUSED = object()
"""What :func:`_fast_load` returns for a document it leaves to the pure-Python loader."""

_UNSURE_TEXT = re.compile(
    f"{yaml.reader.Reader.NON_PRINTABLE.pattern}|[\t\ufeff\x85\u2028\u2029]|[|>][-+0-9]*#"
)
"""Text that libyaml and PyYAML read differently, or that only PyYAML describes as PyYAML
does: a character YAML text cannot hold (a lone surrogate, which libyaml cannot take), a tab,
a byte-order mark or a Unicode line break, and a block scalar's header running into a ``#``."""


def _fast_load(text: str) -> Any:
    """The document as read with libyaml's parser, or ``_REFUSED`` when libyaml is missing or
    the document is not valid YAML within the bounds (the pure-Python loader then says why)."""
    if _FAST_LOADER is None or _UNSURE_TEXT.search(text):
        return _REFUSED
    loader = _FAST_LOADER(text)
    try:
        return loader.get_single_data()
    except yaml.YAMLError:
        return _REFUSED
    finally:
        loader.dispose()


def _load(text: str) -> Any:
    """The document as read with PyYAML's pure-Python loader; ValueError saying why not."""
    try:
        loader = _BoundedLoader(text)  # checks every character at once
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        column = exc.position - text.rfind("\n", 0, exc.position)
        raise ValueError(
            f"line {line}, column {column}: not valid YAML (character #x{exc.character:04x} "
            f"is not allowed in YAML text)"
        ) from None
    try:
        data = loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = exc.problem or exc.context
        if exc.problem and exc.context and exc.problem.startswith("but "):
            problem = f"{exc.context}, {exc.problem}"  # "expected ..., but found ..."
        raise ValueError(f"{where}not valid YAML ({problem})") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML ({exc})") from None
    finally:
        loader.dispose()
    return data


def check_bounds(data: Any) -> None:
    """ValueError when ``data`` (aliases expanded) nests deeper than ``MAX_DEPTH``, holds more
    than ``MAX_VALUES`` values, or contains itself. Each distinct list or mapping is visited
    once, so this costs the size of the document as written, not of its expansion."""
    if not _is_container(data):
        return
    measured: dict[int, tuple[int, int]] = {}
    """id of a list or mapping -> (values in it, its depth), aliases expanded."""
    open_ids: set[int] = set()
    """The lists and mappings being measured: the path from the top to the current one."""
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            open_ids.discard(key)
            values, depth = 1, 1
            for child in _children(node):
                size, below = measured.get(id(child), (1, 0))
                values += size
                depth = max(depth, below + 1)
            if values > MAX_VALUES:
                raise ValueError(
                    f"more than {MAX_VALUES:,} values once its aliases are expanded; write the "
                    "values out or use fewer aliases"
                )
            if depth > MAX_DEPTH:
                raise ValueError(
                    f"nested more than {MAX_DEPTH} levels deep once its aliases are expanded"
                )
            measured[key] = (values, depth)
        elif key in open_ids:
            raise ValueError("an alias refers to a list or mapping that contains it (a cycle)")
        elif key not in measured:
            open_ids.add(key)
            stack.append((node, True))
            stack.extend((child, False) for child in _children(node) if _is_container(child))


def _is_container(value: Any) -> bool:
    return isinstance(value, dict | list | tuple | set)


def _children(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [*node.keys(), *node.values()]
    return list(node)
