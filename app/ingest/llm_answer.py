"""The LLM's answer for a message, asked with no transaction open (issue 56, item 3).

An LLM answers in seconds. Asked inside the transaction that applies the message, it kept a
session "idle in transaction" for as long, pinning the vacuum horizon and queueing any ALTER
TABLE (and every reader after it) behind the worker. So the LLM is asked first: the message's
candidates are read in a short transaction of their own, the LLM is asked about them with none
open, and the answer is kept with what it was shown. The transaction that applies the message
reads the candidates again and uses the answer only if they are the ones it was shown (the
same memories, in the same order, with the same texts); otherwise the answer is stale
(`StaleAnswer`: an earlier message of the batch, or an API write, changed them meanwhile), the
transaction rolls back, and the LLM is asked again. After a few stale answers the message is
decided by the deterministic extractor, recorded as a fallback, as when the LLM is away.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from app.ingest.domain import Candidate, Extraction
from app.ingest.gate import GateVerdict
from app.ml.embedder import Embedding

# What an answer was asked about: each candidate's reference, memory and text, in order.
Shown = tuple[tuple[str, uuid.UUID, str], ...]


class StaleAnswer(Exception):
    """The memories the LLM's answer was asked about changed before the answer was applied."""


def shown(candidates: list[Candidate]) -> Shown:
    return tuple((c.ref, c.memory_id, c.content) for c in candidates)


@dataclass(frozen=True, slots=True)
class LlmAnswer:
    """The gate's verdict and, when it called the LLM, the extraction it answered (or the
    fallback it needs: `fallback_used`), for the candidates in `shown`; None there: for any
    candidates (the LLM's answers kept going stale, so the deterministic extractor decides)."""

    shown: Shown | None
    verdict: GateVerdict
    extraction: Extraction | None
    # The vectors of the texts the LLM answered (an ADD's or UPDATE's content), embedded
    # with the answer so the transaction makes no model call either.
    vectors: dict[str, Embedding] = field(default_factory=dict)

    def check(self, candidates: list[Candidate]) -> None:
        if self.shown is not None and self.shown != shown(candidates):
            raise StaleAnswer("the message's candidate memories changed while the LLM answered")

    def gave_up(self, attempts: int) -> LlmAnswer:
        """This answer's verdict, for the deterministic extractor: after `attempts` stale
        answers the message is decided without the LLM, as a recorded fallback."""
        failure = Extraction(operations=[], extractor="deterministic", fallback_used=True)
        failure.failure = (
            f"the candidate memories changed while the LLM answered, {attempts} times in a row"
        )
        return LlmAnswer(None, self.verdict, failure)


async def deferred() -> Extraction:
    """The fallback extract_with_llm is given when asked outside a transaction: an empty
    extraction that it marks `fallback_used`; the deterministic extractor's decision replaces
    it in the transaction (carry_fallback)."""
    return Extraction(operations=[], extractor="deterministic")


def carry_fallback(answered: Extraction, decided: Extraction) -> Extraction:
    """The deterministic extractor's `decided`, with the record of why the LLM's answer was not
    used (`answered`'s failure, model, answer hash, latency, prompt)."""
    decided.fallback_used = True
    decided.failure = answered.failure
    decided.model = answered.model
    decided.raw_answer_sha256 = answered.raw_answer_sha256
    decided.latency_ms = answered.latency_ms
    decided.prompt_version = answered.prompt_version
    return decided
