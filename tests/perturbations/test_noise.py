"""The noise kind: each operation does what it says, seeded texts are pinned, errors name the
field."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dbpa.perturbations import (
    OPERATIONS,
    QWERTY_NEIGHBOURS,
    CardiovascularSpec,
    NoiseSpec,
    apply_noise,
    base_prompt,
    expand,
    parse_specs,
)
from dbpa.perturbations._noise_ops import (
    add_filler,
    choose_edits,
    contract,
    delete,
    insert,
    places,
    recase,
    repunctuate,
    respace,
    splice,
    substitute,
    transpose,
    typo,
)
from dbpa.specs import Message

KINDS_PAGE = Path(__file__).parents[2] / "docs" / "reference" / "perturbations.md"
"""The documentation's page of the perturbation kinds, whose Noise section shows examples."""
QUESTION = "A 45-year-old man has had a cough, a mild fever and tiredness for three weeks."
SYSTEM = Message(role="system", content="You are a helpful assistant.")


def user(text: str) -> tuple[Message, ...]:
    return (Message(role="user", content=text),)


def texts(spec: NoiseSpec, text: str = QUESTION) -> list[str]:
    return [p.messages[-1].content for p in expand(user(text), [spec])]


# ------------------------------------------------------------------ each operation by hand


def test_the_keyboard_map_holds_the_adjacent_keys():
    assert QWERTY_NEIGHBOURS["a"] == "qwsz"
    assert QWERTY_NEIGHBOURS["s"] == "weadzx"
    assert QWERTY_NEIGHBOURS["g"] == "tyfhvb"
    assert QWERTY_NEIGHBOURS["p"] == "ol"
    assert QWERTY_NEIGHBOURS["m"] == "jkn"
    assert all(a in QWERTY_NEIGHBOURS[b] for a, near in QWERTY_NEIGHBOURS.items() for b in near)


def test_substitution_takes_an_adjacent_key_in_the_same_case():
    assert substitute("cat", 0, 0.0) == "dat"  # c: d f x v
    assert substitute("Cat", 0, 0.99) == "Vat"
    assert substitute("cat", 2, 0.5) == "caf"  # t: r y f g


def test_deletion_insertion_and_transposition():
    assert delete("cough", 1) == "cugh"
    assert insert("cat", 1, 0.0) == "caqt"  # a: q w s z, typed after the a
    assert insert("CAT", 2, 0.99) == "CATG"
    assert transpose("cough", 1) == "cuogh"


def test_a_typo_draws_its_kind_position_and_key():
    # kind int(u0 * 4): substitution, deletion, insertion, transposition
    assert typo("fever", (0.0, 0.0, 0.0)) == "rever"  # f: r t d g c v
    assert typo("fever", (0.3, 0.99, 0.0)) == "feve"
    assert typo("fever", (0.6, 0.5, 0.99)) == "fevber"  # v: f g c b, after position 2
    assert typo("fever", (0.9, 0.0, 0.0)) == "efver"
    # transpositions only swap different letters: "see" has one such pair
    assert typo("see", (0.9, 0.99, 0.0)) == "ese"
    assert typo("aa", (0.9, 0.5, 0.0)) == "aa"


def test_casing_picks_among_the_changes():
    assert recase("Hello", 0.0) == "hello"  # lowercase and flipped first letter coincide
    assert recase("Hello", 0.9) == "HELLO"
    assert recase("mild", 0.0) == "MILD"
    assert recase("mild", 0.9) == "Mild"
    assert recase("I", 0.5) == "i"
    assert recase("\u4f60\u597d", 0.5) == "\u4f60\u597d"  # no case: as it is


def test_whitespace_punctuation_and_filler():
    assert respace(" ", 0.2) == ""
    assert respace(" ", 0.7) == "  "
    assert repunctuate("?", 0.2) == ""
    assert repunctuate("?", 0.7) == "??"
    assert add_filler(" ", 0.0) == " um "
    assert add_filler(" ", 0.99) == " basically "


