"""The specificity lever through the real API: a memory's factor comes from its own user's
words (not another user's, not another tenant's), the explanation shows it, and the lever
can be switched off."""

from __future__ import annotations

import httpx
import pytest

from app.config import SETTING_FIELDS
from app.retrieval.specificity import WordRarity
from tests.conftest import InProcessApi
from tests.factories import search
from tests.retrieval.test_pipeline_api import _load
from tests.tenants.helpers import new_tenant, tenant_client

CHATTER = [
    "Pottery day again, thanks so much, that means a lot to me!",
    "That is so great, thanks for the support with the family!",
    "My family means a lot to me, so much support, so great.",
    "So great to hear from you, that means a lot!",
    "Thanks, family support means so much to me.",
    "That is great, so much fun with the family!",
]
FACT = "I signed up for a pottery class at the Glaze studio on Elm street."
QUESTION = "What did I sign up for with pottery and family?"
WORDS = SETTING_FIELDS["specificity_words"].default
BOOST = SETTING_FIELDS["specificity_boost"].default
PRIOR = SETTING_FIELDS["specificity_prior"].default


def factor(result: dict) -> float:
    """The factor the specificity step applied: its score over fusion's (paper profile: no
    step between them changes the score)."""
    stages = result["explanation"]
    return stages["specificity"]["score"] / stages["rrf"]["score"]


def by_content(found: dict) -> dict[str, dict]:
    return {r["memory"]["content"]: r for r in found["results"]}


def expected(texts: list[str], text: str) -> float:
    """The factor: the boost shrunk by the user's evidence (n / (n + prior)), times z."""
    rarity = WordRarity.of(texts, WORDS)
    return 1 + BOOST * rarity.weight(PRIOR) * rarity.z(text)


async def test_specific_memories_are_lifted_by_their_users_own_words(
    client, opensearch, index_name, user_id, other_user_id
) -> None:
    # The other user says "pottery", "class", "Glaze" and "studio" all the time: were their
    # words counted, the fact would be this user's least specific memory.
    await _load(
        client,
        opensearch,
        index_name,
        other_user_id,
        [{"content": f"Pottery class {i} at the Glaze studio on Elm street"} for i in range(30)],
    )
    mine = [*CHATTER, FACT]
    await _load(client, opensearch, index_name, user_id, [{"content": c} for c in mine])
    found = await search(
        client, user_id, QUESTION, top_k=7, profile="paper", levers={"specificity": True}
    )
    assert found["stages"]["specificity"] == f"7 memories' words, weight {7 / (7 + PRIOR):.2f}"
    results = by_content(found)
    # All of the user's (what the relevance floor lets through), none of the other's.
    assert FACT in results and len(results) >= 4 and set(results) <= set(mine)
    assert factor(results[FACT]) == pytest.approx(expected(mine, FACT))
    assert factor(results[FACT]) > 1.0
    for text in set(results) - {FACT}:
        assert factor(results[text]) == pytest.approx(expected(mine, text))
        assert factor(results[text]) < factor(results[FACT])
    # The explanation's order is the step's: non-increasing scores.
    scores = [r["explanation"]["specificity"]["score"] for r in found["results"]]
    assert scores == sorted(scores, reverse=True)
    # Off (the paper profile alone), no step and no factor.
    plain = await search(client, user_id, QUESTION, top_k=7, profile="paper")
    assert "specificity" not in plain["stages"]
    assert all("specificity" not in r["explanation"] for r in plain["results"])
    # `default` has it on; a request may switch it off.
    on = await search(client, user_id, QUESTION, top_k=7)
    assert on["stages"]["specificity"].startswith("7 memories' words")
    off = await search(client, user_id, QUESTION, top_k=7, levers={"specificity": False})
    assert "specificity" not in off["stages"]


async def test_too_few_memories_to_tell_change_nothing(
    client, opensearch, index_name, user_id
) -> None:
    await _load(client, opensearch, index_name, user_id, [{"content": FACT}])
    found = await search(
        client, user_id, "pottery class", profile="paper", levers={"specificity": True}
    )
    assert found["stages"]["specificity"] == "too few memories (1)"
    (hit,) = found["results"]
    assert "specificity" not in hit["explanation"]


async def test_the_same_user_id_in_two_tenants_has_two_vocabularies(
    admin: httpx.AsyncClient, inprocess_api: InProcessApi, opensearch, index_name
) -> None:
    home, away = await new_tenant(admin, "home"), await new_tenant(admin, "away")
    user = "same-user"
    theirs = [
        f"Pottery class at the Glaze studio on Elm street, {day}"
        for day in ("glazing bowls", "throwing cups", "Monday evening", "with Sam", "kiln", "vases")
    ]
    mine = [*CHATTER, FACT]
    async with (
        tenant_client(inprocess_api, home.key) as one,
        tenant_client(inprocess_api, away.key) as two,
    ):
        await _load(two, opensearch, index_name, user, [{"content": c} for c in theirs])
        await _load(one, opensearch, index_name, user, [{"content": c} for c in mine])
        # The away tenant's search first: its statistics are cached for its user alone.
        away_found = await search(
            two, user, QUESTION, profile="paper", levers={"specificity": True}
        )
        assert away_found["stages"]["specificity"].startswith("6 memories' words")
        assert {r["memory"]["content"] for r in away_found["results"]} <= set(theirs)
        home_found = await search(
            one, user, QUESTION, top_k=7, profile="paper", levers={"specificity": True}
        )
        assert home_found["stages"]["specificity"].startswith("7 memories' words")
        results = by_content(home_found)
        assert set(results) <= set(mine)
        assert factor(results[FACT]) == pytest.approx(expected(mine, FACT))
