"""User-level endpoints: erasure of everything a user left in both stores."""

from __future__ import annotations

import structlog
from litestar import Controller, delete
from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.schemas import EraseOut
from app.memories.service import MemoryService

log = structlog.get_logger(__name__)


class UserController(Controller):
    path = "/v1/users/{user_id:str}"
    tags = ["users"]

    @delete("/", status_code=200, summary="Erase a user: physically remove every row and document")
    async def erase_user(self, user_id: str, db_session: AsyncSession, state: State) -> EraseOut:
        runtime = state.runtime
        service = MemoryService(db_session, runtime.embedder, runtime.classifier, runtime.settings)
        counts, erase_event_id = await service.erase_user(user_id)
        # Commit now so the OpenSearch erase runs against a settled Postgres state; if
        # OpenSearch is down, the committed outbox event erases the documents later.
        await db_session.commit()
        report = await runtime.relay.run_once(ids=[erase_event_id])
        deleted = report.erased.get(user_id)
        log.info("user.erased", user_id=user_id, postgres=counts, opensearch_deleted=deleted)
        return EraseOut(
            user_id=user_id,
            postgres=counts,
            opensearch_deleted=deleted,
            opensearch_pending=deleted is None,
        )
