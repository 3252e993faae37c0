"""Lever newer_first's detector, without services (its own command, not a test): how often it
fires and how fast it is (app/retrieval/disagreement.py, docs/benchmarks/newer-first.md).

1. The supersedes pairs (bench/data/supersedes/): each (memory, newer message) pair read as two
   current memories; precision and recall of "contradicts" against the pairs labelled as the
   message superseding the memory.
2. LoCoMo (../shared/data, as bench/locomo.py writes it: one memory a turn, with its speaker
   and session time): every turn of each conversation against every other, which covers every
   user bench/locomo.py and bench/small_users.py make. Marks found here are the only places the
   lever can change those benches' order.
3. Time of the detector over a head of n memories, cold (claims read) and warm (cached).

    .venv/bin/python -m bench.newer_first
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from app.retrieval.disagreement import Stated, later_of
from app.retrieval.fact_claims import claims_of
from bench.locomo import load_conversations

PAIRS = Path(__file__).resolve().parent / "data" / "supersedes"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def pairs(name: str) -> None:
    found = right = wanted = 0
    for line in (PAIRS / name).read_text().splitlines():
        row = json.loads(line)
        for index, memory in enumerate(row["memories"]):
            older = Stated(uuid.uuid4(), memory, None, T0, T0)
            newer = Stated(uuid.uuid4(), row["message"], None, T0 + timedelta(days=9), T0)
            said, truth = bool(later_of([older, newer])), row["target"] == index
            found, right, wanted = found + said, right + (said and truth), wanted + truth
    print(
        f"{name}: {wanted} superseding pairs, {found} marked, precision "
        f"{right / max(found, 1):.3f}, recall {right / max(wanted, 1):.3f}"
    )


def locomo() -> None:
    turns = marked = 0
    for conversation in load_conversations(None):
        memories = [
            Stated(
                uuid.uuid4(),
                turn["content"],
                turn["speaker"],
                datetime.fromisoformat(turn["event_time"]),
                datetime.fromisoformat(turn["event_time"]),
            )
            for turn in conversation.turns
        ]
        turns, marked = turns + len(memories), marked + len(later_of(memories))
    print(f"LoCoMo: {turns} turns, {marked} marked earlier")


def timing() -> None:
    texts = [
        json.loads(line)["message"] for line in (PAIRS / "train.jsonl").read_text().splitlines()
    ]
    for n in (10, 20, 40):
        memories = [
            Stated(uuid.uuid4(), text, "Ann", T0 + timedelta(hours=i), T0)
            for i, text in enumerate(texts[:n])
        ]
        cold = warm = 0.0
        for _ in range(30):
            claims_of.cache_clear()
            start = time.perf_counter()
            later_of(memories)
            cold += time.perf_counter() - start
            start = time.perf_counter()
            later_of(memories)
            warm += time.perf_counter() - start
        print(f"{n} memories: {cold / 30 * 1000:.2f} ms cold, {warm / 30 * 1000:.3f} ms warm")


if __name__ == "__main__":
    for name in ("heldout.jsonl", "heldout2.jsonl", "train.jsonl"):
        pairs(name)
    locomo()
    timing()
