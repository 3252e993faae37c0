"""Chat-style users whose facts change, through the service's real API (its own command, not a
test). Issue 52, item 5.

People tell an assistant about themselves in passing, inside long requests, several facts to a
turn, and weeks later say that one of them changed ("we relocated", "I handed in my notice").
The data (bench/data/chat/, written for this bench: no benchmark's conversations, none of the
issue's examples) comes in two parts and two splits, `dev` (read while working on the
product) and `heldout` (kept for the end; nobody tunes on it):

* `--part chat` (the default): users of 6-12 user turns, dated over weeks and months with
  their UTC offsets, each turn sent as a message (`POST /messages?wait=true`); then 2-4
  questions an agent would ask, whose answer is the *current* fact. Per split and search
  profile: hit@1, hit@3, how often the replaced fact ranks above the current one, and the
  share of context blocks (`POST /context`) that hold the current fact and show the replaced
  one only as replaced; the message latency of ingestion.
* `--part updates`: cases of earlier messages (some stating several facts), then one
  chat-style message that changes one of them in passing, or adds beside them. Per split:
  recall and precision of supersessions, and the unrelated facts that stopped being current.

What counts, exactly, is in bench/chat_scoring.py. Every user is new (its id carries the
run's id) and erased afterwards.

    make bench-chat                                   # both parts
    make bench-chat BENCH_ARGS="--part updates --splits heldout"
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

import httpx

from bench import as_client
from bench.chat_scoring import (
    SPLITS,
    ChatTally,
    ChatUser,
    UpdateCase,
    UpdateTally,
    context_right,
    load_chat_users,
    load_update_cases,
    score_search,
    score_update,
)
from bench.small_users import ask, release

PROFILES = ("default", "paper")
UPDATE_START = datetime(2026, 3, 2, 18, 30)  # an update case's first message; the rest days later


def send(api: httpx.Client, user_id: str, content: str, timestamp: str) -> float:
    """One user turn as a message, answered once its job is done; its latency in ms."""
    body = {"messages": [{"content": content, "role": "user", "timestamp": timestamp}]}
    t0 = time.perf_counter()
    response = as_client.post_sync(
        api, f"/v1/users/{user_id}/messages", params={"wait": "true"}, json=body
    )
    elapsed = (time.perf_counter() - t0) * 1000
    if response.json()["state"] != "done":
        raise RuntimeError(f"{user_id}: message job {response.json()['state']}")
    return elapsed


def current_memories(api: httpx.Client, user_id: str) -> list[dict[str, Any]]:
    """The user's current memories, every page."""
    memories: list[dict[str, Any]] = []
    params: dict[str, Any] = {"limit": 200}
    while True:
        page = api.get(f"/v1/users/{user_id}/memories", params=params)
        page.raise_for_status()
        memories.extend(page.json()["items"])
        if not (cursor := page.json().get("next_cursor")):
            return memories
        params["cursor"] = cursor


def _as_of(user: ChatUser) -> str:
    """A day after the user's last turn: when the agent asks."""
    last = max(datetime.fromisoformat(t["timestamp"]) for t in user.turns)
    return (last + timedelta(days=1)).isoformat()


def run_chat(
    api: httpx.Client, users: list[ChatUser], run_id: str, profiles: list[str], keep: bool
) -> tuple[dict[tuple[str, str], ChatTally], list[float], list[str]]:
    """Every user's turns, then its questions: tallies by (split, profile), and by (split,
    "context") for the blocks; message latencies; one line per miss, for reading."""
    names = {u.name: f"chat-{run_id}-{u.name}" for u in users}
    tallies: dict[tuple[str, str], ChatTally] = defaultdict(ChatTally)
    latency: list[float] = []
    misses: list[str] = []
    try:
        for number, user in enumerate(users, start=1):
            for turn in user.turns:
                latency.append(send(api, names[user.name], turn["content"], turn["timestamp"]))
            for question in user.questions:
                body = {"query": question.question, "as_of": _as_of(user)}
                for profile in profiles:
                    hits = ask(
                        api, names[user.name], {**body, "consistency": "indexed"}, profile, []
                    )
                    score = score_search(hits, question)
                    tallies[user.split, profile].add(score)
                    if not score.hit1 or score.replaced_above:
                        top = hits[0]["memory"]["content"][:80] if hits else "(nothing)"
                        misses.append(
                            f"{user.split} {user.name} [{profile}] "
                            f"{question.question!r}: top {top!r}"
                        )
                block = as_client.post_sync(
                    api, f"/v1/users/{names[user.name]}/context", json=body
                ).json()["block"]
                right = context_right(block, question)
                tallies[user.split, "context"].add_context(right)
                if not right:
                    misses.append(f"{user.split} {user.name} [context] {question.question!r}")
            print(f"[chat] {number}/{len(users)} users", flush=True)
    finally:
        release(api, names.values(), keep, run_id)
    return tallies, latency, misses


