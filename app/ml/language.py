"""The language of a memory's or a query's text: ISO 639-1, or None when the text gives none.

Lingua (lingua-language-detector: n-gram models of each language shipped in its wheel, written
for short and mixed text) chooses among app.vocabulary.LANGUAGES. On the project's short chat
turns (bench/language_detection.py) it names 96 % right, 48 of 50 English turns and 47 of 50
Japanese ones; the Japanese it misses are kanji-only (東京出張 is Chinese as well), which a
client can label itself (a memory's `language`).

The detector is built once per process, its models loaded at once (~0.4 ms a short text
afterwards, ~300 MB); `warm_up` builds it before the first request needs it.
"""

from __future__ import annotations

import functools
import re
from typing import TYPE_CHECKING

from app.vocabulary import LANGUAGES

if TYPE_CHECKING:
    from lingua import LanguageDetector

# Kana are written in Japanese alone: a text with any is Japanese, whatever else it holds
# ("Reactで作った" is a Japanese sentence about React), so no model need weigh it.
_KANA = re.compile(r"[\u3041-\u309f\u30a0-\u30ff\u31f0-\u31ff\uff66-\uff9d]")
# Nothing to tell a language by: digits, punctuation, symbols, emoji.
_LETTER = re.compile(r"[^\W\d_]")


@functools.cache
def _detector() -> LanguageDetector:
    from lingua import IsoCode639_1, LanguageDetectorBuilder

    codes = [getattr(IsoCode639_1, code.upper()) for code in LANGUAGES]
    return (
        LanguageDetectorBuilder.from_iso_codes_639_1(*codes)
        .with_preloaded_language_models()
        .build()
    )


def warm_up() -> None:
    """Load the models now (a second or two), not in the first write that needs them."""
    _detector()


def detect_language(text: str) -> str | None:
    """The ISO 639-1 code of the text's language, or None for a text without letters."""
    if _KANA.search(text):
        return "ja"
    if not _LETTER.search(text):
        return None
    language = _detector().detect_language_of(text)
    return None if language is None else language.iso_code_639_1.name.lower()
