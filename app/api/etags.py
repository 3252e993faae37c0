"""A memory version's ETag: a response carrying one version says which (`ETag: "<version_id>"`),
and PATCH and DELETE take it back in If-Match to act only while that version is current (412
Precondition Failed when another writer replaced it). Without If-Match, the last writer wins."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from litestar import Response
from litestar.datastructures import ResponseHeader
from litestar.params import Parameter
from litestar.serialization import decode_json

from app.errors import InvalidInputError

ETAG_HEADER = "ETag"
IF_MATCH_HEADER = "If-Match"
ETAG_HEADERS = [
    ResponseHeader(
        name=ETAG_HEADER,
        documentation_only=True,
        required=False,
        description='The version in the body, as `"<version_id>"`: send it back as If-Match '
        "on PATCH or DELETE to change the memory only while that version is current.",
    )
]
IfMatch = Annotated[
    str | None,
    Parameter(
        header=IF_MATCH_HEADER,
        required=False,
        description="The version you read (its `version_id`, or a response's ETag; quoted or "
        "not; several comma-separated, or `*` for any): the write is done only while the "
        "memory's current version is that one, else 412 naming the current version "
        "(`current_version_id`), and nothing is written. Without it the write applies to "
        "whichever version is current (last writer wins).",
    ),
]


def etag(version_id: uuid.UUID | str) -> str:
    return f'"{version_id}"'


def parse_if_match(raw: str | None) -> frozenset[uuid.UUID] | None:
    """The versions an If-Match header accepts; None when it accepts any current version
    (no header, or `*`). A weak tag (`W/"..."`, as some proxies rewrite ETags) counts as the
    version it names; anything but version ids is a 400."""
    if raw is None:
        return None
    tags = [tag.strip() for tag in raw.split(",") if tag.strip()]
    if "*" in tags:
        return None
    versions = set()
    for tag in tags:
        value = tag.removeprefix("W/")
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        try:
            versions.add(uuid.UUID(value))
        except ValueError:
            raise InvalidInputError(
                f"If-Match {tag[:64]!r} is not a version id: send the `version_id` (or the "
                "ETag) of the version you read, quoted or not",
                field=IF_MATCH_HEADER,
            ) from None
    if not versions:
        raise InvalidInputError(
            "If-Match is empty: send the `version_id` of the version you read, or omit it",
            field=IF_MATCH_HEADER,
        )
    return frozenset(versions)


def with_etag(response: Response[Any]) -> Response[Any]:
    """A memory write's response with its version's ETag, read from the body so that a
    replayed response (Idempotency-Key) carries it too."""
    if response.status_code in (200, 201) and isinstance(response.content, bytes):
        version_id = decode_json(response.content).get("version_id")
        if version_id is not None:
            response.headers[ETAG_HEADER] = etag(version_id)
    return response
