"""Stage 2, beside the English vector: the multilingual leg (issue 40).

The deployment's model (all-mpnet-base-v2) reads English only. Every memory also has a
multilingual vector (app/ml/multilingual.py, memories.embedding_ml); this leg searches it by
cosine and stage 4 fuses its ranking with the other legs' (RRF, at the vector leg's weight).

When it runs (decided cheaply, before any model call), and what stage 4 fuses:
- the query is not English (letters outside the Latin script: Japanese, Chinese, Korean,
  Cyrillic, ...): the English vector's ranking of it is close to chance, so the leg ranks
  every memory and its ranking takes the vector leg's place, beside BM25;
- the query is in the Latin script and the user has current memories that are not English
  (one index probe, migration 0034): the leg ranks those memories, and the vector list is
  each memory judged by the model that reads it: English memories by their English cosine,
  the others by their multilingual cosine (both models put unrelated text below ~0.15 and
  paraphrases at 0.3-0.7, so the two scales sort together);
- otherwise (an English question of a user who writes English only) it does not run, and
  English search is exactly what it was.

Relevance (app/retrieval/relevance_steps.py) follows the same choice: a result whose relevance the
English model cannot judge (a non-English query, or a memory that is not English) takes its
multilingual cosine instead, against the floor calibrated for that model
(`multilingual_min_relevance`, docs/languages.md).

Lever `language_legs` (its steps in app/retrieval/relevance_steps.py): for a query the English
model cannot read, the multilingual model is the one judge of meaning, so what was built on
English does not out-vote it. Measured on `make bench-japanese` (docs/benchmarks/japanese.md):
with equal RRF weights, BM25's rank decides between any two neighbours of the multilingual
ranking, and a paraphrased question shares few words with its answer, so a word it shares with
another memory puts that one first. With the lever the first results are settled by the
multilingual relevance, as lever `relevance_order` settles them by the English one: none stands
above a result of the top k more relevant by more than `multilingual_order_margin` (0.05; BM25
and the fused order still break the closer calls). And a question with a time window keeps the
memories dated inside it past the multilingual floor (a question that names only a time shares
no meaning with its answer).
English questions of English users never get here: the leg does not run.
"""

from __future__ import annotations

import unicodedata
import uuid
from collections.abc import Sequence, Set
from dataclasses import dataclass, field

import numpy as np

from app.ml.multilingual import MultilingualEncoder
from app.retrieval.candidates import Candidate
from app.retrieval.timing import StageTimer
from app.retrieval.vector_sql import SearchRepository
from app.time_expressions import TimeWindow

STAGE = "multilingual"


def query_is_english(query: str) -> bool:
    """Whether the English model may rank the query's hits: all its letters are Latin.

    Not the language detector's reading: it takes one short English question in twenty for
    Dutch or Tagalog (docs/languages.md), and an English user's search must stay what it was.
    A Latin-script query in another language (Spanish, French) still finds the memories not in
    English by their multilingual cosine, as an English one does."""
    return all(unicodedata.name(ch, "").startswith("LATIN") for ch in query if ch.isalpha())


@dataclass(slots=True)
class MultilingualHits:
    candidates: list[Candidate] = field(default_factory=list)
    query_vector: np.ndarray | None = None  # None: the leg did not run
    english_query: bool = True
    # What the explanation's stages say of the leg.
    status: str = "off"


async def multilingual_leg(
    repository: SearchRepository,
    encoder: MultilingualEncoder,
    user_id: str,
    session_id: str | None,
    query: str,
    limit: int,
    exact: bool,
    timer: StageTimer,
) -> MultilingualHits:
    """The user's memories nearest the query by multilingual cosine, when the leg applies."""
    english = query_is_english(query)
    if english:
        with timer.stage("multilingual_check_ms"):
            if not await repository.has_other_languages(user_id):
                return MultilingualHits(status="skipped: a Latin-script query, English memories")
    with timer.stage("multilingual_embedding_ms"):
        (vector,) = await encoder.encode([query])
    with timer.stage("vector_multilingual_ms"):
        found = await repository.multilingual_candidates(
            user_id, vector, session_id, limit, exact, other_languages_only=english
        )
    candidates = []
    for rank, (memory_id, score) in enumerate(found, start=1):
        candidate = Candidate(memory_id=memory_id, score=score)
        candidate.record(STAGE, rank, score)
        candidates.append(candidate)
    why = "the user has memories not in English" if english else "the query is not in Latin script"
    return MultilingualHits(candidates, vector, english, f"on: {why}")


def vector_list(vector: list[Candidate], multilingual: MultilingualHits) -> list[Candidate]:
    """Stage 4's vector list (module docstring): the English leg's where the multilingual leg
    did not run; the multilingual leg's for a query that is not English; else the English
    leg's with the memories not in English scored by their multilingual cosine, ranked again."""
    if multilingual.query_vector is None:
        return vector
    if not multilingual.english_query:
        return multilingual.candidates
    by_id = {c.memory_id: c for c in vector}
    for hit in multilingual.candidates:
        candidate = by_id.setdefault(hit.memory_id, hit)
        candidate.stages.update(hit.stages)
        candidate.score = hit.stages[STAGE].score or 0.0
    return sorted(by_id.values(), key=lambda c: -c.score)


def multilingual_judges(english_query: bool, multilingual_vector: np.ndarray | None) -> bool:
    """Whether every result's relevance is the multilingual model's: the leg ran for a query
    not in the Latin script (app/retrieval/relevance_steps.py, `_multilingual_relevance`)."""
    return multilingual_vector is not None and not english_query


def dated_in_window(
    ranked: Sequence[Candidate], window: TimeWindow | None, judged: Set[uuid.UUID]
) -> set[uuid.UUID]:
    """Lever language_legs: of the results the multilingual model judged, those dated inside
    the question's time window, which its floor must not drop. 昨日は何をしていた asks by
    date, not by words: its multilingual cosine to what happened that day is ~0.05, far below
    the floor, and without this every answer was dropped (`make bench-japanese`, time users)."""
    if window is None:
        return set()
    return {
        c.memory_id
        for c in ranked
        if c.memory_id in judged and c.when is not None and window.start <= c.when < window.end
    }
