"""The BM25 index of memory text in OpenSearch. Every query is filtered by tenant and user
(filters.py)."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

import structlog
from opensearchpy import AsyncOpenSearch
from opensearchpy.exceptions import ConnectionError as OSConnectionError
from opensearchpy.exceptions import ConnectionTimeout, TransportError

from app.config import StoreSettings
from app.search_index.documents import (
    SUBFIELD_ANALYZERS,
    TEXT_FIELDS,
    Analysis,
    added_fields,
    analyzers,
    index_body,
    text_field,
)
from app.search_index.filters import tenant_filter, visible_documents
from app.search_index.layout import node_urls, reconcile_layout, wanted_replicas
from app.search_index.text_query import proximity_match, text_match
from app.tracing.setup import opensearch_transport_class

log = structlog.get_logger(__name__)

# What "OpenSearch is not answering" looks like to the caller: the outbox holds the write.
UNAVAILABLE = (OSConnectionError, ConnectionTimeout, OSError)

# After a scheduled refresh starts, it takes a while to finish on a busy node: a delivered
# document counts as maybe unsearchable for its refresh interval plus this much.
REFRESH_MARGIN_S = 1.0
_TIME_VALUE = re.compile(r"(\d+(?:\.\d+)?)(nanos|micros|ms|s|m|h|d)")
_TIME_UNIT_S = {
    "nanos": 1e-9,
    "micros": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
    "d": 86400.0,
}


def refresh_window_s(refresh_interval: str) -> float | None:
    """How long after its delivery a document may still be missing from searches: the
    index's refresh interval (an OpenSearch time value) plus a margin. None for "-1" (no
    scheduled refresh: only an explicit one makes it searchable)."""
    match = _TIME_VALUE.fullmatch(refresh_interval.strip())
    if match is None:
        if refresh_interval.strip() == "-1":
            return None
        raise ValueError(f"not an OpenSearch time value: {refresh_interval!r}")
    return float(match.group(1)) * _TIME_UNIT_S[match.group(2)] + REFRESH_MARGIN_S


@dataclass(frozen=True, slots=True)
class BulkOutcome:
    """Result of one bulk item: ok (applied, or stale and rightly refused) or an error text."""

    ok: bool
    error: str | None = None


@dataclass(frozen=True, slots=True)
class TextHit:
    memory_id: uuid.UUID
    score: float


class MemoryIndex:
    def __init__(self, store: StoreSettings) -> None:
        auth = None
        if store.opensearch_username and store.opensearch_password:
            auth = (
                store.opensearch_username,
                store.opensearch_password.get_secret_value(),
            )
        self.name = store.opensearch_index
        self._refresh_interval = store.opensearch_refresh_interval
        # The interval this service creates the index with: keep an existing index's equal.
        self.refresh_window_s = refresh_window_s(store.opensearch_refresh_interval)
        self._shards = store.opensearch_shards
        self._replicas = store.opensearch_replicas
        self._existing_checked = False
        # Whether queries may search the language subfields: False for an index made before
        # them (ensure_index finds out), whose CJK queries then search `content` as they did.
        self.language_fields = True
        hosts = node_urls(store.opensearch_url)
        # While tracing: a span per request made below a recorded span.
        traced = opensearch_transport_class()
        self.client = AsyncOpenSearch(
            hosts=hosts,
            http_auth=auth,
            timeout=store.opensearch_timeout_s,
            # With several nodes, a request that finds one dead (refused, reset) is retried on
            # the next, and the client leaves the dead one out for a while. A timeout is not
            # retried: the caller's time is spent (the BM25 leg reports itself missing).
            max_retries=len(hosts) - 1,
            retry_on_timeout=False,
            **({"transport_class": traced} if traced is not None else {}),
        )

    async def close(self) -> None:
        await self.client.close()

    async def ping(self) -> bool:
        try:
            return bool(await self.client.ping())
        except Exception:
            return False

    async def _analyzer_available(self, name: str) -> bool:
        try:
            await self.client.indices.analyze(body={"analyzer": name, "text": "running"})
        except TransportError:
            return False
        return True

    async def analysis(self) -> Analysis:
        """The analyzers this cluster offers (its modules and plugins)."""
        return Analysis(
            english=await self._analyzer_available("english"),
            kuromoji=await self._analyzer_available("kuromoji"),
            cjk=await self._analyzer_available("cjk"),
        )

    async def has_language_fields(self) -> bool:
        """Whether content and context have their language subfields (an index made before
        them has not, until `make reindex`)."""
        mapping = await self.client.indices.get_mapping(index=self.name)
        return all(
            set(body["mappings"].get("properties", {}).get(field, {}).get("fields", {}))
            == set(SUBFIELD_ANALYZERS)
            for body in mapping.values()
            for field in TEXT_FIELDS
        )

    async def language_fields_current(self) -> bool:
        """Whether the index has the language subfields, analysed as this cluster can."""
        if not await self.has_language_fields():
            return False
        wanted = analyzers(await self.analysis())
        settings = await self.client.indices.get_settings(index=self.name, name="index.analysis.*")
        return all(
            body["settings"].get("index", {}).get("analysis", {}).get("analyzer", {}).get(name)
            == wanted[name]
            for body in settings.values()
            for name in SUBFIELD_ANALYZERS.values()
        )

    async def add_language_fields(self) -> bool:
        """Give an index made before languages had fields (or before the cluster had kuromoji)
        its language analyzers and subfields; True if it changed. The analyzers are index
        settings that an open index cannot change: the index is closed for a moment (searches
        fail meanwhile, writes wait in the outbox) and opened again. Documents are analysed
        into the new fields when indexed again: `make reindex` does both."""
        if await self.language_fields_current():
            return False
        wanted = analyzers(await self.analysis())
        await self.client.indices.close(index=self.name)
        try:
            await self.client.indices.put_settings(
                index=self.name,
                body={
                    "analysis": {
                        "analyzer": {name: wanted[name] for name in SUBFIELD_ANALYZERS.values()}
                    }
                },
            )
        finally:
            await self.client.indices.open(index=self.name)
        await self.client.cluster.health(index=self.name, wait_for_status="yellow")
        await self.client.indices.put_mapping(
            index=self.name, body={"properties": {field: text_field() for field in TEXT_FIELDS}}
        )
        self.language_fields = True
        log.info("search_index.language_fields_added", index=self.name, analyzers=wanted)
        return True

    async def ensure_index(self) -> bool:
        """Create the index with its mapping, shards and replicas if missing. Returns True if
        it was created. An existing one is brought up to date once per process."""
        if await self.client.indices.exists(index=self.name):
            if not self._existing_checked:
                # An index made by an earlier version: add the fields it lacks (allowed in place;
                # old documents gain them when reindexed; see tenant_filter for the tenant).
                await self.client.indices.put_mapping(
                    index=self.name, body=added_fields(await self.analysis())
                )
                await reconcile_layout(self.client, self.name, self._shards, self._replicas)
                self.language_fields = await self.has_language_fields()
                if not self.language_fields:
                    log.warning(
                        "search_index.language_fields_missing",
                        index=self.name,
                        remedy="make reindex (python -m app reindex)",
                    )
                self._existing_checked = True
            return False
        analysis = await self.analysis()
        replicas = await wanted_replicas(self.client, self._replicas)
        body = index_body(analysis, self._refresh_interval, self._shards, replicas)
        try:
            await self.client.indices.create(index=self.name, body=body)
        except TransportError as exc:
            if exc.error == "resource_already_exists_exception":
                return False
            raise
        log.info(
            "search_index.created",
            index=self.name,
            english_analyzer=analysis.english,
            kuromoji=analysis.kuromoji,
            cjk=analysis.cjk,
            shards=self._shards,
            replicas=replicas,
        )
        return True

    async def drop_index(self) -> None:
        await self.client.indices.delete(index=self.name, ignore_unavailable=True)

    async def bulk_index(self, items: list[tuple[str, int, dict[str, Any]]]) -> list[BulkOutcome]:
        """Index (doc_id, external_version, document) items; one outcome per item, in order."""
        if not items:
            return []
        body: list[dict[str, Any]] = []
        for doc_id, version, document in items:
            body.append(
                {
                    "index": {
                        "_index": self.name,
                        "_id": doc_id,
                        "version": version,
                        "version_type": "external",
                    }
                }
            )
            body.append(document)
        response = await self.client.bulk(body=body)
        outcomes: list[BulkOutcome] = []
        for item in response["items"]:
            result = item["index"]
            status = result.get("status", 500)
            # 409: a newer version is already indexed, so this stale event is done, not failed.
            if status < 300 or status == 409:
                outcomes.append(BulkOutcome(ok=True))
            else:
                outcomes.append(BulkOutcome(ok=False, error=str(result.get("error"))[:2000]))
        return outcomes

    async def delete_documents(self, items: list[tuple[str, int]]) -> list[BulkOutcome]:
        """Delete (doc_id, external_version) items: an expired memory's versions, reaped. One
        outcome per item, in order; a document already gone (404) counts as deleted."""
        if not items:
            return []
        response = await self.client.bulk(
            body=[
                {
                    "delete": {
                        "_index": self.name,
                        "_id": doc_id,
                        "version": version,
                        "version_type": "external",
                    }
                }
                for doc_id, version in items
            ]
        )
        outcomes: list[BulkOutcome] = []
        for item in response["items"]:
            result = item["delete"]
            status = result.get("status", 500)
            # 409: the document has a later version than this event (none can be written
            # after its row is gone), so there is nothing of this event left to do.
            if status < 300 or status in (404, 409):
                outcomes.append(BulkOutcome(ok=True))
            else:
                outcomes.append(BulkOutcome(ok=False, error=str(result.get("error"))[:2000]))
        return outcomes

    async def delete_user_documents(
        self, tenant_id: uuid.UUID, user_id: str, page_size: int = 1000
    ) -> int:
        """Delete every document of one user of a tenant; returns how many were deleted.

        Search-then-bulk-delete rather than _delete_by_query, which lives in the optional
        `reindex` module: this works on any OpenSearch node, the minimal local one included.
        """
        deleted = 0
        while True:
            await self.refresh()
            response = await self.client.search(
                index=self.name,
                body={
                    "size": page_size,
                    "_source": False,
                    "query": {
                        "bool": {
                            "filter": [tenant_filter(tenant_id), {"term": {"user_id": user_id}}]
                        }
                    },
                },
            )
            ids = [hit["_id"] for hit in response["hits"]["hits"]]
            if not ids:
                return deleted
            result = await self.client.bulk(
                body=[{"delete": {"_index": self.name, "_id": doc_id}} for doc_id in ids],
                refresh=True,
            )
            for item in result["items"]:
                status = item["delete"].get("status", 500)
                if status < 300:
                    deleted += 1
                elif status != 404:
                    raise TransportError(status, "bulk delete failed", item["delete"].get("error"))

    async def refresh(self) -> None:
        await self.client.indices.refresh(index=self.name)

    async def speakers(self, user_id: str, session_id: str | None, limit: int = 100) -> set[str]:
        """The speakers of the memories this caller may see (a terms aggregation over the
        same filters as search): the names lever speaker_query leaves out of a query."""
        body = {
            "size": 0,
            "query": {"bool": {"filter": visible_documents(user_id, session_id)}},
            "aggs": {"speakers": {"terms": {"field": "speaker", "size": limit}}},
        }
        response = await self.client.search(index=self.name, body=body)
        return {bucket["key"] for bucket in response["aggregations"]["speakers"]["buckets"]}

    async def search_bm25(
        self,
        user_id: str,
        query: str,
        size: int,
        session_id: str | None = None,
        context_boost: float = 0.0,
        proximity_slop: int | None = None,
        matching: dict[str, Any] | None = None,
        language: str | None = None,
    ) -> list[TextHit]:
        """BM25 over current memories of one user of the current tenant: USER scope, plus
        CONTEXT of this session. With `context_boost` > 0 the context field counts too, at that
        weight beside the content's 1.0 (best field plus the other's share: a tie-breaker, not a
        sum). With `proximity_slop`, documents with the terms close together score more.
        `matching`: a search filter's clause (app/memories/filters/), applied with the
        visibility filters, before scoring. `language`: the query's (ISO 639-1), which chooses
        the analysis it is searched in (language_fields)."""
        query_body: dict[str, Any] = {
            "must": [text_match(query, context_boost, language if self.language_fields else None)],
            "filter": [*visible_documents(user_id, session_id), *([matching] if matching else [])],
        }
        if proximity_slop is not None:
            query_body["should"] = proximity_match(
                query, context_boost, proximity_slop, language if self.language_fields else None
            )
        body = {"size": size, "_source": False, "query": {"bool": query_body}}
        response = await self.client.search(index=self.name, body=body)
        return [
            TextHit(memory_id=uuid.UUID(hit["_id"]), score=float(hit["_score"]))
            for hit in response["hits"]["hits"]
        ]
