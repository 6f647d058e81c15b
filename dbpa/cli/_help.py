"""A command's ``--help`` from its docstring, as a reader sees it.

Typer shows a docstring's later paragraphs with the line breaks of the source, so every
paragraph is joined onto one line here (the terminal wraps it), and the docstrings'
``literals`` are shown in bold, their backticks left out. The rest is escaped: Typer reads
help as Rich markup.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any

from rich.markup import escape

_LITERAL = re.compile(r"``(.+?)``")


def shown_help(command: Callable[..., Any]) -> str:
    """The help text of ``command``: its docstring's paragraphs, one line each, in markup."""
    paragraphs = inspect.cleandoc(command.__doc__ or "").split("\n\n")
    return "\n\n".join(
        _LITERAL.sub(r"[bold]\1[/bold]", escape(" ".join(p.split()))) for p in paragraphs
    )
