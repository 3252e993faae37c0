"""mem0's request bodies, read and checked: the object a call sends, the one user it names,
its messages' contents and time, a batch's memory ids. What is missing or of the wrong type
is a 400 naming the field (InvalidInputError), as the service's own routes answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import msgspec

from app.api.mem0.translate import split_filters
from app.errors import InvalidInputError


def body_of(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise InvalidInputError("the body must be a JSON object", field="body")
    return data


def scoped_body(data: Any) -> tuple[dict[str, Any], str, dict[str, Any] | None]:
    """A call's body, the one user it names (`user_id` or in its filters) and the rest of its
    filters as a native filter tree."""
    body = body_of(data)
    return body, *split_filters(body.get("filters"), text_field(body, "user_id"))


def content_of(message: Any) -> Any:
    if not isinstance(message, dict):
        raise InvalidInputError(
            "every message must be an object such as {'role': 'user', 'content': '...'}",
            field="messages",
        )
    return message.get("content")


def sent_at_of(timestamp: Any) -> datetime:
    """mem0's `timestamp` (Unix seconds) as the messages' time; now when it gives none."""
    if timestamp is None:
        return datetime.now(UTC)
    try:
        return datetime.fromtimestamp(float(timestamp), UTC)
    except (TypeError, ValueError, OverflowError, OSError) as exc:
        raise InvalidInputError(
            "timestamp must be a Unix time in seconds", field="timestamp"
        ) from exc


def text_field(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is not None and not isinstance(value, str):
        raise InvalidInputError(f"{key} must be a string", field=key)
    return value


def converted(raw: dict[str, Any], kind: type[Any]) -> Any:
    try:
        return msgspec.convert(raw, kind)
    except msgspec.ValidationError as exc:
        raise InvalidInputError(str(exc), field="body") from exc


def batch_items(data: Any) -> list[dict[str, Any]]:
    items = body_of(data).get("memories")
    if not isinstance(items, list) or not items or not all(isinstance(i, dict) for i in items):
        raise InvalidInputError(
            "memories must be a non-empty list of {'memory_id': ...} objects", field="memories"
        )
    return items


def item_memory_id(item: dict[str, Any]) -> str:
    memory_id = item.get("memory_id")
    if not isinstance(memory_id, str):
        raise InvalidInputError("every item needs its memory_id", field="memories.memory_id")
    return memory_id
