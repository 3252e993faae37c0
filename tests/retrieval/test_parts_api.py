"""Multi-part questions, event ordering and session scoring through the real API: each part
reaches the top k, the explanation shows the parts, the results carry the event times to
order them by, and no new lever crosses users."""

from __future__ import annotations

from tests.factories import search, stage_rank
from tests.retrieval.test_pipeline_api import _load

MOVE, BAKERY = "2023-03-01T10:00:00Z", "2023-04-10T10:00:00Z"
QUESTION = "How long was it between the move to Lyon and the first day at the bakery?"
NEW_LEVERS = {"query_parts": True, "event_order": True, "sessions": True}


def moving_and_baking() -> list[dict]:
    # Twelve turns on the move (which also ask "how long", "first day") crowd the one
    # bakery turn out of the whole question's top 3.
    move = [
        {
            "content": f"How long was the first day of the move to Lyon? Trip {i} with the van",
            "session_id": "move",
            "event_time": MOVE,
        }
        for i in range(12)
    ]
    bakery = {
        "content": "Started my new job: 4am shift at the bakery, kneading bread",
        "session_id": "work",
        "event_time": BAKERY,
    }
    return [*move, bakery]


async def test_each_part_reaches_the_top_k_with_its_event_time(
    client, opensearch, index_name, user_id
) -> None:
    created = await _load(client, opensearch, index_name, user_id, moving_and_baking())
    bakery = created[-1]["id"]
    whole = await search(client, user_id, QUESTION, top_k=3, profile="paper")
    assert bakery not in [r["memory"]["id"] for r in whole["results"]]
    assert "parts" not in whole["stages"] and "part_slots" not in whole["stages"]
    for lever in ("query_parts", "event_order"):
        found = await search(
            client, user_id, QUESTION, top_k=3, profile="paper", levers={lever: True}
        )
        ids = [r["memory"]["id"] for r in found["results"]]
        assert bakery in ids
        assert found["stages"]["parts"] == "the move to Lyon | the first day at the bakery"
        assert found["stages"]["part_slots"] == "2 parts, 2 places each"
        assert found["query_analysis"]["parts"] == [
            "the move to Lyon",
            "the first day at the bakery",
        ]
        assert found["query_analysis"]["asks_order"] is True
        hit = next(r for r in found["results"] if r["memory"]["id"] == bakery)
        assert stage_rank(hit, "part 2") is not None  # found by its part
        assert stage_rank(hit, "part 1") is None or stage_rank(hit, "part 2") < stage_rank(
            hit, "part 1"
        )
        # The events' times order them: the move came first.
        times = {r["memory"]["session_id"]: r["event_at"] for r in found["results"]}
        assert times["move"] < times["work"]
        assert times["work"] == hit["memory"]["event_time"]


async def test_event_at_is_the_time_a_memory_names(client, opensearch, index_name, user_id) -> None:
    (said,) = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [{"content": "Yesterday I signed the lease for the flat", "event_time": BAKERY}],
    )
    found = await search(client, user_id, "When was the lease signed?", top_k=1)
    (hit,) = found["results"]
    assert hit["memory"]["event_time"] == said["event_time"]
    assert hit["event_at"] is not None and hit["event_at"][:10] == "2023-04-09"


async def test_event_order_leaves_other_questions_whole(
    client, opensearch, index_name, user_id
) -> None:
    await _load(client, opensearch, index_name, user_id, moving_and_baking())
    question = "Does she like boxes and bread?"  # two parts, but no question of time
    ordered = await search(client, user_id, question, profile="paper", levers={"event_order": True})
    assert "parts" not in ordered["stages"]
    assert ordered["stages"]["part_slots"] == "not a multi-part question"
    parts = await search(client, user_id, question, profile="paper", levers={"query_parts": True})
    assert parts["stages"]["parts"] == "Does she like boxes | Does she like bread"


async def test_sessions_spread_the_top_k_across_matching_sessions(
    client, opensearch, index_name, user_id
) -> None:
    created = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            {"content": f"Hiking day {i} on the coastal trail", "session_id": "trip"}
            for i in range(5)
        ]
        + [{"content": "Went hiking on the ridge trail with Sam", "session_id": "later"}],
    )
    later = created[-1]["id"]
    question = "Which trails did we hike?"  # a list question
    whole = await search(client, user_id, question, top_k=4, profile="paper")
    assert later not in [r["memory"]["id"] for r in whole["results"]]  # four days of the trip
    found = await search(
        client, user_id, question, top_k=4, profile="paper", levers={"sessions": True}
    )
    assert found["stages"]["sessions"] == "2 sessions scored"
    assert later in [r["memory"]["id"] for r in found["results"]]
    assert all(stage_rank(r, "sessions") is not None for r in found["results"])


async def test_new_levers_never_cross_users(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [{"content": "First day at the bakery: secret sourdough", "session_id": "move"}],
    )
    mine = await _load(client, opensearch, index_name, user_id, moving_and_baking()[:3])
    found = await search(client, user_id, QUESTION, top_k=10, profile="default", levers=NEW_LEVERS)
    assert found["stages"]["parts"]  # the parts were searched
    assert {r["memory"]["id"] for r in found["results"]} <= {m["id"] for m in mine}
    assert all(r["memory"]["user_id"] == user_id for r in found["results"])