@pytest.mark.parametrize(
    ("phrase", "expected"),
    [
        ("do not", "don't"),
        ("Do not", "Don't"),
        ("DO NOT", "DON'T"),
        ("don't", "do not"),
        ("don\u2019t", "do not"),
        ("Can't", "Cannot"),
        ("I am", "I'm"),
        ("it is", "it's"),
        ("won't", "will not"),
    ],
)
def test_contractions_go_both_ways_in_the_original_case(phrase, expected):
    assert contract(phrase) == expected


def test_places_are_whole_words_and_keep_numbers():
    text = "It's 7.5 mmol/L, isn't it? It is 1,000 steps; he do not know  them"
    found = lambda op: [text[a:b] for a, b in places(op, text)]  # noqa: E731
    words = ["It", "mmol", "isn", "it", "It", "is", "steps", "he", "do", "not", "know", "them"]
    assert found("typos") == words
    assert found("casing")[:3] == ["It's", "mmol", "L"]
    assert found("punctuation") == [",", "?", ";"]  # not the . of 7.5 nor the , of 1,000
    assert found("contractions") == ["isn't", "It is", "do not"]  # it's: is or has, never undone
    assert found("whitespace")[-1] == "  "
    assert "\n" not in "".join(found("whitespace"))


# Words of scripts without case, Latin words with decomposed accents (NFD) and cased words.
CASELESS = [
    "\u0645\u0631\u062d\u0628\u0627",
    "\u05e9\u05dc\u05d5\u05dd",
    "\u4f60\u597d",
    "\uc758\uc0ac",
]
DECOMPOSED = ["Jose\u0301", "re\u0301sume\u0301", "cafe\u0301s", "Zoe\u0308", "nin\u0303o"]
CASED = ["I", "feel", "ill", "Doctor", "it's", "WHY"]


def test_casing_finds_no_place_in_caseless_words():
    text = " ".join([CASELESS[0], "I", CASELESS[1], "feel", CASELESS[2], "ill"])
    assert [text[a:b] for a, b in places("casing", text)] == ["I", "feel", "ill"]
    with pytest.raises(ValueError, match=r"operations: 'casing' finds no place"):
        expand(user(" ".join(CASELESS)), [NoiseSpec(operations=["casing"])])


def test_a_word_keeps_its_combining_marks():
    text = " ".join(DECOMPOSED)
    assert [text[a:b] for a, b in places("casing", text)] == DECOMPOSED
    # like José in NFC, a word with a decomposed accent is not an ASCII word
    with_ascii = text + " and more"
    assert [with_ascii[a:b] for a, b in places("typos", with_ascii)] == ["and", "more"]
    renees = "Rene\u0301es and ab"  # the "es" after the accent is no word of its own
    assert [renees[a:b] for a, b in places("typos", renees)] == ["and", "ab"]


def _recased(word: str) -> set[str]:
    flipped = (word[0].lower() if word[0].isupper() else word[0].upper()) + word[1:]
    return {word, word.lower(), word.upper(), flipped}


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.sampled_from(CASELESS + DECOMPOSED + CASED), min_size=1, max_size=8),
    seed=st.integers(0, 2**32),
    rate=st.sampled_from([0.1, 0.5, 1.0]),
)
def test_casing_recases_whole_words_and_never_caseless_ones(words, seed, rate):
    text = " ".join([*words, "ok"])
    (noisy,) = texts(NoiseSpec(operations=["casing"], seed=seed, rate=rate, variants=1), text)
    new = noisy.split(" ")
    assert len(new) == len(words) + 1
    for old, changed in zip([*words, "ok"], new, strict=True):
        assert changed in _recased(old)
        if old in CASELESS:
            assert changed == old


@settings(max_examples=200, deadline=None)
@given(
    words=st.lists(st.sampled_from(DECOMPOSED + CASED), min_size=1, max_size=8),
    seed=st.integers(0, 2**32),
)
def test_typos_never_part_a_letter_from_its_combining_mark(words, seed):
    text = " ".join([*words, "cough"])
    spec = NoiseSpec(operations=["typos"], seed=seed, rate=1.0, variants=1)
    (noisy,) = texts(spec, text)
    for old, changed in zip([*words, "cough"], noisy.split(" "), strict=True):
        if any(unicodedata.combining(c) for c in old):
            assert changed == old


