"""The ``swap`` kind: person names, or the gender of the person a prompt talks about.

Swaps apply to whole words only (``Ann`` is never touched inside ``Annual``, ``he`` never
inside ``the``), keep the case of the word they replace (``He`` -> ``She``, ``HIS`` ->
``HER``) and its possessive (``John's`` -> ``Maria's``). The ambiguities of English are
documented at ``swap_gender`` (her, his) and ``swap_names`` (names that are also words).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from dbpa.specs import Message

from ._messages import user_prompt_index, with_content
from ._model import FamilySpec, Identifier, Label, Perturbation
from ._names import (
    ADVERBS,
    FUNCTION_WORDS,
    GENDER_PAIRS,
    MODAL_NAMES,
    OBJECT_VERBS,
    ONE_WAY,
    PERSON_NAMES,
    PLACE_AFTER,
    PLACE_BEFORE,
    PRONOUNS,
    SUBJECTS,
    TIME_NOUNS,
    Gender,
)
from ._text import is_mark, make_id, touches_mark

_SWAPS: dict[str, str] = {
    **{m: f for m, f in GENDER_PAIRS},
    **{f: m for m, f in GENDER_PAIRS},
    **ONE_WAY,
    "him": "her",
    "hers": "his",
}
_TITLES = frozenset({"mr", "ms", "mrs"})
_GENDERED = re.compile(
    r"\b(?:" + "|".join(sorted([*_SWAPS, "his", "her"], key=len, reverse=True)) + r")\b",
    re.IGNORECASE,
)
_NEXT_WORD = re.compile(r"[ \t]+([A-Za-z]+(?:-[A-Za-z]+)*)")
_TIME_STARTS = frozenset({"last", "next"})
_AFTER_LET = re.compile(r"\b(?:let|lets|letting)[ \t]+\Z", re.IGNORECASE)


def _in_case_of(word: str, new: str) -> str:
    """``new`` in the case of ``word``: all capitals, a capital first letter, or lowercase."""
    if word.isupper() and len(word) > 1:
        return new.upper()
    if word[0].isupper():
        return new[0].upper() + new[1:]
    return new


def _next_word(text: str, end: int) -> tuple[str | None, int]:
    """The word after ``end`` in lowercase (a hyphenated word is one: ``well-being``) and
    where it ends; ``None`` when punctuation or the end of the text comes first."""
    following = _NEXT_WORD.match(text, end)
    return (following.group(1).lower(), following.end()) if following else (None, end)


def _stands_alone(text: str, end: int, *, verbs: bool) -> bool:
    """Whether the ``her`` or ``his`` ending at ``end`` has no noun after it: nothing, a
    punctuation mark, a function word, a pronoun or (with ``verbs``) a bare verb follows, an
    adverb that ends the phrase (nothing, a function word or another adverb after it), or a
    time expression (``last week``, ``next Monday``)."""
    word, after = _next_word(text, end)
    if word is None or word in FUNCTION_WORDS or word in PRONOUNS:
        return True
    if verbs and word in OBJECT_VERBS:
        return True
    if word in ADVERBS:
        then, _ = _next_word(text, after)
        starts_time = word in _TIME_STARTS and then in TIME_NOUNS
        return then is None or then in FUNCTION_WORDS or then in ADVERBS or starts_time
    return False


@dataclass(frozen=True)
class GenderSwap:
    """A text with its gendered words swapped."""

    text: str
    swaps: tuple[tuple[str, str], ...]
    """(old, new) for every word swapped, in order."""


def swap_gender(text: str) -> GenderSwap:
    """``text`` with every gendered word swapped (``GENDER_PAIRS``, ``his``/``her``/``him``/
    ``hers``).

    ``her`` is the object (-> ``him``) or the possessive (-> ``his``); ``his`` is the
    possessive (-> ``her``) or stands alone (-> ``hers``). A possessive has a noun or an
    adjective after it; the rule reads the next word. ``her`` -> ``him`` and ``his`` ->
    ``hers`` when the next word is missing (end of text, punctuation), a function word
    (``FUNCTION_WORDS``: determiners, prepositions, conjunctions, auxiliaries), a pronoun
    (``PRONOUNS``), for ``her`` a bare verb (``OBJECT_VERBS``) or right after ``let``, an
    adverb (``ADVERBS``) that ends the phrase, or a time expression (``last week``:
    ``TIME_NOUNS``); otherwise ``her`` -> ``his`` and ``his`` -> ``her``. So "tell her the
    result", "let her know", "tell her I called", "I like her more", "I saw her last week"
    -> "him"; "her doctor", "her more serious cough", "her well-being" -> "his"; "the
    choice is his." -> "hers". A noun after ``her`` reads as possessed: "give her medicine"
    -> "give his medicine" (it may mean "give him medicine"; only the sense tells).
    Titles (``Mr``, ``Ms``, ``Mrs``) swap only when capitalised (``ms`` may be milliseconds).
    """
    swaps: list[tuple[str, str]] = []

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        lower = word.lower()
        if lower in _TITLES and not word[0].isupper():
            return word
        if lower == "her":
            after_let = _AFTER_LET.search(text, max(0, match.start() - 9), match.start())
            alone = after_let is not None or _stands_alone(text, match.end(), verbs=True)
            new = "him" if alone else "his"
        elif lower == "his":
            new = "hers" if _stands_alone(text, match.end(), verbs=False) else "her"
        else:
            new = _SWAPS[lower]
        swaps.append((word, _in_case_of(word, new)))
        return swaps[-1][1]

    swapped = _GENDERED.sub(swap, text)
    return GenderSwap(swapped, tuple(swaps))


_ACCENTS = re.compile("[\u0300-\u036f]")
"""The combining diacritical marks (accents) that name matching ignores."""
_PREVIOUS_WORD = re.compile(r"(?<!\S)(\S+)[ \t]+\Z")
_FOLLOWING_WORD = re.compile(r"[ \t]+(\w+)")
_SENTENCE_END = re.compile(r"[.!?\n]")


def _fold(char: str) -> str:
    """``char`` as name matching sees it: without accents, case folded, ``'`` for ``\u2019``."""
    if char.isascii():
        return char.lower()
    return _ACCENTS.sub("", unicodedata.normalize("NFD", char)).casefold().replace("\u2019", "'")


