"""Readable ids and descriptions: slugs and shortened text, cut only at word boundaries."""

from __future__ import annotations

import re
import textwrap
import unicodedata

from dbpa.specs import text_hash

SLUG_LENGTH = 40
"""Most characters the readable part of a derived id takes from the text."""

_WORDS = re.compile(r"\d+(?:\.\d+)+|[a-z0-9]+")


def _slug_words(text: str) -> tuple[list[str], bool]:
    """Lowercase ASCII words of ``text`` within SLUG_LENGTH, and whether all of them fit."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    words = _WORDS.findall(ascii_text.lower())
    kept: list[str] = []
    length = -1
    for word in words:
        length += len(word) + 1
        if length > SLUG_LENGTH:
            return kept, False
        kept.append(word)
    return kept, True


def make_id(prefix: str, readable: str, *, detail: str | None = None) -> str:
    """``prefix-<slug of readable>``, plus 6 hex digits of a digest when the slug does not
    carry all of the content: it was cut, it is empty, or a ``detail`` is not in it."""
    words, complete = _slug_words(readable)
    parts = [prefix, *words]
    if not complete or not words or detail is not None:
        parts.append(text_hash(readable if detail is None else f"{readable}\n{detail}")[:6])
    return "-".join(parts)


def shorten(text: str, width: int = 60) -> str:
    """``text`` on one line, cut at a word boundary to at most ``width`` characters."""
    return textwrap.shorten(text, width=width, placeholder=" ...")
