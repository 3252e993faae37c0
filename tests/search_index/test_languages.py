"""Languages against the real OpenSearch and the real API (issue 40): the Japanese analysis
plugin loaded and analysing a sentence word by word, a memory's language detected, stored,
given by the client and filtered on, Japanese keyword search by words rather than shared
characters, a mixed-language user, and `make reindex`'s upgrade of an index made before
languages had fields."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from app.search_index.client import MemoryIndex
from tests.factories import create_memory, search, stage_rank
from tests.retrieval.test_pipeline_api import _load

ROOT = Path(__file__).resolve().parents[2]
# Installed by scripts/install-opensearch.sh: the node the tests start loads it.
OWN_PLUGIN = ROOT / ".local" / "opensearch" / "current" / "plugins" / "cognis-analysis-ja"
BM25_ONLY = {"profile": "paper", "stages": {"vector": False}}


async def _searchable(client, opensearch, index_name, user_id, *contents: str) -> list[dict]:
    """Memories written through the API, once the index has them."""
    return await _load(client, opensearch, index_name, user_id, [{"content": c} for c in contents])


async def _tokens(opensearch, **body) -> list[str]:
    response = await opensearch.indices.analyze(body=body)
    return [token["token"] for token in response["tokens"]]


@pytest.fixture
async def kuromoji(opensearch) -> None:
    plugins = {row["component"] for row in await opensearch.cat.plugins(format="json")}
    if not plugins & {"cognis-analysis-ja", "analysis-kuromoji"} and not OWN_PLUGIN.exists():
        pytest.skip("this OpenSearch has no kuromoji (an image without the plugin)")


async def test_the_plugin_analyses_a_japanese_sentence_word_by_word(kuromoji, opensearch) -> None:
    sentence = "昨年の秋に金沢へ転勤して、週末は兼六園をのんびり歩きました"
    # Particles and auxiliaries gone, the verb in its dictionary form (歩きました -> 歩く),
    # the place name one word, the compound noun split for search (兼六園 -> 兼, 六, 園).
    assert await _tokens(opensearch, analyzer="kuromoji", text=sentence) == [
        "昨年", "秋", "金沢", "転勤", "週末", "兼", "六", "園", "のんびり", "歩く",
    ]  # fmt: skip
    chain = await _tokens(
        opensearch,
        tokenizer="kuromoji_tokenizer",
        filter=["kuromoji_baseform", "kuromoji_part_of_speech", "ja_stop", "kuromoji_stemmer"],
        text="妹はプリンターで年賀状を印刷しました",
    )
    assert chain == ["妹", "プリンタ", "年賀状", "印刷"]


async def test_the_index_has_a_field_per_analysis(kuromoji, opensearch, client, index_name) -> None:
    await client.get("/health")  # the in-process API made the index
    settings = await opensearch.indices.get_settings(index=index_name)
    analyzers = settings[index_name]["settings"]["index"]["analysis"]["analyzer"]
    assert analyzers["memory_text_ja"] == {"type": "kuromoji"}
    assert analyzers["memory_text_cjk"] == {"type": "cjk"}
    mapping = await opensearch.indices.get_mapping(index=index_name)
    content = mapping[index_name]["mappings"]["properties"]["content"]
    assert content["analyzer"] == "memory_text"
    assert content["fields"]["ja"]["analyzer"] == "memory_text_ja"


async def test_a_memory_gets_its_language_detected_given_kept_and_filtered(client, user_id) -> None:
    japanese = await create_memory(client, user_id, "来月から福井の工場で働きます")
    english = await create_memory(client, user_id, "I keep bees on the roof of our building")
    # Kanji alone read as Chinese by the detector: the client knows better.
    given = await create_memory(client, user_id, "大阪出張", language="ja")
    none = await create_memory(client, user_id, "👍 10:30")
    assert (japanese["language"], english["language"], given["language"]) == ("ja", "en", "ja")
    assert none["language"] is None
    bad = await client.post(
        f"/v1/users/{user_id}/memories", json={"content": "hello", "language": "eng"}
    )
    assert bad.status_code == 400, bad.text

    # An update that leaves the content keeps the language; new content is detected again.
    kept = await client.patch(
        f"/v1/users/{user_id}/memories/{given['id']}", json={"metadata": {"trip": 1}}
    )
    assert kept.status_code == 200, kept.text
    assert kept.json()["language"] == "ja"
    changed = await client.patch(
        f"/v1/users/{user_id}/memories/{english['id']}",
        json={"content": "屋上でミツバチを飼っています"},
    )
    assert changed.json()["language"] == "ja"

    listed = await client.get(
        f"/v1/users/{user_id}/memories",
        params={"filters": json.dumps({"field": "language", "op": "eq", "value": "ja"})},
    )
    assert listed.status_code == 200, listed.text
    assert {m["id"] for m in listed.json()["items"]} == {
        japanese["id"],
        kept.json()["id"],  # a new version: the current one of `given`
        changed.json()["id"],
    }


async def test_a_japanese_keyword_finds_the_word_not_a_lookalike(
    kuromoji, client, opensearch, index_name, user_id
) -> None:
    # The second has 金 and 沢, twice over, but never the word 金沢.
    target, lookalike, _ = await _searchable(
        client, opensearch, index_name, user_id,
        "金沢に住んでいる姉を訪ねた",
        "金曜日に沢口さんと金魚を見た",
        "週末は公園でジョギングをする",
    )  # fmt: skip
    found = await search(client, user_id, "金沢", **BM25_ONLY)
    assert found["results"][0]["memory"]["id"] == target["id"]
    by_id = {r["memory"]["id"]: r for r in found["results"]}
    assert lookalike["id"] not in by_id or stage_rank(by_id[lookalike["id"]], "bm25") is None
    # The verb in another form: 訪ねた is indexed as 訪ねる.
    verb = await search(client, user_id, "訪ねる", **BM25_ONLY)
    assert [r["memory"]["id"] for r in verb["results"]] == [target["id"]]


async def test_a_mixed_language_user_is_found_in_either_language(
    kuromoji, client, opensearch, index_name, user_id
) -> None:
    english, japanese, mixed = await _searchable(
        client, opensearch, index_name, user_id,
        "My sister moved to Vancouver for a nursing job",
        "兄はバンクーバーで寿司屋を開いた",
        "毎朝Kubernetesのアラートを確認している",
    )  # fmt: skip
    assert [m["language"] for m in (english, japanese, mixed)] == ["en", "ja", "ja"]

    async def first(query: str) -> str:
        found = await search(client, user_id, query, **BM25_ONLY)
        return found["results"][0]["memory"]["id"]

    assert await first("Vancouver nursing") == english["id"]
    assert await first("バンクーバーの寿司屋") == japanese["id"]
    # English words inside Japanese text, asked in either language.
    assert await first("Kubernetes alerts") == mixed["id"]
    assert await first("Kubernetesのアラート") == mixed["id"]
    # A search filtered to one language sees only it.
    only_en = await search(
        client,
        user_id,
        "Vancouver バンクーバー",
        filters={"field": "language", "op": "eq", "value": "en"},
        **BM25_ONLY,
    )
    assert [r["memory"]["id"] for r in only_en["results"]] == [english["id"]]


async def test_reindex_gives_an_older_index_its_language_fields(
    kuromoji, inprocess_api, opensearch
) -> None:
    """An index made before languages had fields: the analyzers are added (closed and
    opened again), the subfields mapped, and documents indexed again are searchable by
    words. A second run changes nothing."""
    runtime = inprocess_api.app.state.runtime
    name = f"cognis-test-old-{uuid.uuid4().hex[:8]}"
    old_text = {"type": "text", "analyzer": "memory_text"}
    await opensearch.indices.create(
        index=name,
        body={
            "settings": {"analysis": {"analyzer": {"memory_text": {"type": "standard"}}}},
            "mappings": {"properties": {"content": old_text, "context": old_text}},
        },
    )
    index = MemoryIndex(runtime.settings.model_copy(update={"opensearch_index": name}).store)
    try:
        document = {"content": "金沢に住んでいる姉を訪ねた"}
        await index.bulk_index([("m1", 1, document)])
        assert not await index.language_fields_current()
        assert await index.add_language_fields()
        assert await index.language_fields_current()
        assert not await index.add_language_fields()
        await index.bulk_index([("m1", 2, document)])  # what `make reindex` re-delivers
        await index.refresh()
        found = await opensearch.search(
            index=name, body={"query": {"match": {"content.ja": "訪ねる"}}}
        )
        assert [hit["_id"] for hit in found["hits"]["hits"]] == ["m1"]
    finally:
        await opensearch.indices.delete(index=name, ignore_unavailable=True)
        await index.close()
