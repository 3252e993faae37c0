"""How the index is spread over the cluster: its nodes' URLs, its shards and their replicas.

Replicas are what make a node's loss harmless: a replica of each shard on another node is
promoted when the node holding the primary goes, so the BM25 leg keeps every document. Shards
are fixed when the index is created; replicas can change on a live index.
"""

from __future__ import annotations

from typing import Any

import structlog
from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import TransportError

log = structlog.get_logger(__name__)


def node_urls(opensearch_url: str) -> list[str]:
    """The nodes of `COGNIS_OPENSEARCH_URL`: one URL, or several separated by commas."""
    urls = [url.strip() for url in opensearch_url.split(",") if url.strip()]
    if not urls:
        raise ValueError("COGNIS_OPENSEARCH_URL names no node")
    return urls


def auto_replicas(data_nodes: int) -> int:
    """One copy of each shard on another node when there is another node to hold it."""
    return 1 if data_nodes >= 2 else 0


async def wanted_replicas(client: AsyncOpenSearch, configured: int | None) -> int:
    """The configured replica count, else the one the cluster's data nodes allow."""
    if configured is not None:
        return configured
    health = await client.cluster.health()
    return auto_replicas(int(health["number_of_data_nodes"]))


async def reconcile_layout(
    client: AsyncOpenSearch, index: str, shards: int, configured_replicas: int | None
) -> None:
    """Bring an existing index's replicas to the wanted count (a dynamic setting); a different
    shard count cannot change in place, so it is only reported. Unset (automatic) replicas
    are never lowered here: a start-up while nodes are missing must not drop copies."""
    response: dict[str, Any] = await client.indices.get_settings(
        index=index, name="index.number_of_*"
    )
    for concrete, body in response.items():
        current = body["settings"]["index"]
        have_shards, have_replicas = (
            int(current["number_of_shards"]),
            int(current["number_of_replicas"]),
        )
        if have_shards != shards:
            log.warning(
                "search_index.shards_differ",
                index=concrete,
                index_shards=have_shards,
                configured_shards=shards,
                remedy="python -m app reindex --recreate",
            )
        want = await wanted_replicas(client, configured_replicas)
        if want == have_replicas or (configured_replicas is None and want < have_replicas):
            continue
        try:
            await client.indices.put_settings(
                index=concrete, body={"index": {"number_of_replicas": want}}
            )
        except OSConnectionError:
            raise  # no answer: the next ensure_index tries again
        except TransportError as exc:
            log.warning("search_index.replicas_unchanged", index=concrete, error=str(exc))
            continue
        log.info("search_index.replicas_changed", index=concrete, before=have_replicas, after=want)
