"""One message through steps 2-4: context, candidates, extraction, then (unless a dry run) the
write. Without an LLM the worker decides and applies a user's batch of messages in order in one
transaction (app/ingest/worker.py), so each decision reads the store as the previous one left
it. With one, the LLM is asked first, with no transaction open (`ask`), and each message is
decided and applied in a transaction of its own with that answer (app/ingest/llm_answer.py)."""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import tracing
from app.config import ApiSettings, EmbeddingSettings, IngestSettings, RetrievalSettings
from app.db.models import IngestDecision
from app.ingest.apply import apply_operation, audit_rows
from app.ingest.candidates import multilingual_nearest, similar_memories
from app.ingest.corrections import Correction, detect_intent, find_target
from app.ingest.deterministic import extract_deterministic
from app.ingest.domain import Candidate, Extraction, MessageContext, Operation
from app.ingest.fact_units import fact_context, judge_units, judged_here, units_to_embed
from app.ingest.gate import llm_gate
from app.ingest.llm_answer import LlmAnswer, StaleAnswer, carry_fallback, deferred, shown
from app.ingest.llm_extractor import extract_with_llm
from app.ingest.repository import IngestRepository
from app.ingest.supersedes import (
    SentenceView,
    SupersedesModel,
    Supersession,
    find_superseded,
    memory_scores,
    message_sentences,
    model_for,
    vet_llm_updates,
)
from app.llm.client import ChatClient
from app.memories.drafts import interactive_write
from app.memories.filters import to_sql, visible_to
from app.memories.repository import MemoryRepository
from app.memories.sentences import MAX_SENTENCES
from app.memories.service import MemoryService
from app.metrics import LLM_GATE, LLM_UPDATES_VETOED
from app.ml.categories import CategoryClassifier
from app.ml.embedder import Embedder, Embedding
from app.time_expressions import primary_window

# How often a message's LLM answer is asked again when it went stale before it applied, before
# the deterministic extractor decides it (app/ingest/llm_answer.py).
ASK_AGAIN = 2


@dataclass(slots=True)
class Decided:
    """Step 3's result, ready for step 4: operations plus the embedding of every content
    step 4 writes (none is computed twice)."""

    context: MessageContext
    extraction: Extraction
    embeddings: dict[str, Embedding]


