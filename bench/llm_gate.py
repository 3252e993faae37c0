"""LLM gate benchmark: how many LoCoMo turns skip the LLM call, and what the gate lets through.

    python -m bench.llm_gate [--conversations 2] [--thresholds 0.2,0.3,0.4,0.5]
                             [--seconds-per-decision S]

1. Update pairs (bench/data/update_pairs.tsv, written for this project): an earlier memory and a
   later message that updates or contradicts it. For each threshold, the share of later
   messages whose similarity to the earlier memory reaches it (the gate must let those through).
2. LoCoMo (read from ../shared/data, never copied): each conversation is one user, its turns
   arrive in order, and every earlier turn is a current memory (what the extractor without an
   LLM keeps; an LLM would keep fewer, rewritten facts, so the real share skipped is at least
   this). For each threshold, the share of turns whose nearest current memory is below it:
   the messages decided without a call. With --seconds-per-decision (measured with a real
   model, docs/benchmarks/local-llm.md) it prints the LLM time saved.

Embeds with the service's model in-process (768D cosine, as step 3a re-scores). Prints numbers;
asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from pathlib import Path

import numpy as np

from app.ml.embedder import Embedder
from app.ml.offline import user_cache_dir
from app.ml.scheduling.work import Work, WorkClass
from bench.foundation import LOCOMO

BENCH = Work(WorkClass.BULK)  # offline measurements: no tenant, no deadline
PAIRS_PATH = Path(__file__).parent / "data" / "update_pairs.tsv"


def load_pairs() -> list[tuple[str, str]]:
    pairs = []
    for line in PAIRS_PATH.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            earlier, later = line.split("\t", 1)
            pairs.append((earlier, later))
    return pairs


def conversations(path: Path, limit: int) -> list[list[str]]:
    """Each conversation's turns in order, as the service would receive them."""
    data = json.loads(path.read_text())
    result = []
    for sample in data[:limit]:
        conversation = sample["conversation"]
        keys = sorted(
            (k for k in conversation if k.startswith("session_") and "date" not in k),
            key=lambda k: int(k.split("_")[1]),
        )
        result.append([turn["text"] for key in keys for turn in conversation[key]])
    return result


def nearest_earlier(vectors: np.ndarray, duplicate: float = 0.99) -> list[float | None]:
    """For each turn, the cosine of the nearest earlier kept turn (None for the first).
    A near-duplicate (>= `duplicate`) is not kept, as the extractor does."""
    kept: list[int] = []
    nearest: list[float | None] = []
    for i, vector in enumerate(vectors):
        best = float(np.max(vectors[kept] @ vector)) if kept else None
        nearest.append(best)
        if best is None or best < duplicate:
            kept.append(i)
    return nearest


async def run(args: argparse.Namespace) -> None:
    thresholds = [float(t) for t in args.thresholds.split(",")]
    embedder = Embedder(args.model, backend="torch", intra_op_threads=args.threads)
    embedder.load()

    pairs = load_pairs()
    earlier = await embedder.embed([a for a, _ in pairs], BENCH)
    later = await embedder.embed([b for _, b in pairs], BENCH)
    similarity = np.array([a.full @ b.full for a, b in zip(earlier, later, strict=True)])
    print(
        f"update pairs: {len(pairs)}; cosine min {similarity.min():.3f}, "
        f"median {np.median(similarity):.3f}"
    )

    started = time.perf_counter()
    nearest: list[float | None] = []
    for turns in conversations(Path(args.locomo), args.conversations):
        vectors = np.stack([e.full for e in await embedder.embed(turns, BENCH)])
        nearest += nearest_earlier(vectors)
    embed_s = time.perf_counter() - started
    known = np.array([s for s in nearest if s is not None])
    print(
        f"LoCoMo: {args.conversations} conversations, {len(nearest)} turns "
        f"(embedded in {embed_s:.0f}s); nearest-memory cosine median {np.median(known):.3f}"
    )
    print(
        "\n| threshold | update pairs let through | LoCoMo turns skipping the call |"
        + (" LLM time saved |" if args.seconds_per_decision else "")
    )
    print("|---|---|---|" + ("---|" if args.seconds_per_decision else ""))
    for threshold in thresholds:
        through = float(np.mean(similarity >= threshold))
        skipped = sum(1 for s in nearest if s is None or s < threshold)
        line = (
            f"| {threshold:.2f} | {through:.2f} ({round(through * len(pairs))}/"
            f"{len(pairs)}) | {skipped / len(nearest):.3f} ({skipped}/{len(nearest)}) |"
        )
        if args.seconds_per_decision:
            saved = skipped * args.seconds_per_decision
            line += (
                f" {saved / 60:.0f} min of {len(nearest) * args.seconds_per_decision / 60:.0f} |"
            )
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default=os.environ.get(
            "COGNIS_EMBEDDING_MODEL", str(user_cache_dir("models") / "all-mpnet-base-v2")
        ),
    )
    parser.add_argument("--locomo", default=str(LOCOMO), help="path of locomo10.json")
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--thresholds", default="0.2,0.3,0.4,0.5,0.6")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds-per-decision", type=float, default=None)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
