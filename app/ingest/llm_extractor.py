"""Step 3b with an LLM: ask for operations, judge the answer, retry once, else fall back.

The message is never dropped: whatever the LLM does (time out, answer garbage, point at a memory
it was not shown), the deterministic extractor decides instead and the failure is recorded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable

import structlog

from app.ingest.domain import Candidate, Extraction, MessageContext
from app.ingest.guard import AnswerGuard, InvalidAnswer
from app.ingest.prompt import PROMPT_VERSION, chat_messages, operation_schema
from app.llm.client import ChatClient, LLMError
from app.metrics import LLM_ANSWERS, LLM_FALLBACKS

log = structlog.get_logger(__name__)

# One retry after an invalid answer, with the reason fed back; then the fallback.
ANSWER_ATTEMPTS = 2
Fallback = Callable[[], Awaitable[Extraction]]


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def extract_with_llm(
    client: ChatClient,
    context: MessageContext,
    candidates: list[Candidate],
    categories: tuple[str, ...],
    max_content_chars: int,
    fallback: Fallback,
) -> Extraction:
    guard = AnswerGuard(context, candidates, categories, max_content_chars)
    messages = chat_messages(context, candidates, categories)
    schema = operation_schema(categories)
    failures: list[str] = []
    raw_hash: str | None = None
    latency_ms = 0.0
    cause = "invalid_answer"
    for attempt in range(1, ANSWER_ATTEMPTS + 1):
        try:
            completion = await client.complete_json(messages, schema)
        except LLMError as exc:
            failures.append(f"attempt {attempt}: LLM unavailable: {exc}")
            cause = "unavailable"
            break  # transport retries already happened inside the client
        latency_ms += completion.latency_ms
        raw_hash = _sha256(completion.content)
        try:
            if completion.finish_reason == "length":
                # Seen with small local models: a repetition loop runs into max_tokens, and the
                # schema grammar cannot close what was cut off.
                raise InvalidAnswer(
                    "the answer was cut off at the token limit; keep each content to one short "
                    "sentence and give no more operations than the message needs"
                )
            operations = guard.parse(completion.content)
        except InvalidAnswer as exc:
            LLM_ANSWERS.labels(verdict="rejected").inc()
            failures.append(f"attempt {attempt}: invalid answer: {exc}")
            messages = [
                *messages,
                {"role": "assistant", "content": completion.content[:4000]},
                {
                    "role": "user",
                    "content": f"That answer was rejected: {exc}. Answer again with valid JSON "
                    "that follows the rules.",
                },
            ]
            continue
        LLM_ANSWERS.labels(verdict="accepted").inc()
        return Extraction(
            operations=operations,
            extractor="llm",
            model=completion.model,
            raw_answer_sha256=raw_hash,
            latency_ms=latency_ms,
            failure="; ".join(failures) or None,
            prompt_version=PROMPT_VERSION,
        )
    LLM_FALLBACKS.labels(cause=cause).inc()
    log.warning(
        "ingest.llm_fallback",
        user_id=context.user_id,
        message_id=str(context.message_id),
        failures=failures,
    )
    extraction = await fallback()
    extraction.fallback_used = True
    extraction.failure = "; ".join(failures)[:4000]
    extraction.model = client.model
    extraction.raw_answer_sha256 = raw_hash
    extraction.latency_ms = latency_ms or None
    extraction.prompt_version = PROMPT_VERSION
    return extraction
