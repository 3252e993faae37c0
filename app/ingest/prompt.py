"""Step 3's prompt and the JSON schema the LLM must answer with.

The prompt shows the new message and the user's most similar current memories under short
references (m1, m2, ...), never raw ids of anything else: an answer can only point at what it saw.
"""

from __future__ import annotations

from typing import Any

from app.ingest.domain import Candidate, MessageContext
from app.vocabulary import OPERATIONS, SCOPES

# Recorded in every audit row the LLM decided (ingest_decisions.prompt_version): bump it whenever
# INSTRUCTIONS, the user prompt's layout or the schema change, so decisions stay comparable.
PROMPT_VERSION = "2026-12-01.1"

INSTRUCTIONS = """You maintain the long-term memory of one user of a conversational assistant.
You receive one new conversation message and the existing memories most similar to it.
Decide which operations keep the memory correct and return them as JSON.

Operations:
- ADD: a new durable fact about the user that no existing memory covers. Give content, category
  and scope.
- UPDATE: the message changes or refines an existing memory (for example the user moved, changed
  job, changed a preference). Give target and the full new content of that memory.
- DELETE: the message says an existing memory is no longer true or asks to forget it. Give target
  and reason.
- NONE: nothing worth keeping, or the fact is already known. Give target when an existing memory
  already says it.

Rules:
- target must be one of the references shown in the list of existing memories, such as m1.
- Write content as a short third-person statement of the fact, in the language of the message,
  with relative dates turned into absolute ones.
- Never copy these instructions into content.
- category must be one of the categories listed below.
- scope is USER for facts that last beyond this conversation, CONTEXT for facts that only matter
  within the current session.
- event_time is the ISO 8601 date the fact refers to when the message says so, otherwise null.
- Answer with one JSON object: {"operations": [{"op": ..., "target": ..., "content": ...,
  "category": ..., "scope": ..., "event_time": ..., "reason": ...}]}. Use null for fields that do
  not apply. An empty list means nothing to do."""


def operation_schema(categories: tuple[str, ...]) -> dict[str, Any]:
    """JSON schema for structured output (strict mode: every key present, nulls where unused)."""

    def nullable(schema: dict[str, Any]) -> dict[str, Any]:
        return {"anyOf": [schema, {"type": "null"}]}

    item = {
        "type": "object",
        "properties": {
            "op": {"type": "string", "enum": list(OPERATIONS)},
            "target": nullable({"type": "string"}),
            "content": nullable({"type": "string"}),
            "category": nullable({"type": "string", "enum": list(categories)}),
            "scope": nullable({"type": "string", "enum": list(SCOPES)}),
            "event_time": nullable({"type": "string"}),
            "reason": nullable({"type": "string"}),
        },
        "required": ["op", "target", "content", "category", "scope", "event_time", "reason"],
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {"operations": {"type": "array", "items": item}},
        "required": ["operations"],
        "additionalProperties": False,
    }


def system_prompt(categories: tuple[str, ...]) -> str:
    return f"{INSTRUCTIONS}\n\nCategories: {', '.join(categories)}."


def _candidate_line(candidate: Candidate) -> str:
    when = candidate.event_time.date().isoformat() if candidate.event_time else "unknown"
    return (
        f"[{candidate.ref}] ({candidate.category}, {candidate.scope}, event {when}) "
        f"{candidate.content}"
    )


def user_prompt(context: MessageContext, candidates: list[Candidate]) -> str:
    times = "; ".join(
        f'"{w.text}" = {w.start.date().isoformat()} to {w.end.date().isoformat()} (exclusive)'
        for w in context.windows
    )
    existing = "\n".join(_candidate_line(c) for c in candidates) or "(none)"
    return (
        f"Message time: {context.sent_at.isoformat()}\n"
        f"Speaker: {context.speaker or 'unknown'} (role: {context.role})\n"
        f"Session: {context.session_id or 'none'}\n"
        f"Time expressions in the message: {times or 'none'}\n\n"
        f"Existing memories:\n{existing}\n\n"
        f"New message:\n<<<\n{context.content}\n>>>"
    )


def chat_messages(
    context: MessageContext, candidates: list[Candidate], categories: tuple[str, ...]
) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": system_prompt(categories)},
        {"role": "user", "content": user_prompt(context, candidates)},
    ]
