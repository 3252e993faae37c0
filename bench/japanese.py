"""Japanese retrieval through the service's real API (issue 40, item 5): `make bench-japanese`.

Users are made from the project's own topics (bench/data/japanese_topics.tsv: 30 topics, each
a Japanese and an English fact with a value, and a paraphrased question in each language):

- `ja`: Japanese users, their memories and questions in Japanese;
- `mixed`: half their memories in English, half in Japanese, asked in both languages (an
  English question about a Japanese memory, and the reverse, included);
- `en`: English users, the same topics in English: the control (English must not fall) and
  the latency baseline.

Every user has 10 memories (10 different topics, random values) and 5 questions; a question
hits when its topic's memory is first (hit@1) or in the top 3 (hit@3). Two more groups tell
their facts as messages, through the message pipeline (`POST /v1/users/{u}/messages?wait=true`,
the message's `timestamp` its time), beside 3 topic memories each:

- `update`: 3 facts of the 6 kinds of bench/data/japanese_updates.tsv (a move, a new job, car,
  phone, commute, class), each changed by a later message weeks after; the question asks what
  holds now, so it hits when the later message's memory comes first. "Chained": the later
  message's decision is an UPDATE of the earlier memory (a new version of it).
- `time`: 6 activities of bench/data/japanese_events.tsv, each on another day before the
  reference time (yesterday, the day before, 3 days before, last week, last month, last year),
  and 4 questions that name only the time (昨日, 先週, 先月), asked `as_of` the reference.

Each question is asked with `default`, `default` without lever `language_legs` (the fusion
that lets the multilingual model judge a query in another script), `paper`, and each with
lever `multilingual_vector` switched the other way (`--variants` chooses). Search latency
(client wall time, and the server's `duration_ms`) is the `default` profile's, Japanese
against English (the `ja` and `en` groups: the same topics), in the same run. The multilingual
vectors' calibration (the cosine of each question to its own memory and to the user's other
memories) is computed with the service's encoder (app/ml/multilingual.py) on the same data.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import as_client

DATA = Path(__file__).parent / "data"
TOPICS_FILE = DATA / "japanese_topics.tsv"
UPDATES_FILE = DATA / "japanese_updates.tsv"
EVENTS_FILE = DATA / "japanese_events.tsv"
TIME_QUESTIONS_FILE = DATA / "japanese_time_questions.tsv"
MEMORIES_PER_USER = 10
QUESTIONS_PER_USER = 5
FILLERS = 3  # topic memories of an update or time user, beside its messages
UPDATES_PER_USER = 3
TIME_QUESTIONS_PER_USER = 4
# The time users' questions are asked as of this moment (a Friday), their messages dated
# before it: every run resolves the same windows.
REFERENCE = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
EARLIER = timedelta(days=60)  # an update user's earlier messages, before REFERENCE
LATER = timedelta(days=10)  # and the later ones that change them
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {"profile": "default"},
    "default, language_legs off": {"profile": "default", "levers": {"language_legs": False}},
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


@dataclass(frozen=True)
class UpdateKind:
    name: str
    earlier: str
    later: str
    question: str
    values: tuple[str, ...]


@dataclass
class BenchUser:
    name: str
    group: str  # ja, mixed, en, update, time
    memories: list[dict[str, Any]] = field(default_factory=list)  # content, topic
    # text, topic (its memory is the answer); an update or time question: also as_of
    questions: list[dict[str, Any]] = field(default_factory=list)
    ids: dict[str, str] = field(default_factory=dict)  # topic -> memory id
    # Told through the message pipeline, in order: content, timestamp, topic.
    messages: list[dict[str, Any]] = field(default_factory=list)
    chained: dict[str, bool] = field(default_factory=dict)  # update kind -> chained


def load_topics() -> list[Topic]:
    topics = []
    for line in TOPICS_FILE.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        name, fact_ja, question_ja, fact_en, question_en, values = line.split("\t")
        pairs = tuple(tuple(v.split("=", 1)) for v in values.split("|"))
        topics.append(Topic(name, fact_ja, question_ja, fact_en, question_en, pairs))  # type: ignore[arg-type]
    return topics


def load_updates() -> list[UpdateKind]:
    kinds = []
    for line in UPDATES_FILE.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, earlier, later, question, values = line.split("\t")
            kinds.append(UpdateKind(name, earlier, later, question, tuple(values.split("|"))))
    return kinds


def load_time_questions() -> list[tuple[str, datetime]]:
    """(the question, when its activity happened): windows that do not overlap."""
    lines = TIME_QUESTIONS_FILE.read_text(encoding="utf-8").splitlines()
    pairs = [line.split("\t") for line in lines if line and not line.startswith("#")]
    return [(question, datetime.fromisoformat(when)) for question, when in pairs]


def load_events() -> list[str]:
    lines = EVENTS_FILE.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def with_fillers(user: BenchUser, topics: list[Topic], rng: random.Random) -> BenchUser:
    for topic in rng.sample(topics, FILLERS):
        user.memories.append({"content": topic.fact_ja.format(x=rng.choice(topic.values)[0])})
    return user


def make_update_users(
    topics: list[Topic], kinds: list[UpdateKind], users: int, seed: int
) -> list[BenchUser]:
    """Each user: FILLERS topic memories, then UPDATES_PER_USER kinds (in turn, so every kind
    is asked as often) told twice: an earlier value, then the later one."""
    rng = random.Random(seed + 1)
    run = uuid.uuid4().hex[:6]
    made = []
    for number in range(users):
        user = with_fillers(BenchUser(f"japanese-{run}-update-{number}", "update"), topics, rng)
        chosen = [
            kinds[(number * UPDATES_PER_USER + j) % len(kinds)] for j in range(UPDATES_PER_USER)
        ]
        values = [rng.sample(kind.values, 2) for kind in chosen]
        for position, (kind, (old, _)) in enumerate(zip(chosen, values, strict=True)):
            user.messages.append(
                {
                    "content": kind.earlier.format(old=old),
                    "timestamp": REFERENCE - EARLIER + timedelta(hours=position),
                    "topic": f"{kind.name}:earlier",
                }
            )
            user.questions.append({"text": kind.question, "topic": kind.name, "as_of": REFERENCE})
        for position, (kind, (old, new)) in enumerate(zip(chosen, values, strict=True)):
            user.messages.append(
                {
                    "content": kind.later.format(old=old, new=new),
                    "timestamp": REFERENCE - LATER + timedelta(hours=position),
                    "topic": kind.name,
                }
            )
        made.append(user)
    return made


def make_time_users(
    topics: list[Topic], events: list[str], users: int, seed: int
) -> list[BenchUser]:
    """Each user: FILLERS topic memories and one activity on each day of the time questions,
    asked about TIME_QUESTIONS_PER_USER of those days."""
    rng = random.Random(seed + 2)
    run = uuid.uuid4().hex[:6]
    asked = load_time_questions()
    made = []
    for number in range(users):
        user = with_fillers(BenchUser(f"japanese-{run}-time-{number}", "time"), topics, rng)
        activities = rng.sample(events, len(asked))
        for (question, when), activity in zip(asked, activities, strict=True):
            user.messages.append({"content": activity, "timestamp": when, "topic": question})
        for question, _ in rng.sample(asked, TIME_QUESTIONS_PER_USER):
            user.questions.append({"text": question, "topic": question, "as_of": REFERENCE})
        made.append(user)
    return made


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
            if "topic" in memory:
                user.ids[memory["topic"]] = item["id"]
        for message in user.messages:
            tell(api, user, message)


def tell(api: httpx.Client, user: BenchUser, message: dict[str, Any]) -> None:
    """One message through the pipeline, waited for: the memory it made (or changed) is its
    topic's answer; a later update message also says whether it chained."""
    response = api.post(
        f"/v1/users/{user.name}/messages",
        params={"wait": "true"},
        json={
            "messages": [
                {"content": message["content"], "timestamp": message["timestamp"].isoformat()}
            ]
        },
    )
    response.raise_for_status()
    (result,) = response.json()["messages"]
    made = [d for d in result["decisions"] if d["operation"] in ("ADD", "UPDATE")]
    topic = message["topic"]
    if made:
        user.ids[topic] = made[0]["memory_id"]
    if user.group == "update" and not topic.endswith(":earlier"):
        earlier = user.ids.get(f"{topic}:earlier")
        user.chained[topic] = any(
            d["operation"] == "UPDATE" and d["target_memory_id"] == earlier for d in made
        )


