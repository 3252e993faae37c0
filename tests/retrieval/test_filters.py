"""The filter language (app/memories/filters/): every operator and combinator through both
legs, each leg alone and both, the list, and strict validation.

Every memory of the set matches the query in both legs (they all talk about hiking), so an
unfiltered search returns them all: what a filtered one leaves out, the filter excluded."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.tenant import DEFAULT_TENANT_ID, tenant_scope
from app.memories.filters import parse_filter, to_opensearch, to_sql
from app.memories.repository import MemoryRepository
from app.memories.vectors import set_hnsw_scan
from app.ml.embedder import Embedder
from app.search_index.client import MemoryIndex
from tests.factories import search, stage_rank
from tests.retrieval.test_pipeline_api import _load

pytestmark = pytest.mark.xdist_group("filters")

QUERY = "hiking trip in the mountains"
# name -> the memory's fields
MEMORIES: dict[str, dict[str, Any]] = {
    "alps": {
        "content": "I went hiking in the Alps mountains last summer",
        "category": "travel",
        "speaker": "Ana",
        "session_id": "s1",
        "event_time": "2026-06-01T10:00:00Z",
        "metadata": {"project": "apollo", "n": 1, "tags": ["outdoor", "summer"]},
    },
    "rockies": {
        "content": "My hiking trip to the Rocky mountains was long",
        "category": "travel",
        "speaker": "Ben",
        "session_id": "s2",
        "event_time": "2026-03-01T10:00:00Z",
        "metadata": {"project": "gemini", "n": 5},
    },
    "boots": {
        "content": "I bought new hiking boots for mountain trips",
        "category": "preferences",
        "speaker": "Ana",
        "metadata": {"project": "apollo", "n": 10, "note": "bought in Lisbon"},
    },
    "knee": {
        "content": "My knee hurts after hiking steep mountain trails",
        "category": "health",
        "metadata": {},
    },
}


@pytest.fixture
async def loaded(client, opensearch, index_name, user_id, other_user_id) -> dict[str, str]:
    created = await _load(client, opensearch, index_name, user_id, list(MEMORIES.values()))
    # Another user's memory that every filter below would match: never anyone else's result.
    await _load(
        client, opensearch, index_name, other_user_id, [dict(MEMORIES["alps"], speaker="Ana")]
    )
    return {m["content"]: m["id"] for m in created}


CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"field": "category", "op": "eq", "value": "travel"}, {"alps", "rockies"}),
    ({"field": "category", "op": "ne", "value": "travel"}, {"boots", "knee"}),
    ({"field": "category", "op": "in", "value": ["health", "preferences"]}, {"boots", "knee"}),
    ({"field": "category", "op": "nin", "value": ["health", "travel"]}, {"boots"}),
    ({"field": "speaker", "op": "exists", "value": False}, {"knee"}),
    ({"field": "speaker", "op": "ne", "value": "Ana"}, {"rockies", "knee"}),
    ({"field": "session", "op": "eq", "value": "s2"}, {"rockies"}),
    ({"field": "speaker", "op": "contains", "value": "n"}, {"alps", "boots", "rockies"}),
    ({"field": "event_time", "op": "gte", "value": "2026-05-01T00:00:00Z"}, {"alps"}),
    ({"field": "event_time", "op": "lt", "value": "2026-05-01T00:00:00Z"}, {"rockies"}),
    ({"field": "valid_to", "op": "exists", "value": False}, set(MEMORIES)),
    ({"field": "scope", "op": "eq", "value": "CONTEXT"}, set()),
    ({"field": "metadata.project", "op": "eq", "value": "apollo"}, {"alps", "boots"}),
    ({"field": "metadata.project", "op": "ne", "value": "apollo"}, {"rockies", "knee"}),
    ({"field": "metadata.project", "op": "in", "value": ["gemini", "x"]}, {"rockies"}),
    ({"field": "metadata.project", "op": "nin", "value": ["gemini"]}, {"alps", "boots", "knee"}),
    ({"field": "metadata.n", "op": "gt", "value": 2}, {"rockies", "boots"}),
    ({"field": "metadata.n", "op": "lte", "value": 5}, {"alps", "rockies"}),
    ({"field": "metadata.n", "op": "eq", "value": 10}, {"boots"}),
    ({"field": "metadata.tags", "op": "contains", "value": "summer"}, {"alps"}),
    ({"field": "metadata.note", "op": "contains", "value": "Lisbon"}, {"boots"}),
    ({"field": "metadata.project", "op": "exists", "value": False}, {"knee"}),
    (
        {
            "and": [
                {"field": "category", "op": "eq", "value": "travel"},
                {"field": "speaker", "op": "eq", "value": "Ana"},
            ]
        },
        {"alps"},
    ),
    (
        {
            "or": [
                {"field": "category", "op": "eq", "value": "health"},
                {"field": "metadata.n", "op": "gte", "value": 10},
            ]
        },
        {"knee", "boots"},
    ),
    ({"not": {"field": "metadata.project", "op": "eq", "value": "apollo"}}, {"rockies", "knee"}),
    (
        {
            "not": {
                "or": [
                    {"field": "category", "op": "eq", "value": "travel"},
                    {"field": "metadata.tags", "op": "contains", "value": "x"},
                ]
            }
        },
        {"boots", "knee"},
    ),
]
LEGS = {
    "vector": {"bm25": False},
    "bm25": {"vector": False},
    "both": {},
}


@pytest.mark.parametrize("leg", list(LEGS))
async def test_each_operator_and_combinator_in_each_leg(loaded, client, user_id, leg) -> None:
    unfiltered = await search(client, user_id, QUERY, top_k=20, stages=LEGS[leg])
    assert {r["memory"]["content"] for r in unfiltered["results"]} == {
        m["content"] for m in MEMORIES.values()
    }
    for matching, expected in CASES:
        found = await search(client, user_id, QUERY, top_k=20, stages=LEGS[leg], filters=matching)
        contents = {r["memory"]["content"] for r in found["results"]}
        assert contents == {MEMORIES[name]["content"] for name in expected}, matching
        assert {r["memory"]["user_id"] for r in found["results"]} <= {user_id}


async def test_the_best_match_excluded_by_the_filter_never_appears(loaded, client, user_id) -> None:
    """Each leg's own best match, excluded by a column clause (exact in both stores)."""
    query = MEMORIES["knee"]["content"]
    for leg, stage in (("vector", "768d"), ("bm25", "bm25")):
        unfiltered = await search(client, user_id, query, top_k=4, stages=LEGS[leg])
        best = next(r for r in unfiltered["results"] if stage_rank(r, stage) == 1)["memory"]
        found = await search(
            client,
            user_id,
            query,
            top_k=4,
            stages=LEGS[leg],
            filters={"field": "category", "op": "ne", "value": best["category"]},
        )
        assert found["results"], leg
        assert best["id"] not in {r["memory"]["id"] for r in found["results"]}, leg
        assert best["category"] not in {r["memory"]["category"] for r in found["results"]}