class IngestPipeline:
    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        embedder: Embedder,
        classifier: CategoryClassifier,
        llm: ChatClient | None,
        *,
        api: ApiSettings,
        embedding: EmbeddingSettings,
        ingest: IngestSettings,
        retrieval: RetrievalSettings,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._embedder = embedder
        self._classifier = classifier
        self._api = api
        self._embedding = embedding
        self._ingest = ingest
        self._retrieval = retrieval
        self._llm = llm

    async def embed(self, texts: list[str], user_id: str) -> list[Embedding]:
        """Every model call of ingestion goes through here: a message is interactive work
        (queries first, imports after), in its tenant's and user's share."""
        return await self._embedder.embed(texts, interactive_write(user_id))

    def texts_to_prefetch(self, content: str, role: str) -> list[str]:
        """The texts besides the message itself that step 3 embeds for it on the
        deterministic path, as far as the message alone tells: its units, when it has several
        (the fact model scores each, and each fact is decided and stored with its vector),
        else its sentences (the learned supersedes model scores each, and an UPDATE's content
        is one of them), and each explicit correction's claim. The worker embeds them in its
        claim's one model call, not one call each inside the user's transaction. Whether step
        3 uses them depends on the memories it is shown (none for a new user): then a claim
        was embedded for nothing."""
        if role != "user":
            return []
        by_facts = (
            self._ingest.ingest_facts
            and judged_here(content, self._embedding.embedding_model) is not None
        )
        texts = units_to_embed(content) if by_facts else []
        judged = list(texts) or [content]  # decided one by one: each unit, or the message
        if self._ingest.ingest_corrections:
            for unit in judged:
                if (intent := detect_intent(unit)) is not None:
                    texts += [t for t in (intent.claim, intent.content) if t]
        said = message_sentences(content)
        # As _judged_sentences decides: the model of the message's language, when it reads
        # this embedder's vectors (the Japanese one reads the multilingual embedder's).
        supersedes_reads_it = (
            model_for(content).embedding_model == Path(self._embedding.embedding_model).name
        )
        if (
            not by_facts  # a fact is judged whole (its own vector), never by its sentences
            and self._ingest.ingest_supersedes
            and supersedes_reads_it
            and 1 < len(said) <= MAX_SENTENCES
        ):
            texts += said
        return [t for t in dict.fromkeys(texts) if t != content]

    async def _embed_for(self, context: MessageContext, texts: list[str]) -> list[Embedding]:
        """`texts`' vectors for this message's decision: those prefetched, the rest now."""
        missing = [t for t in dict.fromkeys(texts) if t not in context.prefetched]
        computed = (
            dict(zip(missing, await self.embed(missing, context.user_id), strict=True))
            if missing
            else {}
        )
        return [context.prefetched[t] if t in context.prefetched else computed[t] for t in texts]

    @property
    def asks_llm(self) -> bool:
        """Whether step 3 may ask an LLM: then `decide` needs `ask`'s answer."""
        return self._llm is not None

    async def decide_alone(self, context: MessageContext) -> Decided:
        """`decide` against the committed store, in a session of its own (a dry run); every
        model call (the message's vectors, the LLM's answer) made first, with no transaction
        open."""
        context = await self._with_vectors(context)
        answer = None
        for _ in range(ASK_AGAIN + 1):
            answer = await self.ask(context) if self.asks_llm else None
            try:
                async with self._sessionmaker() as session, session.begin():
                    return await self.decide(session, context, answer)
            except StaleAnswer:
                continue
        assert answer is not None  # stale answers come only with an LLM
        async with self._sessionmaker() as session, session.begin():
            return await self.decide(session, context, answer.gave_up(ASK_AGAIN + 1))

    async def _with_vectors(self, context: MessageContext) -> MessageContext:
        """A dry run's message (never saved, so never embedded) with its vector and those of
        the texts its decision embeds, in one model call, as the worker's claim has them."""
        if context.embedding is not None:
            return context
        others = self.texts_to_prefetch(context.content, context.role)
        vectors = await self.embed([context.content, *others], context.user_id)
        return replace(
            context, embedding=vectors[0], prefetched=dict(zip(others, vectors[1:], strict=True))
        )

    async def ask(self, context: MessageContext) -> LlmAnswer:
        """Step 3b's LLM call, with no transaction open: the candidates read in a short
        transaction of their own, then the LLM asked about them if the gate says so, and the
        texts it answered embedded. `decide` uses the answer only while the candidates are
        still those (app/ingest/llm_answer.py)."""
        assert self._llm is not None and context.embedding is not None
        async with self._sessionmaker() as session, session.begin():
            candidates = await self._candidates(session, context, context.embedding)
        verdict = llm_gate(candidates, self._ingest.ingest_llm_gate_threshold)
        if not verdict.call:
            return LlmAnswer(shown(candidates), verdict, None)
        extraction = await extract_with_llm(
            self._llm,
            context,
            candidates,
            await self._classifier.current_names(),
            self._api.max_content_chars,
            deferred,
        )
        written = [
            op.content
            for op in extraction.operations
            if op.op in ("ADD", "UPDATE") and op.content is not None
        ]
        new = [t for t in dict.fromkeys(written) if t != context.content]
        new = [t for t in new if t not in context.prefetched]
        vectors = dict(zip(new, await self.embed(new, context.user_id), strict=True)) if new else {}
        return LlmAnswer(shown(candidates), verdict, extraction, vectors)

    async def decide(
        self, session: AsyncSession, context: MessageContext, answer: LlmAnswer | None = None
    ) -> Decided:
        """Step 3 and the embedding half of step 4, reading through `session`: in the worker's
        transaction, so earlier messages' writes are among the candidates. With an LLM, its
        `answer` (asked before the transaction) is used if the candidates are still the ones
        it was shown; else StaleAnswer, and the caller asks again."""
        if context.embedding is None:
            context = await self._with_vectors(context)
        assert context.embedding is not None
        embedding = context.embedding
        if answer is not None and answer.vectors:
            context = replace(context, prefetched={**context.prefetched, **answer.vectors})
        with tracing.span("ingest.candidates"):
            candidates = await self._candidates(session, context, embedding)
            tracing.annotate({"cognis.ingest.candidates": len(candidates)})

        async def deterministic() -> Extraction:
            return await self._extract_facts(session, context, candidates, embedding)

        with tracing.span("ingest.extract"):
            if self._llm is None:
                extraction = await deterministic()
            else:
                if answer is None:
                    raise StaleAnswer("the LLM was not asked before the transaction")
                answer.check(candidates)
                verdict, answered = answer.verdict, answer.extraction
                if answered is None:  # the gate skipped the LLM
                    extraction = await deterministic()
                elif answered.fallback_used:
                    extraction = carry_fallback(answered, await deterministic())
                else:  # a copy: the steps below change its operations
                    extraction = copy.deepcopy(answered)
                    await self._vet_llm_updates(session, context, candidates, embedding, extraction)
                extraction.llm_gate, extraction.gate_similarity = verdict.label, verdict.similarity
                LLM_GATE.labels(verdict=verdict.label).inc()
            tracing.annotate(
                {
                    "cognis.ingest.extractor": extraction.extractor,
                    "cognis.ingest.fallback_used": extraction.fallback_used,
                    "cognis.ingest.llm_gate": extraction.llm_gate or "none",
                }
            )
        for op in extraction.operations:
            if op.op in ("ADD", "UPDATE"):
                op.event_time = _event_time(op, context)
        known = {context.content: embedding}
        new_texts = list(
            dict.fromkeys(
                op.content
                for op in extraction.operations
                if op.op in ("ADD", "UPDATE") and op.content is not None and op.content not in known
            )
        )
        known.update(zip(new_texts, await self._embed_for(context, new_texts), strict=True))
        await self._drop_repeated_adds(
            MemoryRepository(session), context, extraction, candidates, known
        )
        return Decided(context, extraction, known)

    async def _candidates(
        self, session: AsyncSession, context: MessageContext, embedding: Embedding
    ) -> list[Candidate]:
        """Step 3a: the user's current memories most similar to `embedding`, among those the
        message's agent and run see (their own and the shared ones: an UPDATE of a shared
        memory keeps it shared)."""
        scoped = visible_to(context.agent_id, context.run_id)
        return await similar_memories(
            MemoryRepository(session, to_sql(scoped) if scoped else None),
            context,
            embedding,
            self._ingest,
            self._retrieval,
        )

    async def _extract_facts(
        self,
        session: AsyncSession,
        context: MessageContext,
        candidates: list[Candidate],
        embedding: Embedding,
    ) -> Extraction:
        """The deterministic path: each fact of a user message decided on its own against the
        memories most similar to it (app/ingest/fact_units.py); the rest of the message is
        NONE. A message the fact model cannot judge is decided whole."""
        model = judged_here(context.content, self._embedding.embedding_model)
        if context.role != "user" or not self._ingest.ingest_facts or model is None:
            return await self._decide_fact(session, context, candidates, embedding)
        units = judge_units(context.content, embedding, context.prefetched, model)
        operations: list[Operation] = []
        taken: set[uuid.UUID] = set()  # a memory one fact updates or ends, no other fact may
        for unit in units:
            # A retraction or correction is a request ("please forget that I'm vegetarian"),
            # not a fact, and is still decided: the rules find what it ends or replaces.
            asks = self._ingest.ingest_corrections and detect_intent(unit.text) is not None
            if not unit.is_fact and not asks:
                operations.append(unit.not_kept())
                continue
            said = fact_context(context, unit)
            shown = (
                candidates
                if said is context
                else await self._candidates(session, said, unit.embedding)
            )
            decided = await self._decide_fact(
                session,
                said,
                [c for c in shown if c.memory_id not in taken],
                unit.embedding,
                whole=True,
            )
            if not unit.is_fact:  # only what the rules found: no new memory of a request
                decided.operations = [
                    unit.not_kept() if op.op == "ADD" else op for op in decided.operations
                ]
            for op in decided.operations:
                if said is not context:
                    op.turn = context.content
                if op.op in ("UPDATE", "DELETE") and op.target is not None:
                    taken.add(op.target.memory_id)
                if op.op == "ADD" and op.reason is None:
                    op.reason = unit.reason
            operations += decided.operations
        return Extraction(operations=operations, extractor="deterministic")

    async def _decide_fact(
        self,
        session: AsyncSession,
        context: MessageContext,
        candidates: list[Candidate],
        embedding: Embedding,
        whole: bool = False,
    ) -> Extraction:
        """One fact (or a whole message) without an LLM: the explicit rules first, the learned
        supersedes model only where they found nothing, then app/ingest/deterministic.py.
        `whole`: the text is one fact, judged and stored whole (never cut into sentences)."""
        correction = await self._correction(session, context, candidates)
        supersession = (
            None
            if correction is not None
            else await self._supersession(session, context, candidates, embedding, whole)
        )
        return await extract_deterministic(
            context,
            candidates,
            embedding,
            self._classifier,
            self._ingest.ingest_duplicate_threshold,
            correction,
            supersession,
        )

    async def _correction(
        self, session: AsyncSession, context: MessageContext, candidates: list[Candidate]
    ) -> Correction | None:
        """The current memory a user message explicitly corrects or retracts, if the setting is
        on and one memory shown fits (app/ingest/corrections.py); its claim is compared with
        them by the exact 768D cosine, as step 3a's candidates were found."""
        if not self._ingest.ingest_corrections or context.role != "user" or not candidates:
            return None
        intent = detect_intent(context.content)
        if intent is None:
            return None
        (claim,) = await self._embed_for(context, [intent.claim])
        similarities = await MemoryRepository(session).exact_768d_scores(
            context.user_id, [c.memory_id for c in candidates], claim.full
        )
        return find_target(
            intent,
            candidates,
            similarities,
            self._ingest.ingest_correction_threshold,
            context.speaker,
        )

    async def _supersession(
        self,
        session: AsyncSession,
        context: MessageContext,
        candidates: list[Candidate],
        embedding: Embedding,
        whole: bool = False,
    ) -> Supersession | None:
        """The current memory one sentence of a user message supersedes, by the learned model
        (app/ingest/supersedes.py), if the setting is on and its score reaches the threshold.
        `whole`: the message is one fact, judged as one sentence."""
        if not self._ingest.ingest_supersedes:
            return None
        judged = await self._judged_sentences(session, context, candidates, embedding, whole)
        if judged is None:
            return None
        views, projections, model, candidates = judged
        threshold = (
            self._ingest.ingest_supersedes_threshold_ja
            if model.language == "ja"
            else self._ingest.ingest_supersedes_threshold
        )
        return find_superseded(
            views,
            candidates,
            projections,
            threshold,
            model,
            context.speaker,
        )

    async def _vet_llm_updates(
        self,
        session: AsyncSession,
        context: MessageContext,
        candidates: list[Candidate],
        embedding: Embedding,
        extraction: Extraction,
    ) -> None:
        """The LLM's UPDATEs of memories the learned model scores below
        COGNIS_INGEST_LLM_UPDATE_FLOOR become ADDs beside them (precision first)."""
        floor = self._ingest.ingest_llm_update_floor
        if floor <= 0 or extraction.extractor != "llm" or extraction.fallback_used:
            return
        if not any(op.op == "UPDATE" for op in extraction.operations):
            return
        judged = await self._judged_sentences(session, context, candidates, embedding)
        if judged is None:
            return
        views, projections, model, judged_candidates = judged
        scores = memory_scores(views, judged_candidates, projections, model, context.speaker)
        vetoed = vet_llm_updates(extraction.operations, scores, floor)
        if vetoed:
            LLM_UPDATES_VETOED.inc(vetoed)

    async def _judged_sentences(
        self,
        session: AsyncSession,
        context: MessageContext,
        candidates: list[Candidate],
        embedding: Embedding,
        whole: bool = False,
    ) -> tuple[list[SentenceView], dict[uuid.UUID, float], SupersedesModel, list[Candidate]] | None:
        """What the learned supersedes model judges a user message by: its sentences' cosines
        to the memories shown, and the memories' projections on the model's direction. None
        where it cannot judge (not a user's message, no memory shown, too many sentences, or
        another embedder than the model's). The message's language picks the model
        (`model_for`): the English one reads the 768D vectors (a message of one sentence costs
        one query; one of several embeds its sentences and scores each in 768D), the Japanese
        one the multilingual vectors (its sentences embedded, memories.embedding_ml scored, and
        the memories shown widened by each sentence's nearest by multilingual cosine). The
        candidates it judges come last."""
        if context.role != "user" or not candidates:
            return None
        said = [context.content.strip()] if whole else message_sentences(context.content)
        if not said or len(said) > MAX_SENTENCES:
            return None
        model = model_for(context.content)
        repository = MemoryRepository(session)
        ids = [c.memory_id for c in candidates]
        multilingual = self._embedder.multilingual
        if multilingual is not None and model.embedding_model == multilingual.model_name:
            vectors = await multilingual.encode(said)
            scoped = visible_to(context.agent_id, context.run_id)
            candidates = await multilingual_nearest(
                MemoryRepository(session, to_sql(scoped) if scoped else None),
                context,
                vectors,
                candidates,
                self._ingest,
                self._retrieval,
            )
            ids = [c.memory_id for c in candidates]
            cosines = [await repository.exact_ml_scores(context.user_id, ids, v) for v in vectors]
            projections = await repository.exact_ml_scores(context.user_id, ids, model.direction)
            return _views(said, cosines, vectors, model), projections, model, candidates
        if model.embedding_model != Path(self._embedding.embedding_model).name:
            return None  # its cosines and direction belong to another embedder
        if len(said) == 1:
            vectors = [embedding.full]
            cosines = [{c.memory_id: c.similarity for c in candidates}]
        else:
            vectors = [e.full for e in await self._embed_for(context, said)]
            cosines = [await repository.exact_768d_scores(context.user_id, ids, v) for v in vectors]
        projections = await repository.exact_768d_scores(context.user_id, ids, model.direction)
        return _views(said, cosines, vectors, model), projections, model, candidates

    async def _drop_repeated_adds(
        self,
        repository: MemoryRepository,
        context: MessageContext,
        extraction: Extraction,
        candidates: list[Candidate],
        known: dict[str, Embedding],
    ) -> None:
        """An ADD that repeats a memory already shown becomes NONE (never a second copy)."""
        adds = [op for op in extraction.operations if op.op == "ADD" and op.content is not None]
        if not adds or not candidates:
            return
        shown = {op.target.memory_id for op in extraction.operations if op.target is not None}
        by_id = {c.memory_id: c for c in candidates}
        for op in adds:
            assert op.content is not None
            open_ids = [c.memory_id for c in candidates if c.memory_id not in shown]
            if not open_ids:
                return
            # Exact 768D cosine in Postgres, by id: the statement stage 2 re-scores with.
            scores = await repository.exact_768d_scores(
                context.user_id, open_ids, known[op.content].full
            )
            memory_id, similarity = max(scores.items(), key=lambda pair: pair[1])
            if similarity >= self._ingest.ingest_duplicate_threshold:
                op.op, op.target = "NONE", by_id[memory_id]
                op.reason = f"ADD repeats a current memory (cosine {similarity:.3f})"
                shown.add(memory_id)

    async def apply(
        self, session: AsyncSession, job_id: uuid.UUID, decided: Decided
    ) -> list[IngestDecision]:
        """Step 4 in the caller's transaction: all operations of the message, then the audit."""
        with tracing.span("ingest.apply"):
            service = MemoryService(
                session,
                self._embedder,
                self._classifier,
                self._api,
                self._ingest,
                self._retrieval,
            )
            for op in decided.extraction.operations:
                embedding = decided.embeddings.get(op.content) if op.content is not None else None
                turn = decided.embeddings[decided.context.content] if op.turn else None
                await apply_operation(service, decided.context, op, embedding, turn)
            rows = audit_rows(job_id, decided.context, decided.extraction)
            IngestRepository(session).add_decisions(rows)
            await session.flush()
            return rows


def _views(
    said: list[str],
    cosines: list[dict[uuid.UUID, float]],
    vectors: list[np.ndarray],
    model: SupersedesModel,
) -> list[SentenceView]:
    """Each sentence with its cosines to the memories and its projection on the direction."""
    return [
        SentenceView(text, scored, float(vector @ model.direction))
        for text, scored, vector in zip(said, cosines, vectors, strict=True)
    ]


def _event_time(op: Operation, context: MessageContext) -> datetime:
    """Per fact: a time expression in its own text, else the LLM's date, else the message's."""
    window = primary_window(op.content or "", context.sent_at)
    if window is not None:
        return window.start
    return op.event_time or context.event_time