def wait_for_index(api: httpx.Client, timeout_s: float = 600) -> None:
    """Until the outbox is delivered (every memory searchable by BM25). Not the sentence
    worker, as bench.locomo's wait does: the set's memories are one sentence each, so lever
    sentence_vector has nothing to add for them, and on a shared database the worker's backlog
    is everyone's."""
    deadline = time.monotonic() + timeout_s
    while api.get("/ready").json().get("outbox_pending") and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(1.0)  # one refresh interval, so the last documents are searchable


def ask(api: httpx.Client, user: BenchUser, question: dict[str, Any], body: dict[str, Any]):
    started = time.perf_counter()
    asked = {"query": question["text"], "top_k": 3, **body}
    if "as_of" in question:
        asked["as_of"] = question["as_of"].isoformat()
    response = api.post(f"/v1/users/{user.name}/search", json=asked)
    wall_ms = (time.perf_counter() - started) * 1000
    response.raise_for_status()
    found = response.json()
    # By version: a topic's answer is the version its message made, and a memory id is the
    # id of its first version (kept by every later one), so an update is found by its own.
    ranked = [r["memory"]["version_id"] for r in found["results"]]
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
        if user.group not in ("ja", "mixed"):
            continue
        facts = encoder.encode_sync([m["content"] for m in user.memories])
        topics = [m["topic"] for m in user.memories]
        asked = encoder.encode_sync([q["text"] for q in user.questions])
        for question, vector in zip(user.questions, asked, strict=True):
            cosines = facts @ vector
            for topic, cosine in zip(topics, cosines, strict=True):
                (right if topic == question["topic"] else wrong).append(float(cosine))
    if not right or not wrong:
        return ["- no Japanese or mixed users in this run"]
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