def name_key(name: str) -> str:
    """What makes two spellings one name: ``JOHN``, ``John``; ``José``, ``Jose\\u0301``,
    ``JOSE``."""
    return "".join(map(_fold, name))


@dataclass(frozen=True)
class NameAt:
    """An occurrence of a name in a text."""

    start: int
    end: int
    """The end of the name with its accents, before any possessive."""
    key: str
    """``name_key`` of the name."""


def _capitalised_in(word: re.Match[str] | None, words: frozenset[str]) -> bool:
    return word is not None and word[1][0].isupper() and word[1].capitalize() in words


def _place_name(text: str, start: int, end: int) -> bool:
    """Whether the name at ``[start, end)`` is part of a place name: a capitalised word of
    ``PLACE_BEFORE`` before it or of ``PLACE_AFTER`` after it (in any case: ``SAN DIEGO``)."""
    before = _PREVIOUS_WORD.search(text, max(0, start - 12), start)
    return _capitalised_in(before, PLACE_BEFORE) or _capitalised_in(
        _FOLLOWING_WORD.match(text, end), PLACE_AFTER
    )


def _modal_verb(text: str, start: int, end: int) -> bool:
    """Whether the Will, May or Can at ``[start, end)`` is the verb: a pronoun, a
    determiner, ``there`` or ``not`` follows (``Will he recover?``), or it opens a question
    and no comma follows (``Will Maria recover?``, but ``Will, are you there?``)."""
    following = _FOLLOWING_WORD.match(text, end)
    if following is not None and following[1].lower() in SUBJECTS:
        return True
    before = text[:start].rstrip(" \t\"'(")
    opens = not before or before[-1] in ".!?\n"
    closing = _SENTENCE_END.search(text, end)
    return opens and text[end : end + 1] != "," and closing is not None and closing[0] == "?"


def find_names(text: str, names: Iterable[str]) -> list[NameAt]:
    """The occurrences of ``names`` in ``text``, in order.

    A name matches whole words, ignoring case and accents (``name_key``: ``JOHN`` and
    ``John``, ``José`` and ``Jose\\u0301`` are one name), except: a word starting in
    lowercase for a capitalised name (``hope``, ``will``, ``mark`` are words); a name inside
    a place name (``_place_name``: ``San Diego``, ``Thomas Street``); and Will, May or Can as
    the verb (``_modal_verb``: ``Will he recover?``).
    """
    capitalised: dict[str, bool] = {}
    for name in names:
        capitalised.setdefault(name_key(name), name[0].isupper())
    alternatives = sorted(capitalised, key=len, reverse=True)
    pattern = re.compile(
        r"(?<!\w)(?:"
        + "|".join(r"\s+".join(map(re.escape, k.split())) for k in alternatives)
        + r")(?!\w)"
    )
    folded, where = _folded(text)
    found = []
    for match in pattern.finditer(folded):
        start, end = where[match.start()], where[match.end() - 1] + 1
        while end < len(text) and _ACCENTS.match(text, end):
            end += 1
        key = re.sub(r"\s+", " ", match.group(0))
        if (
            touches_mark(text, start, end)
            or (text[start].islower() and capitalised[key])
            or _place_name(text, start, end)
            or (key in MODAL_NAMES and _modal_verb(text, start, end))
        ):
            continue
        found.append(NameAt(start, end, key))
    return found


