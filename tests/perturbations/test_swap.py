"""The swap kind: whole words only, case and possessives kept, the his/her/him rule."""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dbpa.perturbations import (
    PERSON_NAMES,
    SwapSpec,
    expand,
    parse_specs,
    swap_gender,
    swap_names,
)
from dbpa.specs import Message


def user(text: str) -> tuple[Message, ...]:
    return (Message(role="user", content=text),)


def swapped(text: str) -> str:
    return swap_gender(text).text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # her: object before a function word or punctuation, possessive before anything else
        ("Tell her the result.", "Tell him the result."),
        ("I saw her.", "I saw him."),
        ("I saw her, then left.", "I saw him, then left."),
        ("Her doctor called.", "His doctor called."),
        ("She took her own pills.", "He took his own pills."),
        # the documented ambiguity: a bare noun after "her" reads as a possessive
        ("Give her medicine.", "Give his medicine."),
        # her: object before a verb, a pronoun, or an adverb that ends the phrase
        ("Let her know.", "Let him know."),
        ("Let her know the results.", "Let him know the results."),
        ("I saw her", "I saw him"),
        ("Tell her I called.", "Tell him I called."),
        ("Tell her she is fine.", "Tell him he is fine."),
        ("I like her more", "I like him more"),
        ("I like her more than him.", "I like him more than her."),
        ("I know her well.", "I know him well."),
        ("Make her feel better.", "Make him feel better."),
        ("Call her back tomorrow.", "Call him back tomorrow."),
        ("Let her rest.", "Let him rest."),
        ("Tell her everything.", "Tell him everything."),
        # her: object before a time expression or a preposition
        ("Let her know that I saw her last week.", "Let him know that I saw him last week."),
        ("I will see her next Monday.", "I will see him next Monday."),
        ("I saw her this morning.", "I saw him this morning."),
        ("I saw her tonight.", "I saw him tonight."),
        ("I saw her recently.", "I saw him recently."),
        ("I met her during the visit.", "I met him during the visit."),
        ("I treat her like a friend.", "I treat him like a friend."),
        ("Sit between her and me.", "Sit between him and me."),
        ("Her last visit was fine.", "His last visit was fine."),
        ("Her next appointment is soon.", "His next appointment is soon."),
        # her: possessive before a noun or an adjective, comparatives included
        ("Her more serious cough", "His more serious cough"),
        ("Her first symptoms were mild.", "His first symptoms were mild."),
        ("Her well-being matters.", "His well-being matters."),
        ("Her know-how", "His know-how"),
        # his: possessive before a word, standing alone before punctuation or a function word
        ("His cough is worse.", "Her cough is worse."),
        ("The choice is his.", "The choice is hers."),
        ("The choice is his and not mine.", "The choice is hers and not mine."),
        ("Is it hers?", "Is it his?"),
        ("Tell him and her.", "Tell her and him."),
        ("John told her his plan.", "John told him her plan."),
        ("He hurt himself.", "She hurt herself."),
    ],
)
def test_his_her_him_hers(text, expected):
    assert swapped(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("She said he would come.", "He said she would come."),
        ("HE SAID HIS WIFE", "SHE SAID HER HUSBAND"),
        ("HER doctor", "HIS doctor"),
        ("The man's son and the woman's daughter", "The woman's daughter and the man's son"),
        ("he'd rather not; she's fine", "she'd rather not; he's fine"),
        ("Mr. Smith met Mrs Jones and Ms. Lee.", "Ms. Smith met Mr Jones and Mr. Lee."),
        ("It took 200 ms and 3 mr.", "It took 200 ms and 3 mr."),
        ("the theme of the manager's message", "the theme of the manager's message"),
        ("Men and women, boys and girls", "Women and men, girls and boys"),
    ],
)
def test_gendered_words_whole_words_case_and_possessives(text, expected):
    assert swapped(text) == expected


def test_swapping_twice_gives_back_the_unambiguous_text():
    text = "He and his brother met their uncle; the man told him."
    assert swapped(swapped(text)) == text
    assert swap_gender(text).swaps == (
        ("He", "She"),
        ("his", "her"),
        ("brother", "sister"),
        ("uncle", "aunt"),
        ("man", "woman"),
        ("him", "her"),
    )


def test_names_are_whole_words_with_their_possessives():
    mapping = {"John": "Maria", "James": "Sofia", "Ann": "Carlos"}
    text = "John's dog, James' cat, Ann, Annual, Johnson and JOHN."
    assert (
        swap_names(text, mapping) == "Maria's dog, Sofia's cat, Carlos, Annual, Johnson and MARIA."
    )
    assert swap_names("Ann's and Carlos'", {"Ann": "Thomas"}) == "Thomas's and Carlos'"
    assert swap_names("Ann' s", {"Ann": "Thomas"}) == "Thomas' s"
    # after a name not ending in s, an apostrophe closes a quote
    assert swap_names("She said 'ask Ann'.", {"Ann": "Maria"}) == "She said 'ask Maria'."


