"""Context, speaker, entity, feedback and neighbour levers through the real API: what is
stored, what a search returns, and isolation (no lever ever crosses users or sessions the
caller may not see)."""

from __future__ import annotations

from tests.factories import search, stage_rank
from tests.retrieval.test_pipeline_api import _load

AS_OF = "2023-05-08T10:00:00Z"
# The default profile with every other lever on too: all that read other rows or documents.
ALL_LEVERS = {
    "profile": "default",
    "levers": {"neighbours": True, "entities": True, "feedback": True, "speaker_query": True},
}


def turn(content: str, speaker: str, session: str, scope: str = "USER") -> dict:
    return {"content": content, "speaker": speaker, "session_id": session, "scope": scope}


async def test_context_is_stored_beside_the_content_and_continues_across_batches(
    client, opensearch, index_name, user_id
) -> None:
    first = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            turn("I adopted a greyhound last Friday!", "Ann", "s1"),
            turn("What is the name of the dog?", "Bob", "s1"),
        ],
    )
    assert first[0]["context"] is None
    assert first[1]["content"] == "What is the name of the dog?"  # content unchanged
    assert first[1]["context"] == "Ann: I adopted a greyhound last Friday!"
    (second,) = await _load(client, opensearch, index_name, user_id, [turn("Pixel.", "Ann", "s1")])
    assert second["context"] == "Bob: What is the name of the dog?"
    document = await opensearch.get(index=index_name, id=second["id"])
    assert document["_source"]["context"] == "Bob: What is the name of the dog?"
    # The reply "Pixel." says nothing alone; its context makes BM25 find it by the question.
    found = await search(
        client,
        user_id,
        "name of the dog",
        levers={"context_bm25": True},
        stages={"vector": False},
        profile="paper",
    )
    assert second["id"] in [r["memory"]["id"] for r in found["results"]]
    plain = await search(
        client, user_id, "name of the dog", stages={"vector": False}, profile="paper"
    )
    assert second["id"] not in [r["memory"]["id"] for r in plain["results"]]


async def test_neighbours_join_and_speaker_boost(client, opensearch, index_name, user_id) -> None:
    created = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            turn("Where are you going this summer?", "Bob", "s1"),
            turn("We booked two weeks in Lisbon, flights on the 3rd.", "Ann", "s1"),
            turn("Sounds great.", "Bob", "s1"),
        ]
        + [turn(f"Office chat number {i} about spreadsheets", "Bob", "s2") for i in range(6)],
    )
    found = await search(
        client,
        user_id,
        "Which city is Ann visiting on holiday in Lisbon?",
        top_k=4,
        as_of=AS_OF,
        **ALL_LEVERS,
    )
    ids = [r["memory"]["id"] for r in found["results"]]
    assert ids[0] == created[1]["id"]
    assert found["stages"]["speaker"] == "boosted Ann"
    assert stage_rank(found["results"][0], "speaker") == 1
    # The turns around the hit come along, carried by the hit's score.
    assert {created[0]["id"], created[2]["id"]} <= set(ids)
    paper = await search(
        client,
        user_id,
        "Which city is Ann visiting on holiday in Lisbon?",
        top_k=4,
        profile="paper",
    )
    assert "speaker" not in paper["stages"] and "neighbours" not in paper["stages"]
    assert found["stages"]["neighbours"].endswith("joined")


async def test_levers_never_cross_users_or_invisible_sessions(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    # The other user's session shares the session id: their turn must be no one's context.
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [turn("The vault code is walrus-tulip-42", "Eve", "s1")],
    )
    mine = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            turn("Let us talk about the vault code", "Ann", "s1"),
            turn("The vault code is otter-lily-7", "Ann", "s1", scope="CONTEXT"),
            turn("Noted, thanks.", "Bob", "s1"),
        ],
    )
    assert mine[0]["context"] is None  # nothing of the other user's s1
    assert mine[1]["context"] == "Ann: Let us talk about the vault code"
    # A USER memory is visible everywhere: it must not carry a CONTEXT turn's text.
    assert mine[2]["context"] is None
    for session in (None, "s2"):
        body = {"session_id": session} if session else {}
        found = await search(client, user_id, "vault code", top_k=10, **ALL_LEVERS, **body)
        contents = [r["memory"]["content"] for r in found["results"]]
        assert "The vault code is otter-lily-7" not in contents  # not even as a neighbour
        assert not any("walrus" in c for c in contents)
        assert all("otter" not in (r["memory"]["context"] or "") for r in found["results"])
        assert mine[0]["id"] in [r["memory"]["id"] for r in found["results"]]
    inside = await search(client, user_id, "vault code", top_k=10, session_id="s1", **ALL_LEVERS)
    assert "The vault code is otter-lily-7" in [r["memory"]["content"] for r in inside["results"]]
    theirs = await search(client, other_user_id, "vault code talk noted", top_k=10, **ALL_LEVERS)
    assert [r["memory"]["content"] for r in theirs["results"]] == [
        "The vault code is walrus-tulip-42"
    ]


