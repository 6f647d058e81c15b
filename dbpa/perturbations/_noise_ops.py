"""The edits of the ``noise`` kind, one function per operation.

An operation finds its *places* in a text (words, gaps between words, punctuation marks,
contractible phrases) and edits some of them. Every random choice is a float from a numpy
``Generator.random`` (uniform in [0, 1)), mapped to an index as ``int(u * n)``, so an
operation given the same draws gives the same text on every machine. Digits are never
touched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ._text import touches_mark, word_spans

Operation = Literal["typos", "casing", "whitespace", "punctuation", "filler", "contractions"]
OPERATIONS: tuple[Operation, ...] = (
    "typos",
    "casing",
    "whitespace",
    "punctuation",
    "filler",
    "contractions",
)
"""Every operation, in the order they apply when a variant combines several."""

TypoKind = Literal["substitution", "deletion", "insertion", "transposition"]
TYPO_KINDS: tuple[TypoKind, ...] = ("substitution", "deletion", "insertion", "transposition")

_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_OFFSETS = (0.0, 0.25, 0.75)
"""Horizontal offset of each row on a QWERTY keyboard, in keys."""


def _neighbours() -> dict[str, str]:
    """The letters whose keys touch each letter's key (same row left and right, and the
    keys of the rows above and below that overlap it), in keyboard order."""
    where = {c: (r, i + _OFFSETS[r]) for r, row in enumerate(_ROWS) for i, c in enumerate(row)}
    near = {}
    for c, (r, x) in where.items():
        near[c] = "".join(
            o
            for o, (ro, xo) in where.items()
            if o != c and ((ro == r and abs(xo - x) == 1) or (abs(ro - r) == 1 and abs(xo - x) < 1))
        )
    return near


QWERTY_NEIGHBOURS: dict[str, str] = _neighbours()
"""Lowercase letter -> the letters of the adjacent keys on a QWERTY keyboard."""

FILLERS: tuple[str, ...] = ("um", "uh", "like", "so", "well", "you know", "I mean", "basically")
"""Filler words and phrases, inserted before a word."""

CONTRACTIONS: dict[str, str] = {
    "do not": "don't",
    "does not": "doesn't",
    "did not": "didn't",
    "is not": "isn't",
    "are not": "aren't",
    "was not": "wasn't",
    "were not": "weren't",
    "have not": "haven't",
    "has not": "hasn't",
    "had not": "hadn't",
    "will not": "won't",
    "would not": "wouldn't",
    "should not": "shouldn't",
    "could not": "couldn't",
    "must not": "mustn't",
    "cannot": "can't",
    "I am": "I'm",
    "you are": "you're",
    "we are": "we're",
    "they are": "they're",
    "I have": "I've",
    "you have": "you've",
    "we have": "we've",
    "they have": "they've",
    "I will": "I'll",
    "you will": "you'll",
    "we will": "we'll",
    "they will": "they'll",
    "it is": "it's",
    "that is": "that's",
    "what is": "what's",
    "there is": "there's",
    "he is": "he's",
    "she is": "she's",
}
"""Phrase -> contraction. Both directions are applied, except that the contractions of
``AMBIGUOUS_CONTRACTIONS`` are never expanded."""

AMBIGUOUS_CONTRACTIONS = frozenset({"it's", "that's", "what's", "there's", "he's", "she's"})
"""``'s`` stands for *is* or *has* ("it's been"): these are made, never undone."""

_EXPANSIONS = {c: p for p, c in CONTRACTIONS.items() if c not in AMBIGUOUS_CONTRACTIONS}
_BOTH_WAYS = {k.lower(): v for k, v in {**CONTRACTIONS, **_EXPANSIONS}.items()}


def _phrase_pattern(phrase: str) -> str:
    words = (re.escape(w).replace("'", "['\u2019]") for w in phrase.split(" "))
    return r"\s+".join(words)


_CONTRACTIBLE = re.compile(
    r"\b(?:"
    + "|".join(
        _phrase_pattern(p) for p in sorted([*CONTRACTIONS, *_EXPANSIONS], key=len, reverse=True)
    )
    + r")\b",
    re.IGNORECASE,
)

Span = tuple[int, int]

_ASCII_WORD = re.compile(r"\b[A-Za-z]{2,}\b")
_GAP = re.compile(r"(?<=\S) +(?=\S)")
_MARK = re.compile(r"[.,;:!?](?!\d)")


def _typo_places(text: str) -> list[Span]:
    return [m.span() for m in _ASCII_WORD.finditer(text) if not touches_mark(text, *m.span())]


