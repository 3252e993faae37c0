"""The API's published contract in one place: strict request bodies, the user id path
parameter, and the problem+json responses each route declares in the OpenAPI document."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import msgspec
from litestar import Request
from litestar.exceptions import ValidationException
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import Parameter
from litestar.types import Empty

from app.api.problems import PROBLEM_JSON
from app.errors import InvalidInputError
from app.memories.fields import (
    USER_ID_REGEX,
    AgentId,
    RunId,
    check_all_text,
    check_text,
    unstorable_in_json,
)
from app.memories.filters import FILTER_JSON_SCHEMA, MAX_FILTER_DEPTH
from app.vocabulary import MAX_METADATA_DEPTH

UserId = Annotated[
    str,
    Parameter(
        pattern=USER_ID_REGEX,
        min_length=1,
        max_length=128,
        description="1-128 characters: letters, digits and _ . : @ -, starting with a letter "
        "or digit.",
    ),
]


class Problem(msgspec.Struct, kw_only=True):
    """RFC 9457 problem details, as every error of this API is sent."""

    type: str
    title: str
    status: int
    detail: Annotated[str, msgspec.Meta(description="What went wrong and how to fix it.")]
    instance: str
    field: Annotated[
        str | None, msgspec.Meta(description="The offending field, when one is to blame.")
    ] = None
    errors: list[dict[str, Any]] | None = None


_WHY = {
    400: "Invalid input: the detail says what to change (and `field` names it).",
    401: "Missing or invalid API key.",
    404: "No such resource for this user.",
    409: "A conflict: the resource is gone or changed meanwhile (e.g. a deleted memory), the "
    "name is taken, or the user was erased after this write began (`erased_at`; sent again, "
    "the write is accepted), or the first request with this Idempotency-Key is still running "
    "(`code: idempotency_key_in_use`: retry with the same key after Retry-After seconds).",
    412: "If-Match names a version that is no longer the memory's current one: another "
    "writer replaced it (`current_version_id`: the version now current). Nothing was written; "
    "read the memory again and decide.",
    413: "The request body is too large.",
    415: "Unsupported media type.",
    422: "The Idempotency-Key was already used for a different request (`code: "
    "idempotency_key_reused`): send a new key for a new request.",
    429: "Over this key's rate limit: retry after Retry-After seconds.",
    502: "The embedding server gave an unusable answer.",
    503: "A store or the embedder is unavailable for now, or a write's deadline passed before "
    "it could be done (nothing written): retry after Retry-After seconds.",
}
# What any authenticated route can answer, body or not (429 only with rate limits set).
COMMON = (400, 401, 429, 503)
WITH_BODY = (*COMMON, 413, 502)
# A write of a user's data: refused (409) for a while after the user's erase.
USER_WRITE = (*WITH_BODY, 409)
# A write that takes an Idempotency-Key: the key reused for another request.
KEYED = (422,)


def parse_job_id(raw: str) -> uuid.UUID:
    """A job id path parameter (an ingestion job's, a batch create's): 400 when not a UUID."""
    try:
        return uuid.UUID(raw)
    except ValueError as exc:
        raise InvalidInputError(f"job id {raw[:64]!r} is not a UUID", field="job_id") from exc


def problems(*statuses: int) -> dict[int, ResponseSpec]:
    """The problem+json responses of a route, for its `responses=`."""
    return {
        status: ResponseSpec(
            data_container=Problem,
            media_type=PROBLEM_JSON,
            description=_WHY[status],
            generate_examples=False,
        )
        for status in statuses
    }


class StrictRequest(Request[Any, Any, Any]):
    """Decodes a JSON body straight into the handler's `data` type, strictly: `"top_k": "5"`
    or `"event_time": 0` are errors, not coerced (Litestar's own conversion is lax). Too deep a
    nesting is a 400, not a RecursionError, and so is any text Postgres cannot store (NUL, an
    unpaired surrogate), wherever it is in the body, named by its field: every JSON body's one
    door."""

    async def json(self) -> Any:
        if self._json is Empty and self._connection_state.json is Empty:
            data_field = self.route_handler.parsed_data_field
            target = data_field.annotation if data_field is not None else Any
            body = await self.body()
            try:
                value = msgspec.json.decode(body or b"null", type=target, strict=True)
            except msgspec.ValidationError as exc:
                raise _invalid(str(exc)) from exc
            except msgspec.DecodeError as exc:
                unstorable = unstorable_in_json(body, target)
                if unstorable is not None:
                    raise unstorable from exc
                raise _invalid(f"the body is not valid JSON: {exc}") from exc
            except RecursionError as exc:
                raise _invalid(
                    f"the body is nested too deeply to read: metadata nests at most "
                    f"{MAX_METADATA_DEPTH} levels, a filter at most {MAX_FILTER_DEPTH}"
                ) from exc
            check_all_text(value, "")
            self._json = self._connection_state.json = value
        return await super().json()


async def refuse_unstorable_parameters(request: Request[Any, Any, Any]) -> None:
    """Every query and path parameter's one door (the app's before_request hook): text
    Postgres cannot store (`?category=%00`) is a 400 naming the parameter, before any
    handler reads it."""
    for name, value in request.query_params.multi_items():
        check_text(value, name)
    for name, value in request.path_params.items():
        if isinstance(value, str):
            check_text(value, name)


def _invalid(message: str) -> ValidationException:
    return ValidationException(
        detail=message, extra=[{"key": "body", "message": message, "source": "body"}]
    )


# The query parameters that choose a user's memories, shared by the list and the export.
AgentIdQuery = Annotated[
    AgentId | None,
    Parameter(
        description="The agent's memories and the user's shared ones (no agent). Omitted: "
        "every memory of the user, whatever its agent."
    ),
]
RunIdQuery = Annotated[
    RunId | None,
    Parameter(
        description="The run's memories and those of no run. Omitted: every memory of the "
        "user, whatever its run."
    ),
]
FiltersQuery = Annotated[
    str | None,
    Parameter(
        description="A filter as JSON (the search body's `filters`): only memories matching "
        "it are included. " + FILTER_JSON_SCHEMA["description"]
    ),
]
