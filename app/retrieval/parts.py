"""Multi-part questions: each part searched by both legs, fused beside the whole question, and
a few places at the head of the results kept for each part.

"How long between her move and the new job?" needs two memories; searched whole, the one that
matches more words takes every place. The parts (app/retrieval/query_parts.py, from the
question's syntax) each run the two legs (concurrently, at most MAX_PARTS extra leg calls),
are fused by RRF with the whole question's ranking, and the `part_slots` step interleaves the
head of the results round-robin (the whole question's best, then each part's best, for
COGNIS_PART_SLOTS rounds), so every part is represented in the top k.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence, Set

from app.retrieval.candidates import Candidate
from app.retrieval.fusion import RankedList, fuse, fuse_rrf, scored_in_order
from app.retrieval.legs import LegQuery, search_legs
from app.retrieval.multilingual_leg import vector_list
from app.retrieval.plan import Lever, RetrievalPlan, Tuning
from app.retrieval.query_parts import QueryParts, content_words
from app.retrieval.speakers import named_speakers, without_names
from app.retrieval.steps import SearchContext, Step
from app.retrieval.timing import StageTimer

QUERY_PARTS = Lever(
    "query_parts",
    'A question whose syntax joins several parts ("X and Y", "between X and Y", "before/'
    'after X", "X or Y", comparisons) searches each part too, and keeps places in the top k '
    "for each (COGNIS_PART_SLOTS).",
)
EVENT_ORDER = Lever(
    "event_order",
    'Time-ordering questions ("which came first", "how long between", "how many weeks '
    "after\") search each event on its own, as query_parts does, so that every event's memories "
    "reach the top k; each result's memory carries its event_time to order them by.",
)
LEVERS = (QUERY_PARTS, EVENT_ORDER)
SLOTS = Tuning("part_slots", lambda basis: basis.settings.part_slots)  # places per part


def parts_to_search(plan: RetrievalPlan, parts: QueryParts) -> tuple[str, ...]:
    """The parts this search retrieves: all of them under query_parts, those of a question
    about the order of events under event_order, else none."""
    if plan.on(QUERY_PARTS) or (plan.on(EVENT_ORDER) and parts.asks_order):
        return parts.parts
    return ()


def part_texts(parts: Sequence[str], speakers: Set[str]) -> list[str]:
    """The parts as the legs search them: without the speakers' names when the query was
    (lever speaker_query); a part that was nothing but a name is dropped."""
    if not speakers:
        return list(parts)
    texts = []
    for part in parts:
        text = without_names(part, speakers)
        if text == part and named_speakers(part, speakers) and len(content_words(part)) <= 1:
            continue
        texts.append(text)
    return texts


async def search_parts(
    parts: Sequence[str],
    query: LegQuery,
    context: SearchContext,
    weights: tuple[float, float],
) -> list[list[Candidate]]:
    """Each part through both legs, fused as the whole question is: one ranked list per part.
    The legs' own timings are the whole question's; the parts are timed together."""

    async def one(text: str) -> list[Candidate]:
        hits = await search_legs(LegQuery(text, query.speakers), context, StageTimer())
        vector = vector_list(hits.vector, hits.multilingual)
        return fuse(context.plan, vector, hits.text or [], weights)

    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(text)) for text in parts]
    except ExceptionGroup as failed:
        raise failed.exceptions[0] from None
    return [task.result() for task in tasks]


def part_stage(number: int) -> str:
    return f"part {number}"


def fuse_parts(whole: list[Candidate], parts: Sequence[list[Candidate]], k: int) -> list[Candidate]:
    """RRF over the whole question's ranking and each part's, equally weighted. A memory that
    only a part found joins as a fresh candidate (its vector scores were the part's, not the
    question's: relevance measures it anew); each keeps its rank in every part's list."""
    by_id = {c.memory_id: c for c in whole}
    lists = [RankedList("query", [c.memory_id for c in whole], 1.0)]
    for number, ranked in enumerate(parts, start=1):
        for rank, found in enumerate(ranked, start=1):
            candidate = by_id.setdefault(found.memory_id, Candidate(memory_id=found.memory_id))
            candidate.record(part_stage(number), rank, found.score)
        lists.append(RankedList(part_stage(number), [c.memory_id for c in ranked], 1.0))
    return scored_in_order(fuse_rrf(lists, k), by_id, "parts")


def interleave_parts(ranked: list[Candidate], parts: int, rounds: int) -> list[Candidate]:
    """The head of the list, round-robin: the best remaining of the whole ranking, then the
    best of each part (by its rank in that part's list), for `rounds` rounds; the rest keeps
    its order. Every part thus has `rounds` places among the first (parts + 1) * rounds."""
    queues: list[list[Candidate]] = [list(ranked)]
    for number in range(1, parts + 1):
        ranks = {
            c.memory_id: rank
            for c in ranked
            if (s := c.stages.get(part_stage(number))) is not None and (rank := s.rank)
        }
        queues.append(
            sorted((c for c in ranked if c.memory_id in ranks), key=lambda c: ranks[c.memory_id])
        )
    taken: set[uuid.UUID] = set()
    head: list[Candidate] = []
    for _ in range(rounds):
        for queue in queues:
            while queue and queue[0].memory_id in taken:
                queue.pop(0)
            if queue:
                chosen = queue.pop(0)
                taken.add(chosen.memory_id)
                head.append(chosen)
    return head + [c for c in ranked if c.memory_id not in taken]


def without_parts(_: list[Candidate], context: SearchContext) -> str | None:
    return None if context.parts else "not a multi-part question"


async def part_slots(
    ranked: list[Candidate], context: SearchContext
) -> tuple[list[Candidate], str]:
    rounds = context.plan.numbers(SLOTS)
    ranked = interleave_parts(ranked, len(context.parts), rounds)
    return ranked, f"{len(context.parts)} parts, {rounds} places each"


STEP = Step("part_slots", part_slots, timer="part_slots_ms", serves=LEVERS, skip=without_parts)
