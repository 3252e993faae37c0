"""Stages 2 and 3: what the two legs search, and the legs themselves, run side by side.

BM25 needs no embedding: it runs while the query is embedded and the vectors are searched.
Each leg may be missing and the search still answers from the other: BM25 when OpenSearch
cannot answer, the vector leg when the query cannot be embedded (the model service
unavailable; a query vector still in the embedder's cache is used). Only when neither leg can
answer does the search fail.
The legs' levers are declared here; `vector_leg.py` and `bm25_leg.py` hold the searches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Set
from dataclasses import dataclass, field, replace

import numpy as np
import structlog

from app.db.tenant import current_tenant
from app.errors import EmbedderUnavailableError
from app.memories.filters import to_opensearch
from app.ml.embedder import Embedding
from app.retrieval.bm25_leg import Bm25LegSettings, bm25_leg
from app.retrieval.candidates import Candidate
from app.retrieval.multilingual_leg import STAGE as MULTILINGUAL_STAGE
from app.retrieval.multilingual_leg import MultilingualHits, multilingual_leg
from app.retrieval.person import about_an_entity, in_first_person
from app.retrieval.plan import Lever, RetrievalPlan, Tuning
from app.retrieval.request import SearchRequest
from app.retrieval.speakers import known_speakers, without_names
from app.retrieval.steps import SearchContext, Step, levers_of
from app.retrieval.timing import StageTimer
from app.retrieval.vector_leg import VectorLegSettings, scan_choice, vector_leg
from app.search_index.client import TextHit

SPEAKER_QUERY = Lever(
    "speaker_query",
    "Both legs search the query without the names of the user's speakers (the speaker "
    "lever weighs those instead).",
)
CONTEXT_VECTOR = Lever(
    "context_vector",
    "Vector leg: a memory's score is the better of its content's and its contextual text's cosine.",
)
SENTENCE_VECTOR = Lever(
    "sentence_vector",
    "Vector leg: a memory of several sentences also scores its nearest sentence's cosine "
    "(the best of content, context where that lever is on, and sentence counts).",
)
MULTILINGUAL_VECTOR = Lever(
    "multilingual_vector",
    "A second vector leg on the memories' multilingual vectors, for a query that is not "
    "English or a user with memories that are not (fused at the vector leg's weight; "
    "relevance from the multilingual cosine there). Needs COGNIS_MULTILINGUAL_EMBEDDER.",
)
FEEDBACK = Lever("feedback", "Vector leg: pseudo-relevance feedback (Rocchio) from the best hits.")
CONTEXT_BM25 = Lever(
    "context_bm25", "BM25 leg: the context field is searched too, at COGNIS_BM25_CONTEXT_BOOST."
)
BM25_PROXIMITY = Lever(
    "bm25_proximity",
    "BM25 leg: documents with the query's terms close together (a sloppy phrase match, in "
    "content and context) score more.",
)
FIRST_PERSON = Lever(
    "first_person",
    "Vector leg and relevance: the question is embedded with its second- and third-person "
    'pronouns in the first person ("What does she do?" as "What does I do?"), as the '
    "user's memories tell their facts; BM25 searches the words as asked.",
)
log = structlog.get_logger(__name__)

# The explanation stages the legs and their fusion record, in order.
STAGES = ("256d", "768d", "feedback", MULTILINGUAL_STAGE, "bm25", "rrf")


@dataclass(frozen=True, slots=True)
class LegQuery:
    """The text both legs search, and the user's speakers once they were read."""

    text: str
    speakers: Set[str] = frozenset()
    # What the vector legs embed where it is not `text` (lever first_person).
    vector_text: str | None = None

    @property
    def embedded(self) -> str:
        return self.vector_text if self.vector_text is not None else self.text


async def drop_speaker_names(query: LegQuery, context: SearchContext) -> tuple[LegQuery, str]:
    request = context.request
    names = await known_speakers(context.index, request.user_id, request.session_id)
    text = without_names(query.text, names)
    return LegQuery(text, names), text


def as_the_user_tells_it(text: str, request: SearchRequest) -> str:
    """`text` in the first person, as the user's memories tell it; a search filtered to an
    entity keeps its third-person pronouns, which are that entity."""
    return in_first_person(text, third_person=not about_an_entity(request.filters))


async def first_person(query: LegQuery, context: SearchContext) -> tuple[LegQuery, str]:
    text = as_the_user_tells_it(query.text, context.request)
    if text == query.text:
        return query, "no pronoun to put in the first person"
    return replace(query, vector_text=text), text


def question_embedded(plan: RetrievalPlan, request: SearchRequest, text: str | None = None) -> str:
    """The question (or `text`, another form of it) as relevance embeds it: as asked, in the
    first person where lever first_person is on (as the vector leg embeds it)."""
    question = request.query if text is None else text
    return as_the_user_tells_it(question, request) if plan.on(FIRST_PERSON) else question


# Steps on the query text, before the legs start.
QUERY_STEPS: tuple[Step[LegQuery], ...] = (
    Step("speaker_query", drop_speaker_names, timer="speakers_ms", lever=SPEAKER_QUERY),
    Step("first_person", first_person, lever=FIRST_PERSON),
)
LEVERS = (
    *levers_of(QUERY_STEPS),
    CONTEXT_VECTOR,
    SENTENCE_VECTOR,
    CONTEXT_BM25,
    BM25_PROXIMITY,
    FEEDBACK,
    MULTILINGUAL_VECTOR,
)


