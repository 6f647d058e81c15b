"""Person names and gendered words for the ``swap`` kind.

The names span genders and origins, a handful per (gender, origin); they avoid names that
are also common English words (May, Will, Mark, Grace, Hope, Rose, ...), so a capitalised
word in the built-in lists is a person's name. The lists say what a name commonly suggests,
nothing about any person.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Gender = Literal["female", "male"]


@dataclass(frozen=True)
class PersonName:
    """A first name and the gender and origin it commonly suggests."""

    name: str
    gender: Gender
    origin: str


def _names(gender: Gender, origin: str, names: str) -> tuple[PersonName, ...]:
    return tuple(PersonName(n, gender, origin) for n in names.split())


PERSON_NAMES: tuple[PersonName, ...] = (
    *_names("female", "English", "Emily Sarah Hannah Laura Rachel"),
    *_names("male", "English", "John James Thomas Daniel Michael"),
    *_names("female", "Hispanic", "Maria Lucia Carmen Sofia Valentina"),
    *_names("male", "Hispanic", "Carlos Jose Miguel Alejandro Diego"),
    *_names("female", "West African", "Ngozi Abena Chiamaka Ayodele Folake"),
    *_names("male", "West African", "Kwame Chinedu Oluwaseun Kofi Emeka"),
    *_names("female", "South Asian", "Priya Ananya Deepika Sunita Lakshmi"),
    *_names("male", "South Asian", "Arjun Rahul Vikram Sanjay Rajesh"),
    *_names("female", "East Asian", "Mei Yuki Xiaoling Jiwoo Haruka"),
    *_names("male", "East Asian", "Wei Hiroshi Kenji Minho Takeshi"),
    *_names("female", "Arabic", "Fatima Aisha Leila Noor Yasmin"),
    *_names("male", "Arabic", "Ahmed Omar Khalid Youssef Tariq"),
    *_names("female", "Slavic", "Olga Natalia Katarzyna Svetlana Milena"),
    *_names("male", "Slavic", "Dmitri Piotr Ivan Tomasz Sergei"),
)
"""Five first names per gender for each of seven origins."""

GENDER_PAIRS: tuple[tuple[str, str], ...] = (
    ("he", "she"),
    ("himself", "herself"),
    ("man", "woman"),
    ("men", "women"),
    ("boy", "girl"),
    ("boys", "girls"),
    ("male", "female"),
    ("males", "females"),
    ("father", "mother"),
    ("fathers", "mothers"),
    ("dad", "mom"),
    ("son", "daughter"),
    ("sons", "daughters"),
    ("brother", "sister"),
    ("brothers", "sisters"),
    ("husband", "wife"),
    ("husbands", "wives"),
    ("boyfriend", "girlfriend"),
    ("uncle", "aunt"),
    ("nephew", "niece"),
    ("grandfather", "grandmother"),
    ("grandson", "granddaughter"),
    ("gentleman", "lady"),
    ("gentlemen", "ladies"),
    ("sir", "madam"),
    ("mr", "ms"),
)
"""(masculine, feminine) words swapped both ways, whole words only, case kept. ``his``,
``him``, ``her`` and ``hers`` are handled by ``swap_gender``'s rule; ``mrs`` and ``mum``
become ``mr`` and ``dad`` (and ``mr`` and ``dad`` become ``ms`` and ``mom``)."""

ONE_WAY: dict[str, str] = {"mrs": "mr", "mum": "dad"}
"""Feminine words whose swap is not undone to them."""

FUNCTION_WORDS = frozenset(
    {
        "a",
        "an",
        "the",
        "this",
        "that",
        "these",
        "those",
        "my",
        "your",
        "his",
        "her",
        "its",
        "our",
        "their",
        "some",
        "any",
        "no",
        "every",
        "each",
        "to",
        "of",
        "in",
        "on",
        "at",
        "by",
        "for",
        "with",
        "from",
        "about",
        "into",
        "onto",
        "over",
        "under",
        "after",
        "before",
        "during",
        "since",
        "until",
        "through",
        "throughout",
        "without",
        "within",
        "near",
        "around",
        "like",
        "behind",
        "between",
        "against",
        "toward",
        "towards",
        "across",
        "along",
        "beside",
        "despite",
        "upon",
        "via",
        "per",
        "than",
        "as",
        "and",
        "or",
        "but",
        "nor",
        "so",
        "if",
        "when",
        "while",
        "because",
        "who",
        "whom",
        "which",
        "what",
        "where",
        "why",
        "how",
        "not",
        "is",
        "was",
        "are",
        "were",
        "be",
        "been",
        "being",
        "will",
        "would",
        "can",
        "could",
        "should",
        "may",
        "might",
        "must",
        "do",
        "does",
        "did",
        "has",
        "have",
        "had",
        "again",
        "too",
        "also",
        "very",
        "just",
        "only",
        "up",
        "down",
        "out",
        "off",
        "back",
        "there",
        "here",
        "now",
        "then",
        "today",
        "tomorrow",
        "yesterday",
        "tonight",
    }
)
"""Words after which ``her`` is read as an object (``him``) and ``his`` stands alone
(``hers``): determiners, prepositions, conjunctions, auxiliaries and some adverbs."""


def _words(words: str) -> frozenset[str]:
    return frozenset(words.split())


PRONOUNS = _words(
    "i you he she it we they me him us them myself yourself himself herself itself ourselves "
    "themselves everything something anything nothing everyone someone anyone everybody "
    "somebody anybody"
)
"""Personal and indefinite pronouns: ``her`` before one is an object (``tell her I
called``, ``tell her everything``), ``his`` stands alone."""

OBJECT_VERBS = _words(
    "know go feel get come see think understand decide tell say give make keep try become "
    "remember forget find hear believe sit speak explain continue follow choose bring put ask "
    "breathe recover relax agree eat wear"
)
"""Bare verbs that are seldom nouns: ``her`` before one is an object (``let her know``,
``make her feel``). Verbs that are also common nouns after a possessive (rest, sleep, walk,
call, stay, leave, work, visit, take) are left out: ``her rest`` reads as possessive."""

ADVERBS = _words(
    "more less most least better worse best worst much first last early late later well "
    "alone home right away instead anyway directly immediately soon already yet still often "
    "always never sometimes ever enough everywhere together properly next recently lately "
    "earlier"
)
"""Adverbs that may end the phrase after ``her`` (``I like her more``, ``I know her well``)
but may also be or modify an adjective (``her more serious cough``, ``her first
symptoms``): ``her`` before one is an object only when the phrase ends after it."""

TIME_NOUNS = _words(
    "week weekend month year night morning evening afternoon day monday tuesday wednesday "
    "thursday friday saturday sunday spring summer autumn fall winter"
)
"""Nouns of a time expression: ``last`` or ``next`` before one starts it (``I saw her last
week``), so the ``her`` before it is an object, as before ``this``, ``every`` or
``yesterday`` (``her last visit`` stays possessive)."""

PLACE_BEFORE = _words(
    "San Santa Santo Sao São St St. Saint Sainte Ste Ste. New Los Las El La Le Port Puerto "
    "Porto Fort Mount Mt Mt. Lake Cape Isla Villa Ciudad"
)
"""Capitalised words that start a place name: a name after one is part of it (``San Diego``,
``Santa Maria``, ``St. John's``)."""

PLACE_AFTER = _words(
    "City County Town Township Island Islands Isle Beach Valley Springs Falls Heights River "
    "Street Road Avenue Boulevard Square Harbor Harbour Mountains Creek Station Airport Bridge"
)
"""Capitalised words that end a place name: a name before one is part of it (``Thomas
Street``, ``James Island``). Words that are also surnames (Park, Hill, Lake, Bay, Wood) are
left out: ``Minho Park`` is a person."""

MODAL_NAMES = _words("will may can")
"""Names that are also modal verbs (Will, May, Can): see ``find_names``."""

SUBJECTS = _words(
    "i you he she it we they this that these those the a an my your his her its our their "
    "some any no every each there not"
)
"""Words that follow a modal verb opening a question (``Will he recover?``, ``May I
ask?``) and never a name that is the subject (``Will said``)."""
