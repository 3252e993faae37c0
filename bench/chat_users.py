"""Small users made of real chats (LongMemEval's development split), searched right after their
memories are written and again once the background has settled (issue 55, items 1-2).

Each question of ../shared/data/longmemeval-dev (read there, never copied) whose answer is in a
user turn becomes a user: the user turns of its evidence sessions, one memory a turn, written
in one `POST /memories/batch` with each session's date as `event_time`. Its question is asked at
once (`consistency: indexed`, `as_of` the question's date): **fresh**, what a user's next
question meets. When every user is written, the service is left to finish its background
work (BM25 outbox, sentence vectors, entities) and every question is asked again: **settled**.
A hit is a turn marked `has_answer` among the first 1, 3 or 5 current results.

The questions are split by a seeded draw: **train** (read while building) and **validation**
(reported, never tuned on), the split fixed by question id. Per split, moment and profile the
bench prints hit@1/3/5, then per question type for the validation split.

    make bench-chat-users                                  # both splits, default and paper
    make bench-chat-users BENCH_ARGS="--split train --limit 60"
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from bench import as_client
from bench.facts import LONGMEMEVAL
from bench.locomo import wait_for_outbox
from bench.small_users import ask, release

PROFILES = ("default", "paper")
MOMENTS = ("fresh", "settled")
SPLITS = ("train", "validation")
# A question's split: the first byte of sha256(SALT + question id) below VALIDATION_SHARE.
SALT = "cognis-chat-users-1"
VALIDATION_SHARE = 0.5
CUTS = (1, 3, 5)


@dataclass(frozen=True, slots=True)
class ChatUser:
    question_id: str
    question_type: str
    question: str
    asked_at: datetime
    turns: list[dict[str, Any]]  # the batch's memories: content, event_time, metadata.turn
    evidence: frozenset[str]  # metadata.turn of the turns that hold the answer

    @property
    def split(self) -> str:
        digest = hashlib.sha256(f"{SALT}{self.question_id}".encode()).digest()
        return "validation" if digest[0] < 256 * VALIDATION_SHARE else "train"


def _date(text: str) -> datetime:
    """LongMemEval's "2023/05/23 (Tue) 03:13", read as UTC."""
    day, _, clock = text.partition(" (")
    return datetime.strptime(f"{day} {clock.split(') ')[-1]}", "%Y/%m/%d %H:%M").replace(tzinfo=UTC)


def chat_users(path: os.PathLike[str] | str = LONGMEMEVAL) -> list[ChatUser]:
    """Every question whose answer some user turn holds, as a user of its sessions' user turns."""
    with lzma.open(path, "rt", encoding="utf-8") as file:
        questions = json.load(file)
    users = []
    for q in questions:
        turns, evidence = [], set()
        for number, (session, said) in enumerate(
            zip(q["haystack_sessions"], q["haystack_dates"], strict=True)
        ):
            for index, turn in enumerate(session):
                if turn["role"] != "user" or not turn["content"].strip():
                    continue
                key = f"{number}:{index}"
                turns.append(
                    {
                        "content": turn["content"].strip(),
                        "event_time": _date(said).isoformat(),
                        "metadata": {"turn": key},
                    }
                )
                if turn.get("has_answer"):
                    evidence.add(key)
        if evidence:
            users.append(
                ChatUser(
                    q["question_id"],
                    q["question_type"],
                    q["question"],
                    _date(q["question_date"]),
                    turns,
                    frozenset(evidence),
                )
            )
    return users


@dataclass
class Hits:
    questions: int = 0
    hits: dict[int, int] = field(default_factory=lambda: dict.fromkeys(CUTS, 0))

    def add(self, results: Sequence[dict[str, Any]], evidence: frozenset[str]) -> None:
        ranked = [r["memory"]["metadata"].get("turn") for r in results]
        self.questions += 1
        for cut in CUTS:
            self.hits[cut] += bool(evidence & set(ranked[:cut]))

    def row(self) -> str:
        rates = " | ".join(f"{self.hits[c] / self.questions:.3f}" for c in CUTS)
        return f"{self.questions} | {rates}"


def search_body(user: ChatUser) -> dict[str, Any]:
    return {"query": user.question, "as_of": user.asked_at.isoformat(), "consistency": "indexed"}


def report(
    tallies: dict[tuple[str, str, str, str], Hits], profiles: Sequence[str], splits: Sequence[str]
) -> str:
    """Per split, moment and profile, all types; then validation per question type."""
    head = "| split | moment | profile | questions | " + " | ".join(f"hit@{c}" for c in CUTS)
    lines = [head + " |", "|---" * (4 + len(CUTS)) + "|"]
    types = sorted({kind for (_, _, _, kind) in tallies})
    for split in splits:
        for moment in MOMENTS:
            for profile in profiles:
                total = Hits()
                for kind in types:
                    part = tallies.get((split, moment, profile, kind))
                    if part is not None:
                        total.questions += part.questions
                        for cut in CUTS:
                            total.hits[cut] += part.hits[cut]
                if total.questions:
                    lines.append(f"| {split} | {moment} | {profile} | {total.row()} |")
    shown = "validation" if "validation" in splits else splits[0]
    lines += ["", f"{shown}, per question type:", "", head.replace("split", "type") + " |"]
    lines.append("|---" * (4 + len(CUTS)) + "|")
    for kind in types:
        for moment in MOMENTS:
            for profile in profiles:
                if part := tallies.get((shown, moment, profile, kind)):
                    lines.append(f"| {kind} | {moment} | {profile} | {part.row()} |")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    run_id = uuid.uuid4().hex[:6]
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=900)
    users = [u for u in chat_users(args.data) if u.split in args.splits]
    if args.limit:
        users = users[: args.limit]
    names = {u.question_id: f"chatu-{run_id}-{u.question_id}" for u in users}
    tallies: dict[tuple[str, str, str, str], Hits] = defaultdict(Hits)
    latency: list[float] = []
    started = time.perf_counter()
    try:
        for number, user in enumerate(users, start=1):
            as_client.post_batch_sync(api, names[user.question_id], user.turns)
            for profile in args.profiles:
                results = ask(api, names[user.question_id], search_body(user), profile, latency)
                key = (user.split, "fresh", profile, user.question_type)
                tallies[key].add(results, user.evidence)
            if number % 20 == 0 or number == len(users):
                print(
                    f"[fresh] {number}/{len(users)} users written and asked "
                    f"({time.perf_counter() - started:.0f} s)",
                    flush=True,
                )
        wait_for_outbox(api)
        for user in users:
            for profile in args.profiles:
                results = ask(api, names[user.question_id], search_body(user), profile, latency)
                key = (user.split, "settled", profile, user.question_type)
                tallies[key].add(results, user.evidence)
        print(f"[settled] {len(users)} users asked again", flush=True)
    finally:
        release(api, names.values(), args.keep, run_id)
    print(report(tallies, args.profiles, args.splits))
    sizes = [len(u.turns) for u in users]
    if sizes and latency:
        print(
            f"\n{len(users)} users, {min(sizes)}-{max(sizes)} memories (median "
            f"{statistics.median(sizes):g}); search p50 {statistics.median(latency):.0f} ms"
        )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--data", default=LONGMEMEVAL, help="LongMemEval's oracle dev file")
    parser.add_argument(
        "--splits", type=lambda text: text.split(","), default=list(SPLITS), help="train,validation"
    )
    parser.add_argument("--profiles", type=lambda text: text.split(","), default=list(PROFILES))
    parser.add_argument("--limit", type=int, default=0, help="the first N users only")
    parser.add_argument("--keep", action="store_true", help="leave the users in place")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
