"""Users with few memories, through the service's real API (its own command, not a test).

Every trial, demo and new user starts small, and a lever tuned on users with hundreds of
memories can misfire on a dozen. This bench makes small users out of LoCoMo conversations: a
user is one session, two consecutive sessions, or the first turns of a session, of 5 to 40
turns (one memory a turn, as bench/locomo.py writes them), and is asked the LoCoMo questions
whose evidence lies wholly inside its turns (categories 1-4). Per size bucket and profile it
reports hit@1 and hit@3 (an evidence turn first, or in the top 3) and the **relevance
inversions** of the top 3: pairs where a result is ranked above one whose relevance is higher
by more than 0.1. The data is read from ../shared/data and never copied.

    make bench-small-users BENCH_ARGS="--per-bucket 40"
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import IO, Any, Protocol

import httpx

from bench import as_client
from bench.locomo import Conversation, evidence_ids, load_conversations, wait_for_outbox

BUCKETS = ((5, 10), (11, 20), (21, 40))
PROFILES = ("paper", "default")


def variant_body(name: str) -> dict[str, Any]:
    """A search body's profile and levers from a name: `default`, `paper`, or a profile with
    levers switched on and off, e.g. `default+relevance_order-specificity`."""
    profile, *changes = re.split(r"(?=[+-])", name)
    return {
        "profile": profile,
        "levers": {change[1:]: change[0] == "+" for change in changes},
    }


INVERSION = 0.1  # a relevance gap beyond this, ranked the wrong way, is an inversion
TOP_K = 10


@dataclass(frozen=True)
class SmallUser:
    name: str
    turns: list[dict[str, Any]]
    questions: list[dict[str, Any]]
    as_of: datetime

    @property
    def bucket(self) -> tuple[int, int]:
        return next(b for b in BUCKETS if b[0] <= len(self.turns) <= b[1])


def _sessions(conversation: Conversation) -> list[list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = {}
    for turn in conversation.turns:
        grouped.setdefault(turn["session_id"], []).append(turn)
    return list(grouped.values())


def _user(conversation: Conversation, name: str, turns: list[dict[str, Any]]) -> SmallUser:
    ids = {t["metadata"]["dia_id"] for t in turns}
    questions = [
        q
        for q in conversation.questions
        if q["category"] in (1, 2, 3, 4) and evidence_ids(q["evidence"]) <= ids
    ]
    last = max(datetime.fromisoformat(t["event_time"]) for t in turns)
    return SmallUser(name, turns, questions, last + timedelta(hours=1))


def small_users(conversations: list[Conversation], per_bucket: int, seed: int) -> list[SmallUser]:
    """Users of every bucket, at most `per_bucket` each, drawn with a fixed seed: sessions,
    pairs of consecutive sessions and prefixes of sessions that hold a question's evidence."""
    rng = random.Random(seed)
    pool: dict[tuple[int, int], list[SmallUser]] = defaultdict(list)
    for conversation in conversations:
        sessions = _sessions(conversation)
        shapes: list[tuple[str, list[dict[str, Any]]]] = []
        for number, session in enumerate(sessions):
            shapes.append((f"s{number}", session))
            if number + 1 < len(sessions):
                shapes.append((f"s{number}-pair", session + sessions[number + 1]))
            size = rng.randint(BUCKETS[0][0], BUCKETS[0][1])
            if size < len(session):
                shapes.append((f"s{number}-first{size}", session[:size]))
        for shape, turns in shapes:
            if not BUCKETS[0][0] <= len(turns) <= BUCKETS[-1][1]:
                continue
            user = _user(conversation, f"{conversation.sample_id}-{shape}", turns)
            if user.questions:
                pool[user.bucket].append(user)
    chosen = []
    for bucket in BUCKETS:
        users = pool[bucket]
        rng.shuffle(users)
        chosen.extend(users[:per_bucket])
    return chosen


