"""Export endpoint: a user's memories, streamed as JSON Lines in the import's line format."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.params import Parameter
from litestar.response import Stream

from app.api.contract import COMMON, AgentIdQuery, FiltersQuery, RunIdQuery, UserId, problems
from app.api.imports import NDJSON
from app.api.reads import READ_HEADERS, Reads
from app.db.tenant import current_tenant
from app.imports.export import ExportOptions, Versions, export_lines
from app.memories.fields import check_user_id
from app.memories.filters import listing_filter, to_sql


class ExportController(Controller):
    path = "/v1/users/{user_id:str}/export"
    tags = ["import"]

    @get(
        "/",
        summary="Export a user's memories as JSON Lines, in the import's line format",
        description="Streamed (application/x-ndjson), one memory per line, in exactly the "
        "line format `POST /import` reads: importing an export elsewhere and exporting again "
        "gives the same lines. A line's external_id is the id the memory was imported under, "
        "else its chain id; lines are ordered by it. `versions=all` gives every version "
        "(external_id `<id>@v<version>`: the line format holds no history, so such an export "
        "imports as one memory per version); `vectors=true` adds each version's 768D "
        "embedding. Read in one transaction: a consistent snapshot.",
        media_type=NDJSON,
        responses=problems(*COMMON),
        response_headers=READ_HEADERS,
    )
    async def export_memories(
        self,
        user_id: UserId,
        reads: Reads,
        versions: Annotated[
            Versions,
            Parameter(description="current (default): current versions; all: every version."),
        ] = "current",
        vectors: Annotated[
            bool, Parameter(description="Add each line's 768D `embedding` (default: none).")
        ] = False,
        agent_id: AgentIdQuery = None,
        run_id: RunIdQuery = None,
        filters: FiltersQuery = None,
    ) -> Stream:
        check_user_id(user_id)
        # Checked before the first byte: a bad filter is a 400, not a broken stream.
        matching = listing_filter(filters, agent_id, run_id)
        tenant_id = current_tenant()
        assert tenant_id is not None  # the key guard bound it
        options = ExportOptions(
            versions=versions,
            vectors=vectors,
            where=to_sql(matching) if matching is not None else None,
        )
        # Where the stream reads is decided before its first byte (it reports it in a header).
        sessionmaker = await reads.sessionmaker_for(fresh=True)
        return Stream(
            export_lines(sessionmaker, tenant_id, user_id, options),
            media_type=NDJSON,
        )
