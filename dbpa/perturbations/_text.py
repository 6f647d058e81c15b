"""Readable ids and descriptions (slugs and shortened text, cut only at word boundaries), and
the words of a text with their combining marks."""

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
    carry all of the content: it was cut, it is empty, or a ``detail`` is not in it.

    Words the prefix ends with are not repeated when the slug starts with them (template
    ``style`` and value "style number 0": ``style-number-0``), unless that leaves no word.
    """
    words, complete = _slug_words(readable)
    parts = [prefix, *words[_repeated(prefix, words) :]]
    if not complete or not words or detail is not None:
        parts.append(text_hash(readable if detail is None else f"{readable}\n{detail}")[:6])
    return "-".join(parts)


def _repeated(prefix: str, words: list[str]) -> int:
    """How many leading ``words`` repeat the last words of ``prefix`` (leaving one at least)."""
    tail = prefix.lower().split("-")
    for n in range(min(len(tail), len(words) - 1), 0, -1):
        if tail[-n:] == words[:n]:
            return n
    return 0


def is_mark(char: str) -> bool:
    """Whether ``char`` is a combining mark (Unicode category M: a decomposed accent, a vowel
    sign), which belongs to the character before it."""
    return unicodedata.category(char)[0] == "M"


def touches_mark(text: str, start: int, end: int) -> bool:
    """Whether a combining mark follows ``[start, end)`` or precedes it (then the letter it
    belongs to does): the span cuts a word of ``text``."""
    return (end < len(text) and is_mark(text[end])) or (start > 0 and is_mark(text[start - 1]))


def _word_class(char: str) -> str:
    if is_mark(char):
        return "m"
    if char.isalpha():
        return "a"
    if char.isalnum() or char == "_":
        return "0"
    return "'" if char in "'\u2019" else " "


_WORD_CLASSES = re.compile(r"(?<![am0])a[am]*(?:'a[am]*)*(?![am0])")
"""A word over the classes of ``_word_class``: letters with their marks, joined by
apostrophes, touching no letter, mark, digit or underscore."""


def word_spans(text: str) -> list[tuple[int, int]]:
    """The ``[start, end)`` of every word of ``text``: letters, each with the combining marks
    after it (``Jose\\u0301`` is one word, as ``José`` is), joined by apostrophes (``it's``),
    touching no digit or underscore (no word in ``3rd``)."""
    classes = "".join(map(_word_class, text))
    return [m.span() for m in _WORD_CLASSES.finditer(classes)]


def shorten(text: str, width: int = 60) -> str:
    """``text`` on one line, cut at a word boundary to at most ``width`` characters."""
    return textwrap.shorten(text, width=width, placeholder=" ...")