@dataclass
class Tally:
    questions: int = 0
    hit1: int = 0
    hit3: int = 0
    inversions: int = 0
    worst_gap: float = 0.0

    def add(self, results: list[dict[str, Any]], evidence: set[str], key: str = "dia_id") -> None:
        """One question's results; `evidence` names the answering memories by the metadata
        field `key`."""
        ranked = [r["memory"]["metadata"].get(key) for r in results]
        self.questions += 1
        self.hit1 += bool(ranked[:1] and ranked[0] in evidence)
        self.hit3 += bool(evidence & set(ranked[:3]))
        relevance = [r.get("relevance") for r in results[:3]]
        for above in range(len(relevance)):
            for below in range(above + 1, len(relevance)):
                high, low = relevance[above], relevance[below]
                if high is None or low is None:
                    continue
                gap = low - high
                if gap > INVERSION:
                    self.inversions += 1
                self.worst_gap = max(self.worst_gap, gap)

    def merge(self, other: Tally) -> None:
        self.questions += other.questions
        self.hit1 += other.hit1
        self.hit3 += other.hit3
        self.inversions += other.inversions
        self.worst_gap = max(self.worst_gap, other.worst_gap)


def write_dump(
    dump: IO[str],
    user: str,
    size: int,
    question: dict[str, Any],
    evidence: set[str],
    variant: str,
    results: list[dict[str, Any]],
) -> None:
    """One search's explained results as a JSON line (`--dump`), for re-ranking offline."""
    row = {
        "user": user,
        "size": size,
        "question": question["question"],
        "evidence": sorted(evidence),
        "variant": variant,
        "results": results,
    }
    dump.write(json.dumps(row) + "\n")


def ask(
    api: httpx.Client,
    user_id: str,
    body: dict[str, Any],
    variant: str,
    latency: list[float],
) -> list[dict[str, Any]]:
    """One search of `variant` (top TOP_K, `body` giving the query, `as_of` and the rest), its
    HTTP time appended to `latency`; the current results (not the history the search adds)."""
    body = {"top_k": TOP_K, **body, **variant_body(variant)}
    t0 = time.perf_counter()
    response = as_client.post_sync(api, f"/v1/users/{user_id}/search", json=body)
    latency.append((time.perf_counter() - t0) * 1000)
    return [r for r in response.json()["results"] if r["history_of"] is None]


def release(api: httpx.Client, user_ids: Iterable[str], keep: bool, run_id: str) -> None:
    """Keep the bench's users for a later --reuse, or erase them."""
    if keep:
        print(f"kept the users: rerun with --reuse {run_id}", flush=True)
        return
    for user_id in user_ids:
        api.delete(f"/v1/users/{user_id}")


def _label(bucket: tuple[int, int]) -> str:
    return f"{bucket[0]}-{bucket[1]}"


def stored_whole(api: httpx.Client, prefix: str) -> dict[str, int]:
    """Each stored user's count of current memories, by user id, for the ids with `prefix`."""
    counts: dict[str, int] = {}
    cursor = None
    while True:
        params: dict[str, Any] = {"prefix": prefix, "limit": 200}
        if cursor:
            params["cursor"] = cursor
        page = api.get("/v1/users", params=params).json()
        counts.update({u["user_id"]: u["memories"] for u in page["items"]})
        if not (cursor := page.get("next_cursor")):
            return counts


