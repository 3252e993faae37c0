"""What the OpenAPI document says mem0's request bodies are. The routes read their bodies
loosely (app/api/mem0/bodies.py: mem0's client sends fields this service ignores), so the
document cannot come from a wire type; these schemas describe the bodies that are accepted:
every body they allow is taken (schemathesis's positive-data check, tests/api/
test_openapi_positive.py). Fields the routes ignore are allowed beside them."""

from __future__ import annotations

from typing import Any

from litestar.params import Body, BodyKwarg, Parameter

from app.memories.fields import USER_ID_REGEX
from app.vocabulary import MAX_BATCH_ITEMS, MAX_CONTENT_CHARS, MAX_TOP_K

USER_ID: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "pattern": USER_ID_REGEX,
    "description": "The user: 1-128 characters, letters, digits and _ . : @ -, starting with "
    "a letter or digit.",
}
# Text with something in it: the store refuses NUL and unpaired surrogates
# (app/memories/fields.py).
_TEXT: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_CONTENT_CHARS,
    "pattern": r"^[^\x00]*[^\x00\s][^\x00]*$",
}
MEMORY_ID: dict[str, Any] = {"type": "string", "format": "uuid"}
# A memory's id in a mem0 path: a UUID (anything else is a 400).
MEMORY_ID_PARAMETER = Parameter(description="The memory's id.", schema_extra=MEMORY_ID)
# Described as an empty object: what the filters may hold (the user, conditions, AND/OR)
# depends on the other fields (one user in all), beyond what a schema says.
_FILTERS: dict[str, Any] = {
    "type": "object",
    "maxProperties": 0,
    "description": "mem0's filters. Taken beside `user_id` (naming the same user, or none): "
    "agent_id, run_id, categories, metadata conditions, AND/OR: docs/mem0.md.",
}


def _object(required: list[str], properties: dict[str, Any], description: str) -> BodyKwarg:
    return Body(
        description=description,
        schema_extra={
            "type": "object",
            "required": required,
            "properties": properties,
            # mem0's client sends fields beside these, which are ignored; the document names
            # only what is read (a field it does not name may be refused, e.g. holding NUL).
            "additionalProperties": False,
        },
    )


ADD = _object(
    ["user_id", "messages"],
    {
        "user_id": USER_ID,
        "messages": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_BATCH_ITEMS,
            "items": {
                "type": "object",
                "required": ["content"],
                "properties": {"role": {"enum": ["user", "assistant"]}, "content": _TEXT},
                "additionalProperties": False,
            },
        },
        "infer": {"type": "boolean"},
        "async_mode": {"type": "boolean"},
    },
    "mem0's add: the user's messages; `infer: false` stores each as a memory as written.",
)
LIST = _object(
    ["user_id"],
    {
        "user_id": USER_ID,
        "filters": _FILTERS,
    },
    "mem0's get_all: the user (`user_id`, or in `filters`), a page of its memories.",
)
SEARCH = _object(
    ["user_id", "query"],
    {
        "user_id": USER_ID,
        "query": _TEXT,
        "filters": _FILTERS,
        "top_k": {"type": "integer", "minimum": 1, "maximum": MAX_TOP_K},
        "threshold": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "mem0's search: the user (`user_id`, or in `filters`) and the query.",
)


def _batch(item: list[str], description: str) -> BodyKwarg:
    properties = {"memory_id": MEMORY_ID, "text": _TEXT}
    return _object(
        ["memories"],
        {
            "memories": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_BATCH_ITEMS,
                "items": {
                    "type": "object",
                    "required": item,
                    "properties": {k: properties[k] for k in item},
                    "additionalProperties": False,
                },
            }
        },
        description,
    )


BATCH_UPDATE = _batch(["memory_id", "text"], "mem0's batch update: each memory's new text.")
BATCH_DELETE = _batch(["memory_id"], "mem0's batch delete: the memories by id.")
UPDATE = _object(
    ["text"],
    {"text": _TEXT},
    "mem0's update: the memory's new text (`metadata` beside it is taken too).",
)