def test_built_in_names_span_genders_and_origins():
    genders = {p.gender for p in PERSON_NAMES}
    origins = {p.origin for p in PERSON_NAMES}
    assert genders == {"female", "male"}
    assert len(origins) >= 6
    for origin in origins:
        assert {p.gender for p in PERSON_NAMES if p.origin == origin} == genders
    names = [p.name for p in PERSON_NAMES]
    assert len(names) == len(set(names))


def test_names_match_whatever_their_case_each_keeping_its_own():
    text = "JOHN SAID: John's cough and JAMES' fever; Jo\u00ebl and JOE\u0308L."
    mapping = {"John": "Maria", "James": "Sofia", "Jo\u00ebl": "Kenji"}
    assert swap_names(text, mapping) == (
        "MARIA SAID: Maria's cough and SOFIA'S fever; Kenji and KENJI."
    )
    # a word in lowercase is not a capitalised name: hope, will, mark are words
    assert swap_names("Hope says I hope so.", {"Hope": "Ana"}) == "Ana says I hope so."
    family = expand(user("JOHN called. John is 70."), [SwapSpec(variants=3)])
    for p in family:
        new = p.messages[0].content.split()[2]
        assert p.messages[0].content == f"{new.upper()} called. {new} is 70."
        assert p.description == f"names swap: John -> {new}"


def test_a_name_with_decomposed_accents_is_one_word_swapped_whole():
    nfd = "Jose\u0301 called; Jose\u0301's wife and Jos\u00e9 are here."
    assert (
        swap_names(nfd, {"Jose": "Carlos"}) == "Carlos called; Carlos's wife and Carlos are here."
    )
    assert swap_names(nfd, {"Jos\u00e9": "Ren\u00e9"}) == (
        "Ren\u00e9 called; Ren\u00e9's wife and Ren\u00e9 are here."
    )
    (p,) = expand(user("Jose\u0301 is 70."), [SwapSpec(names=["Zoe\u0308"])])
    assert p.messages[0].content == "Zoe\u0308 is 70."
    assert p.description == "names swap: Jose -> Zoe\u0308"
    for p in expand(user(nfd), [SwapSpec(variants=5)]):
        assert not any(unicodedata.combining(c) for c in p.messages[0].content)
    (p,) = expand(user("Rene\u0301e asks."), [SwapSpec(find=["Rene\u0301e"], names=["Ana"])])
    assert p.messages[0].content == "Ana asks."


_BUILT_IN_NAMES = [p.name for p in PERSON_NAMES]
_GENDER = {p.name: p.gender for p in PERSON_NAMES}


@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(
        st.tuples(st.sampled_from([*_BUILT_IN_NAMES[:20], "called", "and", "is"]), st.booleans()),
        min_size=1,
        max_size=8,
    ).filter(lambda words: any(w in _GENDER for w, _ in words)),
    accent=st.sampled_from(["", "\u0301", "\u0308"]),
    seed=st.integers(0, 2**32),
)
def test_each_name_is_swapped_whole_and_alike_in_every_case(words, accent, seed):
    written = [(w.upper() if upper else w) + (accent if w in _GENDER else "") for w, upper in words]
    (p,) = expand(user(" ".join(written)), [SwapSpec(seed=seed)])
    new = p.messages[0].content.split(" ")
    assert not any(unicodedata.combining(c) for c in p.messages[0].content)
    given_to: dict[str, str] = {}
    for (old, upper), changed in zip(words, new, strict=True):
        if old not in _GENDER:
            assert changed == (old.upper() if upper else old)
            continue
        assert given_to.setdefault(old, changed.capitalize()) == changed.capitalize()
        assert changed == (changed.upper() if upper else changed.capitalize())
        assert _GENDER[changed.capitalize()] == _GENDER[old]
        assert changed.capitalize() != old


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Diego moved to San Diego.", "Carlos moved to San Diego."),
        ("Maria lives in Santa Maria.", "Carlos lives in Santa Maria."),
        (
            "Thomas works on Thomas Street near St. John's.",
            "Carlos works on Thomas Street near St. John's.",
        ),
        (
            "James went to James Island and Saint Thomas with Thomas.",
            "Carlos went to James Island and Saint Thomas with Carlos.",
        ),
        ("Will he recover? Will said he will.", "Will he recover? Carlos said he will."),
        ("WILL SHE RECOVER? Ask Will.", "WILL SHE RECOVER? Ask Carlos."),
        ("Will Maria recover? Will, are you there?", "Will Carlos recover? Carlos, are you there?"),
        ("May I ask May?", "May I ask Carlos?"),
        ("Will said he is ill.", "Carlos said he is ill."),
        ("Minho Park called.", "Carlos Park called."),
        ("SAN DIEGO, said DIEGO", "SAN DIEGO, said CARLOS"),
    ],
)
def test_names_are_never_swapped_in_place_names_or_as_verbs(text, expected):
    names = ("Diego", "Maria", "Thomas", "John", "James", "Will", "May", "Minho")
    mapping = {n: "Carlos" for n in names}
    assert swap_names(text, mapping) == expected


