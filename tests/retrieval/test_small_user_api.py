"""A user with few memories through the real API: relevance measures the question as asked
(not the name-free text the legs searched), and the relevance guard of `default` leaves no
result in the first three above a much more relevant one unless both legs (BM25 and the vector
leg) rank it higher too."""

from __future__ import annotations

from app.config import SETTING_FIELDS
from tests.factories import search
from tests.retrieval.test_pipeline_api import _load

MARGIN = SETTING_FIELDS["relevance_order_margin"].default
HEAD = SETTING_FIELDS["relevance_order_head"].default

# Two friends talking: one session, eight turns, each a memory with its speaker.
TALK = [
    ("Ann", "Hi Bob, did you get home all right after the concert?"),
    ("Bob", "Yes, thanks! Music was always a big part of my childhood, you know."),
    ("Ann", "I remember! Your brother told me you play the cello in the city orchestra."),
    ("Bob", "He talks too much. How is your new job going?"),
    ("Ann", "Busy, the bakery opens at five so I get up at four."),
    ("Bob", "That is early! I could never do that."),
    ("Ann", "You get used to it. The bread smells wonderful at that hour."),
    ("Bob", "I will come by on Saturday for a loaf of rye."),
]
QUESTIONS = [
    "What instrument does Bob play?",
    "What time does Ann start work?",
    "Where does Bob play music?",
    "What will Bob buy on Saturday?",
]


async def _talk(client, opensearch, index_name, user_id) -> None:
    await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            {
                "content": f"{speaker}: {text}",
                "speaker": speaker,
                "session_id": "evening",
                "event_time": f"2026-05-02T20:{minute:02d}:00Z",
            }
            for minute, (speaker, text) in enumerate(TALK)
        ],
    )


async def _load_turns(client, opensearch, index_name, user_id, talk, session_id: str) -> None:
    """One session of (speaker, text) turns, each a memory "Speaker: text"."""
    turns = [{"content": f"{s}: {t}", "speaker": s, "session_id": session_id} for s, t in talk]
    await _load(client, opensearch, index_name, user_id, turns)


def _by_content(found: dict) -> dict[str, dict]:
    return {r["memory"]["content"]: r for r in found["results"]}


async def test_relevance_is_the_question_as_asked_whatever_text_the_legs_searched(
    client, opensearch, index_name, user_id
) -> None:
    await _talk(client, opensearch, index_name, user_id)
    question = QUESTIONS[0]
    found = await search(client, user_id, question, top_k=8, min_relevance=0)
    # The legs searched the question without the speakers' names...
    assert found["stages"]["speaker_query"] == "What instrument does play?"
    # ...and relevance is the question's own: the same as where the legs search it whole.
    whole = await search(
        client, user_id, question, top_k=8, min_relevance=0, levers={"speaker_query": False}
    )
    named, plain = _by_content(found), _by_content(whole)
    assert set(named) == set(plain) == {f"{s}: {t}" for s, t in TALK}
    for content, result in named.items():
        assert abs(result["relevance"] - plain[content]["relevance"]) < 1e-3, content
    # Not the name-free text's: that one's cosines differ.
    free = await search(
        client,
        user_id,
        "What instrument does play?",
        top_k=8,
        min_relevance=0,
        levers={"speaker_query": False},
    )
    differ = [
        c
        for c, r in _by_content(free).items()
        if abs(r["relevance"] - named[c]["relevance"]) > 0.01
    ]
    assert len(differ) >= 4


async def test_no_result_of_the_head_stands_above_a_much_more_relevant_one_unbacked(
    client, opensearch, index_name, user_id
) -> None:
    await _talk(client, opensearch, index_name, user_id)
    for question in QUESTIONS:
        found = await search(client, user_id, question, top_k=8)
        assert found["stages"]["relevance_guard"].startswith("moved ")
        results = found["results"]
        for above in range(min(HEAD, len(results))):
            for below in range(above + 1, len(results)):
                high, low = results[above], results[below]
                if low["relevance"] - high["relevance"] <= MARGIN:
                    continue
                # An inversion beyond the margin stands only where both legs back it.
                for leg in ("bm25", "768d"):
                    rank_high = high["explanation"].get(leg, {}).get("rank")
                    rank_low = low["explanation"].get(leg, {}).get("rank")
                    assert rank_high is not None, (question, leg, high["memory"]["content"])
                    assert rank_low is None or rank_high < rank_low, (question, leg)
        # Scores still fall with the order (a moved result takes its place's score).
        scores = [r["score"] for r in results]
        assert scores == sorted(scores, reverse=True), question
        # The guard's explanation stage is the final order's, for the results shown.
        assert [r["explanation"]["relevance_guard"]["rank"] for r in results] == list(
            range(1, len(results) + 1)
        )
    # Switched off, the fused order is shown as it is (the paper profile has no guard).
    plain = await search(client, user_id, QUESTIONS[0], top_k=8, profile="paper")
    assert "relevance_guard" not in plain["stages"]


