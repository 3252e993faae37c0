"""The answer guard alone: what it accepts, what it rejects and why."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime

import pytest

from app.ingest.context import identify_speaker, message_context
from app.ingest.domain import Candidate, IncomingMessage
from app.ingest.guard import AnswerGuard, InvalidAnswer, repeats_prompt
from app.ingest.prompt import INSTRUCTIONS
from app.vocabulary import SEED_CATEGORIES

SENT = datetime(2023, 5, 8, 12, tzinfo=UTC)
TOKYO = Candidate(
    ref="m1",
    memory_id=uuid.uuid4(),
    content="Lives in Tokyo",
    category="personal_details",
    scope="USER",
    session_id=None,
    event_time=None,
    similarity=0.8,
)


def _guard(session_id: str | None = None, text: str = "I moved to Osaka") -> AnswerGuard:
    said = IncomingMessage(content=text, sent_at=SENT, session_id=session_id)
    context = message_context("u1", None, said, scope=None)
    return AnswerGuard(context, [TOKYO], SEED_CATEGORIES, max_content_chars=200)


def _answer(*ops: dict) -> str:
    return json.dumps({"operations": list(ops)})


def test_a_valid_update_resolves_its_target_and_leaves_the_category_alone() -> None:
    (op,) = _guard().parse(_answer({"op": "update", "target": "m1", "content": "Lives in Osaka"}))
    assert op.op == "UPDATE" and op.target is TOKYO
    # No category in the answer: the memory keeps its own (app/ingest/apply.py).
    assert op.category is None and op.scope == "USER"


def test_a_target_may_be_the_shown_memory_id_and_fences_are_tolerated() -> None:
    raw = "```json\n" + _answer({"op": "DELETE", "target": str(TOKYO.memory_id), "reason": "x"})
    (op,) = _guard().parse(raw + "\n```")
    assert op.target is TOKYO


def test_event_time_is_parsed_and_unknown_keys_ignored() -> None:
    (op,) = _guard().parse(
        _answer(
            {
                "op": "ADD",
                "content": "Moved to Osaka",
                "category": "personal_details",
                "event_time": "2023-05-01",
                "confidence": 0.9,
            }
        )
    )
    assert op.event_time == datetime(2023, 5, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("[]", "expected an object"),
        (json.dumps({"operations": "ADD"}), "expected an object"),
        (_answer({"content": "x"}), "'op' is required"),
        (_answer({"op": "MERGE"}), "unknown op"),
        (_answer({"op": "UPDATE", "content": "x"}), "'target' is required"),
        (_answer({"op": "UPDATE", "target": "m2", "content": "x"}), "not one of the memories"),
        (_answer({"op": "ADD", "content": "x", "category": "pets"}), "unknown category"),
        (_answer({"op": "ADD", "content": "x"}), "'category' is required"),
        (_answer({"op": "ADD", "content": 7, "category": "travel"}), "must be a string"),
        (_answer({"op": "DELETE", "target": "m1", "reason": " "}), "'reason' is required"),
        (
            _answer({"op": "ADD", "content": "x", "category": "travel", "scope": "CONTEXT"}),
            "needs a session",
        ),
        (_answer({"op": "ADD", "content": "y" * 201, "category": "travel"}), "longer than"),
        (
            _answer({"op": "ADD", "content": "x", "category": "travel", "event_time": "soon"}),
            "not an ISO 8601 date",
        ),
        (
            _answer(
                {"op": "DELETE", "target": "m1", "reason": "a"},
                {"op": "NONE", "target": "m1"},
            ),
            "same target",
        ),
    ],
)
def test_invalid_answers_are_rejected_with_a_reason(answer: str, reason: str) -> None:
    with pytest.raises(InvalidAnswer, match=reason):
        _guard().parse(answer)


def test_prompt_echo_is_detected_but_ordinary_facts_pass() -> None:
    assert repeats_prompt(INSTRUCTIONS.splitlines()[2], "I moved to Osaka")
    assert repeats_prompt("Existing memories: [m1] Lives in Tokyo", "I moved to Osaka")
    assert not repeats_prompt("Lives in Osaka since May 2023", "I moved to Osaka")
    # The user's own words are never an echo, even when they overlap the instructions.
    quoted = "decide which operations keep the memory correct and return them"
    assert not repeats_prompt(quoted, f"My boss asked me to {quoted}")


def test_speaker_comes_from_the_field_or_an_inline_prefix() -> None:
    assert identify_speaker("Ana", "Caroline: hi there") == "Ana"
    assert identify_speaker(None, "Caroline: I went to a support group") == "Caroline"
    assert identify_speaker(None, "note: buy milk") is None
    assert identify_speaker(None, "I went home") is None


def test_a_reference_in_capitals_or_brackets_names_the_memory_shown() -> None:
    for ref in ("M1", "[m1]", "[M1]"):
        (op,) = _guard().parse(_answer({"op": "DELETE", "target": ref, "reason": "moved"}))
        assert op.target is TOKYO
