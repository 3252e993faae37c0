"""The LLM as tie-breaker for the category classifier: asked only when the examples leave two
categories too close, and only to choose among the most likely few."""

from __future__ import annotations

import json

import structlog

from app.llm.client import ChatClient, LLMError
from app.ml.categories import CategoryJudge

log = structlog.get_logger(__name__)

INSTRUCTIONS = (
    "You file facts a user told an assistant under one category. Answer with JSON "
    '{"category": ...}, choosing exactly one of the categories offered.'
)


def llm_category_judge(client: ChatClient) -> CategoryJudge:
    async def judge(text: str, choices: list[str]) -> str | None:
        schema = {
            "type": "object",
            "properties": {"category": {"type": "string", "enum": choices}},
            "required": ["category"],
            "additionalProperties": False,
        }
        messages = [
            {"role": "system", "content": INSTRUCTIONS},
            {"role": "user", "content": f"Categories: {', '.join(choices)}\nFact: {text}"},
        ]
        try:
            completion = await client.complete_json(messages, schema)
            answer = json.loads(completion.content)
        except (LLMError, ValueError) as exc:
            log.warning("categories.judge_failed", error=str(exc)[:300])
            return None
        chosen = answer.get("category") if isinstance(answer, dict) else None
        # Untrusted like every answer: only one of the choices offered counts.
        return chosen if chosen in choices else None

    return judge
