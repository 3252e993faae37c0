"""The chain timeline's word diff and field changes (plain data, no services)."""

from __future__ import annotations

from types import SimpleNamespace

from app.console.diff import Span, field_changes, word_diff


def test_word_diff_marks_only_the_changed_words() -> None:
    spans = word_diff("I live in Tokyo now", "I live in Osaka now")
    assert spans == [
        Span("same", "I live in "),
        Span("del", "Tokyo"),
        Span("ins", "Osaka"),
        Span("same", " now"),
    ]
    assert "".join(s.text for s in spans if s.kind != "del") == "I live in Osaka now"
    assert word_diff("same", "same") == [Span("same", "same")]


def test_field_changes_lists_what_differs() -> None:
    fields = {"scope": "USER", "session_id": None, "speaker": "Ana", "event_time": None}
    old = SimpleNamespace(category="travel", **fields)
    new = SimpleNamespace(category="personal_details", **{**fields, "speaker": "Ana B."})
    assert field_changes(old, new) == [
        ("category", "travel", "personal_details"),
        ("speaker", "Ana", "Ana B."),
    ]
