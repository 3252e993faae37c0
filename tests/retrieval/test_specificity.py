"""The specificity prior's arithmetic: words, inverse document frequencies over a user's own
memories, the clipped z, the boost, and the per-tenant, per-user cache."""

from __future__ import annotations

import itertools
import math
import uuid

import pytest

from app.retrieval.candidates import Candidate
from app.retrieval.specificity import Z_LIMIT, WordRarity, WordRarityCache, boost_specific, words

CHATTER = [
    "Thanks so much, that means a lot to me!",
    "That is so great, thanks for the support!",
    "My family means a lot to me, so much support.",
    "So great to hear, that means a lot!",
]
FACT = "I signed up for a pottery class at the Glaze studio."


def test_words_are_distinct_lower_case_letters_with_inner_apostrophes() -> None:
    assert words("Charlotte\u2019s Web, 2nd copy: don't LOSE it! Café") == {
        "charlotte's",
        "web",
        "nd",
        "copy",
        "don't",
        "lose",
        "it",
        "café",
    }


def test_idf_counts_documents_not_occurrences() -> None:
    rarity = WordRarity.of(["a a a b", "a c"], rarest=2)
    assert rarity.documents == 2
    assert rarity.idf("a") == pytest.approx(math.log(3 / 2.5))  # in both, however often
    assert rarity.idf("b") == pytest.approx(math.log(3 / 1.5))
    assert rarity.idf("never") == pytest.approx(math.log(3 / 0.5))  # the rarest of all


def test_specificity_is_the_mean_idf_of_the_rarest_words() -> None:
    rarity = WordRarity.of(["a b", "a c", "a d"], rarest=2)
    expected = (rarity.idf("zzz") + rarity.idf("b")) / 2  # "a" is in every memory
    assert rarity.specificity_of({"a", "b", "zzz"}) == pytest.approx(expected)
    assert rarity.specificity_of(set()) == 0.0


def test_a_fact_is_more_specific_than_the_users_chatter() -> None:
    rarity = WordRarity.of([*CHATTER, FACT], rarest=5)
    assert rarity.z(FACT) > 0
    assert all(rarity.z(text) < rarity.z(FACT) for text in CHATTER)
    assert rarity.z("Thanks, that means a lot!") < 0  # nothing but the user's usual words


def test_z_is_clipped_and_zero_without_spread() -> None:
    rarity = WordRarity.of([*CHATTER * 5, FACT], rarest=5)
    assert rarity.z("quixotic zephyrs jabberwocky flummox kerfuffle") == Z_LIMIT
    same = WordRarity.of(["so great", "so great"], rarest=5)
    assert same.spread == 0 and same.z("anything rare at all") == 0.0
    assert WordRarity.of([], rarest=5).z("anything") == 0.0


def test_boost_reorders_by_specificity_at_equal_scores() -> None:
    rarity = WordRarity.of([*CHATTER, FACT], rarest=5)
    chatter = Candidate(uuid.uuid4(), score=1.0, content=CHATTER[0])
    fact = Candidate(uuid.uuid4(), score=1.0, content=FACT)
    ranked = boost_specific([chatter, fact], rarity, boost=0.2, prior=0.0)
    assert [c.memory_id for c in ranked] == [fact.memory_id, chatter.memory_id]
    assert fact.score == pytest.approx(1 + 0.2 * rarity.z(FACT))
    assert chatter.score == pytest.approx(1 + 0.2 * rarity.z(CHATTER[0]))
    assert fact.stages["specificity"].rank == 1 and chatter.stages["specificity"].rank == 2
    # No boost: the order and scores stay.
    again = boost_specific([chatter, fact], rarity, boost=0.0, prior=0.0)
    assert [c.score for c in again] == [fact.score, chatter.score]


def test_the_boost_is_shrunk_by_the_users_evidence_and_fades_without_a_cliff() -> None:
    few = WordRarity.of([*CHATTER, FACT], rarest=5)  # 5 memories
    many = WordRarity.of([*CHATTER * 100, FACT], rarest=5)  # 401
    assert few.weight(50.0) == pytest.approx(5 / 55)
    assert many.weight(50.0) == pytest.approx(401 / 451)
    assert WordRarity.of([], rarest=5).weight(50.0) == 0.0
    assert few.weight(0.0) == 1.0
    # Each memory more is a little more weight: no size where the boost jumps.
    weights = [WordRarity.of([*CHATTER, FACT] * n, rarest=5).weight(50.0) for n in range(1, 60)]
    assert all(0 < b - a < 0.1 for a, b in itertools.pairwise(weights))
    chatter = Candidate(uuid.uuid4(), score=1.0, content=CHATTER[0])
    fact = Candidate(uuid.uuid4(), score=1.0, content=FACT)
    boost_specific([chatter, fact], few, boost=0.2, prior=50.0)
    assert fact.score == pytest.approx(1 + 0.2 * (5 / 55) * few.z(FACT))


def recording(loads: list[str], label: str, texts: list[str] = CHATTER):
    """A sample loader that records its label each time the cache calls it."""

    async def load() -> list[str]:
        loads.append(label)
        return texts

    return load


async def test_cache_reuses_within_ttl_and_keys_by_tenant_and_user() -> None:
    loads: list[str] = []

    def sample(texts: list[str], label: str):
        return recording(loads, label, texts)

    cache = WordRarityCache(ttl_s=60)
    tenant, other_tenant = uuid.uuid4(), uuid.uuid4()
    first = await cache.get((tenant, "ann"), 5, sample(CHATTER, "a"))
    assert await cache.get((tenant, "ann"), 5, sample([FACT], "b")) is first
    # The same user id in another tenant, and another user: counted from their own memories.
    theirs = await cache.get((other_tenant, "ann"), 5, sample([FACT], "c"))
    assert theirs.documents == 1 and first.documents == len(CHATTER)
    await cache.get((tenant, "bob"), 5, sample([FACT], "d"))
    # Another number of rarest words is another statistic.
    assert (await cache.get((tenant, "ann"), 3, sample(CHATTER, "e"))).rarest == 3
    assert loads == ["a", "c", "d", "e"]


async def test_cache_expires_and_forgets_the_least_recently_used() -> None:
    calls: list[str] = []

    def sample(label: str):
        return recording(calls, label)

    stale = WordRarityCache(ttl_s=0)
    await stale.get((None, "ann"), 5, sample("1"))
    await stale.get((None, "ann"), 5, sample("2"))
    assert calls == ["1", "2"]
    small = WordRarityCache(ttl_s=60, users=2)
    for user in ("ann", "bob", "ann", "cy"):  # ann used again: bob is the one to go
        await small.get((None, user), 5, sample(user))
    await small.get((None, "ann"), 5, sample("ann again"))
    await small.get((None, "bob"), 5, sample("bob again"))
    assert calls[2:] == ["ann", "bob", "cy", "bob again"]