async def test_speaker_names_leave_the_query_only_for_speakers_the_caller_can_see(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    await _load(client, opensearch, index_name, other_user_id, [turn("Zed: chess", "Zed", "s1")])
    mine = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            turn("Ann: Ann here, Ann again, hi", "Ann", "s1"),
            turn("Quinn: secret plans", "Quinn", "s2", scope="CONTEXT"),
            turn("Bob: my cello teacher says hi", "Bob", "s1"),
        ],
    )
    bm25_only = {"profile": "paper", "stages": {"vector": False}}
    query = "Is Ann's cello teacher Zed or Quinn?"
    found = await search(client, user_id, query, levers={"speaker_query": True}, **bm25_only)
    # Ann is a speaker here; Zed speaks only to another user, Quinn only in session s2.
    assert found["stages"]["speaker_query"] == "Is cello teacher Zed or Quinn?"
    assert [r["memory"]["id"] for r in found["results"]] == [mine[2]["id"]]
    inside = await search(
        client, user_id, query, levers={"speaker_query": True}, session_id="s2", **bm25_only
    )
    assert inside["stages"]["speaker_query"] == "Is cello teacher Zed or ?"
    # Without the lever the name is a term: Ann's empty turn matches it, three times.
    plain = await search(client, user_id, query, **bm25_only)
    assert "speaker_query" not in plain["stages"]
    assert mine[0]["id"] in [r["memory"]["id"] for r in plain["results"]]


async def test_entities_and_feedback_rank_and_explain(
    client, opensearch, index_name, user_id
) -> None:
    created = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            turn("Ann: the trip was wonderful, the museums above all", "Ann", "s1"),
            turn("Ann: Lisbon was wonderful, the museums above all", "Ann", "s2"),
            turn("Bob: I repaired the bike chain today", "Bob", "s3"),
        ],
    )
    query = "Which museums did Ann like in Lisbon?"
    found = await search(
        client, user_id, query, top_k=3, profile="paper", levers={"entities": True}
    )
    assert found["stages"]["entities"] == "boosted Lisbon"  # Ann is a speaker, not an entity
    assert found["results"][0]["memory"]["id"] == created[1]["id"]
    assert stage_rank(found["results"][0], "entities") == 1
    fed = await search(
        client, user_id, query, top_k=3, profile="paper", levers={"feedback": True}, min_relevance=0
    )
    assert all("feedback" in r["explanation"] for r in fed["results"] if "768d" in r["explanation"])
    assert {r["memory"]["id"] for r in fed["results"]} == {c["id"] for c in created}


async def test_proximity_prefers_terms_close_together_and_typed_weights_say_why(
    client, opensearch, index_name, user_id
) -> None:
    close, far = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            turn(
                "Ann: yesterday after a long and tiring week at the office downtown I finally "
                "bought a red bicycle",
                "Ann",
                "s1",
            ),
            turn("Ann: red shoes and hats and socks and gloves for the bicycle", "Ann", "s2"),
        ],
    )
    bm25_only = {"profile": "paper", "stages": {"vector": False}}
    plain = await search(client, user_id, "red bicycle", **bm25_only)
    # Plain BM25: the same terms once each, so the shorter memory wins.
    assert [r["memory"]["id"] for r in plain["results"]] == [far["id"], close["id"]]
    near = await search(
        client, user_id, "red bicycle", levers={"bm25_proximity": True}, **bm25_only
    )
    assert [r["memory"]["id"] for r in near["results"]] == [close["id"], far["id"]]

    typed = {"levers": {"typed_weights": True}}
    named = await search(client, user_id, "Did Ann ride in Lisbon?", **typed)
    assert named["stages"]["fusion"] == "lexical query"
    unnamed = await search(client, user_id, "Did Ann buy a bicycle?", **typed)
    assert unnamed["stages"]["fusion"] == "balanced"  # Ann is a speaker: no name is left
