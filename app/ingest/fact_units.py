"""Step 3's first cut without an LLM: which parts of a user message are facts to remember.

A chat turn is rarely one fact: "Hi! Could you recommend a running app? We just moved to
Valencia, so I need new routes." holds a greeting, a request and one fact. The message is cut
into units, each exactly as said (app/ingest/facts.py, `fact_units`), and the learned fact
model scores each (P(fact), from the unit's 768D vector and a few cue words); a unit at or
above the model's threshold becomes a fact of its own, decided against the user's memories
like a message of one sentence, and the others stay in the message (a NONE in its job, with
the score). Each unit's vector is the one the worker embedded in its claim's model call
(`texts_to_prefetch`), or the message's own when the message is one unit, so this costs no
model call of its own.

It judges only what the model can read: English text (a Japanese message stays one memory:
its vectors come from another embedder) and the embedder the model was trained on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from app.ingest.domain import MessageContext, Operation
from app.ingest.facts import JAPANESE, FactJudgement, FactModel, fact_units, shipped_fact_model
from app.ml.embedder import Embedding
from app.time_expressions import resolve_time_expressions


@dataclass(frozen=True, slots=True)
class Unit:
    """A part of the message as said, its vector, and the fact model's verdict."""

    judgement: FactJudgement
    embedding: Embedding

    @property
    def text(self) -> str:
        return self.judgement.unit

    @property
    def is_fact(self) -> bool:
        return self.judgement.is_fact

    @property
    def reason(self) -> str:
        return self.judgement.reason

    def not_kept(self) -> Operation:
        """The NONE that records a unit the message keeps and the memories do not."""
        return Operation(op="NONE", content=self.text, reason=self.reason)


def judged_here(content: str, embedding_model: str) -> FactModel | None:
    """The fact model, where it can judge this message (English, the embedder it reads)."""
    if JAPANESE.search(content):
        return None
    model = shipped_fact_model()
    return model if model.reads(embedding_model) else None


def units_to_embed(content: str) -> list[str]:
    """The units whose vectors the fact model needs besides the message's own (for a message
    `judged_here`)."""
    units = fact_units(content)
    return [] if units == [content.strip()] else units


def judge_units(
    content: str,
    message_embedding: Embedding,
    vectors: Mapping[str, Embedding],
    model: FactModel,
) -> list[Unit]:
    """Every unit of the message with the model's score; `vectors` holds each unit's."""
    units = fact_units(content)
    embeddings = [message_embedding if unit == content.strip() else vectors[unit] for unit in units]
    judgements = model.judge(units, np.stack([e.full for e in embeddings]))
    return [
        Unit(judgement, embedding)
        for judgement, embedding in zip(judgements, embeddings, strict=True)
    ]


def fact_context(context: MessageContext, unit: Unit) -> MessageContext:
    """The message as if it had said this fact alone: its text, vector and time expressions
    (a fact is dated by its own words, else by when the message was said)."""
    if unit.text == context.content.strip():
        return context
    return replace(
        context,
        content=unit.text,
        embedding=unit.embedding,
        windows=resolve_time_expressions(unit.text, context.sent_at),
    )
