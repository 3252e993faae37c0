"""Bulk writes of new memories (imports): COPY into a staging table, then one INSERT ... SELECT.

A row per memory through the ORM costs a round trip and a flush each; COPY moves a batch in
one stream. The staging table lets Postgres apply the idempotency rule (ON CONFLICT on the
user's external id) and hand back exactly the rows it inserted, whose outbox rows are then
written in the same transaction: an imported memory is never without its index event.
"""

from __future__ import annotations

import io

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import pgcopy
from app.db.models import Memory
from app.memories.repository import MemoryRepository
from app.search_index import outbox
from app.vocabulary import COARSE_DIM, EMBEDDING_DIM, MULTILINGUAL_DIM

STAGING_TABLE = "memory_import_staging"
# Column, binary COPY encoder: the staging table's layout.
_STAGING = (
    ("position", pgcopy.int4),
    ("id", pgcopy.uuid_),
    ("user_id", pgcopy.text),
    ("content", pgcopy.text),
    ("category", pgcopy.text),
    ("scope", pgcopy.text),
    ("session_id", pgcopy.text),
    ("agent_id", pgcopy.text),
    ("run_id", pgcopy.text),
    ("speaker", pgcopy.text),
    ("event_time", pgcopy.timestamptz),
    ("embedding_768d", pgcopy.vector),
    ("embedding_256d", pgcopy.vector),
    ("metadata", pgcopy.jsonb),
    ("external_id", pgcopy.text),
    ("expires_at", pgcopy.timestamptz),
    ("language", pgcopy.text),
    ("embedding_ml", pgcopy.vector),
)
_CREATE_STAGING = text(
    f"""
    CREATE TEMPORARY TABLE {STAGING_TABLE} (
        position integer NOT NULL,
        id uuid NOT NULL,
        user_id text NOT NULL,
        content text NOT NULL,
        category text NOT NULL,
        scope text NOT NULL,
        session_id text,
        agent_id text,
        run_id text,
        speaker text,
        event_time timestamptz,
        embedding_768d vector({EMBEDDING_DIM}) NOT NULL,
        embedding_256d vector({COARSE_DIM}) NOT NULL,
        metadata jsonb NOT NULL,
        external_id text NOT NULL,
        expires_at timestamptz,
        language text,
        embedding_ml vector({MULTILINGUAL_DIM})
    ) ON COMMIT DROP
    """
)
_INSERT_NEW = text(
    f"""
    INSERT INTO memories (id, user_id, chain_id, version, content, category, scope, session_id,
                          agent_id, run_id, is_current, speaker, event_time, created_at,
                          embedding_768d, embedding_256d, metadata, external_id, expires_at,
                          language, embedding_ml)
    SELECT id, user_id, id, 1, content, category, scope, session_id, agent_id, run_id, true,
           speaker, event_time, now(), embedding_768d, embedding_256d, metadata, external_id,
           expires_at, language, embedding_ml
    FROM {STAGING_TABLE}
    ORDER BY position
    ON CONFLICT (tenant_id, user_id, external_id)
        WHERE external_id IS NOT NULL AND version = 1 DO NOTHING
    RETURNING id
    """  # noqa: S608 (constants only)
)
_EXISTING_EXTERNAL_IDS = text(
    """
    SELECT m.user_id, m.external_id
    FROM memories AS m
    JOIN unnest(CAST(:user_ids AS text[]), CAST(:external_ids AS text[]))
         AS wanted(user_id, external_id)
      ON m.user_id = wanted.user_id AND m.external_id = wanted.external_id
    WHERE m.external_id IS NOT NULL AND m.version = 1
    """
)


class BulkMemoryWriter:
    """Imports first versions of new chains that carry an external id. Never commits."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def existing_external_ids(self, keys: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """The (user id, external id) pairs among `keys` that are already imported."""
        if not keys:
            return set()
        rows = await self.session.execute(
            _EXISTING_EXTERNAL_IDS,
            {"user_ids": [k[0] for k in keys], "external_ids": [k[1] for k in keys]},
        )
        return {(row[0], row[1]) for row in rows}

    async def insert_new(self, memories: list[Memory]) -> list[Memory]:
        """Insert the memories whose (user, external id) is not there yet, each with its outbox
        row; return those inserted (the others were imported before, or by a concurrent run).

        Each memory must be a version 1 with its id, external id and both unit embeddings set;
        its created_at is set here to the transaction's time, as the row's is."""
        if not memories:
            return []
        now = await MemoryRepository(self.session).now()
        await self.session.execute(_CREATE_STAGING)
        connection = await self.session.connection()
        raw = await connection.get_raw_connection()
        stream = pgcopy.copy_binary(
            (_staging_record(position, m) for position, m in enumerate(memories)),
            tuple(encode for _, encode in _STAGING),
        )
        await raw.driver_connection.copy_to_table(  # type: ignore[union-attr]
            STAGING_TABLE,
            source=io.BytesIO(stream),
            columns=[name for name, _ in _STAGING],
            format="binary",
        )
        inserted_ids: set[object] = set((await self.session.execute(_INSERT_NEW)).scalars())
        await self.session.execute(text(f"DROP TABLE {STAGING_TABLE}"))
        inserted = [m for m in memories if m.id in inserted_ids]
        for memory in inserted:
            memory.created_at = now
        await outbox.enqueue_index_many(self.session, inserted)
        return inserted


def _staging_record(position: int, memory: Memory) -> tuple[object, ...]:
    return (
        position,
        memory.id,
        memory.user_id,
        memory.content,
        memory.category,
        memory.scope,
        memory.session_id,
        memory.agent_id,
        memory.run_id,
        memory.speaker,
        memory.event_time,
        memory.embedding_768d,
        memory.embedding_256d,
        memory.metadata_,
        memory.external_id,
        memory.expires_at,
        memory.language,
        memory.embedding_ml,
    )
