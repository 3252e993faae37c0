"""Speaker-aware ranking: a query that names a speaker prefers that speaker's memories.

The names come from the memories themselves (their `speaker` field), so nothing is
configured per user: "What did Caroline research?" boosts Caroline's turns over Melanie's
(lever `speaker`), and both legs search for "What did research?" (lever `speaker_query`):
a transcript line names its speaker ("Caroline: ..."), so a speaker's name matches every one
of their turns, in BM25 (where, rare across the index, it outweighs the words that say what
is asked) and in the vector (where it pulls towards anything that speaker said).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import structlog
from opensearchpy.exceptions import TransportError

from app.retrieval.candidates import Candidate, boost_scores
from app.retrieval.function_words import has_subject
from app.search_index.client import UNAVAILABLE, MemoryIndex

log = structlog.get_logger(__name__)


def name_pattern(name: str) -> str:
    """A name as a whole word (any case), with a possessive "'s" if it has one."""
    return rf"(?<!\w){re.escape(name)}(?:['\u2019]s)?(?!\w)"


def named_speakers(query: str, speakers: Iterable[str]) -> set[str]:
    """The speakers whose name appears in the query as a whole word (any case)."""
    return {
        name for name in speakers if name and re.search(name_pattern(name), query, re.IGNORECASE)
    }


def without_names(query: str, names: Iterable[str]) -> str:
    """The query without the given names; the query itself if no word but function words
    would remain ("Tell me about Tim": the name is the subject)."""
    stripped = query
    for name in sorted((n for n in names if n), key=len, reverse=True):
        stripped = re.sub(name_pattern(name), " ", stripped, flags=re.IGNORECASE)
    stripped = " ".join(stripped.split())
    return stripped if has_subject(stripped) else query


async def known_speakers(index: MemoryIndex, user_id: str, session_id: str | None) -> set[str]:
    """The speakers of the memories the caller may see; none when OpenSearch cannot answer
    (the query is then searched whole)."""
    try:
        return await index.speakers(user_id, session_id)
    except (*UNAVAILABLE, TransportError) as exc:
        log.warning("retrieval.speakers_unavailable", error=str(exc))
        return set()


def boost_named_speakers(
    query: str, ranked: list[Candidate], boost: float
) -> tuple[list[Candidate], set[str]]:
    """Multiply the score of the named speakers' memories by (1 + boost); re-rank if any
    speaker is named. Returns the list and the names found."""
    speakers = {c.speaker for c in ranked if c.speaker}
    named = named_speakers(query, speakers)
    if not named:
        return ranked, named
    return boost_scores(
        ranked, lambda c: 1.0 + boost if c.speaker in named else 1.0, "speaker"
    ), named