def run(args: argparse.Namespace) -> int:
    run_id = args.reuse or uuid.uuid4().hex[:6]
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=900)
    users = small_users(load_conversations(args.conversations), args.per_bucket, args.seed)
    names = {user.name: f"small-{run_id}-{user.name}" for user in users}
    if args.reuse:  # an earlier run may have stopped mid-ingest: ask the users stored whole
        counts = stored_whole(api, f"small-{run_id}-")
        whole = [u for u in users if counts.get(names[u.name]) == len(u.turns)]
        if len(whole) < len(users):
            print(
                f"[reuse] {len(users) - len(whole)} of {len(users)} users not stored whole: "
                "left out",
                flush=True,
            )
        users = whole
    tallies: dict[tuple[str, tuple[int, int]], Tally] = defaultdict(Tally)
    latency: list[float] = []
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    try:
        started = time.perf_counter()
        for number, user in enumerate(users, start=1):
            if args.reuse:
                break  # written by an earlier --keep run with the same seed and sizes
            as_client.post_batch_sync(api, names[user.name], user.turns)
            if number % 20 == 0 or number == len(users):
                print(
                    f"[ingest] {number}/{len(users)} users ({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
        if not args.no_wait:
            wait_for_outbox(api)
        asked = 0
        for user in users:
            for question in user.questions:
                evidence = evidence_ids(question["evidence"])
                for profile in args.variants:
                    body = {
                        "query": question["question"],
                        "as_of": user.as_of.isoformat(),
                        "explain": dump is not None,
                    }
                    results = ask(api, names[user.name], body, profile, latency)
                    tallies[profile, user.bucket].add(results, evidence)
                    if dump is not None:
                        write_dump(
                            dump, user.name, len(user.turns), question, evidence, profile, results
                        )
                asked += 1
        print(f"[search] {asked} questions, {len(args.variants)} variants each", flush=True)
    finally:
        if dump is not None:
            dump.close()
        release(api, names.values(), args.keep or bool(args.reuse), run_id)
    print(report(users, tallies, latency, args.variants))
    return 0


class Bucketed(Protocol):
    """A bench user as the report counts it: its memories (turns) and their size bucket."""

    @property
    def turns(self) -> Sequence[object]: ...

    @property
    def bucket(self) -> tuple[int, int]: ...


def report(
    users: Sequence[Bucketed],
    tallies: dict[tuple[str, tuple[int, int]], Tally],
    latency: list[float],
    variants: list[str],
) -> str:
    lines = [
        "| bucket (memories) | users | questions | profile | hit@1 | hit@3 | "
        f"inversions > {INVERSION} in top 3 | worst gap |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for bucket in (*BUCKETS, None):
        in_bucket = [u for u in users if bucket is None or u.bucket == bucket]
        for profile in variants:
            parts = [t for (p, b), t in tallies.items() if p == profile and bucket in (None, b)]
            total = Tally(
                sum(t.questions for t in parts),
                sum(t.hit1 for t in parts),
                sum(t.hit3 for t in parts),
                sum(t.inversions for t in parts),
                max((t.worst_gap for t in parts), default=0.0),
            )
            if not total.questions:
                continue
            lines.append(
                f"| {_label(bucket) if bucket else 'all'} | {len(in_bucket)} | "
                f"{total.questions} | {profile} | {total.hit1 / total.questions:.3f} | "
                f"{total.hit3 / total.questions:.3f} | {total.inversions} | "
                f"{total.worst_gap:.3f} |"
            )
    sizes = [len(u.turns) for u in users]
    if sizes and latency:
        lines.append(
            f"\n{len(users)} users, {min(sizes)}-{max(sizes)} memories (median "
            f"{statistics.median(sizes):g}); search p50 {statistics.median(latency):.0f} ms"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--conversations", type=int, default=None, help="the first N only")
    parser.add_argument("--per-bucket", type=int, default=40, help="users per size bucket")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--variants",
        type=lambda text: text.split(","),
        default=list(PROFILES),
        help="comma-separated profiles, each with levers on (+name) or off (-name)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the users in place")
    parser.add_argument("--reuse", help="the run id of an earlier --keep run: search only")
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="with --reuse: ask at once, without waiting for the outbox and the background "
        "workers of the whole service (another job's writes keep them busy)",
    )
    parser.add_argument(
        "--dump", type=Path, help="write every search's explained results here (JSON lines)"
    )
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
