"""Japanese retrieval through the service's real API (issue 40, item 5): `make bench-japanese`.

Users are made from the project's own topics (bench/data/japanese_topics.tsv: 30 topics, each
a Japanese and an English fact with a value, and a paraphrased question in each language):

- `ja`: Japanese users, their memories and questions in Japanese;
- `mixed`: half their memories in English, half in Japanese, asked in both languages (an
  English question about a Japanese memory, and the reverse, included);
- `en`: English users, the same topics in English: the control (English must not fall) and
  the latency baseline.

Every user has 10 memories (10 different topics, random values) and 5 questions; a question
hits when its topic's memory is first (hit@1) or in the top 3 (hit@3). Each question is asked
with `default`, `paper`, and each with lever `multilingual_vector` switched the other way.
Search latency (client wall time, and the server's `duration_ms`) is the `default` profile's,
Japanese against English, in the same run. The multilingual vectors' calibration (the cosine
of each question to its own memory and to the user's other memories) is computed with the
service's encoder (app/ml/multilingual.py) on the same data.

    make bench-japanese BENCH_ARGS="--users 30 --english-users 10"
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import as_client
from bench.locomo import wait_for_outbox

TOPICS_FILE = Path(__file__).parent / "data" / "japanese_topics.tsv"
MEMORIES_PER_USER = 10
QUESTIONS_PER_USER = 5
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {"profile": "default"},
    "default, leg off": {"profile": "default", "levers": {"multilingual_vector": False}},
    "paper": {"profile": "paper"},
    "paper, leg on": {"profile": "paper", "levers": {"multilingual_vector": True}},
}


@dataclass(frozen=True)
class Topic:
    name: str
    fact_ja: str
    question_ja: str
    fact_en: str
    question_en: str
    values: tuple[tuple[str, str], ...]  # (Japanese, English)


@dataclass
class BenchUser:
    name: str
    group: str  # ja, mixed, en
    memories: list[dict[str, Any]] = field(default_factory=list)  # content, topic
    questions: list[dict[str, Any]] = field(default_factory=list)  # text, topic
    ids: dict[str, str] = field(default_factory=dict)  # topic -> memory id


def load_topics() -> list[Topic]:
    topics = []
    for line in TOPICS_FILE.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        name, fact_ja, question_ja, fact_en, question_en, values = line.split("\t")
        pairs = tuple(tuple(v.split("=", 1)) for v in values.split("|"))
        topics.append(Topic(name, fact_ja, question_ja, fact_en, question_en, pairs))  # type: ignore[arg-type]
    return topics


def make_users(topics: list[Topic], users: int, english_users: int, seed: int) -> list[BenchUser]:
    """`users` Japanese ones (a fifth of them mixed) and `english_users` English ones."""
    rng = random.Random(seed)
    run = uuid.uuid4().hex[:6]
    mixed_from = users - max(1, users // 5)
    made = []
    groups = ["ja" if i < mixed_from else "mixed" for i in range(users)] + ["en"] * english_users
    for number, group in enumerate(groups):
        user = BenchUser(f"japanese-{run}-{group}-{number}", group)
        chosen = rng.sample(topics, MEMORIES_PER_USER)
        for position, topic in enumerate(chosen):
            ja, en = rng.choice(topic.values)
            english = group == "en" or (group == "mixed" and position % 2 == 1)
            content = topic.fact_en.format(x=en) if english else topic.fact_ja.format(x=ja)
            user.memories.append({"content": content, "topic": topic.name})
        for position, topic in enumerate(chosen[:QUESTIONS_PER_USER]):
            # Mixed users: every other question in the other language from its memory's.
            english = group == "en" or (group == "mixed" and position % 4 in (1, 2))
            text = topic.question_en if english else topic.question_ja
            user.questions.append({"text": text, "topic": topic.name})
        made.append(user)
    return made


def ingest(api: httpx.Client, users: list[BenchUser]) -> None:
    for user in users:
        items = as_client.post_batch_sync(
            api, user.name, [{"content": m["content"]} for m in user.memories]
        )
        for memory, item in zip(user.memories, items, strict=True):
            user.ids[memory["topic"]] = item["id"]


def ask(api: httpx.Client, user: BenchUser, question: dict[str, Any], body: dict[str, Any]):
    started = time.perf_counter()
    response = api.post(
        f"/v1/users/{user.name}/search", json={"query": question["text"], "top_k": 3, **body}
    )
    wall_ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    found = response.json()
    ranked = [r["memory"]["id"] for r in found["results"]]
    return ranked, wall_ms, found.get("duration_ms", 0.0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))] if ordered else 0.0


def calibration(users: list[BenchUser]) -> list[str]:
    """The multilingual cosine of each question to its memory and to the user's others."""
    from app.ml.multilingual import shared_encoder

    encoder = shared_encoder()
    right: list[float] = []
    wrong: list[float] = []
    for user in users:
        if user.group == "en":
            continue
        facts = encoder.encode_sync([m["content"] for m in user.memories])
        topics = [m["topic"] for m in user.memories]
        asked = encoder.encode_sync([q["text"] for q in user.questions])
        for question, vector in zip(user.questions, asked, strict=True):
            cosines = facts @ vector
            for topic, cosine in zip(topics, cosines, strict=True):
                (right if topic == question["topic"] else wrong).append(float(cosine))
    lines = [
        f"- question to its memory ({len(right)}): min {min(right):.3f}, p5 "
        f"{percentile(right, 5):.3f}, median {statistics.median(right):.3f}",
        f"- question to the user's other memories ({len(wrong)}): median "
        f"{statistics.median(wrong):.3f}, p95 {percentile(wrong, 95):.3f}, p99 "
        f"{percentile(wrong, 99):.3f}, max {max(wrong):.3f}",
        "",
        "| floor | own memory kept | other memories dropped |",
        "| --- | --- | --- |",
    ]
    for floor in (0.05, 0.10, 0.15, 0.20, 0.25, 0.30):
        kept = np.mean([c >= floor for c in right])
        dropped = np.mean([c < floor for c in wrong])
        lines.append(f"| {floor:.2f} | {kept:.3f} | {dropped:.3f} |")
    return lines