def _casing_places(text: str) -> list[Span]:
    return [(a, b) for a, b in word_spans(text) if text[a:b].lower() != text[a:b].upper()]


def _matches(pattern: re.Pattern[str]) -> Callable[[str], list[Span]]:
    return lambda text: [m.span() for m in pattern.finditer(text)]


PLACES: dict[Operation, Callable[[str], list[Span]]] = {
    "typos": _typo_places,
    "casing": _casing_places,
    "whitespace": _matches(_GAP),
    "punctuation": _matches(_MARK),
    "filler": _matches(_GAP),
    "contractions": _matches(_CONTRACTIBLE),
}
"""Where each operation may edit: ASCII words of two letters or more (typos; a word that
carries a combining mark, ``Jose\\u0301``, is not ASCII, as ``José`` is not), words that have
case, each letter with its combining marks and apostrophes inside (casing: ``it's`` and
``re\\u0301sume\\u0301`` are one word; Arabic, Hebrew or CJK words have no case), runs of
spaces between two non-space characters (whitespace, filler; newlines and tabs are kept),
``. , ; : ! ?`` not followed by a digit (so 7.5 and 1,000 stay), and the phrases and
contractions of ``CONTRACTIONS`` (whole words, any case)."""

PLACE_NAMES: dict[Operation, str] = {
    "typos": "ASCII word of two letters or more",
    "casing": "word with upper and lower case",
    "whitespace": "space between two words",
    "punctuation": "punctuation mark (. , ; : ! ? not followed by a digit)",
    "filler": "space between two words",
    "contractions": "contractible phrase or contraction (e.g. 'do not', \"don't\")",
}


def _pick(u: float, items: Sequence[str]) -> str:
    return items[int(u * len(items))]


def _same_case(letter: str, like: str) -> str:
    return letter.upper() if like.isupper() else letter


def substitute(word: str, position: int, choice: float) -> str:
    """``word`` with the letter at ``position`` replaced by the letter of an adjacent key
    (``QWERTY_NEIGHBOURS``, the ``int(choice * n)``-th), in the same case."""
    old = word[position]
    near = QWERTY_NEIGHBOURS[old.lower()]
    new = _same_case(near[int(choice * len(near))], old)
    return word[:position] + new + word[position + 1 :]


def delete(word: str, position: int) -> str:
    """``word`` without the letter at ``position``."""
    return word[:position] + word[position + 1 :]


def insert(word: str, position: int, choice: float) -> str:
    """``word`` with the letter of a key adjacent to the one at ``position`` typed right
    after it (a slipped finger), in the same case."""
    old = word[position]
    near = QWERTY_NEIGHBOURS[old.lower()]
    new = _same_case(near[int(choice * len(near))], old)
    return word[: position + 1] + new + word[position + 1 :]


def transpose(word: str, position: int) -> str:
    """``word`` with the letters at ``position`` and ``position + 1`` swapped."""
    return word[:position] + word[position + 1] + word[position] + word[position + 2 :]


def typo(word: str, u: tuple[float, float, float], kinds: Sequence[TypoKind] = TYPO_KINDS) -> str:
    """One typo in ``word`` from three draws: ``u[0]`` its kind, ``u[1]`` its position
    (over the word's letters; for a transposition, over the pairs of different neighbouring
    letters), ``u[2]`` the adjacent key of a substitution or insertion."""
    kind = kinds[int(u[0] * len(kinds))]
    if kind == "transposition":
        pairs = [i for i in range(len(word) - 1) if word[i] != word[i + 1]]
        return transpose(word, pairs[int(u[1] * len(pairs))]) if pairs else word
    position = int(u[1] * len(word))
    if kind == "deletion":
        return delete(word, position)
    if kind == "insertion":
        return insert(word, position, u[2])
    return substitute(word, position, u[2])


def recase(word: str, u: float) -> str:
    """``word`` in lowercase, in uppercase, or with its first letter's case flipped: of
    those that differ from it (in that order), the ``int(u * n)``-th; a word without case
    (Arabic, Hebrew, CJK) as it is."""
    first = word[0].lower() if word[0].isupper() else word[0].upper()
    options = [w for w in (word.lower(), word.upper(), first + word[1:]) if w != word]
    return _pick(u, list(dict.fromkeys(options))) if options else word


def respace(gap: str, u: float) -> str:
    """A gap of spaces removed, the words running together (``u < 0.5``), or given one more
    space."""
    return "" if u < 0.5 else gap + " "


def repunctuate(mark: str, u: float) -> str:
    """A punctuation mark dropped (``u < 0.5``) or doubled."""
    return "" if u < 0.5 else mark + mark