SET_TENANT = text("SELECT set_config('cognis.tenant_id', :t, true)")


async def test_the_vector_leg_filters_before_it_ranks_in_both_scans(
    loaded, db, user_id, inprocess_api
) -> None:
    """The 256D shortlist itself holds only matching memories, exactly and through HNSW."""
    embedder: Embedder = inprocess_api.app.state.runtime.query_embedder
    query = await embedder.embed_query(QUERY)
    matching = parse_filter({"field": "metadata.project", "op": "eq", "value": "apollo"})
    expected = {loaded[MEMORIES[name]["content"]] for name in ("alps", "boots")}
    async with AsyncSession(db) as session, session.begin():
        await session.execute(SET_TENANT, {"t": str(DEFAULT_TENANT_ID)})
        repository = MemoryRepository(session, to_sql(matching))
        for exact_max in (100, 0):  # exact scan, then HNSW (iterative)
            shortlist = await repository.coarse_candidates(
                user_id, query.coarse, None, 1, 40, exact_max
            )
            assert len(shortlist) == 1 and str(shortlist[0][0]) in expected
            everything = await repository.coarse_candidates(
                user_id, query.coarse, None, 50, 40, exact_max
            )
            assert {str(memory_id) for memory_id, _ in everything} == expected


async def test_a_filtered_search_scans_exactly_when_few_memories_match(loaded, db, user_id) -> None:
    """The scan's choice with a filter: a user within `exact_max` is scanned exactly whatever
    the filter; of a larger one, the share of a sample that matches decides (the index would
    give up on a rare filter)."""
    apollo = to_sql(parse_filter({"field": "metadata.project", "op": "eq", "value": "apollo"}))
    nowhere = to_sql(parse_filter({"field": "metadata.project", "op": "eq", "value": "zeus"}))
    everywhere = to_sql(parse_filter({"field": "scope", "op": "eq", "value": "USER"}))
    async with AsyncSession(db) as session, session.begin():
        await session.execute(SET_TENANT, {"t": str(DEFAULT_TENANT_ID)})
        # Four memories, two of them apollo's: within an exact_max of 4, not of 3.
        assert await set_hnsw_scan(session, 40, user_id, 4, apollo) is True
        # Two rows sampled of four: nothing matching is rare, everything matching is not,
        # and half of them (2 of 4 read) is common too.
        assert await set_hnsw_scan(session, 40, user_id, 3, nowhere, 200, 2) is True
        assert await set_hnsw_scan(session, 40, user_id, 3, everywhere, 200, 2) is False
        assert await set_hnsw_scan(session, 40, user_id, 3, apollo, 200, 4) is False
        # Unfiltered, a user over exact_max goes to the index.
        assert await set_hnsw_scan(session, 40, user_id, 3) is False