def updates_chained(users: list[BenchUser]) -> str:
    """How many later messages became a new version of the earlier memory, by kind."""
    by_kind: dict[str, list[bool]] = defaultdict(list)
    for user in users:
        for kind, chained in user.chained.items():
            by_kind[kind].append(chained)
    if not by_kind:
        return ""
    cells = ", ".join(f"{kind} {sum(v)}/{len(v)}" for kind, v in sorted(by_kind.items()))
    total = sum(sum(v) for v in by_kind.values())
    kinds = sum(1 for v in by_kind.values() if 2 * sum(v) > len(v))
    return (
        f"\nUpdates chained: {total}/{sum(len(v) for v in by_kind.values())} ({cells}); "
        f"kinds that chain most of the time: {kinds} of {len(by_kind)}"
    )


def run(args: argparse.Namespace) -> int:
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=300)
    topics = load_topics()
    users = [
        *make_users(topics, args.users, args.english_users, args.seed),
        *make_update_users(topics, load_updates(), args.update_users, args.seed),
        *make_time_users(topics, load_events(), args.time_users, args.seed),
    ]
    started = time.perf_counter()
    ingest(api, users)
    wait_for_index(api)
    print(f"[ingest] {len(users)} users in {time.perf_counter() - started:.0f} s", flush=True)
    hits: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
    wall: dict[str, list[float]] = defaultdict(list)
    server: dict[str, list[float]] = defaultdict(list)
    try:
        for _ in range(args.warmup):  # the first searches load what is lazily loaded
            ask(api, users[0], users[0].questions[0], VARIANTS["default"])
        variants = {v: VARIANTS[v] for v in args.variants}
        # Variant by variant, users interleaved, so latency compares like with like.
        for variant, body in variants.items():
            for user in users:
                for question in user.questions:
                    ranked, wall_ms, server_ms = ask(api, user, question, body)
                    expected = user.ids.get(question["topic"])  # None: no memory was made
                    hits[(variant, user.group)].append(
                        (ranked[:1] == [expected], expected in ranked[:3])
                    )
                    if variant == "default":
                        language = user.group
                        if language in ("ja", "en"):  # the same topics, one language each
                            wall[language].append(wall_ms)
                            server[language].append(server_ms)
    finally:
        if not args.keep:
            for user in users:
                api.delete(f"/v1/users/{user.name}")
    groups = [
        g for g in ("ja", "mixed", "update", "time", "en") if any(u.group == g for u in users)
    ]
    counts = {g: sum(len(u.questions) for u in users if u.group == g) for g in groups}
    print("\n| variant | " + " | ".join(f"{g} hit@1 / hit@3 ({counts[g]} q)" for g in groups))
    print("| --- |" + " --- |" * len(groups))
    for variant in variants:
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
    print(updates_chained(users))
    print("\nMultilingual cosine calibration (the Japanese and mixed users):")
    print("\n".join(calibration(users)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--users", type=int, default=30, help="Japanese users (a fifth mixed)")
    parser.add_argument("--english-users", type=int, default=10, help="English control users")
    parser.add_argument("--update-users", type=int, default=12, help="users whose facts change")
    parser.add_argument("--time-users", type=int, default=12, help="users asked by time")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS),
        default=list(VARIANTS),
        help="which variants to ask (default: all; `default` first, its latency is reported)",
    )
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--keep", action="store_true", help="keep the users afterwards")
    return run(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
