"""Bulk import endpoint: a streamed JSON Lines body of a user's history, one summary back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from litestar import Controller, Request, post
from litestar.di import Provide
from litestar.enums import MediaType
from litestar.openapi.spec import OpenAPIMediaType as Content
from litestar.openapi.spec import Operation, RequestBody, Schema
from litestar.openapi.spec.enums import OpenAPIFormat, OpenAPIType
from litestar.params import Parameter

from app.api.contract import USER_WRITE, UserId, problems
from app.api.schemas.imports import ImportSummaryOut
from app.errors import UnsupportedMediaTypeError
from app.imports.lines import LineFormat
from app.imports.service import DEFAULT_BATCH_SIZE, ImportOptions, MemoryImporter
from app.imports.sources import MAX_DOCUMENT_BYTES, import_records
from app.memories.fields import check_user_id
from app.runtime import Runtime
from app.vocabulary import EMBEDDING_DIM, SCOPES, SEED_CATEGORIES

NDJSON = "application/x-ndjson"
_STRING = Schema(type=OpenAPIType.STRING)
_LINE = Schema(
    type=OpenAPIType.OBJECT,
    required=["content", "external_id"],
    description="One memory per line (mem0's export records {id, memory, user_id, agent_id, "
    "run_id, metadata, categories, created_at, updated_at} are accepted too).",
    properties={
        "content": _STRING,
        "external_id": Schema(
            type=OpenAPIType.STRING,
            description="Your id for this memory: a line whose id this user already has is "
            "skipped, so a rerun resumes an interrupted import.",
        ),
        "speaker": _STRING,
        "event_time": Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.DATE_TIME),
        "session_id": _STRING,
        "agent_id": Schema(
            type=OpenAPIType.STRING,
            description="The agent the memory belongs to; absent: shared by all agents.",
        ),
        "run_id": Schema(
            type=OpenAPIType.STRING, description="The run it came from; absent: of no run."
        ),
        "scope": Schema(type=OpenAPIType.STRING, enum=list(SCOPES)),
        "category": Schema(
            type=OpenAPIType.STRING,
            examples=list(SEED_CATEGORIES),
            description="One of this deployment's categories (the `categories` table: the 15 "
            "seeded, and any it added); an unknown one fails its line. Classified from the "
            "text when absent.",
        ),
        "metadata": Schema(type=OpenAPIType.OBJECT),
        "embedding": Schema(
            type=OpenAPIType.ARRAY,
            items=Schema(type=OpenAPIType.NUMBER),
            min_items=EMBEDDING_DIM,
            max_items=EMBEDDING_DIM,
            description="Precomputed with the service's model; normalised to unit length.",
        ),
        "user_id": Schema(type=OpenAPIType.STRING, description="If given, the path's user."),
    },
)


@dataclass
class ImportOperation(Operation):
    """The body is streamed, not a `data` parameter: describe it here."""

    def __post_init__(self) -> None:
        self.request_body = RequestBody(
            required=True,
            description="JSON Lines (application/x-ndjson), streamed: one memory per line. "
            'Or a mem0 export as it is (application/json): a JSON list, or {"results": [...]}, '
            f"read whole (at most {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB).",
            content={
                NDJSON: Content(schema=_LINE),
                MediaType.JSON: Content(
                    schema=Schema(
                        one_of=[
                            Schema(type=OpenAPIType.ARRAY, items=_LINE),
                            Schema(
                                type=OpenAPIType.OBJECT,
                                required=["results"],
                                properties={"results": Schema(type=OpenAPIType.ARRAY, items=_LINE)},
                            ),
                        ]
                    )
                ),
            },
        )


async def provide_importer(runtime: Runtime) -> MemoryImporter:
    return runtime.importer


class ImportController(Controller):
    path = "/v1/users/{user_id:str}/import"
    tags = ["import"]
    dependencies = {"importer": Provide(provide_importer)}

    @post(
        "/",
        status_code=200,
        summary="Import a user's history from JSON Lines (idempotent by external_id)",
        description="Lines are imported in batches, each committed on its own: bad lines are "
        "reported (line, field, detail) while the good ones land, and a rerun skips what an "
        "earlier run imported. The first 100 errors are listed; `failed` counts them all. "
        "A leading UTF-8 byte-order mark is ignored.",
        operation_class=ImportOperation,
        responses=problems(*USER_WRITE, 415),
        request_max_body_size=None,
    )
    async def import_memories(
        self,
        user_id: UserId,
        request: Request,
        importer: MemoryImporter,
        line_format: Annotated[LineFormat, Parameter(query="format")] = "auto",
        batch_size: Annotated[int, Parameter(ge=1, le=5000)] = DEFAULT_BATCH_SIZE,
    ) -> ImportSummaryOut:
        check_user_id(user_id)
        media_type = request.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if media_type not in (NDJSON, "application/jsonl", MediaType.TEXT, MediaType.JSON):
            raise UnsupportedMediaTypeError(
                f"send the lines as {NDJSON} (or a JSON document as {MediaType.JSON}), "
                f"not {media_type or 'no content type'}"
            )
        summary = await importer.run(
            # The body's shape (JSON Lines or one document) is told by its first line, as the
            # CLI tells a file's.
            import_records(request.stream(), max_document_bytes=MAX_DOCUMENT_BYTES),
            ImportOptions(user_id=user_id, line_format=line_format, batch_size=batch_size),
        )
        return ImportSummaryOut.of(summary)
