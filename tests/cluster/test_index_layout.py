"""Shards and replicas of the BM25 index: from the cluster's size unless set (issue 35)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from opensearchpy import AsyncOpenSearch
from structlog.testing import capture_logs

from app.config import Settings
from app.search_index.client import MemoryIndex
from app.search_index.layout import auto_replicas, node_urls
from bench.opensearch_cluster import OpenSearchCluster, wait_green
from tests import services

pytestmark = pytest.mark.xdist_group("opensearch_cluster")

MakeIndex = Callable[..., MemoryIndex]


def test_the_replica_count_follows_the_data_nodes() -> None:
    assert [auto_replicas(n) for n in (1, 2, 3, 5)] == [0, 1, 1, 1]


def test_several_node_urls_are_read_from_one_setting() -> None:
    assert node_urls(" http://a:1 ,http://b:2,, http://c:3") == [
        "http://a:1",
        "http://b:2",
        "http://c:3",
    ]
    with pytest.raises(ValueError, match="names no node"):
        node_urls(" , ")


@pytest.fixture
async def make_index() -> AsyncIterator[MakeIndex]:
    """MemoryIndex objects on a URL, each on an index of this test's own (deleted after)."""
    made: list[MemoryIndex] = []

    def make(url: str, index: str | None = None, **settings: Any) -> MemoryIndex:
        memory_index = MemoryIndex(
            Settings(
                database_url="postgresql+asyncpg://unused@127.0.0.1/unused",
                opensearch_url=url,
                opensearch_index=index or f"cognis-layout-{uuid.uuid4().hex[:8]}",
                **settings,
            ).store
        )
        made.append(memory_index)
        return memory_index

    yield make
    for memory_index in made:
        await memory_index.drop_index()
        await memory_index.close()


async def layout(client: AsyncOpenSearch, index: str) -> tuple[int, int]:
    settings = (await client.indices.get_settings(index=index))[index]["settings"]["index"]
    return int(settings["number_of_shards"]), int(settings["number_of_replicas"])


async def test_on_three_nodes_the_index_has_one_replica_and_turns_green(
    opensearch_cluster: OpenSearchCluster, make_index: MakeIndex
) -> None:
    index = make_index(opensearch_cluster.urls)
    assert await index.ensure_index() is True
    assert await layout(index.client, index.name) == (1, 1)
    await wait_green(index.client, index.name, timeout_s=60)
    copies = await index.client.cat.shards(index=index.name, format="json")
    # The primary and its replica are started, on two different nodes.
    assert sorted(c["prirep"] for c in copies) == ["p", "r"]
    assert {c["state"] for c in copies} == {"STARTED"}
    assert len({c["node"] for c in copies}) == 2


async def test_on_a_single_node_the_index_has_no_replica(
    service_urls: services.ServiceUrls, make_index: MakeIndex
) -> None:
    index = make_index(service_urls.opensearch_url)
    assert await index.ensure_index() is True
    assert await layout(index.client, index.name) == (1, 0)
    health = await index.client.cluster.health(index=index.name)
    assert (health["number_of_data_nodes"], health["status"]) == (1, "green")


async def test_explicit_shards_and_replicas_win(
    opensearch_cluster: OpenSearchCluster,
    service_urls: services.ServiceUrls,
    make_index: MakeIndex,
) -> None:
    on_cluster = make_index(opensearch_cluster.urls, opensearch_shards=2, opensearch_replicas=0)
    await on_cluster.ensure_index()
    assert await layout(on_cluster.client, on_cluster.name) == (2, 0)
    # On one node a replica cannot be placed: asked for, it is set all the same (yellow).
    single = make_index(service_urls.opensearch_url, opensearch_replicas=1)
    await single.ensure_index()
    assert await layout(single.client, single.name) == (1, 1)


async def test_start_up_brings_an_existing_index_to_the_wanted_replicas(
    opensearch_cluster: OpenSearchCluster, make_index: MakeIndex
) -> None:
    first = make_index(opensearch_cluster.urls, opensearch_replicas=0)
    await first.ensure_index()
    # A later start with replicas unset raises them to the cluster's 1 ...
    automatic = make_index(opensearch_cluster.urls, first.name)
    with capture_logs() as logs:
        assert await automatic.ensure_index() is False
    assert await layout(first.client, first.name) == (1, 1)
    changed = [e for e in logs if e["event"] == "search_index.replicas_changed"]
    assert [(e["before"], e["after"]) for e in changed] == [(0, 1)]
    # ... an explicit 2 is applied ...
    await make_index(opensearch_cluster.urls, first.name, opensearch_replicas=2).ensure_index()
    assert await layout(first.client, first.name) == (1, 2)
    # ... and unset never lowers them (a start while nodes are missing must not drop copies).
    await make_index(opensearch_cluster.urls, first.name).ensure_index()
    assert await layout(first.client, first.name) == (1, 2)


async def test_a_different_shard_count_is_reported_not_changed(
    opensearch_cluster: OpenSearchCluster, make_index: MakeIndex
) -> None:
    first = make_index(opensearch_cluster.urls)
    await first.ensure_index()
    resharded = make_index(opensearch_cluster.urls, first.name, opensearch_shards=3)
    with capture_logs() as logs:
        await resharded.ensure_index()
    assert await layout(first.client, first.name) == (1, 1)
    warned = [e for e in logs if e["event"] == "search_index.shards_differ"]
    assert len(warned) == 1
    assert (warned[0]["index_shards"], warned[0]["configured_shards"]) == (1, 3)
    assert "python -m app reindex" in warned[0]["remedy"]
