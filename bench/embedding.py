"""Embedding benchmark: torch (1 and 2 threads), ONNX and ONNX int8, with quality against torch.

One process loads every configuration, then measures them round-robin (a shuffled order each
round), so a shared, noisy machine slows all of them alike:

- query latency: one LoCoMo question per call (no cache), p50/p95 over the rounds;
- batch throughput: 100 LoCoMo turns per call, texts/s (median over the rounds);
- query cache: Embedder.embed_query on a hit, for scale;
- quality of each ONNX backend against torch: cosine of the 768D vectors over LoCoMo turns, and
  the overlap of the top-10 turns (by cosine) for LoCoMo questions.

ONNX exports go to --onnx-cache-dir (default ~/.cache/cognis-memory/onnx) on first use. LoCoMo
is read from ../shared/data, never copied. Prints numbers; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import numpy as np

from app.config import EmbeddingBackend
from app.ml.embedder import Embedder
from bench.foundation import locomo_turns_and_questions, percentile

MODELS_DIR = Path.home() / ".cache" / "cognis-memory" / "models"


@dataclass
class Config:
    model: str
    backend: EmbeddingBackend
    threads: int
    embedder: Embedder
    latencies_ms: list[float] = field(default_factory=list)
    batch_texts_per_s: list[float] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{Path(self.model).name} {self.backend} {self.threads}t"

    def embed(self, texts: list[str]) -> np.ndarray:
        if self.backend == "torch":
            # torch's thread count is process-wide: set it for this configuration's call.
            import torch

            torch.set_num_threads(self.threads)
        return np.stack([e.full for e in self.embedder.embed_sync(texts)])


def build_configs(
    models: list[str],
    backends: list[EmbeddingBackend],
    threads: list[int],
    cache_dir: str | None,
) -> list[Config]:
    configs = []
    for model in models:
        for backend in backends:
            # One torch model serves both thread counts (set per call); ORT sets them per session.
            shared = Embedder(model, backend="torch") if backend == "torch" else None
            for n in threads:
                embedder = shared or Embedder(
                    model, backend=backend, intra_op_threads=n, onnx_cache_dir=cache_dir
                )
                configs.append(Config(model, backend, n, embedder))
    for config in configs:
        started = time.perf_counter()
        config.embed(["warm up"])
        print(f"loaded {config.label} in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return configs


def measure(
    configs: list[Config], questions: list[str], turns: list[str], args: argparse.Namespace
) -> None:
    rng = random.Random(7)
    for _ in range(3):  # warm-up rounds, not recorded
        for config in configs:
            config.embed([rng.choice(questions)])
    for round_no in range(args.rounds):
        order = configs[:]
        rng.shuffle(order)
        query = questions[round_no % len(questions)]
        for config in order:
            started = time.perf_counter()
            config.embed([query])
            config.latencies_ms.append((time.perf_counter() - started) * 1000)
    batch = turns[: args.batch]
    for _ in range(args.batch_rounds):
        order = configs[:]
        rng.shuffle(order)
        for config in order:
            started = time.perf_counter()
            config.embed(batch)
            config.batch_texts_per_s.append(len(batch) / (time.perf_counter() - started))


def cache_hit_us(model: str) -> float:
    embedder = Embedder(model, query_cache_size=16)

    async def run() -> float:
        await embedder.embed_query("what did Caroline research?")
        started = time.perf_counter()
        for _ in range(1000):
            await embedder.embed_query("what did Caroline research?")
        return (time.perf_counter() - started) * 1000

    return anyio.run(run)


def quality(configs: list[Config], turns: list[str], questions: list[str]) -> list[dict]:
    rows = []
    for model in dict.fromkeys(c.model for c in configs):
        of_model = [c for c in configs if c.model == model]
        reference = next((c for c in of_model if c.backend == "torch"), None)
        if reference is None:
            continue
        ref_turns, ref_questions = reference.embed(turns), reference.embed(questions)
        ref_top = np.argsort(-(ref_questions @ ref_turns.T), axis=1)[:, :10]
        seen = {"torch"}
        for config in of_model:
            if config.backend in seen:
                continue
            seen.add(config.backend)
            got_turns, got_questions = config.embed(turns), config.embed(questions)
            cosines = np.sum(ref_turns * got_turns, axis=1)
            top = np.argsort(-(got_questions @ got_turns.T), axis=1)[:, :10]
            overlap = [len(set(a) & set(b)) / 10 for a, b in zip(ref_top, top, strict=True)]
            rows.append(
                {
                    "model": Path(model).name,
                    "backend": config.backend,
                    "turns": len(turns),
                    "queries": len(questions),
                    "cosine_mean": float(cosines.mean()),
                    "cosine_min": float(cosines.min()),
                    "top10_overlap_mean": float(np.mean(overlap)),
                    "top10_overlap_min": float(np.min(overlap)),
                }
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--models",
        nargs="+",
        default=[str(MODELS_DIR / "all-mpnet-base-v2"), str(MODELS_DIR / "all-MiniLM-L6-v2")],
    )
    parser.add_argument("--backends", nargs="+", default=["torch", "onnx", "onnx-int8"])
    parser.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    parser.add_argument("--rounds", type=int, default=60, help="single-query calls per config")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--batch-rounds", type=int, default=3)
    parser.add_argument("--quality-turns", type=int, default=200)
    parser.add_argument("--quality-queries", type=int, default=50)
    parser.add_argument("--onnx-cache-dir", default=None)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    models = [m for m in args.models if Path(m).is_dir() or not m.startswith("/")]
    turns, questions = locomo_turns_and_questions(max(args.quality_turns, args.batch))
    rng = random.Random(11)
    quality_questions = rng.sample(questions, args.quality_queries)
    configs = build_configs(models, args.backends, args.threads, args.onnx_cache_dir)
    measure(configs, questions, turns, args)

    results: dict = {"cpus": os.cpu_count(), "latency": [], "quality": []}
    print(f"\n{'configuration':40} {'p50 ms':>8} {'p95 ms':>8} {'batch texts/s':>14}")
    for config in configs:
        row = {
            "config": config.label,
            "p50_ms": statistics.median(config.latencies_ms),
            "p95_ms": percentile(config.latencies_ms, 95),
            "batch_texts_per_s": statistics.median(config.batch_texts_per_s),
        }
        results["latency"].append(row)
        print(
            f"{row['config']:40} {row['p50_ms']:8.1f} {row['p95_ms']:8.1f} "
            f"{row['batch_texts_per_s']:14.1f}"
        )
    hit = cache_hit_us(models[0])
    results["query_cache_hit_us"] = hit
    print(f"\nquery cache hit (embed_query, {Path(models[0]).name}): {hit:.1f} µs")

    results["quality"] = quality(configs, turns[: args.quality_turns], quality_questions)
    print("\nquality against torch (768D cosine over turns; top-10 turns per question)")
    for q in results["quality"]:
        print(
            f"{q['model']:20} {q['backend']:10} cosine mean {q['cosine_mean']:.4f} "
            f"min {q['cosine_min']:.4f}  top-10 overlap mean {q['top10_overlap_mean']:.3f} "
            f"min {q['top10_overlap_min']:.1f}"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