def add_filler(gap: str, u: float) -> str:
    """The ``int(u * n)``-th of the n ``FILLERS`` typed in a gap between two words."""
    return f"{gap}{_pick(u, FILLERS)} "


def contract(phrase: str) -> str:
    """A phrase contracted or a contraction expanded (``CONTRACTIONS``), in the case of the
    original: all capitals stay capitals, a capital first letter stays capital."""
    new = _BOTH_WAYS[re.sub(r"\s+", " ", phrase.replace("\u2019", "'")).lower()]
    if phrase.isupper() and len(phrase) > 1:
        return new.upper()
    if phrase[0].isupper():
        return new[0].upper() + new[1:]
    return new


@dataclass(frozen=True)
class Edit:
    """One place changed: the text around it before and after (the place widened to the
    words it touches)."""

    before: str
    after: str


@dataclass(frozen=True)
class Replacement:
    """The text of ``[start, end)`` replaced by ``new``."""

    start: int
    end: int
    new: str

    def in_context(self, text: str) -> Edit:
        """The edit with the words it touches in ``text`` (the text it was made in)."""
        lo, hi = _around(text, self.start, self.end)
        return Edit(text[lo:hi], text[lo : self.start] + self.new + text[self.end : hi])


def splice(text: str, replacements: Sequence[Replacement]) -> str:
    """``text`` with non-overlapping ``replacements`` (in order of ``start``) made."""
    pieces: list[str] = []
    last = 0
    for r in replacements:
        pieces += [text[last : r.start], r.new]
        last = r.end
    pieces.append(text[last:])
    return "".join(pieces)


def _around(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` widened to the non-space characters it touches on both sides (for a
    gap of spaces: the words before and after it)."""
    while start > 0 and not text[start - 1].isspace():
        start -= 1
    while end < len(text) and not text[end].isspace():
        end += 1
    return start, end


def _edit(
    operation: Operation, place: str, u: tuple[float, float, float], kinds: Sequence[TypoKind]
) -> str:
    if operation == "typos":
        return typo(place, u, kinds)
    if operation == "casing":
        return recase(place, u[0])
    if operation == "whitespace":
        return respace(place, u[0])
    if operation == "punctuation":
        return repunctuate(place, u[0])
    if operation == "filler":
        return add_filler(place, u[0])
    return contract(place)


def places(operation: Operation, text: str) -> list[Span]:
    """The ``[start, end)`` spans ``operation`` may edit in ``text``."""
    return PLACES[operation](text)


def choose_edits(
    operation: Operation,
    text: str,
    spans: Sequence[tuple[int, int]],
    rate: float,
    rng: np.random.Generator,
    *,
    at_least_one: bool = True,
    typo_kinds: Sequence[TypoKind] = TYPO_KINDS,
    taken: bytearray | None = None,
) -> list[Replacement]:
    """The edits of ``operation`` at its places ``spans`` of ``text`` that change something,
    in order.

    Draws, in this order: one per place, left to right (a place is chosen when its draw is
    below ``rate`` and, with ``taken``, none of its characters is marked there); with
    ``at_least_one`` and no place chosen, one more that chooses one (``int(u * n)`` of the n
    places); then three per chosen place, left to right, for its edit.
    """
    n = len(spans)
    chosen = [i for i, u in enumerate(rng.random(n).tolist()) if u < rate]
    if taken is not None:
        chosen = [i for i in chosen if taken.find(1, *spans[i]) < 0]
    if at_least_one and not chosen and n:
        chosen = [int(rng.random() * n)]
    u = rng.random(3 * len(chosen)).tolist()
    replacements = []
    for j, i in enumerate(chosen):
        start, end = spans[i]
        place = text[start:end]
        new = _edit(operation, place, (u[3 * j], u[3 * j + 1], u[3 * j + 2]), typo_kinds)
        if new != place:
            replacements.append(Replacement(start, end, new))
    return replacements


def apply_noise(
    operation: Operation,
    text: str,
    rate: float,
    rng: np.random.Generator,
    *,
    at_least_one: bool = True,
    typo_kinds: Sequence[TypoKind] = TYPO_KINDS,
) -> str:
    """``text`` with each place of ``operation`` edited with probability ``rate`` (and with
    ``at_least_one``, one place at least); the draws are those of ``choose_edits``."""
    spans = places(operation, text)
    return splice(
        text,
        choose_edits(
            operation, text, spans, rate, rng, at_least_one=at_least_one, typo_kinds=typo_kinds
        ),
    )
