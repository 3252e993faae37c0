"""History intent in Japanese questions (stage 1; pure Python)."""

# ruff: noqa: RUF001 (Japanese questions end in a full-width question mark)

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.retrieval.query_analysis import analyze_query

AS_OF = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "query",
    [
        "以前はどこに住んでいましたか",
        "前はどこで働いていた？",
        "昔はどんな車に乗っていた",
        "かつて飼っていたペットは",
        "もともと何の仕事をしていた",
        "最初は何を勉強していたっけ",
        "大阪に引っ越す前はどこにいた",
        "前の会社はどこ",
        "名古屋に住んでいたのはいつ",
        "使ってたエディタは何",
        "もうテニスはしていない？",
        "趣味は変わった？",
        "電話番号を変更したっけ",
        "これまでに住んだ街",
        "転職する前の給料は",
        "私は何と言っていた？",
    ],
)  # fmt: skip
def test_history_questions(query: str) -> None:
    analysis = analyze_query(query, AS_OF)
    assert analysis.history, query
    assert analysis.history_terms


@pytest.mark.parametrize(
    "query",
    [
        "どこに住んでいる？",
        "名前は何ですか",  # 名前 is a name, not "before"
        "午前中は何をする",  # 午前 is the morning
        "駅前のカフェはどこ",  # 駅前 is in front of the station
        "3日前に何を食べた",  # a time, not an earlier state
        "犬を飼っている？",
        "子供を育てた場所は",  # 育てた ends in てた without being a past progressive
        "今の仕事は何",
        "好きな食べ物は",
    ],
)  # fmt: skip
def test_current_questions(query: str) -> None:
    assert not analyze_query(query, AS_OF).history, analyze_query(query, AS_OF).history_terms
