"""The ``swap`` kind: person names, or the gender of the person a prompt talks about.

Swaps apply to whole words only (regex word boundaries: ``Ann`` is never touched inside
``Annual``, ``he`` never inside ``the``), keep the case of the word they replace (``He`` ->
``She``, ``HIS`` -> ``HER``) and its possessive (``John's`` -> ``Maria's``). The one real
ambiguity of English is documented at ``swap_gender``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field, field_validator

from dbpa.specs import Message

from ._messages import user_prompt_index, with_content
from ._model import FamilySpec, Identifier, Label, Perturbation
from ._names import FUNCTION_WORDS, GENDER_PAIRS, ONE_WAY, PERSON_NAMES, Gender
from ._text import make_id

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
_NEXT_WORD = re.compile(r"[ \t]+([A-Za-z]+)")


def _in_case_of(word: str, new: str) -> str:
    """``new`` in the case of ``word``: all capitals, a capital first letter, or lowercase."""
    if word.isupper() and len(word) > 1:
        return new.upper()
    if word[0].isupper():
        return new[0].upper() + new[1:]
    return new


def _reads_as_object(text: str, end: int) -> bool:
    """Whether the word ending at ``end`` stands without a noun after it: nothing, a
    punctuation mark or a function word (``FUNCTION_WORDS``) follows."""
    following = _NEXT_WORD.match(text, end)
    return following is None or following.group(1).lower() in FUNCTION_WORDS


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
    possessive (-> ``her``) or stands alone (-> ``hers``). The rule: when the next word is
    missing (end of text, punctuation) or is a function word (``FUNCTION_WORDS``:
    determiners, prepositions, conjunctions, auxiliaries), ``her`` -> ``him`` and ``his`` ->
    ``hers``; otherwise ``her`` -> ``his`` and ``his`` -> ``her``. So "tell her the result"
    -> "tell him the result", "her doctor" -> "his doctor", "the choice is his." -> "the
    choice is hers.", but "give her medicine" -> "give his medicine" (read as a possessive).
    Titles (``Mr``, ``Ms``, ``Mrs``) swap only when capitalised (``ms`` may be milliseconds).
    """
    swaps: list[tuple[str, str]] = []

    def swap(match: re.Match[str]) -> str:
        word = match.group(0)
        lower = word.lower()
        if lower in _TITLES and not word[0].isupper():
            return word
        if lower == "her":
            new = "him" if _reads_as_object(text, match.end()) else "his"
        elif lower == "his":
            new = "hers" if _reads_as_object(text, match.end()) else "her"
        else:
            new = _SWAPS[lower]
        swaps.append((word, _in_case_of(word, new)))
        return swaps[-1][1]

    swapped = _GENDERED.sub(swap, text)
    return GenderSwap(swapped, tuple(swaps))


def _name_pattern(names: Sequence[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"\b(?:{alternatives})\b('(?![A-Za-z]))?")


def swap_names(text: str, mapping: Mapping[str, str]) -> str:
    """``text`` with each name of ``mapping`` (whole words, case-sensitive) replaced by its
    value. A possessive follows: ``John's`` -> ``Maria's``, and ``James'`` -> ``Maria's``
    (the bare apostrophe of a name ending in s gets its s back after a name without one)."""

    def swap(match: re.Match[str]) -> str:
        new = mapping[match.group(0).rstrip("'")]
        if match.group(1) is None:
            return new
        return new + ("'" if new.endswith("s") else "'s")

    return _name_pattern(list(mapping)).sub(swap, text)


SHOWN_SWAPS = 4
"""Gendered words a description lists before counting the rest."""

_BUILT_IN: dict[str, Gender] = {p.name: p.gender for p in PERSON_NAMES}
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
    swap: Literal["names", "gender"] = "names"
    variants: int = Field(default=1, ge=1, le=1000)
    """How many swaps (distinct replacement names); a gender swap of a prompt without names
    has one."""
    seed: int = Field(default=0, ge=0)
    find: tuple[str, ...] | None = Field(default=None, min_length=1)
    """The names to replace; default: every built-in name (``PERSON_NAMES``) in the prompt."""
    names: tuple[str, ...] | None = Field(default=None, min_length=1)
    """The names to draw replacements from; default: the built-in names of the same gender
    (``names``) or of the other gender (``gender``) as each name replaced."""
    label: Label | None = "control"
    """Label of every swap (default ``control``: the answers should not depend on it)."""
    prefix: Identifier | None = "swap"

    @field_validator("find", "names")
    @classmethod
    def _plain_names(cls, values: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for value in values or ():
            if not re.fullmatch(r"\w+(?:[ '-]\w+)*", value):
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
        """The names to replace that occur in ``text``, in order of first appearance."""
        pattern = _name_pattern(self.find or tuple(_BUILT_IN))
        return list(dict.fromkeys(m.group(0).rstrip("'") for m in pattern.finditer(text)))

    def _candidates(self, name: str, found: Sequence[str], i: int) -> list[str]:
        """The replacements of the ``i``-th name found, in a seeded order."""
        if self.names is not None:
            pool = list(dict.fromkeys(self.names))
        else:
            gender = _BUILT_IN.get(name)
            if gender is None:
                raise ValueError(
                    f"names: {name!r} is not a built-in name, so its gender is unknown; "
                    f"give the names to swap it with"
                )
            wanted = gender if self.swap == "names" else _other(gender)
            pool = [n for n, g in _BUILT_IN.items() if g == wanted]
        pool = [n for n in pool if n not in found]
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
