"""Export: a user's memories as JSON Lines in exactly the import's line format (`ImportLine`),
so that an export imported elsewhere (another tenant, another deployment) and exported again
gives the same lines.

A line's `external_id` is the chain's: the id it was imported under, else its chain id. Lines
come in that order, which an import keeps (its external ids are the lines'), so the order
survives a round trip too; `user_id` is left out, so the lines import as any user's. With
`versions="all"` every version is a line, its external id `<chain's>@v<version>`: the line
format holds no history, so such an export imports as one memory per version.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, Literal

import msgspec
import numpy as np
from sqlalchemy import ColumnElement, Text, cast, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from sqlalchemy.orm import aliased

from app.db.models import Memory
from app.db.tenant import tenant_scope
from app.imports.lines import ImportLine
from app.memories.expiry import unexpired
from app.memories.fields import check_user_id

Versions = Literal["current", "all"]
# Rows fetched from the server-side cursor at a time.
EXPORT_FETCH_ROWS = 500


@dataclass(frozen=True, slots=True)
class ExportOptions:
    versions: Versions = "current"
    vectors: bool = False
    where: ColumnElement[bool] | None = None  # a compiled filter (app/memories/filters/)


# Line fields that are not a memory attribute of the same name; every other field of
# ImportLine is copied from the memory's attribute of its name, so a field added to both the
# line format and the memory is exported without a change here.
# `ttl_s` is input only: a memory keeps its expiry as `expires_at`, which is exported.
DERIVED_FIELDS = frozenset({"external_id", "embedding", "metadata", "user_id", "ttl_s"})


def export_line(memory: Memory, chain_key: str, options: ExportOptions) -> bytes:
    """One memory version as an import line (fields without a value left out), newline-ended.
    No `user_id`: the line imports as any user's."""
    external_id = chain_key if options.versions == "current" else f"{chain_key}@v{memory.version}"
    fields: dict[str, Any] = {
        name: getattr(memory, name, None)
        for name in ImportLine.__struct_fields__
        if name not in DERIVED_FIELDS
    }
    line = ImportLine(
        **fields,
        external_id=external_id,
        metadata=memory.metadata_,
        embedding=_vector(memory.embedding_768d) if options.vectors else None,
    )
    kept = {
        name: value
        for name, value in msgspec.structs.asdict(line).items()
        if value is not None and name != "user_id"
    }
    return msgspec.json.encode(kept) + b"\n"


def _as_memory(row: object) -> Memory:
    assert isinstance(row, Memory)
    return row


def _vector(value: Any) -> list[float]:
    return [float(x) for x in np.asarray(value, dtype=np.float32)]


def _statement(user_id: str, options: ExportOptions) -> Any:
    first = aliased(Memory)
    chain_key = func.coalesce(first.external_id, cast(Memory.chain_id, Text)).label("chain_key")
    statement = (
        select(Memory, chain_key)
        .join(first, (first.chain_id == Memory.chain_id) & (first.version == 1))
        .where(Memory.user_id == user_id, first.user_id == user_id, unexpired())
        .order_by(chain_key, Memory.version)
    )
    if options.versions == "current":
        statement = statement.where(Memory.is_current)
    if options.where is not None:
        statement = statement.where(options.where)
    return statement


async def export_lines(
    sessionmaker: async_sessionmaker[AsyncSession],
    tenant_id: uuid.UUID,
    user_id: str,
    options: ExportOptions,
) -> AsyncIterator[bytes]:
    """The user's memories as lines, read in one transaction (one consistent snapshot)."""
    check_user_id(user_id)
    async with sessionmaker() as session, session.begin():
        # The tenant is bound when the transaction's first statement runs: here, not across
        # the yields below (a context variable set in a generator must not outlive a step).
        with tenant_scope(tenant_id):
            rows = await session.stream(
                _statement(user_id, options).execution_options(yield_per=EXPORT_FETCH_ROWS)
            )
        async for memory, chain_key in rows:
            yield export_line(_as_memory(memory), str(chain_key), options)
