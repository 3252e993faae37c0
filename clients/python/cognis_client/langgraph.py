"""CognisStore: LangGraph's long-term memory store (BaseStore) over the Cognis Memory API.

Namespaces map to users and agents: `prefix + (user_id,)` holds the user's shared memories
(no `agent_id`), `prefix + (user_id, agent_id)` that agent's memories (`agent_id` on the API).
Both hold USER-scope memories, kept across sessions; a session's CONTEXT memories are working
memory of that session, not store items. A search or a listing of namespaces covers what lies
beneath its prefix, as in LangGraph's own stores: `prefix + (user_id,)` the user's shared
memories and every agent's, `prefix` (or shorter) every user of the tenant. Results of several
users are merged by `relevance` (the query's cosine to the memory, comparable across users) and
given as each item's `score`. An item is one memory chain: its text is `value["content"]` (or
`value["text"]`, else the value as JSON), its key and value ride in the memory's metadata, and a
put on an existing key writes a new version (the earlier one stays in the chain's history).
Memories written by other means (messages, REST) appear as items too, keyed by their memory id
(which no update changes: `get` by that key finds the current version),
with `{"content", "category"}` as value. A get or put by key is one filtered request (the key
is matched in the metadata by the server), not a walk through the namespace.

A put repeated after the first committed writes nothing (it finds the value unchanged). Its
update or delete sends an idempotency key derived from the version it replaces, so a put repeated
while the first is still in flight is done once as well, and If-Match with that version, so a put
that another writer overtook fails (PreconditionFailedError) rather than overwrite what it did
not read; a first put of a new key sends a new key (retried by the client with that key), so two
concurrent first puts can create two items.

TTL (`supports_ttl`): `put(..., ttl=minutes)` (or `TTLConfig.default_ttl`) gives the memory an
expiry of that many minutes from the put (`ttl_s` on the API); `ttl=None` writes it without one
(an existing item's expiry is cleared). A put of an unchanged value with a ttl writes a version
that only moves the expiry. From its expiry on, an item is never returned (as with
`TTLConfig.omit_expired`: the service hides it at once) and the server's reaper deletes it;
`sweep_interval_minutes` has no effect here (COGNIS_EXPIRY_REAP_INTERVAL_S is the server's).
What differs from LangGraph's stores: reads do not refresh a TTL. `refresh_ttl` on get and
search (and `TTLConfig.refresh_on_read`) is accepted and ignored, because refreshing would write a
new version of the memory on every read: an item expires `ttl` minutes after its last put, not
after its last read. Put it again to extend it.

Needs the `langgraph` extra: `pip install 'cognis-memory-client[langgraph]'`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any

import msgspec
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from cognis_client._calls import RetryPolicy, SearchOptions
from cognis_client.client import AsyncCognisClient
from cognis_client.errors import NotFoundError
from cognis_client.models import Memory, MemoryInput

METADATA_KEY = "langgraph"
MAX_TOP_K = 100  # the API's default bound on one search


def agent_filter(agent_id: str | None) -> dict[str, Any]:
    """Exactly one namespace's memories: the agent's, or the shared ones (no agent)."""
    if agent_id is None:
        return {"field": "agent", "op": "exists", "value": False}
    return {"field": "agent", "op": "eq", "value": agent_id}


def all_of(*clauses: dict[str, Any] | None) -> dict[str, Any] | None:
    present = [c for c in clauses if c is not None]
    return None if not present else present[0] if len(present) == 1 else {"and": present}


def matches(namespace: tuple[str, ...], condition: MatchCondition) -> bool:
    """LangGraph's match conditions: a prefix or suffix of the namespace, "*" any element."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        part = namespace[: len(path)]
    elif condition.match_type == "suffix":
        part = namespace[len(namespace) - len(path) :]
    else:
        raise ValueError(f"unsupported match type {condition.match_type!r}")
    return all(want in ("*", got) for got, want in zip(part, path, strict=True))


_OPERATORS = {"$eq": "eq", "$ne": "ne", "$gt": "gt", "$gte": "gte", "$lt": "lt", "$lte": "lte"}


