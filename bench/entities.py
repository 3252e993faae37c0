"""The NER model's cost on the write path: the write path's model work with and without the
entity worker's, in one run.

    python -m bench.entities [--turns 300] [--rounds 2]

On LoCoMo turns ("Speaker: text", the memories the LoCoMo benchmark writes):

1. embed: the configured embedding model's batched texts/s in this process (the physical limit
   of batch create; bench/ingestion.py's `raw`);
2. ner: the entity worker's model (app/ml/ner.py) alone, texts/s;
3. inline: what batch create would keep if each write ran the NER model itself, computed from
   1 and 2: embed time / (embed time + ner time);
4. beside: embedding while a thread runs the NER model non-stop over the same turns (the entity
   worker at its busiest, never waiting for an idle model), against embedding alone: rounds
   alternate, the ratio is of their medians.

The service's worker waits until the embedding models have been idle for 1 s
(app/memories/entities.py), so under a steady stream of writes it takes none of their time;
4 is the bound for bursts. Prints numbers; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

from app.ml.ner import EntityRecognizer
from bench.foundation import locomo_turns_and_questions
from bench.ingestion import raw_throughput


def ner_throughput(recognizer: EntityRecognizer, turns: list[str]) -> float:
    recognizer.extract(turns[:32])  # load and warm up
    started = time.perf_counter()
    recognizer.extract(turns)
    return len(turns) / (time.perf_counter() - started)


def embed_beside_ner(recognizer: EntityRecognizer, turns: list[str], batch: int) -> float:
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            recognizer.extract(turns[:64])

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    try:
        return raw_throughput(turns, batch)
    finally:
        stop.set()
        thread.join()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="forward batch of the embedder")
    args = parser.parse_args()
    turns, _ = locomo_turns_and_questions(args.turns)
    recognizer = EntityRecognizer()
    ner = ner_throughput(recognizer, turns)
    alone, beside = [], []
    for round_number in range(args.rounds):
        alone.append(raw_throughput(turns, args.batch))
        beside.append(embed_beside_ner(recognizer, turns, args.batch))
        print(
            f"round {round_number + 1}: embed alone {alone[-1]:.1f} texts/s, "
            f"beside the NER model {beside[-1]:.1f} texts/s",
            flush=True,
        )
    embed = statistics.median(alone)
    inline = (1 / embed) / (1 / embed + 1 / ner)
    print(f"turns: {len(turns)}")
    print(f"embed (alone):        {embed:8.1f} texts/s")
    print(f"ner (alone):          {ner:8.1f} texts/s  ({1000 / ner:.2f} ms a memory)")
    print(f"inline NER would keep {inline:8.3f} of batch create's model throughput")
    print(
        f"beside a busy worker: {statistics.median(beside):8.1f} texts/s "
        f"({statistics.median(beside) / embed:.3f} of alone)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
