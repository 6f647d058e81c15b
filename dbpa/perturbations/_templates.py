"""``str.format`` templates with named placeholders only: parsing and rendering.

Rendering fills the placeholders of a template the user wrote; values are inserted verbatim
(``str.format`` never re-reads them), and no existing text is searched or replaced.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any


def placeholders(template: str) -> list[str]:
    """Names of the placeholders in ``template``, in order of first use.

    ValueError for malformed braces and for positional (``{}``, ``{0}``) or compound
    (``{a.b}``, ``{a[0]}``) placeholders. Literal braces are written ``{{`` and ``}}``.
    """
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as error:
        raise ValueError(f"malformed template {template!r}: {error}") from None
    names: list[str] = []
    for _, name, _, _ in parsed:
        if name is None:
            continue
        if not name.isidentifier():
            raise ValueError(
                f"template {template!r}: placeholder {{{name}}} must be a plain name such as "
                f"{{role}} (write literal braces as {{{{ and }}}})"
            )
        if name not in names:
            names.append(name)
    return names


def render(template: str, values: Mapping[str, Any]) -> str:
    """``template`` with every placeholder filled from ``values``."""
    try:
        return template.format_map(values)
    except (ValueError, TypeError) as error:
        raise ValueError(f"cannot render template {template!r}: {error}") from None