# ------------------------------------------------------------------ seeded variants


def test_pinned_typos_worked_out_by_hand():
    # typos = stream 1; variant 1, attempt 0 is PCG64(SeedSequence([0, 1])) advanced by
    # 2**64 steps, whose first draws are .604 .361 .465 .406 .882 .771 .395 .528 .884.
    # places the(.604) cat(.361) sat(.465): cat and sat are below 0.5. Then three draws each:
    # cat: deletion (int(.406*4)=1) at int(.882*3)=2 -> "ca"; sat: deletion (.395) at
    # int(.528*3)=1 -> "st".
    spec = NoiseSpec(operations=["typos"], rate=0.5, variants=1, seed=0)
    assert texts(spec, "the cat sat") == ["the ca st"]


def test_pinned_casing_and_contractions_worked_out_by_hand():
    # casing = stream 2: .689 .938 .109 choose "sat"; its draws .354 .073 .784: of
    # [SAT, Sat] the int(.354*2)=0-th.
    assert texts(NoiseSpec(operations=["casing"], rate=0.3, variants=1), "the cat sat") == [
        "the cat SAT"
    ]
    # contractions = stream 6: .561 .369 choose nothing at rate 0.2, so .247 picks place
    # int(.247*2)=0: "do not".
    spec = NoiseSpec(operations=["contractions"], rate=0.2, variants=1)
    assert texts(spec, "I do not know what is wrong") == ["I don't know what is wrong"]


def test_the_same_seed_gives_the_same_texts_and_another_seed_others():
    spec = NoiseSpec(variants=4, seed=3, rate=0.2)
    first = texts(spec)
    assert first == texts(NoiseSpec(variants=4, seed=3, rate=0.2))
    assert first != texts(NoiseSpec(variants=4, seed=4, rate=0.2))
    assert len(first) == len(set(first)) == 4 * 5
    assert QUESTION not in first


_TEXTS_IN_A_FRESH_PROCESS = """
import json, sys
from dbpa.perturbations import expand, parse_specs
from dbpa.specs import Message
family = parse_specs(json.loads(sys.argv[1]))
original = [Message(role="user", content=sys.argv[2])]
print(json.dumps([p.messages[0].content for p in expand(original, family)]))
"""


def test_texts_do_not_depend_on_the_process():
    family = [{"kind": "noise", "variants": 3, "combine": True, "seed": 5}]
    expected = [p.messages[0].content for p in expand(user(QUESTION), parse_specs(family))]
    for hash_seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", _TEXTS_IN_A_FRESH_PROCESS, json.dumps(family), QUESTION],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert json.loads(out.stdout) == expected


def test_a_variant_does_not_depend_on_the_others_listed():
    alone = texts(NoiseSpec(operations=["filler"], variants=3))
    with_others = texts(NoiseSpec(operations=["typos", "filler"], variants=3))
    assert with_others[3:] == alone
    assert texts(NoiseSpec(operations=["filler"], variants=5))[:3] == alone


def test_ids_labels_and_descriptions():
    family = expand(
        (SYSTEM, *user(QUESTION)), [NoiseSpec(operations=["typos", "casing"], variants=2)]
    )
    assert [p.id for p in family] == [
        "noise-typos-1",
        "noise-typos-2",
        "noise-casing-1",
        "noise-casing-2",
    ]
    assert {p.label for p in family} == {"control"}
    assert {p.kind for p in family} == {"noise"}
    assert all(p.messages[0] == SYSTEM for p in family)
    assert family[0].description.startswith("typos noise at rate 0.1: ")
    combined = expand(user(QUESTION), [NoiseSpec(combine=True, variants=2, prefix="n", label=None)])
    assert [p.id for p in combined] == ["n-mixed-1", "n-mixed-2"]
    assert combined[0].label is None


def test_a_description_shows_the_edits_in_context():
    (p,) = expand(user("the cat sat"), [NoiseSpec(operations=["typos"], rate=0.5, variants=1)])
    assert p.description == "typos noise at rate 0.5: 'cat' -> 'ca', 'sat' -> 'st'"


