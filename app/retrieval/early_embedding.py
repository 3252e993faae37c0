"""The query's embedding, started before the speaker lookup that decides its text.

Lever speaker_query searches the query without the names of the user's speakers, which
OpenSearch is asked for first (app/retrieval/speakers.py): 7-19 ms on a quiet machine, during
which the model would sit idle although the query's embedding is a search's longest step. So
the search starts embedding the text it expects the vector leg to embed, the query without the
speakers this user's last search found, and the lookup runs meanwhile; the vector leg's
`embed_query` of that text then awaits the request under way. Nothing else changes: the
lookup still decides the text, and when it finds other names (a user's first search that names
a speaker, a new speaker since) the leg embeds its own text as before and the early vector is
only cached. The speakers remembered choose what to embed early, never what a search returns;
they are keyed by tenant, user and session like everything a search reads, and kept for
KEPT_S after the user's last search (an erased user's names leave this process's memory then).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict
from collections.abc import Set

from app import tracing
from app.db.tenant import current_tenant
from app.ml.embedder import Embedding
from app.retrieval.legs import SPEAKER_QUERY, question_embedded
from app.retrieval.speakers import without_names
from app.retrieval.steps import SearchContext
from app.retrieval.timing import SPAN_PREFIX, stage_label

Key = tuple[uuid.UUID | None, str, str | None]
# How long a user's speakers are remembered after their last search.
KEPT_S = 600.0


class EarlyEmbedding:
    """Starts a search's query embedding early; remembers the speakers of at most `users`
    users (least recently searched leave first)."""

    def __init__(self, users: int = 4096, kept_s: float = KEPT_S) -> None:
        self._users = users
        self._kept_s = kept_s
        # Least recently searched first: (when, names).
        self._speakers: OrderedDict[Key, tuple[float, Set[str]]] = OrderedDict()

    def start(self, context: SearchContext) -> asyncio.Future[Embedding] | None:
        """Embed what the vector leg will most likely embed, now (the request under way; None
        where nothing is started). Only where a lookup would otherwise come first: the vector
        leg runs and lever speaker_query is on."""
        plan, request = context.plan, context.request
        if not (plan.runs("vector") and plan.on(SPEAKER_QUERY)):
            return None
        tenant = current_tenant()
        self._forget(time.monotonic() - self._kept_s)
        _, names = self._speakers.get((tenant, request.user_id, request.session_id), (0, set()))
        text = question_embedded(plan, request, without_names(request.query, names))
        # The stage's span (as the vector leg's own request has), for as long as it runs.
        return tracing.span_until_done(
            SPAN_PREFIX + stage_label("query_embedding_ms"),
            lambda: context.embedder.start_query(text, tenant, request.user_id),
        )

    def found(self, context: SearchContext, speakers: Set[str]) -> None:
        """The speakers the lookup found, for this user's next search."""
        request = context.request
        key = (current_tenant(), request.user_id, request.session_id)
        self._speakers[key] = (time.monotonic(), frozenset(speakers))
        self._speakers.move_to_end(key)
        while len(self._speakers) > self._users:
            self._speakers.popitem(last=False)

    def _forget(self, before: float) -> None:
        while self._speakers and next(iter(self._speakers.values()))[0] < before:
            self._speakers.popitem(last=False)
