"""Named-entity recognition on chat sentences: precision, recall, entities per sentence, texts/s.

    python -m bench.ner

Compares, on bench/data/ner_chat.tsv (50 chat sentences written for issue 43, with the names a
person would mark in each), the service's recognizer (app.ml.ner: spaCy's en_core_web_sm 3.8
with only tok2vec and ner), the same model with its whole pipeline (tagger, parser, lemmatizer
too: the cost of not excluding them), and the capitalised-run heuristic that retrieval's
`entities` lever uses on queries (app.retrieval.entities.query_entities). A found name counts
as right when it equals a marked one, case-insensitively. Speed: the 50 sentences 20 times
over, in batches of 64, one process. Prints numbers and the misses; asserts nothing.

Then the same on bench/data/ner_chat_ja.tsv (40 Japanese chat sentences written the same way):
the service's recognizer with the texts marked Japanese (GiNZA's ja_ginza with only tok2vec
and ner), ja_ginza's whole pipeline, and the English model that read Japanese memories before.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from app.ml.ner import JA_MODEL_PACKAGE, EntityRecognizer, ja_labels, mentions_of
from app.retrieval.entities import query_entities

DATA = Path(__file__).parent / "data" / "ner_chat.tsv"
DATA_JA = Path(__file__).parent / "data" / "ner_chat_ja.tsv"
ROUNDS = 20


def load(path: Path = DATA) -> list[tuple[str, set[str]]]:
    rows = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        sentence, _, marked = line.partition("\t")
        rows.append((sentence, {name.lower() for name in marked.split("|") if name}))
    return rows


def measure(name: str, extract: Callable[[list[str]], list[list[str]]], rows) -> None:
    texts = [sentence for sentence, _ in rows]
    extract(texts)  # load and warm up
    started = time.perf_counter()
    for _ in range(ROUNDS):
        found = extract(texts)
    rate = ROUNDS * len(texts) / (time.perf_counter() - started)
    right = total = marked = 0
    misses = []
    for (sentence, gold), names in zip(rows, found, strict=True):
        got = {n.lower() for n in names}
        right += len(got & gold)
        total += len(got)
        marked += len(gold)
        if got != gold:
            misses.append(f"    {sentence!r}: found {sorted(got)}, marked {sorted(gold)}")
    precision = right / total if total else 0.0
    recall = right / marked if marked else 0.0
    print(
        f"{name:32s} precision {precision:.3f}  recall {recall:.3f}  "
        f"entities/sentence {total / len(rows):.2f} (marked {marked / len(rows):.2f})  "
        f"{rate:7.0f} texts/s"
    )
    for miss in misses:
        print(miss)


def main() -> None:
    rows = load()
    recognizer = EntityRecognizer()
    print(f"{len(rows)} sentences, {ROUNDS} rounds for speed")
    measure(
        "spacy en_core_web_sm (ner only)",
        lambda texts: [[m.name for m in ms] for ms in recognizer.extract(texts)],
        rows,
    )
    import spacy

    full = spacy.load(recognizer.name)
    measure(
        "spacy en_core_web_sm (full)",
        lambda texts: [[m.name for m in mentions_of(d)] for d in full.pipe(texts, batch_size=64)],
        rows,
    )
    measure("capitalised runs (heuristic)", lambda texts: [query_entities(t) for t in texts], rows)

    rows = load(DATA_JA)
    print(f"\n{len(rows)} Japanese sentences, {ROUNDS} rounds for speed")
    started = time.perf_counter()
    recognizer.extract(["東京"], ["ja"])
    print(f"ja_ginza loaded (tok2vec and ner) in {time.perf_counter() - started:.1f} s")
    measure(
        "ginza ja_ginza (ner only)",
        lambda texts: [
            [m.name for m in ms] for ms in recognizer.extract(texts, ["ja"] * len(texts))
        ],
        rows,
    )
    full_ja, labels = spacy.load(JA_MODEL_PACKAGE), ja_labels()
    measure(
        "ginza ja_ginza (full)",
        lambda texts: [
            [m.name for m in mentions_of(d, labels)] for d in full_ja.pipe(texts, batch_size=64)
        ],
        rows,
    )
    measure(
        "spacy en_core_web_sm on Japanese",
        lambda texts: [[m.name for m in ms] for ms in recognizer.extract(texts)],
        rows,
    )


if __name__ == "__main__":
    main()