def run(args: argparse.Namespace) -> int:
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=300)
    users = make_users(load_topics(), args.users, args.english_users, args.seed)
    started = time.perf_counter()
    ingest(api, users)
    wait_for_outbox(api)
    print(f"[ingest] {len(users)} users in {time.perf_counter() - started:.0f} s", flush=True)
    hits: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
    wall: dict[str, list[float]] = defaultdict(list)
    server: dict[str, list[float]] = defaultdict(list)
    try:
        for _ in range(args.warmup):  # the first searches load what is lazily loaded
            ask(api, users[0], users[0].questions[0], VARIANTS["default"])
        # Variant by variant, users interleaved, so latency compares like with like.
        for variant, body in VARIANTS.items():
            for user in users:
                for question in user.questions:
                    ranked, wall_ms, server_ms = ask(api, user, question, body)
                    expected = user.ids[question["topic"]]
                    hits[(variant, user.group)].append(
                        (ranked[:1] == [expected], expected in ranked[:3])
                    )
                    if variant == "default":
                        language = "en" if user.group == "en" else "ja"
                        if user.group != "mixed":
                            wall[language].append(wall_ms)
                            server[language].append(server_ms)
    finally:
        if not args.keep:
            for user in users:
                api.delete(f"/v1/users/{user.name}")
    groups = [g for g in ("ja", "mixed", "en") if any(u.group == g for u in users)]
    counts = {g: sum(len(u.questions) for u in users if u.group == g) for g in groups}
    print("\n| variant | " + " | ".join(f"{g} hit@1 / hit@3 ({counts[g]} q)" for g in groups))
    print("| --- |" + " --- |" * len(groups))
    for variant in VARIANTS:
        cells = []
        for group in groups:
            found = hits[(variant, group)]
            cells.append(
                f"{np.mean([h[0] for h in found]):.3f} / {np.mean([h[1] for h in found]):.3f}"
            )
        print(f"| {variant} | " + " | ".join(cells) + " |")
    print("\n| default profile, search | p50 ms (client) | p95 ms | server p50 ms | searches |")
    print("| --- | --- | --- | --- | --- |")
    for language in ("ja", "en"):
        if wall[language]:
            print(
                f"| {language} | {statistics.median(wall[language]):.1f} | "
                f"{percentile(wall[language], 95):.1f} | "
                f"{statistics.median(server[language]):.1f} | {len(wall[language])} |"
            )
    if wall["ja"] and wall["en"]:
        ratio = statistics.median(wall["ja"]) / statistics.median(wall["en"])
        print(f"\nJapanese p50 / English p50: {ratio:.2f}x")
    print("\nMultilingual cosine calibration (the Japanese and mixed users):")
    print("\n".join(calibration(users)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--users", type=int, default=30, help="Japanese users (a fifth mixed)")
    parser.add_argument("--english-users", type=int, default=10, help="English control users")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the users afterwards")
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
