"""Language detection on short chat turns: accuracy per language and time per turn.

    python -m bench.language_detection [--langid]

Measures app.ml.language.detect_language (the service's detector: lingua over
app.vocabulary.LANGUAGES, kana read as Japanese) on bench/data/language_turns.tsv, chat turns
written for this project (one word to one sentence; some Japanese are kanji-only, some mix in
English words). With --langid, langid.py (if installed) over the same candidate languages, for
comparison. Prints numbers and the misses; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from app.ml.language import detect_language, warm_up
from app.vocabulary import LANGUAGES

TURNS_PATH = Path(__file__).parent / "data" / "language_turns.tsv"


def load_turns(path: Path = TURNS_PATH) -> list[tuple[str, str]]:
    """(language, text) pairs; lines starting with # are comments."""
    rows = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            language, text = line.split("\t", 1)
            rows.append((language, text))
    return rows


def measure(name: str, detect: Callable[[str], str | None], turns: list[tuple[str, str]]) -> None:
    right: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    misses = []
    started = time.perf_counter()
    for language, text in turns:
        found = detect(text)
        seen[language] += 1
        if found == language:
            right[language] += 1
        else:
            misses.append((language, found, text))
    per_turn_ms = (time.perf_counter() - started) / len(turns) * 1000
    total = sum(right.values())
    share = total / len(turns)
    print(f"{name}: {total}/{len(turns)} right ({share:.3f}), {per_turn_ms:.2f} ms a turn")
    print("  " + ", ".join(f"{lang} {right[lang]}/{seen[lang]}" for lang in seen))
    for language, found, text in misses:
        print(f"  miss: {language} read as {found}: {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--langid", action="store_true", help="also measure langid.py")
    args = parser.parse_args()
    turns = load_turns()
    started = time.perf_counter()
    warm_up()
    print(f"lingua models loaded in {time.perf_counter() - started:.2f} s")
    measure("detect_language (lingua)", detect_language, turns)
    if args.langid:
        import langid  # type: ignore[import-not-found]

        langid.set_languages(list(LANGUAGES))
        measure("langid.py", lambda text: str(langid.classify(text)[0]), turns)


if __name__ == "__main__":
    main()
