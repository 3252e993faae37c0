"""SQL pieces the memories' queries share: an id list as one array parameter, what a session
sees, and the vector columns a read that needs no vectors leaves behind."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import ColumnElement, and_, any_, bindparam, or_
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import defer
from sqlalchemy.sql.elements import CollectionAggregate

from app.db.models import Memory

UUID_ARRAY = ARRAY(Memory.id.type)


def one_of(ids: list[uuid.UUID]) -> CollectionAggregate[bool]:
    """`= ANY($1)` with one uuid[] parameter, for `column == one_of(ids)`.

    An expanding `IN ($1, ..., $n)` re-plans for every list length and, once Postgres
    switches a prepared statement to its generic plan, can scan the user's whole set: measured
    at 10,000 memories, 16 ms for 20 ids against 1.5 ms for the array form."""
    return any_(bindparam(None, ids, type_=UUID_ARRAY))


def visible_in_session(session_id: Any) -> ColumnElement[bool]:
    """USER memories, and CONTEXT ones of the given session: none when it is None, since a
    CONTEXT memory always has one. `session_id` is a value or a bound parameter."""
    columns = Memory.__table__.c
    return or_(
        columns.scope == "USER",
        and_(columns.scope == "CONTEXT", columns.session_id == session_id),
    )


NO_VECTORS = (
    defer(Memory.embedding_768d),
    defer(Memory.embedding_256d),
    defer(Memory.context_embedding_768d),
    defer(Memory.sentence_embeddings_768d),
    defer(Memory.embedding_ml),
)
