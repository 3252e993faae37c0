"""Small users of everyday first-person facts, through the service's real API (its own
command, not a test).

bench/small_users.py builds its users out of LoCoMo chat turns; the users a new deployment
starts with look different: a handful of first-person facts ("I teach maths at a high
school", "my sister is a dentist"), near-duplicates and distractors on the same topic, an
update told as a new memory, and a question about one of them asked in the third or second
person, often without the fact's key noun ("what does she do for a living?"). This set
(bench/data/small_users_facts.jsonl) was written for the purpose, not taken from a
benchmark: each line a user, its memories in the order they were told (a day apart), and 1-3
questions naming the memories that answer them. Its users are split in two halves by a fixed
seed: A, read while studying failures, and B, kept for the end; the report gives both.

    python -m bench.small_users_facts --variants default,paper
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench import as_client
from bench.small_users import BUCKETS, PROFILES, Tally, ask, release, report, write_dump

DATA = Path(__file__).parent / "data" / "small_users_facts.jsonl"
FIRST_DAY = datetime(2026, 1, 5, 9, 0)
FACT = "fact"  # the metadata key that names a memory in the set


@dataclass(frozen=True)
class FactUser:
    name: str
    split: str
    turns: list[dict[str, Any]]
    questions: list[dict[str, Any]]
    as_of: datetime

    @property
    def bucket(self) -> tuple[int, int]:
        return next(b for b in BUCKETS if b[0] <= len(self.turns) <= b[1])


def load_users(path: Path = DATA) -> list[FactUser]:
    """The set's users, each memory a turn dated a day after the one before."""
    users = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        turns = [
            {
                "content": text,
                "event_time": (FIRST_DAY + timedelta(days=number)).isoformat() + "Z",
                "metadata": {FACT: f"m{number}"},
            }
            for number, text in enumerate(row["memories"])
        ]
        questions = [
            {"question": q["question"], "evidence": {f"m{a}" for a in q["answers"]}}
            for q in row["questions"]
        ]
        as_of = FIRST_DAY + timedelta(days=len(turns) + 1)
        users.append(FactUser(row["user"], row["split"], turns, questions, as_of))
    return users


def run(args: argparse.Namespace) -> int:
    run_id = args.reuse or uuid.uuid4().hex[:6]
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=900)
    users = load_users(args.data)
    names = {user.name: f"facts-{run_id}-{user.name}" for user in users}
    # By split ("A", "B"), then variant and bucket.
    tallies: dict[str, dict[tuple[str, tuple[int, int]], Tally]] = defaultdict(
        lambda: defaultdict(Tally)
    )
    latency: list[float] = []
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    try:
        if not args.reuse:
            started = time.perf_counter()
            for number, user in enumerate(users, start=1):
                as_client.post_batch_sync(api, names[user.name], user.turns)
                if number % 10 == 0 or number == len(users):
                    print(
                        f"[ingest] {number}/{len(users)} users "
                        f"({time.perf_counter() - started:.0f} s)",
                        flush=True,
                    )
        for user in users:
            for question in user.questions:
                for variant in args.variants:
                    body = {
                        "query": question["question"],
                        "as_of": user.as_of.isoformat() + "Z",
                        "explain": bool(dump),
                        "consistency": "indexed",  # a user just written is asked at once
                    }
                    results = ask(api, names[user.name], body, variant, latency)
                    tallies[user.split][variant, user.bucket].add(
                        results, question["evidence"], FACT
                    )
                    if dump:
                        write_dump(
                            dump,
                            f"{user.split}:{user.name}",
                            len(user.turns),
                            question,
                            question["evidence"],
                            variant,
                            results,
                        )
    finally:
        if dump:
            dump.close()
        release(api, names.values(), args.keep or bool(args.reuse), run_id)
    for split in ("A", "B"):
        in_split = [u for u in users if u.split == split]
        print(f"\nHalf {split}:\n" + report(in_split, tallies[split], [], args.variants))
    both: dict[tuple[str, tuple[int, int]], Tally] = defaultdict(Tally)
    for split_tallies in tallies.values():
        for key, tally in split_tallies.items():
            both[key].merge(tally)
    print("\nBoth halves:\n" + report(users, both, latency, args.variants))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument(
        "--variants",
        type=lambda text: text.split(","),
        default=list(PROFILES),
        help="comma-separated profiles, each with levers on (+name) or off (-name)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the users in place")
    parser.add_argument("--reuse", help="the run id of an earlier --keep run: search only")
    parser.add_argument(
        "--dump", type=Path, help="write every search's explained results here (JSON lines)"
    )
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