def test_a_name_only_in_a_place_name_is_not_found():
    with pytest.raises(ValueError, match=r"find: the user prompt has no name"):
        expand(user("I live in San Diego."), [SwapSpec()])
    with pytest.raises(ValueError, match=r"find: the user prompt has no name"):
        expand(user("Will he recover?"), [SwapSpec(find=["Will"], names=["Ana"])])


PROMPT = "John is 70 and smokes. Should he take a statin? His wife asked John's doctor."


def test_name_swaps_keep_the_gender_and_vary_the_origin():
    family = expand(user(PROMPT), [SwapSpec(variants=4, seed=1)])
    male = {p.name for p in PERSON_NAMES if p.gender == "male"}
    new = [p.messages[0].content.split()[0] for p in family]
    assert len(set(new)) == 4
    assert set(new) <= male - {"John"}
    for p, name in zip(family, new, strict=True):
        assert p.id == f"swap-names-{name.lower()}"
        assert p.messages[0].content == PROMPT.replace("John", name)
        assert p.label == "control"
        assert p.description == f"names swap: John -> {name}"
    assert family == expand(user(PROMPT), [SwapSpec(variants=4, seed=1)])
    assert new != [
        p.messages[0].content.split()[0]
        for p in expand(user(PROMPT), [SwapSpec(variants=4, seed=2)])
    ]
    # more variants keep the first ones
    assert expand(user(PROMPT), [SwapSpec(variants=6, seed=1)])[:4] == family


def test_a_gender_swap_swaps_the_words_and_the_names():
    (p,) = expand(user(PROMPT), [SwapSpec(swap="gender", names=["Maria"])])
    assert p.messages[0].content == (
        "Maria is 70 and smokes. Should she take a statin? Her husband asked Maria's doctor."
    )
    assert p.id == "swap-gender-maria"
    assert p.description == "gender swap: he -> she, His -> Her, wife -> husband; John -> Maria"


def test_a_gender_swap_without_names_is_one_perturbation():
    (p,) = expand(user("Should he take a statin?"), [SwapSpec(swap="gender")])
    assert (p.id, p.messages[0].content) == ("swap-gender", "Should she take a statin?")
    with pytest.raises(ValueError, match=r"variants: 2 gender swaps"):
        expand(user("Should he take a statin?"), [SwapSpec(swap="gender", variants=2)])
    with pytest.raises(ValueError, match=r"no gendered word or name"):
        expand(user("Should I take a statin?"), [SwapSpec(swap="gender")])


def test_find_and_names_choose_what_is_swapped():
    spec = SwapSpec(find=["Zbigniew"], names=["Ana", "Bo"], variants=2)
    family = expand(user("Zbigniew asks."), [spec])
    assert sorted(p.messages[0].content for p in family) == ["Ana asks.", "Bo asks."]
    several = expand(user("John met Maria."), [SwapSpec(variants=3)])
    for p in several:
        first, _, second = p.messages[0].content.rstrip(".").split()
        assert first != second
        assert {first, second}.isdisjoint({"John", "Maria"})


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (SwapSpec(), "find"),
        (SwapSpec(find=["Zbigniew"]), "names"),
        (SwapSpec(names=["Ana"], variants=2), "variants"),
    ],
)
def test_errors_name_the_field(spec, field):
    text = "Zbigniew asks." if spec.find else "Should a smoker take a statin?"
    if spec.names:
        text = "John asks."
    with pytest.raises(ValueError, match=rf"perturbations\[0\] \(swap\): {field}: "):
        expand(user(text), [spec])


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"swap": "age"}, "swap"),
        ({"variants": 0}, "variants"),
        ({"names": []}, "names"),
        ({"find": ["John;"]}, "find"),
        ({"find": ["\u0301John"]}, "find"),
        ({"names": ["Ana-"]}, "names"),
    ],
)
def test_validation_errors_name_the_field(fields, field):
    with pytest.raises(ValidationError) as error:
        parse_specs([{"kind": "swap", **fields}])
    assert field in str(error.value)