async def test_an_index_scan_that_comes_back_short_is_redone_exactly(
    loaded, db, user_id, inprocess_api
) -> None:
    """A selective filter must not starve the vector leg: when the HNSW scan gives up before
    it found `limit` matches, the leg scans the user's rows exactly."""
    embedder: Embedder = inprocess_api.app.state.runtime.query_embedder
    query = await embedder.embed_query("a knee injury from running")  # nearest: not apollo
    matching = parse_filter({"field": "metadata.project", "op": "eq", "value": "apollo"})
    expected = {loaded[MEMORIES[name]["content"]] for name in ("alps", "boots")}
    async with AsyncSession(db) as session, session.begin():
        await session.execute(SET_TENANT, {"t": str(DEFAULT_TENANT_ID)})
        # An index scan that returns one tuple and does not go on (no iterative scan); the
        # planner must use the index, which it would not for a test's small table.
        for setting in (
            "hnsw.ef_search = 1",
            "hnsw.iterative_scan = off",
            "enable_seqscan = off",
            "enable_sort = off",
        ):
            await session.execute(text(f"SET LOCAL {setting}"))
        repository = MemoryRepository(session, to_sql(matching))
        shortlist = await repository.coarse_candidates(
            user_id, query.coarse, None, 10, 1, 0, exact=False
        )
    assert {str(memory_id) for memory_id, _ in shortlist} == expected


async def test_the_bm25_leg_filters_in_the_query(loaded, inprocess_api, user_id) -> None:
    """Column clauses are exact in OpenSearch: the index returns no excluded document."""
    index: MemoryIndex = inprocess_api.app.state.runtime.index
    matching = parse_filter(
        {
            "and": [
                {"field": "category", "op": "eq", "value": "travel"},
                {"not": {"field": "speaker", "op": "eq", "value": "Ana"}},
            ]
        }
    )
    with tenant_scope(DEFAULT_TENANT_ID):
        hits = await index.search_bm25(user_id, QUERY, 10, matching=to_opensearch(matching))
    assert {str(hit.memory_id) for hit in hits} == {loaded[MEMORIES["rockies"]["content"]]}