def value_filter(matching: dict[str, Any]) -> dict[str, Any]:
    """LangGraph's `filter` on item values as the API's filter language, so the search applies
    it before ranking: `{"k": v}` is equality, `{"k": {"$gt": 2}}` an operator ($eq, $ne,
    $gt, $gte, $lt, $lte). A value is a string, number, boolean or null; anything else is a
    ValueError. Items written by other means (value `{"content", "category"}`) match a filter
    on `category` by their category."""
    clauses = []
    for key, wanted in matching.items():
        conditions = wanted if isinstance(wanted, dict) else {"$eq": wanted}
        for operator, value in conditions.items():
            if operator not in _OPERATORS:
                raise ValueError(
                    f"filter on {key!r}: operator {operator!r} is not supported; use "
                    f"{', '.join(_OPERATORS)} or a plain value"
                )
            if not (value is None or isinstance(value, str | bool | int | float)):
                raise ValueError(
                    f"filter on {key!r}: only a string, number, boolean or null is supported"
                )
            op = _OPERATORS[operator]
            clause: dict[str, Any] = {
                "field": f"metadata.{METADATA_KEY}.value.{key}",
                "op": op,
                "value": value,
            }
            if key == "category" and isinstance(value, str) and op in ("eq", "ne"):
                written_elsewhere = {
                    "and": [
                        {"field": f"metadata.{METADATA_KEY}", "op": "exists", "value": False},
                        {"field": "category", "op": op, "value": value},
                    ]
                }
                clause = {"or": [clause, written_elsewhere]}
            clauses.append(clause)
    return {"and": clauses}


def memory_text(value: dict[str, Any]) -> str:
    for field in ("content", "text"):
        if isinstance(value.get(field), str) and value[field].strip():
            return value[field]
    return json.dumps(value, sort_keys=True, default=str)


def current_value(value: Any, content: str) -> Any:
    """The stored value as of the memory's current content: a version written by other means
    (a REST PATCH, an ingestion UPDATE) keeps the item's metadata but changes its text, so the
    text field the value was read from (`content`, else `text`) says what the memory says now."""
    if not isinstance(value, dict) or memory_text(value) == content:
        return value
    for field in ("content", "text"):
        if isinstance(value.get(field), str):
            return {**value, field: content}
    return value


def _version(memory: Memory) -> uuid.UUID:
    """The version a Memory is (a server before 0029 sent no version_id: its id was it)."""
    return memory.version_id or memory.id


def _version_key(action: str, version_id: uuid.UUID, value: Any = None) -> str:
    """The idempotency key of a change to one memory version: a version is superseded at most
    once, so a put repeated while the first is still in flight (a retry after a timeout: it
    still finds the old version) sends the same key and is done once."""
    change = json.dumps([action, str(version_id), value], sort_keys=True, default=str)
    return "langgraph-" + hashlib.sha256(change.encode()).hexdigest()


