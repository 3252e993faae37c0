"""Entities without the stores: the NER model's mentions (the real spaCy pipeline the project
installs) and the alias rule that merges forms of one name."""

from __future__ import annotations

import pytest

from app.memories.entities import Known, resolve, short_form_of
from app.ml.ner import EntityRecognizer, Mention, clean_name


@pytest.fixture(scope="module")
def recognizer() -> EntityRecognizer:
    return EntityRecognizer()


def test_the_model_finds_typed_names_and_drops_dates(recognizer) -> None:
    [found] = recognizer.extract(
        ["My sister Priya is flying to Lisbon with Ryanair next Tuesday for a conference."]
    )
    names = {(m.name, m.type) for m in found}
    assert ("Priya", "person") in names
    assert ("Lisbon", "place") in names
    assert all(m.type != "date" and "Tuesday" not in m.name for m in found)


def test_a_text_without_names_has_no_entities_and_order_is_kept(recognizer) -> None:
    found = recognizer.extract(["i am allergic to peanuts", "Kevin hiked in Yosemite"])
    assert found[0] == []
    assert "Kevin" in {m.name for m in found[1]}
    assert recognizer.extract([]) == []


def test_a_japanese_text_is_read_by_the_japanese_model(recognizer) -> None:
    """GiNZA's ja_ginza reads the texts marked Japanese; the English model, which reads the
    others, finds nothing in Japanese (what a Japanese memory got before)."""
    japanese = "夫の健太は来月から札幌の病院で働きます。"
    found = recognizer.extract([japanese, "Kevin hiked in Yosemite", japanese], ["ja", "en", None])
    assert {(m.name, m.type) for m in found[0]} == {("健太", "person"), ("札幌", "place")}
    assert "Kevin" in {m.name for m in found[1]}
    assert found[2] == []
    with pytest.raises(ValueError, match="one language per text"):
        recognizer.extract([japanese], [])


@pytest.mark.parametrize(
    ("text", "entity_type", "name"),
    [
        ("the Red Cross", "organisation", "Red Cross"),
        ("The Name of the Wind", "title", "The Name of the Wind"),
        ("Dr. Okafor", "person", "Okafor"),
        ("Melanie's", "person", "Melanie"),
        ("  New \n York ", "place", "New York"),
        ("高橋さん", "person", "高橋"),
        ("「千と千尋の神隠し」", "title", "千と千尋の神隠し"),
    ],
)
def test_names_are_cleaned(text: str, entity_type: str, name: str) -> None:
    assert clean_name(text, entity_type) == name


def test_a_short_form_is_a_single_word_beginning_the_first_word_of_the_other() -> None:
    assert short_form_of("Mel", "Melanie")
    assert short_form_of("Marie", "Marie Curie")
    assert not short_form_of("Al", "Alice")  # too short to tell
    assert not short_form_of("Curie", "Marie Curie")
    assert not short_form_of("Mel Gibson", "Melanie")
    assert not short_form_of("melanie", "Melanie")
    assert not short_form_of("Daniel", "Danielle")  # another name, not a clipped one
    assert not short_form_of("Carol", "Caroline")


def test_forms_of_one_person_merge_whichever_comes_first() -> None:
    known: list[Known] = []
    melanie = resolve(known, Mention("Melanie", "person"))
    assert resolve(known, Mention("Mel", "person")) is melanie
    assert resolve(known, Mention("MEL", "person")) is melanie
    assert (melanie.name, melanie.aliases) == ("Melanie", ["Mel"])

    known = [Known(name="Mel", type="person")]
    longer = resolve(known, Mention("Melanie", "person"))
    assert longer is known[0]
    assert (longer.name, longer.aliases) == ("Melanie", ["Mel"])


def test_ambiguous_short_forms_and_other_types_stay_apart() -> None:
    known: list[Known] = []
    daniel = resolve(known, Mention("Daniel", "person"))
    danielle = resolve(known, Mention("Danielle", "person"))
    assert daniel is not danielle
    dan = resolve(known, Mention("Dan", "person"))
    assert len({id(daniel), id(danielle), id(dan)}) == 3  # "Dan" fits two: neither
    place = resolve(known, Mention("Paris", "place"))
    person = resolve(known, Mention("Paris", "person"))
    assert place is not person
    assert resolve(known, Mention("Par", "place")) is not place  # only people merge by prefix
