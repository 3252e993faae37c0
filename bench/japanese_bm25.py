"""Japanese BM25: the index's analyses compared on keyword queries over Japanese facts.

    python -m bench.japanese_bm25 [--url http://127.0.0.1:59200]

Makes a scratch index with the service's mapping (app/search_index/documents.py) on the
OpenSearch at --url (default COGNIS_OPENSEARCH_URL), indexes the facts of
bench/data/japanese_bm25.tsv and asks its queries four ways: the default analysis (`content`,
Japanese as single characters), `cjk` bigrams (`content.cjk`), kuromoji (`content.ja`), and the
service's own query (its language detected, client.text_match). For each: how often the
expected fact ranks first, and how many other facts match at all (spurious matches) per
query. Deletes the index afterwards. Prints numbers; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from pathlib import Path
from typing import Any

from opensearchpy import AsyncOpenSearch

from app.ml.language import detect_language
from app.search_index.documents import Analysis, analyzers, index_body
from app.search_index.text_query import text_match

DATA_PATH = Path(__file__).parent / "data" / "japanese_bm25.tsv"


def load(path: Path = DATA_PATH) -> tuple[dict[str, str], list[tuple[str, str]]]:
    """(facts by id, [(expected id, query)])."""
    facts: dict[str, str] = {}
    queries: list[tuple[str, str]] = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, key, text = line.split("\t", 2)
        if kind == "F":
            facts[key] = text
        else:
            queries.append((key, text))
    return facts, queries


def ways(query: str) -> dict[str, dict[str, Any]]:
    return {
        "default (single characters)": {"match": {"content": query}},
        "cjk bigrams": {"match": {"content.cjk": query}},
        "kuromoji": {"match": {"content.ja": query}},
        "service query": text_match(query, 0.0, detect_language(query)),
    }


async def run(url: str) -> None:
    client = AsyncOpenSearch(hosts=[url])
    name = f"bench-japanese-{uuid.uuid4().hex[:8]}"
    try:
        analysis = Analysis(
            **{
                probe: await _has(client, analyzer)
                for probe, analyzer in (
                    ("english", "english"),
                    ("kuromoji", "kuromoji"),
                    ("cjk", "cjk"),
                )
            }
        )
        print(f"analyzers: {analyzers(analysis)}")
        await client.indices.create(index=name, body=index_body(analysis))
        facts, queries = load()
        for key, text in facts.items():
            await client.index(index=name, id=key, body={"content": text})
        await client.indices.refresh(index=name)
        results: dict[str, list[tuple[bool, int]]] = {}
        for expected, query in queries:
            for way, clause in ways(query).items():
                response = await client.search(
                    index=name, body={"size": len(facts), "query": clause, "_source": False}
                )
                ids = [hit["_id"] for hit in response["hits"]["hits"]]
                first = bool(ids) and ids[0] == expected
                results.setdefault(way, []).append((first, len([i for i in ids if i != expected])))
                if not first:
                    print(f"  {way}: {query} -> {ids[:3]} (wanted {expected})")
        print(f"{len(facts)} facts, {len(queries)} queries")
        for way, rows in results.items():
            right = sum(first for first, _ in rows)
            spurious = sum(n for _, n in rows) / len(rows)
            print(
                f"{way:28s} first {right}/{len(rows)} ({right / len(rows):.2f}), "
                f"spurious matches {spurious:.2f} a query"
            )
    finally:
        await client.indices.delete(index=name, ignore_unavailable=True)
        await client.close()


async def _has(client: AsyncOpenSearch, analyzer: str) -> bool:
    try:
        await client.indices.analyze(body={"analyzer": analyzer, "text": "テスト"})
    except Exception:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--url", default=os.environ.get("COGNIS_OPENSEARCH_URL", "http://127.0.0.1:59200")
    )
    asyncio.run(run(parser.parse_args().url))


if __name__ == "__main__":
    main()
