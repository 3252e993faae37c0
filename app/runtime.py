"""The composition root: the long-lived parts of a process (engine, clients, embedders, relay,
workers), built once, the same way for the API, the relay, the worker and the CLI; and the one
place where any of these processes starts the outbox relay and the ingestion workers."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.config import Settings
from app.db.categories import category_loader
from app.db.engine import application_name, create_engine, create_sessionmaker
from app.db.reads import ReadRouter
from app.db.retention import RetentionJob
from app.heartbeat import Heartbeats
from app.imports.service import MemoryImporter
from app.ingest.batch_worker import BatchJobWorker
from app.ingest.entity_worker import EntityWorker
from app.ingest.pipeline import IngestPipeline
from app.ingest.sentence_worker import SentenceWorker
from app.ingest.worker import IngestWorker
from app.llm.categories import llm_category_judge
from app.llm.client import ChatClient
from app.memories.expiry_reaper import ExpiryReaper
from app.ml.categories import CategoryClassifier
from app.ml.cross_encoder import CrossEncoderScorer
from app.ml.embedder import Embedder, build_embedder
from app.ml.language import warm_up as warm_up_language_detector
from app.ml.ner import EntityRecognizer
from app.ml.observer import EmbeddingObserver
from app.ml.offline import user_cache_dir
from app.retrieval.pipeline import RetrievalPipeline
from app.retrieval.service import SearchService
from app.search_index.client import MemoryIndex
from app.search_index.coverage import IndexCoverageCheck
from app.search_index.relay import OutboxRelay
from app.tenants.authentication import KeyCheck
from app.tenants.rate_limit import RateLimiter
from app.tracing.setup import start_tracing
from app.webhooks.delivery import WebhookDispatcher


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    # Background work across tenants (relay, ingestion workers, reindex): the worker's role.
    background_engine: AsyncEngine
    background_sessionmaker: async_sessionmaker[AsyncSession]
    embedder: Embedder
    query_embedder: Embedder
    classifier: CategoryClassifier
    index: MemoryIndex
    relay: OutboxRelay
    retrieval: RetrievalPipeline
    cross_encoder: CrossEncoderScorer | None
    # Which tenant a presented API key acts for, counted against the key's rate.
    keys: KeyCheck
    # Where reads run: the replica (COGNIS_READ_DATABASE_URL) or the writer.
    reads: ReadRouter
    read_engine: AsyncEngine | None = None

    def load_models(self) -> None:
        """Load the embedding model(s) and the language detector's now rather than on the
        first request (blocking)."""
        self.embedder.load()
        self.query_embedder.load()
        warm_up_language_detector()

    @property
    def models_loaded(self) -> bool:
        return self.embedder.loaded and self.query_embedder.loaded

    @classmethod
    def build(cls, settings: Settings, process: str = "cli") -> Runtime:
        """`process` names this process's connections (`cognis-api`, `cognis-relay-background`,
        ...: app.db.engine.application_name) and, when the OTEL_* variables ask for traces,
        its service in them (`cognis-api`, ...: started first, so the engines and clients
        built below are traced)."""
        start_tracing(settings.api, process)
        engine = create_engine(settings.store, application=application_name(process))
        sessionmaker = create_sessionmaker(engine)
        background_engine = engine
        if settings.store.worker_database_url is not None:
            background_engine = create_engine(
                settings.store,
                settings.store.worker_database_url.get_secret_value(),
                application=application_name(process, "background"),
                ping_when_idle=True,
            )
        background_sessionmaker = create_sessionmaker(background_engine)
        read_engine = (
            create_engine(
                settings.store,
                settings.store.read_database_url.get_secret_value(),
                connect_timeout_s=settings.store.replica_connect_timeout_s,
                application=application_name(process, "replica"),
            )
            if settings.store.read_database_url is not None
            else None
        )
        embedder = build_embedder(
            settings.embedding,
            settings.embedding.embedding_backend,
            settings.embedding.embedding_intra_op_threads,
            observer=EmbeddingObserver("memories"),
        )
        query_embedder = (
            build_embedder(
                settings.embedding,
                settings.embedding.query_embedding_backend,
                settings.embedding.query_embedding_intra_op_threads,
                observer=EmbeddingObserver("queries"),
                queries=True,
            )
            if settings.embedding.query_embedding_backend != "same"
            else embedder
        )
        cross_encoder = (
            CrossEncoderScorer(
                settings.retrieval.cross_encoder_model, device=settings.embedding.embedding_device
            )
            if settings.retrieval.cross_encoder_model
            else None
        )
        index = MemoryIndex(settings.store)
        classifier = CategoryClassifier(
            embedder,
            load_definitions=category_loader(sessionmaker),
            uncertain_margin=settings.ingest.category_uncertain_margin,
            cache_dir=Path(settings.ingest.category_cache_dir)
            if settings.ingest.category_cache_dir
            else user_cache_dir("categories"),
        )
        runtime = cls(
            settings=settings,
            engine=engine,
            sessionmaker=sessionmaker,
            background_engine=background_engine,
            background_sessionmaker=background_sessionmaker,
            embedder=embedder,
            query_embedder=query_embedder,
            classifier=classifier,
            index=index,
            relay=OutboxRelay(background_sessionmaker, index, settings.relay, settings.store),
            retrieval=RetrievalPipeline(query_embedder, index, settings.retrieval, cross_encoder),
            cross_encoder=cross_encoder,
            keys=KeyCheck(
                settings.keys,
                sessionmaker,
                RateLimiter(
                    settings.keys.rate_limit_per_s,
                    settings.keys.rate_limit_burst or math.ceil(settings.keys.rate_limit_per_s),
                )
                if settings.keys.rate_limit_per_s > 0
                else None,
            ),
            reads=ReadRouter(
                sessionmaker,
                create_sessionmaker(read_engine) if read_engine is not None else None,
                wait_max_s=settings.store.replica_wait_max_ms / 1000,
                retry_s=settings.store.replica_retry_s,
            ),
            read_engine=read_engine,
        )
        if runtime.llm is not None:
            classifier.judge = llm_category_judge(runtime.llm)
        return runtime

    @cached_property
    def reaper(self) -> ExpiryReaper:
        """The expiry reaper: across tenants, so on the background role, like the relay."""
        return ExpiryReaper(self.background_sessionmaker, self.settings.relay)

    @cached_property
    def webhooks(self) -> WebhookDispatcher:
        """The webhook dispatcher: across tenants, on the background role, beside the relay."""
        return WebhookDispatcher(
            self.background_sessionmaker, self.settings.relay, self.settings.store
        )

    @cached_property
    def retention(self) -> RetentionJob:
        """The retention job: across tenants, so on the background role, like the relay."""
        return RetentionJob(self.background_sessionmaker, self.settings.retention)

    @cached_property
    def index_coverage(self) -> IndexCoverageCheck:
        """Whether the index holds every delivered memory version (/ready, searches' `stale`):
        across tenants, so on the background role, like the relay."""
        return IndexCoverageCheck(
            self.background_engine, self.background_sessionmaker, self.index, self.settings.relay
        )

    @cached_property
    def search(self) -> SearchService:
        """Searches as every surface answers them: index wait, replica or writer, index lag."""
        return SearchService(
            self.retrieval,
            self.sessionmaker,
            self.relay,
            self.index,
            self.index_coverage,
            self.reads,
        )

    # Ingestion: built on first use, from the parts above.
    @cached_property
    def llm(self) -> ChatClient | None:
        return ChatClient(self.settings.llm) if self.settings.llm.llm_enabled else None

    @cached_property
    def ingest_pipeline(self) -> IngestPipeline:
        settings = self.settings
        return IngestPipeline(
            self.background_sessionmaker,
            self.embedder,
            self.classifier,
            self.llm,
            api=settings.api,
            embedding=settings.embedding,
            ingest=settings.ingest,
            retrieval=settings.retrieval,
        )

    @cached_property
    def ingest_worker(self) -> IngestWorker:
        return IngestWorker(
            self.background_sessionmaker, self.ingest_pipeline, self.settings.ingest
        )

    @cached_property
    def batch_worker(self) -> BatchJobWorker:
        """The batch creates answered 202: across tenants, on the background role."""
        settings = self.settings
        return BatchJobWorker(
            self.background_sessionmaker,
            self.embedder,
            self.classifier,
            settings.api,
            settings.ingest,
            settings.retrieval,
        )

    @cached_property
    def sentence_worker(self) -> SentenceWorker:
        """Sentence vectors while the model is idle: across tenants, on the background role."""
        return SentenceWorker(
            self.background_sessionmaker, self.embedder, watched=(self.query_embedder,)
        )

    @cached_property
    def entity_worker(self) -> EntityWorker:
        """Entities of new memories while the model is idle: on the background role."""
        return EntityWorker(
            self.background_sessionmaker,
            EntityRecognizer(),
            watched=(self.embedder, self.query_embedder),
        )

    @cached_property
    def importer(self) -> MemoryImporter:
        return MemoryImporter(self.sessionmaker, self.embedder, self.classifier, self.settings.api)

    async def run_background(
        self, stop: asyncio.Event, *, relay: bool, ingest_worker: bool, index_check: bool = False
    ) -> None:
        """This process's share of the background work until `stop` is set: the outbox relay
        (and beside it the expiry reaper and the retention job, the periodic maintenance of both
        stores) and/or the ingestion workers (and beside them the batch job worker and the
        sentence worker, COGNIS_SENTENCE_VECTORS), each finishing the batch in hand before it
        returns; with
        `index_check` (the API, which reports it) the index coverage check. Every process kind
        starts them here: the API (COGNIS_RELAY_IN_API, COGNIS_INGEST_WORKER_IN_API),
        `python -m app relay` and `python -m app worker`."""
        if ingest_worker:
            # Workers embed what they write; a no-op where the process has loaded it already.
            await anyio.to_thread.run_sync(self.embedder.load)
        # COGNIS_HEARTBEAT_DIR: the relay's and each ingestion loop's file, for a liveness
        # probe (app/heartbeat.py); the files of an earlier run of this container go first.
        directory = self.settings.relay.heartbeat_dir
        heartbeats = Heartbeats(Path(directory) if directory else None)
        heartbeats.reset()
        loops: list[Coroutine[Any, Any, None]] = []
        if relay:
            loops.append(self.relay.run_forever(stop, heartbeats.loop("relay")))
            loops.append(self.reaper.run_forever(stop))
            loops.append(self.retention.run_forever(stop))
            loops.append(self.webhooks.run_forever(stop))
        if index_check:
            loops.append(self.index_coverage.run_forever(stop))
        if ingest_worker:
            loops.append(self.ingest_worker.run_forever(stop, heartbeats))
            loops.append(self.batch_worker.run_forever(stop))
            if self.settings.retrieval.sentence_vectors:
                loops.append(self.sentence_worker.run_forever(stop))
            if self.settings.retrieval.entities:
                loops.append(self.entity_worker.run_forever(stop))
        await asyncio.gather(*loops)

    @contextlib.asynccontextmanager
    async def background(
        self, *, relay: bool, ingest_worker: bool, index_check: bool = False
    ) -> AsyncIterator[None]:
        """`run_background` as a task of this process while the block runs (the API's
        lifespan); on leaving, the loops finish their batch and stop."""
        stop = asyncio.Event()
        task = asyncio.create_task(
            self.run_background(
                stop, relay=relay, ingest_worker=ingest_worker, index_check=index_check
            )
        )
        try:
            yield
        finally:
            stop.set()
            await task

    async def close(self) -> None:
        if self.__dict__.get("llm") is not None:
            await self.llm.close()  # type: ignore[union-attr]
        await self.index.close()
        await self.engine.dispose()
        if self.background_engine is not self.engine:
            await self.background_engine.dispose()
        if self.read_engine is not None:
            await self.read_engine.dispose()
