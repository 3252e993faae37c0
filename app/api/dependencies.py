"""What controllers are given (litestar `Provide`): the process's runtime and the services
built from it for one request. Controllers never reach into application state themselves."""

from __future__ import annotations

from litestar.datastructures import State
from sqlalchemy.ext.asyncio import AsyncSession

from app.ingest.service import IngestService
from app.memories.erasure import UserEraser
from app.memories.service import MemoryService
from app.runtime import Runtime


async def provide_runtime(state: State) -> Runtime:
    return state.runtime  # type: ignore[no-any-return]


def memory_service(session: AsyncSession, runtime: Runtime) -> MemoryService:
    settings = runtime.settings
    return MemoryService(
        session,
        runtime.embedder,
        runtime.classifier,
        settings.api,
        settings.ingest,
        settings.retrieval,
        settings.retrieval.sentence_vectors_at_write if settings.retrieval.sentence_vectors else 0,
    )


async def provide_memory_service(db_session: AsyncSession, runtime: Runtime) -> MemoryService:
    return memory_service(db_session, runtime)


async def provide_ingest_service(runtime: Runtime) -> IngestService:
    return IngestService(
        runtime.sessionmaker,
        runtime.ingest_pipeline,
        runtime.ingest_worker,
        runtime.settings.api,
        runtime.settings.ingest,
    )


async def provide_eraser(runtime: Runtime) -> UserEraser:
    return UserEraser(runtime.sessionmaker, runtime.relay, runtime.settings.relay)