def run_updates(
    api: httpx.Client, cases: list[UpdateCase], run_id: str, keep: bool
) -> tuple[dict[str, UpdateTally], list[str]]:
    """Every case as a new user: its earlier messages, then its message; tallies by split,
    and one line per wrong case."""
    names = {c.name: f"chatupd-{run_id}-{c.name}" for c in cases}
    tallies: dict[str, UpdateTally] = defaultdict(UpdateTally)
    wrong: list[str] = []
    try:
        for number, case in enumerate(cases, start=1):
            user_id = names[case.name]
            for day, content in enumerate(case.earlier):
                send(
                    api,
                    user_id,
                    content,
                    (UPDATE_START + timedelta(days=2 * day)).isoformat() + "Z",
                )
            before = current_memories(api, user_id)
            said = UPDATE_START + timedelta(days=2 * len(case.earlier) + 5)
            send(api, user_id, case.message, said.isoformat() + "Z")
            score = score_update(case, before, current_memories(api, user_id))
            tallies[case.split].add(score)
            if (
                score.superseded != score.expected
                or score.kept_lost
                or (score.ended != score.ended_right)
            ):
                wrong.append(
                    f"{case.split} {case.name}: expected {case.supersedes!r}, superseded "
                    f"{score.superseded}, ended {score.ended} ({score.ended_right} right), "
                    f"lost {score.kept_lost}"
                )
            if number % 10 == 0 or number == len(cases):
                print(f"[updates] {number}/{len(cases)} cases", flush=True)
    finally:
        release(api, names.values(), keep, run_id)
    return tallies, wrong


def _share(part: int, whole: int) -> str:
    return f"{part / whole:.3f}" if whole else "-"


def chat_report(
    tallies: dict[tuple[str, str], ChatTally], latency: list[float], profiles: list[str]
) -> str:
    lines = [
        "| split | profile | questions | hit@1 | hit@3 | replaced above current "
        "(of changed) | context blocks right |",
        "|---|---|---|---|---|---|---|",
    ]
    for split in SPLITS:
        context = tallies.get((split, "context"))
        for profile in profiles:
            if (tally := tallies.get((split, profile))) is None:
                continue
            blocks = (
                f"{_share(context.contexts_right, context.contexts)} "
                f"({context.contexts_right}/{context.contexts})"
                if context
                else "-"
            )
            lines.append(
                f"| {split} | {profile} | {tally.questions} | "
                f"{_share(tally.hit1, tally.questions)} | {_share(tally.hit3, tally.questions)} | "
                f"{tally.replaced_above} ({tally.changed}) | {blocks} |"
            )
    if latency:
        ordered = sorted(latency)
        lines.append(
            f"\n{len(latency)} messages (wait=true): p50 {statistics.median(ordered):.0f} ms, "
            f"p95 {ordered[int(0.95 * (len(ordered) - 1))]:.0f} ms, max {ordered[-1]:.0f} ms"
        )
    return "\n".join(lines)


def updates_report(tallies: dict[str, UpdateTally]) -> str:
    lines = [
        "| split | cases | changes | superseded (recall) | earlier memories ended | "
        "ended the right one (precision) | unrelated facts no longer current (cases) |",
        "|---|---|---|---|---|---|---|",
    ]
    for split in SPLITS:
        if (t := tallies.get(split)) is None:
            continue
        precision = f"{t.precision:.3f}" if t.precision is not None else "-"
        lines.append(
            f"| {split} | {t.cases} | {t.expected} | {t.superseded} ({t.recall:.3f}) | "
            f"{t.ended} | {t.ended_right} ({precision}) | {t.kept_lost} ({t.cases_losing}) |"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    run_id = uuid.uuid4().hex[:6]
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=900)
    if args.part in ("chat", "both"):
        users = [u for split in args.splits for u in load_chat_users(split)]
        tallies, latency, misses = run_chat(api, users, run_id, args.profiles, args.keep)
        if args.verbose:
            print("\n".join(misses))
        print("\nChat users:\n" + chat_report(tallies, latency, args.profiles), flush=True)
    if args.part in ("updates", "both"):
        cases = [c for split in args.splits for c in load_update_cases(split)]
        update_tallies, wrong = run_updates(api, cases, run_id, args.keep)
        if args.verbose:
            print("\n".join(wrong))
        print("\nChat-style updates:\n" + updates_report(update_tallies), flush=True)
    print(f"\nclient retries: {as_client.RETRIES.describe()}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--part", choices=("chat", "updates", "both"), default="both")
    parser.add_argument(
        "--splits",
        type=lambda text: text.split(","),
        default=list(SPLITS),
        help="comma-separated: dev, heldout",
    )
    parser.add_argument(
        "--profiles",
        type=lambda text: text.split(","),
        default=list(PROFILES),
        help="search profiles (each with levers on +name or off -name, as bench.small_users)",
    )
    parser.add_argument("--keep", action="store_true", help="leave the users in place")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every miss")
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
