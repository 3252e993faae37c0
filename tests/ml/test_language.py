"""Language detection (app/ml/language.py) and the BM25 fields a query's language chooses
(app/search_index/client.py), without services."""

from __future__ import annotations

import pytest

from app.ml.language import detect_language
from app.search_index.text_query import OTHER_LANGUAGE_WEIGHT, language_fields, text_match


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("We bought a sailboat and keep it in Brighton", "en"),
        ("来週から大阪の支店で働きます", "ja"),
        # Kana make a Japanese sentence of one with English words in it.
        ("GitHubのActionsでデプロイしている", "ja"),
        ("我们周六去爬长城", "zh"),
        ("다음 주에 제주도에 가요", "ko"),
        ("Je commence un nouveau travail lundi", "fr"),
    ],
)
def test_short_turns_get_their_language(text: str, language: str) -> None:
    assert detect_language(text) == language


@pytest.mark.parametrize("text", ["👍", "12:30", "!!!", "   "])
def test_a_text_without_letters_has_no_language(text: str) -> None:
    assert detect_language(text) is None


def test_a_japanese_query_searches_kuromoji_first_and_bigrams_lower() -> None:
    assert language_fields("ja") == {"content.ja": 1.0, "content.cjk": OTHER_LANGUAGE_WEIGHT}
    # Chinese and Korean: bigrams first; never the single-character default analysis.
    assert language_fields("zh") == {"content.cjk": 1.0, "content.ja": OTHER_LANGUAGE_WEIGHT}
    assert "content" not in language_fields("ko")


def test_other_queries_search_the_default_analysis_as_before() -> None:
    assert language_fields("en") == language_fields(None) == {"content": 1.0}
    assert text_match("hiking boots", 0.0, "en") == {
        "match": {"content": {"query": "hiking boots"}}
    }
    with_context = text_match("hiking boots", 0.5, "en")["multi_match"]["fields"]
    assert with_context == ["content", "context^0.5"]
    japanese = text_match("金沢の市場", 0.5, "ja")["multi_match"]["fields"]
    assert japanese == ["content.ja", "content.cjk^0.3", "context.ja^0.5", "context.cjk^0.15"]