def test_every_place_at_rate_one():
    (text,) = texts(NoiseSpec(operations=["punctuation"], rate=1, variants=1), "a, b. c?")
    assert text.replace(",", "").replace(".", "").replace("?", "") == "a b c"
    assert all(mark * 2 in text or mark not in text for mark in ",.?")
    assert text != "a, b. c?"


def test_apply_noise_and_the_edits_it_makes():
    text = "one two three four"
    edits = choose_edits("filler", text, places("filler", text), 1.0, np.random.default_rng(0))
    assert [(r.start, r.end) for r in edits] == [(3, 4), (7, 8), (13, 14)]
    assert all(r.new.startswith(" ") and r.new.endswith(" ") for r in edits)
    noisy = apply_noise("filler", text, 1.0, np.random.default_rng(0))
    assert noisy == splice(text, edits)
    assert (noisy.split()[0], noisy.split()[-1]) == ("one", "four")
    assert edits[0].in_context(text).before == "one two"


def test_taken_places_are_left_alone():
    text = "the cat sat"
    taken = bytearray(len(text))
    taken[4:7] = b"\x01\x01\x01"  # "cat" already edited by an earlier operation
    edits = choose_edits(
        "casing", text, places("casing", text), 1.0, np.random.default_rng(0), taken=taken
    )
    assert [text[r.start : r.end] for r in edits] == ["the", "sat"]


def test_combined_variants_name_the_operation_of_each_edit():
    family = expand(user(QUESTION), [NoiseSpec(combine=True, variants=30, rate=0.3)])
    for p in family:
        assert re.match(
            r"mixed noise at rate 0.3: (typos|casing|whitespace|punctuation|filler) ", p.description
        )
        assert p.messages[0].content != QUESTION
    assert len({p.messages[0].content for p in family}) == 30


def test_noise_applies_to_the_rendered_record():
    cvd = CardiovascularSpec(seed=1)
    specs = [cvd, NoiseSpec(operations=["typos"], variants=2)]
    rendered = base_prompt(specs)
    family = expand(user(rendered), specs)
    noisy = [p for p in family if p.kind == "noise"]
    assert len(noisy) == 2
    assert all(p.messages[0].content != rendered for p in noisy)
    # numbers are never touched: the patient's values stay
    for p in noisy:
        assert [c for c in p.messages[0].content if c.isdigit()] == [
            c for c in rendered if c.isdigit()
        ]


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"rate": 0}, "rate"),
        ({"rate": 1.5}, "rate"),
        ({"variants": 0}, "variants"),
        ({"seed": -1}, "seed"),
        ({"operations": []}, "operations"),
        ({"operations": ["typos", "typos"]}, "operations"),
        ({"operations": ["spelling"]}, "operations"),
        ({"typo_kinds": ["keyboard"]}, "typo_kinds"),
        ({"unknown": 1}, "unknown"),
    ],
)
def test_validation_errors_name_the_field(fields, field):
    with pytest.raises(ValidationError) as error:
        parse_specs([{"kind": "noise", **fields}])
    assert field in str(error.value)


def test_an_operation_without_a_place_is_an_error_naming_it():
    with pytest.raises(
        ValueError, match=r"perturbations\[0\] \(noise\): operations: 'contractions'"
    ):
        expand(user(QUESTION), [NoiseSpec(operations=["contractions"])])


def test_too_few_distinct_variants_is_an_error_naming_variants():
    # one mark: dropped or doubled, two variants at most
    with pytest.raises(ValueError, match=r"variants: 3 distinct punctuation variants"):
        expand(user("Is it safe?"), [NoiseSpec(operations=["punctuation"], variants=3)])
    assert len(texts(NoiseSpec(operations=["punctuation"], variants=2), "Is it safe?")) == 2


def test_too_few_variants_at_rate_one_is_not_told_to_raise_the_rate():
    # two marks at rate 1: both always edited, dropped or doubled: 4 variants at most
    spec = NoiseSpec(operations=["punctuation"], variants=5, rate=1.0)
    with pytest.raises(ValueError, match=r"variants: 5 distinct") as error:
        expand(user("Well, is it safe?"), [spec])
    message = str(error.value)
    assert "raise the rate" not in message
    assert "ask for fewer variants" in message
    assert "lower the rate" in message
    assert "combine" in message
    # the advice holds: at a lower rate the places edited vary too
    lower = spec.model_copy(update={"rate": 0.5})
    assert len(set(texts(lower, "Well, is it safe?"))) == 5


