"""The chat bench's rules (bench/chat_scoring.py) on answers written here, and its data checked
by its own loader: no service, so `make test-fast` runs them."""

from __future__ import annotations

from typing import Any

import pytest

from bench.chat_scoring import (
    SPLITS,
    ChatUser,
    Question,
    UpdateCase,
    UpdateTally,
    context_right,
    load_chat_users,
    load_update_cases,
    marked_earlier,
    score_search,
    score_update,
)
from bench.chat_scoring import _check_case as check_case
from bench.chat_scoring import _check_user as check_user

MOVE = Question("Where does the user live?", ("Harrogate",), ("flat in Leeds",))


def hit(content: str, **fields: Any) -> dict[str, Any]:
    memory = {"content": content, "is_current": True, **fields.pop("memory", {})}
    return {"memory": memory, "history_of": None, "superseded": False, **fields}


def test_hit_at_1_and_3_count_the_first_hit_stating_the_current_fact() -> None:
    first = score_search([hit("We rent a house in HARROGATE now"), hit("other")], MOVE)
    third = score_search([hit("a"), hit("b"), hit("Harrogate it is")], MOVE)
    fourth = score_search([hit("a"), hit("b"), hit("c"), hit("Harrogate")], MOVE)
    assert (first.hit1, first.hit3) == (True, True)
    assert (third.hit1, third.hit3) == (False, True)
    assert (fourth.hit1, fourth.hit3) == (False, False)


def test_an_unmarked_replaced_fact_above_the_current_one_counts() -> None:
    above = score_search([hit("heating in our flat in Leeds"), hit("Harrogate")], MOVE)
    below = score_search([hit("Harrogate"), hit("our flat in Leeds")], MOVE)
    missing = score_search([hit("our flat in Leeds")], MOVE)
    assert above.replaced_above and not above.hit1
    assert below.replaced_above is False
    assert missing.replaced_above  # the current fact is not found at all


def test_a_replaced_fact_marked_earlier_does_not_count_and_is_no_hit() -> None:
    for marked in (
        hit("our flat in Leeds", earlier=True),
        hit("our flat in Leeds", superseded=True),
        hit("our flat in Leeds", memory={"is_current": False}),
        hit("our flat in Leeds", memory={"status": "Earlier"}),
        hit("our flat in Leeds", replaced_by="3fa85f64"),
    ):
        assert marked_earlier(marked)
        assert score_search([marked, hit("Harrogate")], MOVE).replaced_above is False
    # a marked hit stating the current fact is not the current fact
    assert not score_search([hit("Harrogate", earlier=True)], MOVE).hit1
    # history entries shown beside their memory are left out of the ranking
    history = hit("our flat in Leeds", history_of="3fa85f64")
    assert score_search([history, hit("Harrogate")], MOVE).hit1


def test_a_question_whose_fact_never_changed_has_no_replaced_count() -> None:
    question = Question("What food does she dislike?", ("mushrooms",))
    assert score_search([hit("no mushrooms please")], question).replaced_above is None


def test_the_context_block_must_state_the_current_fact_and_the_replaced_only_as_replaced() -> None:
    header = "What you know about the user (as of 2026-04-01):\n\nRelevant to the request:\n"
    changed = header + "- [2026-03-23] (personal) Harrogate now (changed from: our flat in Leeds)\n"
    both = (
        header
        + "- [2026-01-06] (personal) our flat in Leeds\n- [2026-03-23] (personal) Harrogate\n"
    )
    earlier = header + "- Harrogate\n- earlier: the heating in our flat in Leeds\n"
    absent = header + "- [2026-03-23] (personal) Harrogate\n"
    only_old = header + "- our flat in Leeds\n"
    old_as_current = header + "- [earlier] Harrogate\n"
    assert context_right(changed, MOVE)
    assert not context_right(both, MOVE)
    assert context_right(earlier, MOVE)
    assert context_right(absent, MOVE)
    assert not context_right(only_old, MOVE)
    assert not context_right(old_as_current, MOVE)
    assert not context_right("", MOVE)


CASE = UpdateCase(
    "u1",
    "dev",
    ["I live in Rotterdam and work as a dental hygienist.", "My sister is a pilot."],
    "We relocated to Utrecht last month.",
    "Rotterdam",
    ("dental hygienist", "sister is a pilot"),
)


def memory(version: str, content: str) -> dict[str, Any]:
    return {"version_id": version, "content": content}


def test_an_update_that_ends_the_whole_message_loses_its_other_fact() -> None:
    before = [memory("v1", CASE.earlier[0]), memory("v2", CASE.earlier[1])]
    after = [memory("v3", CASE.message), memory("v2", CASE.earlier[1])]
    score = score_update(CASE, before, after)
    assert score.superseded and (score.ended, score.ended_right) == (1, 1)
    assert score.kept_lost == ["dental hygienist"]


def test_an_update_of_one_fact_alone_is_right_and_an_addition_ends_nothing() -> None:
    before = [memory("v1", "I live in Rotterdam"), memory("v2", "I work as a dental hygienist"),
              memory("v4", "My sister is a pilot.")]  # fmt: skip
    after = [memory("v3", "We relocated to Utrecht"), *before[1:]]
    right = score_update(CASE, before, after)
    missed = score_update(CASE, before, before)
    wrong = score_update(CASE, before, [before[0], before[1], memory("v5", "Utrecht")])
    tally = UpdateTally()
    for score in (right, missed, wrong):
        tally.add(score)
    assert right.superseded and not right.kept_lost and right.ended_right == 1
    assert not missed.superseded and missed.ended == 0
    assert wrong.ended == 1 and wrong.ended_right == 0 and wrong.kept_lost == ["sister is a pilot"]
    assert (tally.recall, tally.precision, tally.kept_lost) == (pytest.approx(1 / 3), 0.5, 1)


def test_the_data_obeys_its_own_rules_and_has_the_sizes_the_issue_asks() -> None:
    users = {split: load_chat_users(split) for split in SPLITS}
    cases = {split: load_update_cases(split) for split in SPLITS}
    assert len(users["dev"]) + len(users["heldout"]) >= 40 and len(users["heldout"]) >= 16
    assert all(2 <= len(u.questions) <= 4 for split in users.values() for u in split)
    assert sum(len(split) for split in cases.values()) >= 60
    names = [u.name for split in users.values() for u in split]
    assert len(names) == len(set(names))


def test_the_loaders_refuse_a_question_its_turns_do_not_support() -> None:
    turns = [{"content": f"turn {n}", "timestamp": "2026-01-01T09:00:00+01:00"} for n in range(6)]
    turns[1]["content"] = "We moved out of Leeds into Harrogate"
    with pytest.raises(ValueError, match="both"):
        check_user(ChatUser("x", "dev", turns, [Question("q", ("Harrogate",), ("Leeds",))]))
    turns[1]["content"] = "Harrogate"
    turns[4]["content"] = "Leeds"
    with pytest.raises(ValueError, match="after"):
        check_user(ChatUser("x", "dev", turns, [Question("q", ("Harrogate",), ("Leeds",))]))
    with pytest.raises(ValueError, match="new message"):
        check_case(UpdateCase("x", "dev", ["I live in Leeds"], "Leeds was grey", "Leeds", ()))
