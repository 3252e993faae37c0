"""Settings of the retrieval group: `RetrievalSettings`, read as `settings.retrieval`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, field_validator

from app.config.validators import within_published_bound


class RetrievalSettings(BaseModel):
    """Retrieval.

    The search pipeline (SPEC section 4: its 8 stages and their constants) and the levers of
    the retrieval profiles (docs/retrieval.md).
    """

    candidates_256d: int = Field(default=200, description="coarse 256D HNSW candidates")
    candidates_768d: int = Field(default=50, description="kept after exact 768D re-scoring")
    bm25_candidates: int = Field(default=50, description="BM25 hits fused")
    hnsw_ef_search: int = Field(
        default=200,
        description="`hnsw.ef_search` for the 256D scan (iterative scan, relaxed order)",
    )
    # Exact search is under a millisecond for 600 rows and immune to a worn HNSW graph (after
    # 14,000 rows of other users were erased, LoCoMo recall@10 fell from 0.757 to 0.740
    # through the index).
    exact_search_max_memories: int = Field(
        default=5000,
        ge=0,
        description="a user with at most this many current memories is searched exactly at "
        "256D (their rows by the user index, then sorted) instead of through HNSW; 0: always "
        "HNSW",
    )
    rrf_k: int = Field(default=10, description="RRF constant k")
    rrf_weight_vector: float = Field(default=0.70, description="RRF weight of the vector leg")
    rrf_weight_bm25: float = Field(default=0.30, description="RRF weight of the BM25 leg")
    default_top_k: int = Field(default=10, description="results of a search that asks for none")
    max_top_k: int = Field(
        default=100, description="most results one search may ask for (at most the published 100)"
    )
    temporal_weight_fused: float = Field(
        default=0.60, description="temporal boost: weight of the fused score"
    )
    temporal_weight_time: float = Field(
        default=0.40, description="temporal boost: weight of the time score"
    )
    temporal_min_score: float = Field(default=0.10, description="temporal score floor")
    dedup_threshold: float = Field(
        default=0.99, description="cosine above which a lower-ranked result is dropped"
    )
    min_relevance: float = Field(
        default=0.15,
        ge=0,
        le=1,
        description="results whose relevance (the query's 768D cosine to the memory, on a "
        "fixed 0-1 scale) is below this are left out of a search that sends no "
        "`min_relevance`: unrelated filler scores about 0-0.13 with all-mpnet-base-v2, and "
        "0.15 cost LoCoMo no recall@10 (-0.005 on the conversations it was chosen on, +0.001 "
        "held out; docs/benchmarks/locomo.md); 0: none left out",
    )
    multilingual_min_relevance: float = Field(
        default=0.15,
        ge=0,
        le=1,
        description="the floor for results whose relevance is the multilingual cosine (a "
        "query or a memory that is not English): calibrated on the project's Japanese and "
        "English facts (docs/languages.md); a request's `min_relevance` replaces it too",
    )
    multilingual_order_margin: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="lever `language_legs`: for a query not in the Latin script, a result of "
        "the first `relevance_order_head` may stand above one of the top k more relevant by "
        "the multilingual cosine only when they differ by at most this (docs/languages.md)",
    )
    cross_encoder_model: str | None = Field(
        default=None, description="CrossEncoder name or local path; unset skips re-ranking"
    )
    rerank_top_n: int = Field(default=20, description="candidates the cross-encoder re-scores")
    history_max_versions: int = Field(
        default=20, description="earlier versions returned per hit for history queries"
    )
    memory_context_turns: int = Field(
        default=1,
        ge=0,
        le=10,
        description="previous turns of a session stored (and embedded) as a memory's context, "
        "on write (lever `context_vector`); 0 stores none",
    )
    entities: bool = Field(
        default=True,
        description="beside the ingestion workers, find the named things of new memories "
        "with the NER model while the embedding model is idle (docs/entities.md); false: "
        "none (`python -m app extract-entities` finds them)",
    )
    sentence_vectors: bool = Field(
        default=True,
        description="beside the ingestion workers, embed the sentences of new memories of "
        "several sentences while the model is idle (at most 12 each; lever `sentence_vector`), "
        "and those of a small write with it (COGNIS_SENTENCE_VECTORS_AT_WRITE); false: none "
        "(`python -m app embed-sentences` adds them)",
    )
    sentence_vectors_at_write: int = Field(
        default=64,
        ge=0,
        description="a write through the API (a memory, a batch, a PATCH) whose memories "
        "have at most this many sentences in all embeds them in its own model call, so search "
        "ranks by them at once; larger batches, batch jobs, imports and messages leave them "
        "to the background (COGNIS_SENTENCE_VECTORS); 0: always the background",
    )
    retrieval_profile: Literal["paper", "default"] = Field(
        default="default",
        description="profile of a search that names none: `paper` (SPEC's 8 stages exactly) "
        "or `default` (plus the levers measured in docs/benchmarks/locomo.md)",
    )
    bm25_context_boost: float = Field(
        default=0.5,
        ge=0.0,
        le=10.0,
        description="weight of the context field beside the content's 1.0 (lever `context_bm25`)",
    )
    bm25_proximity_slop: int = Field(
        default=5,
        ge=0,
        le=50,
        description="moves a sloppy phrase match may make (lever `bm25_proximity`)",
    )
    speaker_boost: float = Field(
        default=0.2,
        ge=0.0,
        le=10.0,
        description="factor `1 + boost` for memories of a speaker the query names (lever "
        "`speaker`)",
    )
    feedback_top: int = Field(
        default=3,
        ge=1,
        le=20,
        description="hits whose mean vector the query moves towards, Rocchio (lever `feedback`)",
    )
    feedback_weight: float = Field(
        default=0.75,
        ge=0.0,
        le=10.0,
        description="how far the query vector moves towards them (lever `feedback`)",
    )
    entity_hop_top_n: int = Field(
        default=5,
        ge=1,
        le=100,
        description="the hits whose entities the entity hop follows (lever `entity_hop`)",
    )
    entity_hop_limit: int = Field(
        default=10,
        ge=0,
        le=100,
        description="memories the entity hop may bring in at most (lever `entity_hop`)",
    )
    entity_hop_decay: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="share of the linking hit's score a memory brought in by the entity hop "
        "gets (lever `entity_hop`)",
    )
    entity_hop_max_memories: int = Field(
        default=30,
        ge=1,
        le=10_000,
        description="an entity named by more of the user's memories links nothing in the "
        "entity hop (a name on every page is no link; lever `entity_hop`)",
    )
    entity_boost: float = Field(
        default=0.2,
        ge=0.0,
        le=10.0,
        description="factor `1 + boost * shared / named` for memories mentioning the query's "
        "entities (lever `entities`)",
    )
    neighbour_top_n: int = Field(
        default=10,
        ge=0,
        le=100,
        description="hits that lend their score to the turns just before and after them in "
        "their session (lever `neighbours`)",
    )
    neighbour_decay: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="the share of that score the adjacent turns get (lever `neighbours`)",
    )
    time_mention_boost: float = Field(
        default=0.2,
        ge=0.0,
        le=10.0,
        description="factor `1 + boost` for memories naming a time, on when-questions (lever "
        "`time_mentions`)",
    )
    part_slots: int = Field(
        default=2,
        ge=0,
        le=10,
        description="places each part of a multi-part question is given at the head of the "
        "results, round-robin with the whole question's (levers `query_parts`, `event_order`)",
    )
    session_top_n: int = Field(
        default=30,
        ge=1,
        le=200,
        description="candidates whose scores make their sessions' scores (lever `sessions`)",
    )
    session_boost: float = Field(
        default=0.3,
        ge=0.0,
        le=10.0,
        description="factor `1 + boost * session score / best session score` for a session's "
        "memories (lever `sessions`)",
    )
    session_decay: float = Field(
        default=0.85,
        ge=0.0,
        le=1.0,
        description="factor for each further memory of one session, so the top k spans "
        "sessions (lever `sessions`; 1: none)",
    )
    specificity_boost: float = Field(
        default=0.15,
        ge=0.0,
        le=0.5,
        description="factor `1 + boost * z` for a memory whose rarest words are z standard "
        "deviations rarer than the user's usual (z within ±2; lever `specificity`)",
    )
    relevance_order_margin: float = Field(
        default=0.1,
        ge=0.0,
        le=1.0,
        description="a result of the first `relevance_order_head` may stand above a more "
        "relevant one of the top k only when their relevance differs by at most this "
        "(lever `relevance_order`), or BM25 and the vector leg both rank it higher (lever "
        "`relevance_guard`)",
    )
    relevance_order_head: int = Field(
        default=3,
        ge=1,
        le=100,
        description="the first results whose places relevance settles (levers "
        "`relevance_order`, `relevance_guard` and `language_legs`)",
    )
    specificity_prior: float = Field(
        default=50.0,
        ge=0.0,
        le=10_000.0,
        description="memories of evidence the specificity boost is shrunk by: it is `boost * "
        "n / (n + prior)` for a user of n memories, so it fades for a user with few (lever "
        "`specificity`; 0: the whole boost at any size)",
    )
    specificity_words: int = Field(
        default=5,
        ge=1,
        le=50,
        description="a memory's rarest words whose mean inverse document frequency is its "
        "specificity (lever `specificity`)",
    )
    specificity_sample: int = Field(
        default=500,
        ge=10,
        le=100_000,
        description="the user's memories whose words make the document frequencies (lever "
        "`specificity`)",
    )
    specificity_ttl_s: float = Field(
        default=300.0,
        ge=0.0,
        description="how long a user's word statistics are reused before they are counted "
        "again (lever `specificity`; 0: every search)",
    )

    _top_k_bound = field_validator("max_top_k")(within_published_bound)

    @field_validator("rrf_weight_vector", "rrf_weight_bm25")
    @classmethod
    def _weight_in_unit_interval(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError("RRF weights must lie in [0, 1]")
        return value