def test_too_few_variants_with_one_place_is_not_told_to_change_the_rate():
    with pytest.raises(ValueError, match=r"variants: 3 distinct") as error:
        expand(user("Is it safe?"), [NoiseSpec(operations=["punctuation"], variants=3)])
    assert "rate" not in str(error.value).split("; ", 1)[1]


def test_too_few_variants_below_rate_one_may_raise_the_rate():
    spec = NoiseSpec(operations=["punctuation"], variants=5, rate=0.01, combine=True)
    with pytest.raises(ValueError, match=r"variants: 5 distinct") as error:
        expand(user("Well, is it safe?"), [spec])
    assert "raise the rate" in str(error.value)
    assert "list more operations" in str(error.value)


# ------------------------------------------------------------------ the documentation


def _documented_noise() -> tuple[str, int, float, str]:
    section = KINDS_PAGE.read_text().split("## Noise\n", 1)[1].split("\n## ", 1)[0]
    stated = re.search(r"With\s+seed\s+(\d+)\s+and\s+rate\s+([\d.]+)\s+on\s+`([^`\n]+)`", section)
    assert stated is not None
    return section, int(stated[1]), float(stated[2]), stated[3]


def test_the_documented_noise_examples_are_what_the_code_writes():
    section, seed, rate, prompt = _documented_noise()
    rows = re.findall(r"^\| `(\w+)` \|.*\| `([^`]+)` \|$", section, re.MULTILINE)
    assert sorted(op for op, _ in rows) == sorted(OPERATIONS)
    for op, example in rows:
        (p,) = expand(user(prompt), [NoiseSpec(operations=[op], seed=seed, rate=rate, variants=1)])
        # "..." at either end or between spaces elides unchanged text
        pieces = re.split(r"(?:^|(?<= ))\.\.\.(?= |$)", example)
        shown = re.compile(".+".join(re.escape(piece) for piece in pieces))
        assert shown.fullmatch(p.messages[0].content), (op, p.messages[0].content)
        assert not shown.fullmatch(prompt), f"{op}: the example shows no edit"
    (described,) = re.findall(r"`(typos noise at rate [^`]+)`", section)
    (p,) = expand(user(prompt), [NoiseSpec(operations=["typos"], seed=seed, rate=rate, variants=1)])
    assert p.description == described


def test_a_small_rate_on_a_short_prompt_makes_about_one_edit():
    # docs: rate * places + (1 - rate)**places edits on average, 1.55 for 13 places at 0.1
    section, _, rate, prompt = _documented_noise()
    spans = places("typos", prompt)
    assert len(spans) == 13
    assert f"{rate * 13 + (1 - rate) ** 13:.2f}" == "1.55"
    assert "1.55" in section
    rng = np.random.default_rng(2)
    counts = [len(choose_edits("casing", prompt, spans, rate, rng)) for _ in range(20_000)]
    assert abs(np.mean(counts) - 1.55) < 0.04
    assert abs(np.mean(np.array(counts) == 1) - 0.62) < 0.02
    assert "62%" in section


def test_every_operation_is_listed_once_in_the_defaults_or_opt_in():
    assert set(NoiseSpec().operations) == set(OPERATIONS) - {"contractions"}


def test_variant_streams_jump_ahead_of_one_seeded_stream():
    from dbpa.perturbations._noise import VariantStreams

    streams = VariantStreams(7, 3)
    first = streams.at(2, 1).random(4).tolist()
    bits = np.random.PCG64(np.random.SeedSequence([7, 3]))
    bits.advance(2 * 2**64 + 1 * 2**48)
    assert first == np.random.Generator(bits).random(4).tolist()
    assert streams.at(2, 1).random(4).tolist() == first  # re-positioned, not continued
    assert streams.at(2, 0).random(4).tolist() != first
    assert streams.at(3, 1).random(4).tolist() != first
