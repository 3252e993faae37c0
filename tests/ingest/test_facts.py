"""Facts from messages without an LLM (app/ingest/facts.py): the units a message is cut into
(service-free), the shipped model's file, and with the provisioned embedder (marked `models`
by its fixture) what the model keeps and drops."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.ingest.facts import (
    CUES,
    MODEL_PATH,
    FactModel,
    fact_units,
    shipped_fact_model,
    unit_cues,
)
from app.memories.sentences import MAX_SENTENCES
from app.ml.embedder import Embedder
from app.ml.scheduling.work import Work, WorkClass
from tests.ml.conftest import model_path  # noqa: F401 (the provisioned embedder's path)


@pytest.mark.parametrize(
    ("content", "units"),
    [
        ("Hi, I'm Priya. I live in Boston.", ["Hi, I'm Priya.", "I live in Boston."]),
        (
            "Actually, I prefer aisle seats now, my knee hurts.",
            ["Actually, I prefer aisle seats now, my knee hurts."],
        ),
        (
            "Could you recommend a running app? We just moved to Valencia, so I need new routes.",
            [
                "Could you recommend a running app?",
                "We just moved to Valencia, so I need new routes.",
            ],
        ),
        (
            "i moved to denver last week. any tips for hiking? thanks!",
            ["i moved to denver last week.", "any tips for hiking?", "thanks!"],
        ),
        (
            "I saw Dr. Patel at 3 p.m. yesterday. I paid $3.50, e.g. cheap.",
            ["I saw Dr. Patel at 3 p.m. yesterday.", "I paid $3.50, e.g. cheap."],
        ),
        ("We live on Main St. in Austin.", ["We live on Main St. in Austin."]),
        ("Meet at 5 p.m. We eat after.", ["Meet at 5 p.m.", "We eat after."]),
        # A short piece with no subject of its own leans on the statement before it.
        (
            "I've started eating fish again. So pescatarian I guess. Any salmon recipes?",
            ["I've started eating fish again. So pescatarian I guess.", "Any salmon recipes?"],
        ),
        (
            "We moved to Leeds. Thanks! Settled in now.",
            ["We moved to Leeds.", "Thanks!", "Settled in now."],
        ),
        ("J. K. Rowling is my favourite.", ["J. K. Rowling is my favourite."]),
        ("I was thinking... maybe I should run.", ["I was thinking... maybe I should run."]),
        ("Hi!\nThanks!\n\n1. Pack light", ["Hi!", "Thanks!", "1. Pack light"]),
        (
            "I live in Boston; my sister lives in Queens.",
            ["I live in Boston;", "my sister lives in Queens."],
        ),
        ('He said "go home." I left at once.', ['He said "go home."', "I left at once."]),
        ("  Wow.  ", ["Wow."]),
        ("", []),
        (
            "私は東京に住んでいます。犬を飼っています。",
            ["私は東京に住んでいます。犬を飼っています。"],
        ),
    ],
)
def test_a_message_is_cut_into_units_as_said(content: str, units: list[str]) -> None:
    assert fact_units(content) == units


def test_every_unit_is_an_exact_substring_in_order() -> None:
    content = "Hey!  My son is 7.\nHe loves trains? yes. We moved to St. Paul in May; it's cold."
    found = fact_units(content)
    at = 0
    for unit in found:
        at = content.index(unit, at) + len(unit)
    assert len(found) == 5  # "it's cold." leans on the clause before it


def test_a_long_message_keeps_its_tail_in_the_last_unit() -> None:
    content = " ".join(f"I own {n} books." for n in range(MAX_SENTENCES + 5))
    found = fact_units(content)
    assert len(found) == MAX_SENTENCES
    assert found[-1].startswith(f"I own {MAX_SENTENCES - 1} books.")
    assert found[-1].endswith(f"I own {MAX_SENTENCES + 4} books.")
    assert found[-1] in content


def test_the_cues_read_whom_a_unit_is_about_and_what_it_asks() -> None:
    cues = dict(zip(CUES, unit_cues("Can you suggest recipes for my daughter?"), strict=True))
    assert cues["first_person"] == cues["my_people"] == cues["question_mark"] == 1.0
    assert cues["request_opening"] == cues["second_person"] == 1.0
    thanks = dict(zip(CUES, unit_cues("That's great, thanks!"), strict=True))
    assert thanks["greeting_or_thanks"] == thanks["reaction"] == 1.0
    assert thanks["first_person"] == thanks["has_number"] == 0.0


def test_the_shipped_model_loads_and_matches_its_file() -> None:
    model = shipped_fact_model()
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    assert model.threshold == data["threshold"]
    assert 0.0 < model.threshold < 1.0
    assert model.dimensions == 768
    width = model.dimensions + len(CUES)
    assert model.weights.shape == model.mean.shape == model.scale.shape == (width,)
    assert np.all(model.scale > 0)
    assert model.reads("/home/me/.cache/cognis-memory/models/" + model.embedding_model)
    assert not model.reads("sentence-transformers/all-MiniLM-L6-v2")
    # its cross-validated precision met the target it was chosen for
    assert data["cross_validation"]["precision"] >= data["target_precision"]


def test_a_model_trained_on_other_cues_is_refused() -> None:
    data = json.loads(MODEL_PATH.read_text(encoding="utf-8"))
    data["features"] = [*data["features"][:-1], "something_else"]
    with pytest.raises(ValueError, match="other cues"):
        FactModel.from_json(data)


def test_a_judgement_says_its_score_and_threshold() -> None:
    model = shipped_fact_model()
    units = ["I have a dog.", "Thanks!"]
    # scores for hand-made vectors: what matters is the verdict follows score vs threshold
    vectors = np.zeros((2, model.dimensions))
    judged = model.judge(units, vectors, threshold=0.0)
    assert [j.is_fact for j in judged] == [True, True]
    assert judged[0].reason.startswith("fact: score ")
    judged = model.judge(units, vectors, threshold=1.01)
    # Above any score: only a plain statement about oneself is still a fact.
    assert [j.is_fact for j in judged] == [True, False]
    assert judged[0].reason.startswith("fact: said of oneself, score ")
    assert "< threshold 1.01" in judged[1].reason
    assert model.facts([], np.zeros((0, model.dimensions))) == []


@pytest.fixture(scope="module")
def embedder(model_path: str) -> Embedder:  # noqa: F811 (the fixture imported above)
    model = Embedder(model_path, backend="torch", intra_op_threads=1)
    model.load()
    return model


async def test_the_model_keeps_facts_and_drops_small_talk(embedder: Embedder) -> None:
    model = shipped_fact_model()
    assert model.reads(embedder.model_name)
    message = (
        "Hi! Could you recommend a running app? We just moved to Valencia, so I need new "
        "routes. My daughter is 7 and allergic to peanuts. Thanks so much! That sounds great!"
    )
    units = fact_units(message)
    vectors = np.stack([e.full for e in await embedder.embed(units, Work(WorkClass.BULK))])
    kept = model.facts(units, vectors)
    assert kept == [
        "We just moved to Valencia, so I need new routes.",
        "My daughter is 7 and allergic to peanuts.",
    ]