class CognisStore(BaseStore):
    """`CognisStore("http://127.0.0.1:8000", api_key=...)`; `prefix=("memories",)` to use
    LangGraph's usual `("memories", user_id)` namespaces. `ttl_config`: LangGraph's TTL
    settings (`default_ttl` in minutes); see the module's note on what differs."""

    supports_ttl: bool = True

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        prefix: tuple[str, ...] = (),
        retry: RetryPolicy | None = None,
        timeout_s: float = 60.0,
        ttl_config: TTLConfig | None = None,
    ) -> None:
        self.prefix = tuple(prefix)
        self.ttl_config = ttl_config
        self._client_options: dict[str, Any] = {
            "api_key": api_key,
            "retry": retry,
            "timeout_s": timeout_s,
        }
        self._base_url = base_url
        # One client per event loop: an httpx client's connections belong to the loop that
        # opened them, so a store reused under a second asyncio.run must not reach for the
        # first loop's (closed) ones. A loop's entry goes when the loop does.
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncCognisClient] = (
            weakref.WeakKeyDictionary()
        )

    async def aclose(self) -> None:
        """Close this event loop's client (those of loops already closed are dropped)."""
        client = self._clients.pop(asyncio.get_running_loop(), None)
        if client is not None:
            await client.close()

    def _new_client(self) -> AsyncCognisClient:
        return AsyncCognisClient(self._base_url, **self._client_options)

    def _loop_client(self) -> AsyncCognisClient:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            for closed in [other for other in self._clients if other.is_closed()]:
                del self._clients[closed]  # its connections died with it
            client = self._clients[loop] = self._new_client()
        return client

    # --- BaseStore ---------------------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        client = self._loop_client()
        return [await self._run(client, op) for op in ops]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise asyncio.InvalidStateError(
                "CognisStore's synchronous methods cannot run inside an event loop: "
                "use the async ones (aget, aput, asearch, adelete)"
            )
        ops = list(ops)

        async def run() -> list[Result]:
            async with self._new_client() as client:
                return [await self._run(client, op) for op in ops]

        return asyncio.run(run())

    # --- operations --------------------------------------------------------------------------

    async def _run(self, client: AsyncCognisClient, op: Op) -> Result:
        if isinstance(op, GetOp):
            memory = await self._find(client, op.namespace, op.key)
            return None if memory is None else self._item(memory)
        if isinstance(op, PutOp):
            await self._put(client, op)
            return None
        if isinstance(op, SearchOp):
            return await self._search(client, op)
        if isinstance(op, ListNamespacesOp):
            return await self._list_namespaces(client, op)
        raise TypeError(f"unknown store operation {op!r}")

    def _locate(self, namespace: tuple[str, ...]) -> tuple[str, str | None]:
        """(user_id, agent_id or None) of an item's namespace; anything else is not ours."""
        n = len(self.prefix)
        rest = tuple(namespace[n:])
        if tuple(namespace[:n]) != self.prefix or len(rest) not in (1, 2):
            raise InvalidNamespaceError(
                f"namespace {namespace!r} is not {(*self.prefix, '<user_id>')!r} or "
                f"{(*self.prefix, '<user_id>', '<agent_id>')!r}"
            )
        return rest[0], (rest[1] if len(rest) == 2 else None)

    def _namespace(self, memory: Memory) -> tuple[str, ...]:
        if memory.agent_id is not None:
            return (*self.prefix, memory.user_id, memory.agent_id)
        return (*self.prefix, memory.user_id)

    @staticmethod
    def _stored(memory: Memory) -> dict[str, Any] | None:
        stored = memory.metadata.get(METADATA_KEY)
        return stored if isinstance(stored, dict) and "key" in stored else None

    def _item(self, memory: Memory, score: float | None = None) -> SearchItem:
        stored = self._stored(memory)
        if stored is None:  # written by other means: keyed by its id, stable across updates
            key = str(memory.id)
            value = {"content": memory.content, "category": memory.category}
            created_at = memory.created_at
        else:
            key, value = stored["key"], current_value(stored["value"], memory.content)
            created_at = memory.created_at
            if isinstance(stored.get("created_at"), str):
                created_at = type(created_at).fromisoformat(stored["created_at"])
        return SearchItem(
            namespace=self._namespace(memory),
            key=key,
            value=value,
            created_at=created_at,
            updated_at=memory.created_at,
            score=score,
        )

    async def _find(
        self, client: AsyncCognisClient, namespace: tuple[str, ...], key: str
    ) -> Memory | None:
        """The current version of the item `key` in `namespace`: one filtered list request
        for an item this store put (its key is in the metadata), else the memory written by
        other means that the key names (its id, which no update changes)."""
        user_id, agent_id = self._locate(namespace)
        by_key = {"field": f"metadata.{METADATA_KEY}.key", "op": "eq", "value": key}
        page = await client.list_memories(
            user_id, limit=1, scope="USER", filters={"and": [agent_filter(agent_id), by_key]}
        )
        if page.items:
            return page.items[0]
        try:  # a memory written by other means, named by its id (or any version's)
            current = await client.get_memory(user_id, str(uuid.UUID(key)))
        except (ValueError, NotFoundError):
            return None
        if not current.is_current or self._stored(current) is not None:
            return None  # erased, or an item of this store's, found by its key above
        in_namespace = current.scope == "USER" and current.agent_id == agent_id
        return current if in_namespace else None

    async def _put(self, client: AsyncCognisClient, op: PutOp) -> None:
        user_id, agent_id = self._locate(op.namespace)
        existing = await self._find(client, op.namespace, op.key)
        if op.value is None:
            if existing is not None:
                key = _version_key("delete", _version(existing))
                await client.delete_memory(
                    user_id, existing.id, if_match=existing, idempotency_key=key
                )
            return
        value = dict(op.value)
        # LangGraph's ttl is in minutes; None: the item does not expire.
        ttl_s = None if op.ttl is None else float(op.ttl) * 60.0
        stored = self._stored(existing) if existing is not None else None
        if stored is not None and stored["value"] == value and ttl_s is None:
            if existing is not None and existing.expires_at is not None:
                await client.update_memory(
                    user_id,
                    existing.id,
                    if_match=existing,
                    idempotency_key=_version_key("expiry", _version(existing)),
                    expires_at=None,
                )
            return  # no new version for an unchanged value that does not expire
        # The item's creation time: its first version's, carried along the chain.
        created_at = None
        if existing is not None:
            created_at = (stored or {}).get("created_at") or existing.created_at.isoformat()
        metadata = {METADATA_KEY: {"key": op.key, "value": value, "created_at": created_at}}
        expiry: dict[str, Any] = {"ttl_s": ttl_s} if ttl_s is not None else {"expires_at": None}
        if existing is not None:
            await client.update_memory(
                user_id,
                existing.id,
                if_match=existing,
                idempotency_key=_version_key("put", _version(existing), [value, ttl_s]),
                content=memory_text(value),
                metadata=metadata,
                **expiry,
            )
            return
        draft = MemoryInput(content=memory_text(value), metadata=metadata)
        if ttl_s is not None:
            draft = msgspec.structs.replace(draft, ttl_s=ttl_s)
        if agent_id is not None:
            draft = msgspec.structs.replace(draft, agent_id=agent_id)
        await client.add_memory(user_id, draft)

    async def _users_under(
        self, client: AsyncCognisClient, prefix: tuple[str, ...]
    ) -> tuple[list[str], str | None, bool]:
        """The users a namespace prefix covers, the agent it names (if any), and whether it
        names no agent level at all (so it covers the shared memories and every agent's)."""
        n = len(self.prefix)
        if len(prefix) <= n:
            if tuple(prefix) != self.prefix[: len(prefix)]:
                return [], None, True  # another store's namespaces: nothing of ours
            return [u async for u in self._all_users(client)], None, True
        user_id, agent_id = self._locate(prefix)
        return [user_id], agent_id, agent_id is None

    async def _all_users(self, client: AsyncCognisClient) -> AsyncIterator[str]:
        cursor = None
        while True:
            page = await client.list_users(limit=200, cursor=cursor)
            for user in page.items:
                yield user.user_id
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def _search(self, client: AsyncCognisClient, op: SearchOp) -> list[SearchItem]:
        """A query runs the API's retrieval; without one, the namespaces' memories, newest
        first. `filter` (equality, or $eq/$ne/$gt/$gte/$lt/$lte) is pushed down into the
        search or the list (`value_filter`): applied before ranking, not to a top 100. A
        prefix covers every namespace beneath it (the module's note); a query's results from
        several users are merged by relevance."""
        users, agent_id, every_agent = await self._users_under(client, op.namespace_prefix)
        matching = value_filter(op.filter) if op.filter else None
        namespace = None if every_agent else agent_filter(agent_id)
        wanted = op.offset + op.limit
        hits: list[tuple[Memory, float | None]] = []
        for user_id in users:
            if op.query:
                options: SearchOptions = {
                    "top_k": min(MAX_TOP_K, wanted),
                    "consistency": "indexed",
                }
                if (scoped := all_of(matching, namespace)) is not None:
                    options["filters"] = scoped
                found = await client.search(user_id, op.query, **options)
                hits += [(h.memory, h.relevance) for h in found.results if h.history_of is None]
            else:
                listed = client.iter_memories(
                    user_id, scope="USER", **_with_filter(all_of(matching, namespace))
                )
                newest: list[tuple[Memory, float | None]] = []
                async for memory in listed:  # newest first: this user's `wanted` newest
                    newest.append((memory, None))
                    if len(newest) == wanted:
                        break
                hits += newest
        if op.query:
            if len(users) > 1:  # one user's results keep the service's order
                hits.sort(key=lambda hit: -(hit[1] or 0.0))
        else:
            hits.sort(key=lambda hit: hit[0].created_at, reverse=True)
        items = [self._item(memory, score) for memory, score in hits if memory.scope == "USER"]
        return items[op.offset : wanted]

    async def _list_namespaces(
        self, client: AsyncCognisClient, op: ListNamespacesOp
    ) -> list[tuple[str, ...]]:
        """The namespaces that hold items: a user's when it has shared memories, and one per
        agent with memories of that user. Truncated to `max_depth`, de-duplicated, sorted."""
        found: set[tuple[str, ...]] = set()
        depth = op.max_depth
        async for user_id in self._all_users(client):
            user_namespace = (*self.prefix, user_id)
            if not self._may_match(user_namespace, op.match_conditions):
                continue
            if depth is not None and depth <= len(user_namespace):
                # Cut at the user: it counts when it holds any item, shared or an agent's.
                held = await client.list_memories(user_id, limit=1, scope="USER")
                if held.items:
                    found.add(user_namespace)
                continue
            shared = await client.list_memories(
                user_id, limit=1, scope="USER", filters=agent_filter(None)
            )
            if shared.items:
                found.add(user_namespace)
            agents = client.iter_memories(
                user_id,
                page_size=200,
                scope="USER",
                filters={"field": "agent", "op": "exists", "value": True},
            )
            async for memory in agents:
                if memory.agent_id is not None:
                    found.add((*user_namespace, memory.agent_id))
        namespaces = {
            ns[:depth] if depth is not None else ns
            for ns in found
            if all(matches(ns, c) for c in op.match_conditions or ())
        }
        ordered = sorted(namespaces)
        return ordered[op.offset : op.offset + op.limit]

    @staticmethod
    def _may_match(user_namespace: tuple[str, ...], conditions: Any) -> bool:
        """Whether a prefix condition could match this user's namespaces (the others are
        checked on the namespaces found)."""
        return all(
            matches(user_namespace, MatchCondition("prefix", tuple(c.path)[: len(user_namespace)]))
            for c in conditions or ()
            if c.match_type == "prefix"
        )


def _with_filter(filters: dict[str, Any] | None) -> dict[str, Any]:
    return {} if filters is None else {"filters": filters}
