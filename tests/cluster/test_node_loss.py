"""kill -9 one node of the 3-node OpenSearch cluster while a real API process, pointed at all
three nodes, serves writes and searches (issue 35): searches keep answering with the BM25 leg
(its replica is promoted), what they say about the index's lag is true, and once the node is
back and the index green, every memory in Postgres is in the index."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from opensearchpy import AsyncOpenSearch, OpenSearch

from bench.opensearch_cluster import OpenSearchCluster
from bench.scale_out_opensearch import lose_a_node, stores_compared
from tests.conftest import ApiProcess, only_running

pytestmark = pytest.mark.xdist_group("opensearch_cluster")


@pytest.fixture(scope="module")
def cluster_api(
    migrated: dict[str, str], opensearch_cluster: OpenSearchCluster
) -> Iterator[ApiProcess]:
    """The API (with its outbox relay) on the cluster, in an index of its own."""
    index = f"cognis-cluster-{uuid.uuid4().hex[:8]}"
    env = {
        **migrated,
        "COGNIS_OPENSEARCH_URL": opensearch_cluster.urls,
        "COGNIS_OPENSEARCH_INDEX": index,
        "COGNIS_INGEST_WORKER_IN_API": "false",
    }
    api = ApiProcess(env, "api-opensearch-cluster")
    try:
        api.wait_ready()
        yield api
    finally:
        api.stop()
        client = OpenSearch(hosts=opensearch_cluster.hosts)
        client.indices.delete(index=index, ignore_unavailable=True)
        client.close()


async def test_a_node_killed_under_load_loses_no_search_and_no_memory(
    cluster_api: ApiProcess, opensearch_cluster: OpenSearchCluster, user_id: str
) -> None:
    index = cluster_api.env["COGNIS_OPENSEARCH_INDEX"]
    # Only this API's relay delivers this database's outbox meanwhile (others would send the
    # users' documents to the single-node test index).
    with only_running(cluster_api):
        async with cluster_api.client(timeout=60) as http:
            run = await lose_a_node(
                http, opensearch_cluster, index, user_id, before_s=6, down_s=12, after_s=4
            )
        client = AsyncOpenSearch(hosts=opensearch_cluster.hosts)
        try:
            stored, indexed = await stores_compared(
                cluster_api.env["COGNIS_MIGRATION_DATABASE_URL"], client, index, [*run.written]
            )
        finally:
            await client.close()

    while_down = [s for s in run.searches if run.killed_at <= s.at < run.restarted_at]
    assert len(while_down) >= 3, f"too little load while the node was down: {run}"
    # Every request answered, none with a server error, every search with results.
    assert run.server_errors() == 0
    assert 0 not in run.write_statuses
    assert [s for s in run.searches if s.status != 200 or s.results == 0] == []
    # The index kept a copy of every shard: the BM25 leg answered all but the searches caught
    # in the moment of the kill.
    without_bm25 = [s for s in while_down if not s.bm25]
    assert len(without_bm25) <= 1, without_bm25
    # Read-your-writes told truthfully: a search that waited for the user's writes and says
    # they are in the index (not stale) found the memory written just before it through BM25.
    assert run.untruthful() == []
    assert any(s.bm25 and s.probe_found for s in while_down)
    # Nothing lost: every acknowledged write is in Postgres, and the index holds the same.
    written = {memory_id for ids in run.written.values() for memory_id in ids}
    assert len(written) > 0
    assert stored == written
    assert indexed == stored