async def test_a_question_naming_a_speaker_keeps_the_memory_that_answers_it(
    client, opensearch, index_name, user_id
) -> None:
    # Measured with the name-free text ("What physical change did make?"), the answer's
    # relevance fell under the floor and the search left it out; the question as asked
    # ("...did Mia make?") keeps it near the top.
    talk = [
        ("Leo", "Hi Mia! The rain finally stopped here, the garden looks gorgeous."),
        ("Mia", "It did here too! Wish I had a trip planned, but my thesis eats every evening."),
        ("Leo", "Theses are tough. Keep me posted on how it goes, alright?"),
        ("Mia", "Guess what I did? I cut my hair really short - come and see!"),
        ("Leo", "No way! I bet it suits you."),
        ("Mia", "It feels so light. My sister says I look ten years younger."),
        ("Leo", "Send me a photo when you can."),
        ("Mia", "Will do, right after my seminar tomorrow."),
    ]
    await _load_turns(client, opensearch, index_name, user_id, talk, "rain")
    found = await search(client, user_id, "What physical change did Mia make?", top_k=5)
    shown = [r["memory"]["content"] for r in found["results"]]
    answer = "Mia: Guess what I did? I cut my hair really short - come and see!"
    assert answer in shown[:3], shown
    floor = SETTING_FIELDS["min_relevance"].default
    assert _by_content(found)[answer]["relevance"] >= floor


async def test_bm25_alone_does_not_keep_a_result_above_a_much_more_relevant_one(
    client, opensearch, index_name, user_id
) -> None:
    # "Which marathon did Mia run?": the training plan shares the most words with the
    # question (BM25 ranks it first) and the fused order puts it first, but the vector leg
    # ranks the turn that names the race above it, and so does the question's cosine, by
    # more than the margin. One leg is not enough to keep it there.
    talk = [
        ("Mia", "The marathon training plan says to run every morning."),
        ("Leo", "Mia finished her first marathon in Berlin in under four hours!"),
        ("Mia", "I never thought I could run that far, my legs still hurt."),
        ("Leo", "I started learning the violin, my teacher is very patient."),
        ("Mia", "Training every morning was hard but worth it."),
        ("Leo", "Next month I play in a small recital at the library."),
    ]
    await _load_turns(client, opensearch, index_name, user_id, talk, "race")
    question = "Which marathon did Mia run?"
    plan, race = (f"{s}: {t}" for s, t in talk[:2])
    fused = await search(client, user_id, question, top_k=6, levers={"relevance_guard": False})
    by_content = _by_content(fused)
    assert by_content[plan]["relevance"] + MARGIN < by_content[race]["relevance"]
    assert by_content[plan]["explanation"]["bm25"]["rank"] == 1
    assert by_content[race]["explanation"]["768d"]["rank"] == 1
    shown = [r["memory"]["content"] for r in fused["results"]]
    assert shown.index(plan) < shown.index(race)  # the fused order, unguarded
    guarded = [
        r["memory"]["content"]
        for r in (await search(client, user_id, question, top_k=6))["results"]
    ]
    assert guarded.index(race) < guarded.index(plan), guarded
    assert race in guarded[:HEAD]


# A user's own facts in the first person, beside facts about the people around her told in the
# third person (memories with no speaker, as an agent stores what a user says about herself).
OWN_FACTS = [
    "I run a small bakery on the high street.",
    "My husband Omar drives a tram.",
    "He has worked for the city for ten years.",
    "Our son is learning to swim.",
    "I bake the bread at four every morning.",
    "My sister is a nurse in Leeds.",
    "She works nights at the children's hospital.",
    "I would like to open a second shop next year.",
]


async def test_a_question_about_the_user_in_the_third_person_finds_her_own_fact_first(
    client, opensearch, index_name, user_id
) -> None:
    # Asked "she", the sentence model used to prefer the one memory that says "she" (the
    # sister's) over the user's own fact in the first person; embedded in the first person
    # (lever first_person), the question finds the user's own fact first.
    await _load(client, opensearch, index_name, user_id, [{"content": c} for c in OWN_FACTS])
    sister = OWN_FACTS[6]
    for question, answer in [
        ("What is her business?", OWN_FACTS[0]),
        ("What does she do every morning?", OWN_FACTS[4]),
        ("When does she start work?", OWN_FACTS[4]),
    ]:
        found = await search(client, user_id, question, top_k=5)
        assert found["stages"]["first_person"] == question.replace("her ", "my ").replace(
            "she", "I"
        )
        shown = [r["memory"]["content"] for r in found["results"]]
        assert shown[0] == answer, (question, shown)
        # Without the lever, the third person's memory came first.
        before = await search(client, user_id, question, top_k=5, levers={"first_person": False})
        assert before["results"][0]["memory"]["content"] == sister, question
        assert "first_person" not in before["stages"]
