"""Languages against the real OpenSearch and the real API (issue 40): the Japanese analysis
plugin loaded and analysing a sentence word by word, Japanese keyword search by words rather
than shared characters, and `make reindex`'s upgrade of an index made before languages had
fields."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from app.search_index.client import MemoryIndex
from tests.factories import search, stage_rank
from tests.retrieval.test_pipeline_api import _load

ROOT = Path(__file__).resolve().parents[2]
# Installed by scripts/install-opensearch.sh: the node the tests start loads it.
OWN_PLUGIN = ROOT / ".local" / "opensearch" / "current" / "plugins" / "cognis-analysis-ja"
BM25_ONLY = {"profile": "paper", "stages": {"vector": False}}


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


async def test_a_japanese_keyword_finds_the_word_not_a_lookalike(
    kuromoji, client, opensearch, index_name, user_id
) -> None:
    target, lookalike, _ = await _load(
        client,
        opensearch,
        index_name,
        user_id,
        [
            {"content": "金沢に住んでいる姉を訪ねた"},
            # 金 and 沢, twice over, but never the word 金沢.
            {"content": "金曜日に沢口さんと金魚を見た"},
            {"content": "週末は公園でジョギングをする"},
        ],
    )
    found = await search(client, user_id, "金沢", **BM25_ONLY)
    assert found["results"][0]["memory"]["id"] == target["id"]
    by_id = {r["memory"]["id"]: r for r in found["results"]}
    assert lookalike["id"] not in by_id or stage_rank(by_id[lookalike["id"]], "bm25") is None
    # The verb in another form: 訪ねた is indexed as 訪ねる.
    verb = await search(client, user_id, "訪ねる", **BM25_ONLY)
    assert [r["memory"]["id"] for r in verb["results"]] == [target["id"]]


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
    index = MemoryIndex(runtime.settings.model_copy(update={"opensearch_index": name}))
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
