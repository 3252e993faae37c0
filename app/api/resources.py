"""Long-lived parts of the running service, built once per process."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.engine import create_engine, create_sessionmaker
from app.ml.categories import CategoryClassifier
from app.ml.embedder import Embedder
from app.retrieval.hybrid import HybridSearch
from app.search_index.client import MemoryIndex
from app.search_index.relay import OutboxRelay


@dataclass
class Resources:
    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    embedder: Embedder
    classifier: CategoryClassifier
    index: MemoryIndex
    relay: OutboxRelay
    search: HybridSearch

    @classmethod
    def build(cls, settings: Settings) -> Resources:
        engine = create_engine(settings)
        sessionmaker = create_sessionmaker(engine)
        embedder = Embedder(
            settings.embedding_model,
            device=settings.embedding_device,
            batch_size=settings.embedding_batch_size,
            threads=settings.embedding_threads,
        )
        index = MemoryIndex(settings)
        return cls(
            settings=settings,
            engine=engine,
            sessionmaker=sessionmaker,
            embedder=embedder,
            classifier=CategoryClassifier(embedder),
            index=index,
            relay=OutboxRelay(sessionmaker, index, settings),
            search=HybridSearch(embedder, index, settings),
        )

    async def close(self) -> None:
        await self.index.close()
        await self.engine.dispose()
