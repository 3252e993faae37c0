"""Versioned memory store: the rules. Never commits (the request's session does), only flushes."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from app.config import ApiSettings, IngestSettings, RetrievalSettings
from app.db.models import BatchJob, Memory
from app.errors import (
    InvalidInputError,
    NotFoundError,
    TooMuchWorkError,
)
from app.memories.batch_jobs import BatchJobRepository
from app.memories.categories import choose_categories, require_categories
from app.memories.context import link_session_turns, mentioned_time
from app.memories.cursors import decode_memory_cursor, encode_memory_cursor
from app.memories.domain import (
    MemoryDraft,
    MemoryUpdate,
    SaidIn,
    check_draft,
    check_event_end,
    checked_current,
    kept,
    language_kept,
)
from app.memories.drafts import complete_drafts, embed_drafts, interactive_write, new_version
from app.memories.expiry import resolve_expiry
from app.memories.fields import check_text, check_user_id
from app.memories.repository import ListFilter, MemoryRepository
from app.memories.user_lock import hold_for_write
from app.ml.categories import CategoryClassifier
from app.ml.embedder import Embedder, Embedding
from app.ml.scheduling.work import Work
from app.search_index import outbox

# Memories a delete of many locks and ends per statement.
_DELETE_PAGE = 500


@dataclass(frozen=True, slots=True)
class MemoryPage:
    items: list[Memory]
    next_cursor: str | None


class MemoryService:
    def __init__(
        self,
        session: AsyncSession,
        embedder: Embedder,
        classifier: CategoryClassifier,
        api: ApiSettings,
        ingest: IngestSettings,
        retrieval: RetrievalSettings,
        sentences_at_write: int = 0,
    ) -> None:
        """`sentences_at_write`: the most sentence texts a write embeds in its own call
        (embed_drafts); the API's service gives COGNIS_SENTENCE_VECTORS_AT_WRITE, the
        ingestion and batch-job workers none (their drafts come embedded, and no model call
        may run inside their transaction)."""
        self.repository = MemoryRepository(session)
        self._embedder = embedder
        self._classifier = classifier
        self._api = api
        self._ingest = ingest
        self._retrieval = retrieval
        self._sentences_at_write = sentences_at_write

    async def create(
        self, user_id: str, drafts: list[MemoryDraft], work: Work | None = None
    ) -> list[Memory]:
        """Store new memories (version 1 of new chains) with their outbox events. `work`: the
        model work's class and deadline (default: an interactive write of this user)."""
        await self._check_new(user_id, drafts)
        return await self._write_new(user_id, drafts, work or interactive_write(user_id))

    async def create_or_queue(
        self, user_id: str, drafts: list[MemoryDraft], work: Work
    ) -> list[Memory] | BatchJob:
        """A batch create: its memories stored now, as `create` does, or, when they need more
        model time than the work's whole deadline (TooMuchWorkError, before any model work),
        kept validated as a queued job in this transaction, which a worker writes later
        (app/ingest/batch_worker.py): a batch within the published maximum is never refused
        for its size."""
        await self._check_new(user_id, drafts)
        accepted = [replace(d) for d in drafts]  # as given: the write derives links in place
        try:
            return await self._write_new(user_id, drafts, work)
        except TooMuchWorkError:
            # Refused before any write: the transaction holds reads only. The user's write
            # lock, as for any write: an erase deletes the job, or refuses it (409).
            await hold_for_write(self.repository.session, user_id)
            return await BatchJobRepository(self.repository.session).queue(
                user_id, accepted, self._ingest.ingest_queue
            )

    async def _check_new(self, user_id: str, drafts: list[MemoryDraft]) -> None:
        """Validate new drafts in place (400 naming the field): what a batch job keeps."""
        check_user_id(user_id)
        if not drafts:
            raise InvalidInputError("give at least one memory", field="memories")
        if len(drafts) > self._api.max_batch_size:
            raise InvalidInputError(
                f"{len(drafts)} memories in one batch; at most "
                f"{self._api.max_batch_size} are allowed",
                field="memories",
            )
        prefixes = [f"memories[{i}]." if len(drafts) > 1 else "" for i in range(len(drafts))]
        for draft, prefix in zip(drafts, prefixes, strict=True):
            check_draft(
                draft,
                self._api.max_content_chars,
                self._api.max_metadata_bytes,
                prefix,
            )
        await require_categories(
            self.repository.session,
            self._classifier,
            [
                (d.category, f"{p}category")
                for d, p in zip(drafts, prefixes, strict=True)
                if d.category is not None
            ],
        )

    async def _write_new(self, user_id: str, drafts: list[MemoryDraft], work: Work) -> list[Memory]:
        ids = [uuid.uuid4() for _ in drafts]
        sessions = {d.session_id for d in drafts if d.session_id is not None}
        if sessions:
            # The one read before embedding: the turn each session's first draft follows.
            last = await self.repository.last_turns(user_id, sorted(sessions))
            link_session_turns(drafts, ids, last, self._retrieval.memory_context_turns)
        # Embedding is slow CPU work: done before the first write.
        await complete_drafts(
            self.repository.session,
            drafts,
            self._embedder,
            self._classifier,
            work,
            self._sentences_at_write,
        )
        work.check_deadline()
        await hold_for_write(self.repository.session, user_id)
        now = await self.repository.now()
        for draft in drafts:
            said = draft.said_at or draft.event_time or now
            draft.mentioned_at = mentioned_time(draft.content, said)
        memories = [
            new_version(user_id, draft, now, memory_id=memory_id)
            for draft, memory_id in zip(drafts, ids, strict=True)
        ]
        self.repository.add(memories)
        outbox.enqueue_index(self.repository.session, memories)
        await self.repository.session.flush()
        # Past the deadline (a long wait for the user's lock): rolled back, never committed.
        work.check_deadline()
        return memories

    async def batch_job(
        self, user_id: str, job_id: uuid.UUID
    ) -> tuple[BatchJob, list[Memory] | None]:
        """A batch job of this user, and once it is done the memories it wrote (404 for
        another user's: "not yours" and "not there" look the same)."""
        jobs = BatchJobRepository(self.repository.session)
        job = await jobs.get(check_user_id(user_id), job_id)
        if job is None:
            raise NotFoundError(f"batch job {job_id} not found for user {user_id}")
        return job, await jobs.written(user_id, job) if job.status == "done" else None

    async def get(self, user_id: str, memory_id: uuid.UUID) -> Memory:
        """The version an id names: by the memory's id, its current version (its last one
        once deleted); by one of its versions' ids, that version (404 for another user's)."""
        memory = await self.repository.named(check_user_id(user_id), memory_id)
        if memory is None:
            raise NotFoundError(f"memory {memory_id} not found for user {user_id}")
        return memory

    async def list_page(
        self, user_id: str, filters: ListFilter, limit: int, cursor: str | None
    ) -> MemoryPage:
        await self._check_listing(filters)
        after = decode_memory_cursor(cursor) if cursor else None
        rows = await self.repository.list_page(check_user_id(user_id), filters, limit + 1, after)
        next_cursor = encode_memory_cursor(rows[limit - 1]) if len(rows) > limit else None
        return MemoryPage(items=rows[:limit], next_cursor=next_cursor)

    async def _check_listing(self, filters: ListFilter) -> None:
        check_text(filters.session_id, "session_id")
        if filters.category is not None:
            given = [(filters.category, "category")]
            await require_categories(self.repository.session, self._classifier, given)

    async def delete_all(self, user_id: str, filters: ListFilter) -> list[Memory]:
        """End the current version of every memory of the user that the list with `filters`
        shows, in this transaction, as `delete` ends one: each keeps its history (rows stay,
        with superseded_at set) and leaves the index through its outbox event. The ended
        versions, in id order. Not an erase: nothing is removed (UserEraser does that)."""
        check_user_id(user_id)
        await self._check_listing(filters)
        await hold_for_write(self.repository.session, user_id)
        now = await self.repository.now()
        ended: list[Memory] = []
        # In pages, each locked, ended and flushed: the next page's query no longer sees them.
        while page := await self.repository.current_listed_for_update(
            user_id, filters, _DELETE_PAGE
        ):
            for memory in page:
                memory.is_current = False
                memory.superseded_at = now
            outbox.enqueue_index(self.repository.session, page)
            await self.repository.session.flush()
            ended.extend(page)
        return ended

    async def history(self, user_id: str, memory_id: uuid.UUID) -> list[Memory]:
        """Every version of the memory's chain, oldest first, named by the memory's id or by
        any of its versions' ids."""
        memory = await self.get(user_id, memory_id)
        return await self.repository.chain(user_id, memory.chain_id)

    async def current(
        self,
        user_id: str,
        memory_id: uuid.UUID,
        expected_versions: frozenset[uuid.UUID] | None = None,
    ) -> Memory:
        """The current version of the memory an id names (the memory's id or any of its
        versions'): what an update or a delete acts on. 409 once the memory is deleted; 412
        when `expected_versions` (a client's If-Match) does not hold that version."""
        named = await self.get(user_id, memory_id)
        current = (
            named
            if named.is_current
            else await self.repository.current_in_chain(user_id, named.chain_id)
        )
        return checked_current(named.chain_id, current, expected_versions)

    async def _lock_current(
        self,
        user_id: str,
        chain_id: uuid.UUID,
        expected_versions: frozenset[uuid.UUID] | None,
    ) -> Memory:
        """The current version of the memory `chain_id`, locked for the write, as `current`
        checks it: the version another writer makes current while this one waits for the lock
        is the one it gets (last writer wins), unless If-Match names the version it replaced."""
        # The user's write lock before the row lock: the order an erase takes them in.
        await hold_for_write(self.repository.session, user_id)
        while True:
            current = await self.repository.current_for_update(user_id, chain_id)
            # None: deleted, or ended by a writer that committed while this one waited for
            # the row; a new statement sees that writer's successor, to be locked in turn.
            if (
                current is not None
                or await self.repository.current_in_chain(user_id, chain_id) is None
            ):
                return checked_current(chain_id, current, expected_versions)

    async def update(
        self,
        user_id: str,
        memory_id: uuid.UUID,
        changes: MemoryUpdate,
        embedding: Embedding | None = None,
        work: Work | None = None,
        expected_versions: frozenset[uuid.UUID] | None = None,
        said_in: SaidIn | None = None,
    ) -> Memory:
        """Supersede the memory's current version with a new one (git-like: nothing edited in
        place). `memory_id`: the memory's id or any of its versions'. `expected_versions`: the
        client's If-Match (412 unless the current version is one of them); None: the update
        applies to whichever version is current when it is written. `embedding` is the new
        content's when the caller already has it; else it is computed here, as `work`
        (default: an interactive write of this user). `said_in`: the message the new version
        was said in (ingestion), its source and, where given, its context."""
        work = work or interactive_write(user_id)
        if changes.changes_nothing:
            fields = ", ".join(MemoryUpdate.__struct_fields__)
            raise InvalidInputError(
                f"give at least one field to change ({fields}); an empty "
                "update would only copy the current version",
                field="body",
            )
        # Refused before any model work when the memory is deleted or If-Match already stale.
        base = await self.current(user_id, memory_id, expected_versions)
        # Expiry: None when the update leaves it as it is (kept from the locked row below).
        expiry_changed = (
            changes.expires_at is not msgspec.UNSET or changes.ttl_s is not msgspec.UNSET
        )
        new_expiry = (
            resolve_expiry(
                None if changes.expires_at is msgspec.UNSET else changes.expires_at,
                None if changes.ttl_s is msgspec.UNSET else changes.ttl_s,
            )
            if expiry_changed
            else None
        )
        if isinstance(changes.category, str):
            await require_categories(
                self.repository.session, self._classifier, [(changes.category, "category")]
            )
        draft = await self._next_version(changes, base, embedding, work, said_in=said_in)
        work.check_deadline()
        # Lock after embedding, so the row lock is held only for the short write.
        old = await self._lock_current(user_id, base.chain_id, expected_versions)
        if old.id != base.id:
            # Another writer replaced `base` while this one embedded, and no If-Match asked
            # for `base` alone: this update applies to the version now current, keeping its
            # fields where the update leaves them (the vectors computed above serve again).
            draft = await self._next_version(
                changes, old, embedding, work, earlier=draft, said_in=said_in
            )
        now = await self.repository.now()
        draft.mentioned_at = mentioned_time(draft.content, draft.said_at or draft.event_time or now)
        draft.expires_at = new_expiry if expiry_changed else old.expires_at
        old.is_current = False
        old.superseded_at = now
        if expiry_changed:
            # A memory's expiry is the same on all its versions (app/memories/expiry.py).
            old.expires_at = draft.expires_at
            await self.repository.set_earlier_expiry(
                user_id, old.chain_id, old.version, draft.expires_at
            )
        # Flush the old row first: the "one current version per chain" index must see it end.
        await self.repository.session.flush()
        new = new_version(user_id, draft, now, replaces=old)
        self.repository.add([new])
        outbox.enqueue_index(self.repository.session, [old, new])
        await self.repository.session.flush()
        work.check_deadline()
        return new

    async def _next_version(
        self,
        changes: MemoryUpdate,
        base: Memory,
        embedding: Embedding | None,
        work: Work,
        earlier: MemoryDraft | None = None,
        said_in: SaidIn | None = None,
    ) -> MemoryDraft:
        """The draft of the version `changes` make of `base`, checked, embedded and
        categorised. `earlier`: the draft made of another version, whose vectors serve again
        for the same text."""
        draft = MemoryDraft(
            content=kept(changes.content, base.content),
            category=kept(changes.category, base.category),
            scope=kept(changes.scope, base.scope),
            session_id=kept(changes.session_id, base.session_id),
            agent_id=kept(changes.agent_id, base.agent_id),
            run_id=kept(changes.run_id, base.run_id),
            speaker=kept(changes.speaker, base.speaker),
            event_time=kept(changes.event_time, base.event_time),
            event_end=kept(changes.event_end, base.event_end),
            metadata=kept(changes.metadata, base.metadata_),
            source_message_id=base.source_message_id,
            # A new version keeps its place in the conversation.
            context=base.context,
            follows_chain_id=base.follows_chain_id,
            language=language_kept(changes, base),
        )
        if said_in is not None:
            draft.source_message_id, draft.said_at = said_in.message_id, said_in.said_at
            if said_in.context is not None:
                draft.context, draft.context_embedding = said_in.context, said_in.context_embedding
        check_draft(draft, self._api.max_content_chars, self._api.max_metadata_bytes)
        if draft.content == base.content:
            draft.embedding = Embedding(full=base.embedding_768d, coarse=base.embedding_256d)
            draft.embedding_ml = base.embedding_ml
            if base.context_embedding_768d is not None:
                draft.context_embedding = base.context_embedding_768d
            # The same sentences: the vectors the background embedded, if it has yet.
            if base.sentence_embeddings_768d is not None:
                draft.sentence_embeddings = list(base.sentence_embeddings_768d)
        elif earlier is not None and (earlier.content, earlier.context) == (
            draft.content,
            draft.context,
        ):
            draft.embedding = earlier.embedding
            draft.context_embedding = earlier.context_embedding
            draft.sentence_embeddings = earlier.sentence_embeddings
            draft.embedding_ml = earlier.embedding_ml
        else:
            draft.embedding = embedding
            await embed_drafts([draft], self._embedder, work, self._sentences_at_write)
        # Only an explicit null asks for a new choice: new content alone keeps the category.
        await choose_categories(self.repository.session, self._classifier, [draft])
        return draft

    async def delete(
        self,
        user_id: str,
        memory_id: uuid.UUID,
        event_end: datetime | None = None,
        expected_versions: frozenset[uuid.UUID] | None = None,
    ) -> Memory:
        """End the memory's current version; the row stays, with superseded_at set. With
        `event_end`, the fact ended in the world then; without, the memory is retracted
        (nothing ended). `memory_id` and `expected_versions` as for `update`."""
        chain_id = (await self.get(user_id, memory_id)).chain_id
        memory = await self._lock_current(user_id, chain_id, expected_versions)
        if event_end is not None:
            memory.event_end = check_event_end(event_end, memory.event_time, "event_end")
        now = await self.repository.now()
        memory.is_current = False
        memory.superseded_at = now
        outbox.enqueue_index(self.repository.session, [memory])
        await self.repository.session.flush()
        return memory