async def test_the_list_takes_the_same_filter(loaded, client, user_id) -> None:
    matching = {"field": "metadata.n", "op": "gte", "value": 5}
    response = await client.get(
        f"/v1/users/{user_id}/memories", params={"filters": json.dumps(matching)}
    )
    assert response.status_code == 200, response.text
    assert {m["content"] for m in response.json()["items"]} == {
        MEMORIES["rockies"]["content"],
        MEMORIES["boots"]["content"],
    }
    bad = await client.get(f"/v1/users/{user_id}/memories", params={"filters": "{not json"})
    assert bad.status_code == 400
    assert bad.headers["content-type"].startswith("application/problem+json")
    assert bad.json()["field"] == "filters"


BAD: list[tuple[Any, str, str]] = [
    ([], "filters", "object"),
    ({"field": "colour", "op": "eq", "value": "x"}, "filters.field", "unknown field 'colour'"),
    ({"field": "category", "op": "like", "value": "x"}, "filters.op", "unknown operator"),
    ({"field": "category", "op": "gt", "value": "x"}, "filters.op", "does not apply"),
    ({"field": "category", "op": "eq"}, "filters.value", "needs a value"),
    ({"field": "category", "op": "in", "value": "x"}, "filters.value", "take a list"),
    ({"field": "scope", "op": "eq", "value": "GLOBAL"}, "filters.value", "scope is one of"),
    ({"field": "created_at", "op": "gt", "value": "yesterday"}, "filters.value", "RFC 3339"),
    ({"field": "speaker", "op": "exists", "value": "yes"}, "filters.value", "true or false"),
    ({"field": "metadata.", "op": "eq", "value": 1}, "filters.field", "metadata path"),
    ({"field": "metadata.n", "op": "gt", "value": True}, "filters.value", "compares numbers"),
    ({"field": "metadata.n", "op": "eq", "value": {"a": 1}}, "filters.value", "metadata value"),
    (
        {"and": [{"field": "category", "op": "eq", "value": "x"}, {"field": "x"}]},
        "filters.and[1].field",
        "unknown field",
    ),
    ({"or": []}, "filters.or", "non-empty list"),
    ({"not": {"not": {"field": 1}}}, "filters.not.not.field", "must be a string"),
    ({"and": [], "or": []}, "filters", "the only key"),
    ({"field": "category", "op": "eq", "value": "x", "extra": 1}, "filters", "unknown key"),
]


@pytest.mark.parametrize(("bad", "path", "says"), BAD)
async def test_a_bad_filter_is_a_400_naming_the_clause(
    client, user_id, bad: Any, path: str, says: str
) -> None:
    response = await client.post(
        f"/v1/users/{user_id}/search", json={"query": QUERY, "filters": bad}
    )
    assert response.status_code == 400, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    problem = response.json()
    assert problem["field"] == path
    assert says in problem["detail"]


def _nested_not(levels: int) -> str:
    """A filter `levels` "not"s deep, as JSON text (json.dumps would recurse too deep)."""
    return (
        '{"not": ' * levels + '{"field": "category", "op": "exists", "value": true}' + "}" * levels
    )


@pytest.mark.parametrize("levels", [9, 1_000])
async def test_nesting_is_bounded_wherever_a_filter_is_read(client, user_id, levels) -> None:
    """Issue 42, item 7: 1,000 levels in the list's `filters` parameter were a 500 (the JSON
    reader's RecursionError). Every door now answers 400 naming the one limit, 8 levels."""
    deep = _nested_not(levels)
    answers = [
        await client.get(f"/v1/users/{user_id}/memories", params={"filters": deep}),
        await client.get(f"/v1/users/{user_id}/export", params={"filters": deep}),
        await client.post(
            f"/v1/users/{user_id}/search",
            content=f'{{"query": "{QUERY}", "filters": {deep}}}',
            headers={"Content-Type": "application/json"},
        ),
    ]
    for response in answers:
        assert response.status_code == 400, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert "at most 8" in response.json()["detail"], response.json()


async def test_a_filter_8_levels_deep_is_read(client, user_id) -> None:
    response = await client.get(f"/v1/users/{user_id}/memories", params={"filters": _nested_not(8)})
    assert response.status_code == 200, response.text
