"""Retrieval latency at scale: one queried user with N memories among many users.

Builds synthetic memories in Postgres (sentences drawn from a small vocabulary, each with a
vector made from its words' embeddings: see SyntheticMemories) together with their outbox
rows, as the tables' owner (COGNIS_MIGRATION_DATABASE_URL) in the default tenant (the one the
API's development key and COGNIS_API_KEY_HASHES act for), lets the running service's relay
index them, then times /search over HTTP for unique queries (query embedding included) and
for repeated ones (served by the query-embedding cache); `--context` also times the context
block (POST /context: the search, the profile and the latest changes) and its tokens. Grows
the queried user through the sizes given (e.g. 1000,10000,100000). Needs `make up`; erases
its users at the end. Prints numbers; asserts nothing.

Maintaining the HNSW indexes row by row cost about 45 ms a memory here while memories had two
(100,000 memories: over an hour). `--bulk-load` drops the HNSW indexes before each load and
rebuilds them after it, exactly as the models define them, which takes minutes: for a
benchmark database only, since searches of everyone else fall back to exact scans meanwhile.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import random
import re
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path

import httpx
import numpy as np
from sqlalchemy import text

from app.config import Settings
from app.db.vector_indexes import build_hnsw_indexes, drop_hnsw_indexes
from app.ml.embedder import Embedder
from bench import as_client
from bench.database import default_tenant, owner_engine
from bench.foundation import LOCOMO, percentile
from bench.locomo import load_conversations

WORDS = [
    "morning",
    "coffee",
    "garden",
    "hiking",
    "river",
    "dog",
    "cat",
    "piano",
    "guitar",
    "travel",
    "tokyo",
    "paris",
    "kitchen",
    "recipe",
    "running",
    "marathon",
    "book",
    "novel",
    "office",
    "meeting",
    "project",
    "deadline",
    "doctor",
    "health",
    "sleep",
    "yoga",
    "painting",
    "museum",
    "concert",
    "friend",
    "sister",
    "brother",
    "mother",
    "father",
    "birthday",
    "holiday",
    "beach",
    "mountain",
    "camera",
    "photo",
    "movie",
    "series",
    "game",
    "chess",
    "football",
    "tennis",
    "swimming",
    "bicycle",
    "car",
    "train",
    "flight",
    "hotel",
    "budget",
    "salary",
    "savings",
    "vegetarian",
    "dessert",
    "bakery",
    "market",
    "neighbour",
    "school",
    "course",
    "exam",
    "language",
    "spanish",
    "french",
    "german",
    "python",
    "database",
    "cloud",
    "server",
    "weekend",
    "evening",
]

SPEAKERS = ("Ann", "Bob", "Cleo", "Dev")

INSERT = text(
    """
    WITH rows AS (
        SELECT id, content, speaker, CAST(e AS vector) AS e, CAST(s AS vector(768)[]) AS s
        FROM unnest(CAST(:ids AS uuid[]), CAST(:contents AS text[]),
                    CAST(:speakers AS text[]), CAST(:vectors AS text[]),
                    CAST(:sentences AS text[]))
             AS t(id, content, speaker, e, s)
    ), inserted AS (
        INSERT INTO memories (id, user_id, chain_id, version, content, category, scope,
                              is_current, speaker, embedding_768d, embedding_256d,
                              sentence_embeddings_768d)
        SELECT id, CAST(:user_id AS text), id, 1, content, 'preferences', 'USER', true,
               speaker, e, l2_normalize(subvector(e, 1, 256)), s
        FROM rows
        RETURNING id, user_id, chain_id, content, category, scope, speaker, created_at
    )
    INSERT INTO outbox (user_id, op, memory_id, payload)
    SELECT user_id, 'index', id, jsonb_build_object(
        'user_id', user_id, 'chain_id', chain_id::text, 'content', content,
        'category', category, 'scope', scope, 'session_id', NULL, 'is_current', true,
        'speaker', speaker, 'event_time', NULL, 'created_at', created_at, 'superseded_at', NULL)
    FROM inserted
    """
)


# A batch of memories: contents, content vectors, and each one's sentence vectors.
Batch = tuple[list[str], np.ndarray, list[list[np.ndarray]]]


def thirds(words: np.ndarray) -> list[np.ndarray]:
    return [part for part in np.array_split(words, 3) if len(part)]


def vector_literal(vector: np.ndarray) -> str:
    return "[" + ",".join(map(repr, vector.tolist())) + "]"


class SyntheticMemories:
    """Sentences drawn from WORDS, each with a vector in the model's own embedding space: the
    sum of its words' embeddings plus Gaussian noise, normalised. Neighbourhoods then look
    like real text (a query's words pull it towards the memories that share them) without
    embedding 100,000 sentences. Uniformly random vectors would not do: a real query
    embedding is far from all of them, and HNSW would first exhaust every other user's real
    memories near the query before reaching them."""

    def __init__(self, word_vectors: np.ndarray, seed: int = 7, noise: float = 0.5) -> None:
        self._words = word_vectors
        self._rng = np.random.default_rng(seed)
        self._noise = noise

    def batch(self, first: int, count: int) -> Batch:
        picks = [self._rng.integers(0, len(WORDS), 10 + (first + i) % 5) for i in range(count)]
        contents = [
            f"Note {first + i}: " + " ".join(WORDS[w] for w in words)
            for i, words in enumerate(picks)
        ]
        vectors = self._noisy(np.stack([self._words[words].sum(axis=0) for words in picks]))
        # Three "sentences" of about four words each: the sentence vectors a written memory
        # of that length would carry (app/memories/sentences.py).
        sentences = [
            list(self._noisy(np.stack([self._words[part].sum(axis=0) for part in thirds(w)])))
            for w in picks
        ]
        return contents, vectors, sentences

    def _noisy(self, vectors: np.ndarray) -> np.ndarray:
        vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors += self._rng.normal(0, self._noise / np.sqrt(vectors.shape[1]), vectors.shape)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


class LocomoMemories:
    """Memories of real conversation: each joins two LoCoMo turns (the first and a second one
    drawn at random), its vector the normalised sum of the two turns' own embeddings, the
    second weighted by w ~ U(0.3, 1). The vectors then have the model's real anisotropy and
    the real spacing between statements (SyntheticMemories' 73-word sentences are near ties:
    a query's 1st and 200th neighbours differ by 0.03 in cosine at 100,000 memories), at the
    cost of embedding LoCoMo's ~6,000 turns once (cached, see `locomo_vectors`). Queries are
    LoCoMo's real questions (`questions`), which no memory contains."""

    def __init__(self, seed: int = 7) -> None:
        self.turns, self._vectors, self.question_texts, self.question_vectors = locomo_vectors()
        self._rng = np.random.default_rng(seed)

    def batch(self, first: int, count: int) -> Batch:
        pairs = self._rng.integers(0, len(self.turns), (count, 2))
        weights = self._rng.uniform(0.3, 1.0, (count, 1))
        contents = [f"{self.turns[a]} {self.turns[b]}" for a, b in pairs]
        vectors = self._vectors[pairs[:, 0]] + weights * self._vectors[pairs[:, 1]]
        # Each turn's own vector as a sentence vector (a turn is about two sentences long).
        sentences = [[self._vectors[a], self._vectors[b]] for a, b in pairs]
        return contents, vectors / np.linalg.norm(vectors, axis=1, keepdims=True), sentences

    def questions(self, count: int, rng: np.random.Generator) -> tuple[list[str], np.ndarray]:
        """`count` distinct real questions (at most LoCoMo's ~2,000) and their embeddings."""
        picks = rng.choice(len(self.question_texts), min(count, len(self.question_texts)), False)
        return [self.question_texts[i] for i in picks], self.question_vectors[picks]


def locomo_vectors() -> tuple[list[str], np.ndarray, list[str], np.ndarray]:
    """LoCoMo's turns and questions with their embeddings by the service's model, computed once
    and cached under ~/.cache/cognis-memory/bench, keyed by the model folder and the data
    file's checksum (a changed model or data file is embedded again)."""
    model = os.environ.get("COGNIS_EMBEDDING_MODEL", Settings().embedding.embedding_model)
    key = hashlib.sha256(model.encode() + hashlib.sha256(LOCOMO.read_bytes()).digest())
    cache = Path.home() / ".cache" / "cognis-memory" / "bench" / f"locomo-{key.hexdigest()[:16]}"
    conversations = load_conversations(None)
    turns = [t["content"] for c in conversations for t in c.turns]
    questions = [q["question"] for c in conversations for q in c.questions]
    if not cache.with_suffix(".npz").exists():
        embedder = Embedder(model)
        texts = turns + questions
        vectors = []
        for first in range(0, len(texts), 256):
            vectors += [e.full for e in embedder.embed_sync(texts[first : first + 256])]
            print(f"[locomo] embedded {len(vectors)}/{len(texts)} texts (cached after)", flush=True)
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, vectors=np.stack(vectors).astype(np.float32))
    vectors = np.load(cache.with_suffix(".npz"))["vectors"]
    return turns, vectors[: len(turns)], questions, vectors[len(turns) :]


Memories = SyntheticMemories | LocomoMemories


def word_vectors() -> np.ndarray:
    """WORDS embedded by the service's model (the local folder `make up` configured)."""
    embedder = Embedder(
        os.environ.get("COGNIS_EMBEDDING_MODEL", Settings().embedding.embedding_model)
    )
    return np.stack([e.full for e in embedder.embed_sync(WORDS)])


async def grow(
    engine, memories: Memories, user_id: str, have: int, want: int, chunk: int = 2000
) -> None:
    for first in range(have + 1, want + 1, chunk):
        count = min(want, first + chunk - 1) - first + 1
        contents, vectors, sentences = memories.batch(first, count)
        async with default_tenant(engine) as session:
            await session.execute(
                INSERT,
                {
                    "ids": [uuid.uuid4() for _ in range(count)],
                    "contents": contents,
                    # A conversation's few speakers: what lever speaker_query aggregates.
                    "speakers": [
                        speaker_of(content, SPEAKERS[(first + i) % len(SPEAKERS)])
                        for i, content in enumerate(contents)
                    ],
                    "vectors": [vector_literal(v) for v in vectors],
                    "sentences": [
                        "{" + ",".join(f'"{vector_literal(v)}"' for v in each) + "}"
                        for each in sentences
                    ],
                    "user_id": user_id,
                },
            )
        done = first + count - 1
        if want - have >= 20_000 and (done - have) % 10_000 < chunk:
            print(f"[load] {user_id}: {done}/{want}", flush=True)


def speaker_of(content: str, default: str) -> str:
    """A LoCoMo memory's speaker ("Caroline: ..."); `default` for a synthetic one."""
    name, colon, _ = content.partition(": ")
    return name if colon and " " not in name and not name.startswith("Note") else default


async def erase(api: httpx.Client, engine, users: list[str], bulk_load: bool) -> None:
    # Erasing 100,000 rows under live HNSW indexes leaves their VACUUM minutes of graph
    # repair; with --bulk-load the indexes are rebuilt on what remains instead.
    if bulk_load:
        await drop_hnsw_indexes(engine)
    for user in users:
        api.delete(f"/v1/users/{user}").raise_for_status()  # noqa: ASYNC212


async def stored(engine, users: list[str]) -> dict[str, int]:
    """How many memories each of `users` has already (a kept run's)."""
    async with default_tenant(engine) as session:
        rows = await session.execute(
            text("SELECT user_id, count(*) FROM memories WHERE user_id = ANY(:u) GROUP BY 1"),
            {"u": users},
        )
        return {str(row[0]): int(row[1]) for row in rows}


def _print_built(name: str, seconds: float) -> None:
    print(f"[load] built {name} in {seconds:.0f} s", flush=True)


async def build_hnsw(engine) -> None:
    await build_hnsw_indexes(engine, on_built=_print_built)


async def vacuum_analyze(engine) -> None:
    async with engine.connect() as connection:
        await connection.execution_options(isolation_level="AUTOCOMMIT")
        await connection.execute(text("VACUUM (ANALYZE) memories"))


def wait_for_outbox(api: httpx.Client, timeout_s: float = 1800) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if api.get("/ready").json().get("outbox_pending") == 0:
            time.sleep(1.0)
            return
        time.sleep(1.0)
    raise RuntimeError("the outbox did not drain in time")


def profile_body(entry: str | None) -> dict[str, object]:
    """A --profiles entry as the search body's profile and levers: "default",
    "default-sentence_vector" (that lever off), "paper+sentence_vector" (on)."""
    if entry is None:
        return {}
    name, *changes = re.split(r"(?=[+-])", entry)
    levers = {change[1:]: change[0] == "+" for change in changes}
    return {"profile": name, **({"levers": levers} if levers else {})}


def measure(
    api: httpx.Client,
    user: str,
    queries: list[str],
    profile: str | None = None,
    endpoint: str = "search",
    max_tokens: int = 400,
) -> dict[str, list[float]]:
    """Time one request per query: /search (server time and each stage too) or /context
    (the block's tokens too; the context block searches with the `default` profile)."""
    timings: dict[str, list[float]] = defaultdict(list)
    if endpoint == "context":
        body_base: dict[str, object] = {"max_tokens": max_tokens}
    else:
        body_base = {"top_k": 10, "stages": {"rerank": False}, **profile_body(profile)}
    for query in queries:
        t0 = time.perf_counter()
        path = f"/v1/users/{user}/{endpoint}"
        response = as_client.post_sync(api, path, json={"query": query, **body_base})
        timings["http_ms"].append((time.perf_counter() - t0) * 1000)
        result = response.json()
        if endpoint == "context":
            timings["tokens"].append(result["tokens"])
            timings["cited"].append(len(result["cited"]))
            continue
        timings["server_ms"].append(result["duration_ms"])
        for stage, ms in result["stage_durations_ms"].items():
            timings[stage].append(ms)
    return timings


def show(label: str, timings: dict[str, list[float]]) -> None:
    print(f"  {label}:")
    for name in (
        "http_ms",
        "server_ms",
        *sorted(k for k in timings if k not in ("http_ms", "server_ms")),
    ):
        values = timings.get(name)
        if not values:  # /context reports no server time or stages
            continue
        print(
            f"    {name:22s} p50 {percentile(values, 50):7.2f}  p95 {percentile(values, 95):7.2f}"
            f"  p99 {percentile(values, 99):7.2f}  (n={len(values)})"
        )


async def main_async(args: argparse.Namespace) -> int:
    engine = owner_engine(Settings())  # loads rows, drops and builds indexes, vacuums
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=120)
    run = args.keep or uuid.uuid4().hex[:6]
    target = f"scale-{run}-target"
    others = [f"scale-{run}-u{i:03d}" for i in range(args.other_users)]
    rng = random.Random(uuid.uuid4().hex)  # new queries each run: the API may cache the last
    memories: Memories
    if args.memories == "locomo":
        memories = LocomoMemories()
        questions, _ = memories.questions(10**6, np.random.default_rng(rng.randrange(2**32)))
    else:
        memories = SyntheticMemories(word_vectors())

    def new_queries(count: int) -> list[str]:
        if args.memories == "locomo":  # real questions, never asked before in this run
            return [questions.pop() for _ in range(count)]
        return [" ".join(rng.choice(WORDS) for _ in range(8)) + "?" for _ in range(count)]

    try:
        started = time.perf_counter()
        kept = await stored(engine, [*others, target]) if args.keep else {}
        if args.bulk_load and min(kept.get(user, 0) for user in others) < args.other_size:
            await drop_hnsw_indexes(engine)
        for number, user in enumerate(others, start=1):
            await grow(engine, memories, user, kept.get(user, 0), args.other_size)
            if number % 20 == 0:
                print(f"[load] {number}/{len(others)} other users", flush=True)
        have = kept.get(target, 0)
        for size in (int(s) for s in args.sizes.split(",")):
            if args.bulk_load and have < size:
                await drop_hnsw_indexes(engine)
            await grow(engine, memories, target, have, size)
            have = max(have, size)
            if args.bulk_load:
                await build_hnsw(engine)
            print(
                f"[load] target user at {size} memories ({time.perf_counter() - started:.0f} s); "
                "waiting for the relay ...",
                flush=True,
            )
            wait_for_outbox(api)
            # What a DBA runs after a bulk load; otherwise autovacuum works through the new
            # rows while the first queries are timed.
            await vacuum_analyze(engine)
            measure(api, target, new_queries(10))
            print(
                f"== {size} memories for the queried user, {len(others)} other users x "
                f"{args.other_size}"
            )
            for profile in args.profiles.split(","):
                # New queries per profile: the second must not find the first's embeddings.
                unique = new_queries(args.queries)
                timed = measure(api, target, unique, profile)
                show(f"profile {profile}, unique queries (embedding computed)", timed)
                timed = measure(api, target, unique, profile)
                show(f"profile {profile}, repeated queries (embedding cached)", timed)
            if args.context:  # the same user's context block, in the same run as its searches
                unique = new_queries(args.queries)
                for label in ("unique queries (embedding computed)", "repeated queries (cached)"):
                    timed = measure(
                        api, target, unique, endpoint="context", max_tokens=args.max_tokens
                    )
                    show(f"context, max_tokens {args.max_tokens}, {label}", timed)
    finally:
        try:
            if not args.keep:  # a kept run's users stay for the next run with the same name
                await erase(api, engine, [target, *others], args.bulk_load)
        finally:  # the indexes come back even when the erase fails half-way
            await build_hnsw(engine)
            if not args.keep:
                await vacuum_analyze(engine)
            await engine.dispose()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--sizes", default="1000,10000", help="queried user's sizes, ascending")
    parser.add_argument("--other-users", type=int, default=99)
    parser.add_argument("--other-size", type=int, default=100)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument(
        "--profiles", default="paper,default", help="retrieval profiles timed, in turn"
    )
    parser.add_argument(
        "--keep",
        metavar="NAME",
        help="name the users after NAME and keep them at the end; a later run with the same "
        "NAME loads only what is missing (then erase them with DELETE /v1/users/scale-NAME-*)",
    )
    parser.add_argument(
        "--memories",
        choices=("synthetic", "locomo"),
        default="synthetic",
        help="synthetic: 73-word sentences, 8-word queries; locomo: pairs of real LoCoMo turns "
        "with their real embeddings, queried by LoCoMo's real questions (bench.scale's "
        "LocomoMemories)",
    )
    parser.add_argument(
        "--context",
        action="store_true",
        help="also time POST /context (the prompt-ready block of issue 43) for the same user, "
        "with its tokens and cited memories",
    )
    parser.add_argument("--max-tokens", type=int, default=400, help="with --context")
    parser.add_argument(
        "--bulk-load",
        action="store_true",
        help="drop and rebuild the HNSW indexes around each load (benchmark databases only)",
    )
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