VECTOR_LEG = Tuning(
    "vector_leg",
    lambda basis: VectorLegSettings(
        shortlist=basis.settings.candidates_256d,
        keep=basis.settings.candidates_768d,
        ef_search=basis.settings.hnsw_ef_search,
        exact_max=basis.settings.exact_search_max_memories,
        rescore_768d=basis.runs("rescore_768d"),
        with_context=basis.on(CONTEXT_VECTOR),
        with_sentences=basis.on(SENTENCE_VECTOR),
        feedback_top=basis.settings.feedback_top if basis.on(FEEDBACK) else 0,
        feedback_weight=basis.settings.feedback_weight,
    ),
)
BM25_LEG = Tuning(
    "bm25_leg",
    lambda basis: Bm25LegSettings(
        size=basis.settings.bm25_candidates,
        context_boost=basis.settings.bm25_context_boost if basis.on(CONTEXT_BM25) else 0.0,
        proximity_slop=basis.settings.bm25_proximity_slop if basis.on(BM25_PROXIMITY) else None,
    ),
)
TUNINGS = (VECTOR_LEG, BM25_LEG)


@dataclass(slots=True)
class LegHits:
    vector: list[Candidate] = field(default_factory=list)
    shortlisted: int = 0  # how many the 256D stage shortlisted
    text: list[TextHit] | None = field(default_factory=list)  # None: OpenSearch did not answer
    query_vector: np.ndarray | None = None  # the vector leg's unit 768D query vector
    unembedded: bool = False  # the vector leg is missing: the query could not be embedded
    # The multilingual leg's (app/retrieval/multilingual_leg.py); its query_vector None: not run.
    multilingual: MultilingualHits = field(default_factory=MultilingualHits)

    @property
    def missing(self) -> list[str]:
        return (["vector"] if self.unembedded else []) + (["bm25"] if self.text is None else [])

    def status(self, plan: RetrievalPlan) -> dict[str, str]:
        return {
            "vector": (
                "unavailable: the model service cannot embed the query"
                if self.unembedded
                else "on"
                if plan.runs("vector")
                else "off"
            ),
            "bm25": "unavailable" if self.text is None else "on" if plan.runs("bm25") else "off",
            MULTILINGUAL_STAGE: self.multilingual.status,
        }


async def search_legs(query: LegQuery, context: SearchContext, timer: StageTimer) -> LegHits:
    """The legs the plan switches on, concurrently; a task group cancels the other leg when
    one fails, and the leg's own exception is raised (the error handlers expect it)."""
    request, plan = context.request, context.plan

    async def vector_path() -> (
        tuple[list[Candidate], int, np.ndarray, MultilingualHits] | EmbedderUnavailableError
    ):
        options = plan.numbers(VECTOR_LEG)
        embedding: Embedding | EmbedderUnavailableError
        try:
            async with asyncio.TaskGroup() as beside:
                # The scan's choice needs the database, not the query vector: it runs while
                # the query is embedded (on another core), instead of after it.
                choice = beside.create_task(
                    scan_choice(context.repository, request.user_id, options, timer)
                )
                with timer.stage("query_embedding_ms"):
                    try:
                        embedding = await context.embedder.embed_query(
                            query.embedded, current_tenant(), request.user_id
                        )
                    except EmbedderUnavailableError as unavailable:
                        # Not raised in the group: a cancelled scan_choice would leave the
                        # session's connection mid-query, unusable for the rest of the search.
                        embedding = unavailable
        except ExceptionGroup as failed:
            raise failed.exceptions[0] from None
        if isinstance(embedding, EmbedderUnavailableError):
            return embedding  # BM25 may answer alone: decided once it has
        candidates, shortlisted = await vector_leg(
            context.repository,
            request.user_id,
            request.session_id,
            embedding,
            options,
            timer,
            choice.result(),
        )
        multilingual = MultilingualHits()
        encoder = context.embedder.multilingual
        if encoder is None and plan.on(MULTILINGUAL_VECTOR):
            multilingual.status = "off: COGNIS_MULTILINGUAL_EMBEDDER is off"
        elif encoder is not None and plan.on(MULTILINGUAL_VECTOR):
            # After the English leg: both read through the search's one database session.
            multilingual = await multilingual_leg(
                context.repository,
                encoder,
                request.user_id,
                request.session_id,
                query.text,
                options.keep,
                choice.result(),
                timer,
            )
        return candidates, shortlisted, embedding.full, multilingual

    try:
        async with asyncio.TaskGroup() as legs:
            vector = legs.create_task(vector_path()) if plan.runs("vector") else None
            bm25 = (
                legs.create_task(
                    bm25_leg(
                        context.index,
                        request.user_id,
                        query.text,
                        request.session_id,
                        plan.numbers(BM25_LEG),
                        timer,
                        # The filter (with the agent's and run's visibility), compiled once
                        # for OpenSearch (the vector leg's is the repository's): applied in
                        # the query, before BM25 scores.
                        to_opensearch(scoped) if (scoped := request.scoped_filter) else None,
                    )
                )
                if plan.runs("bm25")
                else None
            )
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None
    hits = LegHits()
    if bm25 is not None:
        hits.text = bm25.result()
    if vector is not None:
        found = vector.result()
        if isinstance(found, EmbedderUnavailableError):
            if bm25 is None or hits.text is None:  # no leg answers: 503 with Retry-After
                raise found
            log.warning("retrieval.vector_unavailable", error=found.detail)
            hits.unembedded = True
        else:
            hits.vector, hits.shortlisted, hits.query_vector, hits.multilingual = found
    return hits
