"""Corrections without an LLM: explicit correction and retraction intents in a user message.

Without an LLM (or when its answer falls back), every user message would be a new memory, so
"please forget that I'm vegetarian" would leave "I'm vegetarian" current. Here a message's own
syntax says when it corrects or retracts something the user said before:

- retraction (DELETE): "forget that I …", "I no longer …", "I'm not … anymore",
  "I don't … anymore", "it's no longer true that I …", "I … — that's no longer true";
- correction (UPDATE): "actually, I …" / "correction: my …", and, for facts a person has one of
  at a time (where they live, where or as what they work), "I moved to …", "I now live in …",
  "I work at … now".

The intent names a claim in the first person ("I am vegetarian", "I live in Osaka"). Its target
is the one current memory, among those shown to the extractor, that says the same kind of thing
as the claim and nothing else (one clause, the same subject and predicate), and is at least
`threshold` cosine-similar to it, said by the message's speaker. A retraction's target also
contains every content word of the claim; a correction's says something different, not just
less. Anything else (a question, someone else's fact, a pronoun with no subject, "also", a
memory of two facts, no such memory, two that fit) is no intent or no target: the message
stays an ADD. English only; the rules come from English syntax alone
(bench/corrections.py measures them on a set written for this project).

The syntax is app/ingest/correction_rules.py (`detect_intent`); the words and frames it and the
target-finding here both read are app/ingest/claims.py. This module finds the target.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from uuid import UUID

from app.ingest.claims import frame_of, memory_frames, says_claim
from app.ingest.correction_rules import Intent, detect_intent
from app.ingest.domain import Candidate

__all__ = ["Correction", "Intent", "detect_intent", "find_target", "frame_of", "memory_frames"]


@dataclass(frozen=True, slots=True)
class Correction:
    intent: Intent
    target: Candidate
    similarity: float

    @property
    def reason(self) -> str:
        return (
            f"correction without an LLM: rule {self.intent.rule!r}, cosine "
            f"{self.similarity:.3f} to the memory"
        )


def find_target(
    intent: Intent,
    candidates: list[Candidate],
    similarities: Mapping[UUID, float],
    threshold: float,
    speaker: str | None = None,
) -> Correction | None:
    """The one current memory the intent is about (see the module docstring), else None.
    `similarities`: each candidate's cosine to the claim; `speaker`: the message's (a memory
    another speaker said is about someone else, whatever its words)."""
    claim_frame = frame_of(intent.claim)
    if claim_frame is None:
        return None
    eligible = []
    for candidate in candidates:
        similarity = similarities.get(candidate.memory_id)
        if similarity is None or candidate.speaker != speaker:
            continue
        frames = memory_frames(candidate.content)
        if frames != [claim_frame]:
            continue
        if intent.claim_is_held and not says_claim(intent.claim, candidate.content):
            continue
        if intent.content is not None and (
            says_claim(intent.content, candidate.content)
            or says_claim(candidate.content, intent.content)
        ):
            continue  # says it already, or the message adds to it: nothing to correct
        eligible.append((similarity, candidate))
    eligible.sort(key=lambda pair: pair[0], reverse=True)
    if not eligible or eligible[0][0] < threshold:
        return None
    if len(eligible) > 1 and eligible[1][0] >= threshold:
        return None  # two memories fit: which one is meant is not certain
    similarity, target = eligible[0]
    return Correction(intent, target, similarity)