def _folded(text: str) -> tuple[str, list[int]]:
    """``text`` folded character by character (``_fold``), and for each folded character
    the index of the character of ``text`` it comes from."""
    pieces: list[str] = []
    where: list[int] = []
    for i, char in enumerate(text):
        piece = _fold(char)
        pieces.append(piece)
        where += [i] * len(piece)
    return "".join(pieces), where


def _in_case_of_name(word: str, new: str) -> str:
    """``new`` in capitals where ``word`` is written in capitals, else as it is spelt."""
    return new.upper() if word.isupper() and len(word) > 1 else new


def swap_names(text: str, mapping: Mapping[str, str]) -> str:
    """``text`` with each name of ``mapping`` replaced by its value wherever ``find_names``
    finds it (any case and accents: ``JOHN`` -> ``MARIA``, ``John`` -> ``Maria``). A
    possessive follows: ``John's`` -> ``Maria's``, and ``James'`` -> ``Maria's`` (the bare
    apostrophe of a name ending in s gets its s back after a name without one; after a name
    not ending in s it is a closing quote, and stays)."""
    new_names = {name_key(old): new for old, new in mapping.items()}
    pieces: list[str] = []
    last = 0
    for at in find_names(text, mapping):
        word = text[at.start : at.end]
        new = _in_case_of_name(word, new_names[at.key])
        pieces += [text[last : at.start], new]
        last = at.end
        apostrophe = text[at.end : at.end + 1]
        if (
            word[-1] in "sS"
            and apostrophe in ("'", "\u2019")
            and not text[at.end + 1 : at.end + 2].isalpha()
        ):
            s = "S" if new.isupper() and len(new) > 1 else "s"
            pieces.append(apostrophe if new[-1] in "sS" else apostrophe + s)
            last = at.end + 1
    pieces.append(text[last:])
    return "".join(pieces)


SHOWN_SWAPS = 4
"""Gendered words a description lists before counting the rest."""

_BUILT_IN: dict[str, Gender] = {p.name: p.gender for p in PERSON_NAMES}
_GENDER_BY_KEY: dict[str, Gender] = {name_key(p.name): p.gender for p in PERSON_NAMES}
_STREAMS = {"names": 1, "gender": 2}


class SwapSpec(FamilySpec):
    """Name or gender swaps in the user prompt.

    ``swap: names`` replaces every person name found in the prompt (``find``, default: the
    built-in names it contains) by other names: by default built-in names of the same
    gender, from every origin, so only the origin a name suggests changes. ``swap: gender``
    swaps every gendered word (``swap_gender``) and replaces the names found by names of the
    other gender. Variant ``n`` gives the first name found the ``n``-th name of a seeded
    shuffle of its candidates (``Generator(PCG64([seed, stream, i]))`` for the ``i``-th name
    found), and each further name the next candidate of its own shuffle not taken yet, so
    the variants differ. Ids: ``swap-names-<new names>``, ``swap-gender`` or
    ``swap-gender-<new names>``.
    """

    kind: Literal["swap"] = "swap"
    """Swap who the prompt is about, in whole words."""
    swap: Literal["names", "gender"] = "names"
    """``names``: other names of the same gender; ``gender``: gendered words and names swapped."""
    variants: int = Field(default=1, ge=1, le=1000)
    """How many swaps (distinct replacement names); a gender swap of a prompt without names
    has one."""
    seed: int = Field(default=0, ge=0)
    """Seeds the shuffle the replacement names are taken from."""
    find: tuple[str, ...] | None = Field(default=None, min_length=1)
    """The names to replace; default: every built-in name (``PERSON_NAMES``) in the prompt.
    Found by ``find_names``: in any case and with or without accents, never in a place name
    or as the verb Will, May or Can."""
    names: tuple[str, ...] | None = Field(default=None, min_length=1)
    """The names to draw replacements from; default: the built-in names of the same gender
    (``names``) or of the other gender (``gender``) as each name replaced."""
    label: Label | None = "control"
    """Label of every swap (default ``control``: the answers should not depend on it)."""
    prefix: Identifier | None = "swap"
    """Start of the generated ids (``swap-names-<new name>``)."""

    @field_validator("find", "names")
    @classmethod
    def _plain_names(cls, values: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for value in values or ():
            marks_follow_letters = all(
                i > 0 and (value[i - 1].isalnum() or is_mark(value[i - 1]))
                for i, c in enumerate(value)
                if is_mark(c)
            )
            bare = "".join(c for c in value if not is_mark(c))
            if not (marks_follow_letters and re.fullmatch(r"\w+(?:[ '-]\w+)*", bare)):
                raise ValueError(f"{value!r} is not a name (letters, spaces, ' and -)")
        return values

    def expand(self, original: tuple[Message, ...]) -> list[Perturbation]:
        index = user_prompt_index(original)
        text = original[index].content
        found = self._found(text)
        prefix = f"{self.prefix or 'swap'}-{self.swap}"
        if not found:
            if self.swap == "names":
                raise ValueError(
                    "find: the user prompt has no name to swap (none of the built-in names "
                    "occurs in it); list the names it uses in `find`"
                )
            if self.variants > 1:
                raise ValueError(
                    f"variants: {self.variants} gender swaps asked, but the user prompt has no "
                    f"name to vary: it has one"
                )
            return [self._perturbation(original, index, prefix, {})]
        orders = [self._candidates(name, found, i) for i, name in enumerate(found)]
        if self.variants > len(orders[0]):
            raise ValueError(
                f"variants: {self.variants} swaps asked, but {found[0]!r} has "
                f"{len(orders[0])} candidate names; ask for fewer or give more `names`"
            )
        perturbations = []
        for n in range(1, self.variants + 1):
            mapping = {found[0]: orders[0][n - 1]}
            for name, order in zip(found[1:], orders[1:], strict=True):
                free = [c for c in order[n - 1 :] + order[: n - 1] if c not in mapping.values()]
                if not free:
                    raise ValueError(
                        f"names: too few candidate names for the {len(found)} names found"
                    )
                mapping[name] = free[0]
            perturbations.append(self._perturbation(original, index, prefix, mapping))
        return perturbations

    def _found(self, text: str) -> list[str]:
        """The names to replace that occur in ``text`` (``find_names``), in order of first
        appearance, each as ``find`` (or the built-in list) spells it."""
        names = self.find or tuple(_BUILT_IN)
        spelt = {}
        for name in names:
            spelt.setdefault(name_key(name), name)
        return list(dict.fromkeys(spelt[at.key] for at in find_names(text, names)))

    def _candidates(self, name: str, found: Sequence[str], i: int) -> list[str]:
        """The replacements of the ``i``-th name found, in a seeded order."""
        if self.names is not None:
            pool = list(dict.fromkeys(self.names))
        else:
            gender = _GENDER_BY_KEY.get(name_key(name))
            if gender is None:
                raise ValueError(
                    f"names: {name!r} is not a built-in name, so its gender is unknown; "
                    f"give the names to swap it with"
                )
            wanted = gender if self.swap == "names" else _other(gender)
            pool = [n for n, g in _BUILT_IN.items() if g == wanted]
        taken = {name_key(n) for n in found}
        pool = [n for n in pool if name_key(n) not in taken]
        if not pool:
            raise ValueError(f"names: no candidate name for {name!r}")
        rng = np.random.Generator(np.random.PCG64([self.seed, _STREAMS[self.swap], i]))
        return [pool[j] for j in rng.permutation(len(pool))]

    def _perturbation(
        self,
        original: tuple[Message, ...],
        index: int,
        prefix: str,
        mapping: Mapping[str, str],
    ) -> Perturbation:
        text = original[index].content
        swapped = swap_names(text, mapping) if mapping else text
        parts = [", ".join(f"{old} -> {new}" for old, new in mapping.items())] if mapping else []
        if self.swap == "gender":
            gender = swap_gender(swapped)
            if not gender.swaps and not mapping:
                raise ValueError("the user prompt has no gendered word or name to swap")
            swapped = gender.text
            listed = ", ".join(f"{old} -> {new}" for old, new in gender.swaps[:SHOWN_SWAPS])
            more = len(gender.swaps) - SHOWN_SWAPS
            parts.insert(0, listed + (f" (+{more} more)" if more > 0 else ""))
        return Perturbation(
            id=make_id(prefix, " ".join(mapping.values())) if mapping else prefix,
            kind=self.kind,
            label=self.label,
            description=f"{self.swap} swap: {'; '.join(parts)}",
            messages=with_content(original, index, swapped),
        )


def _other(gender: Gender) -> Gender:
    return "male" if gender == "female" else "female"
