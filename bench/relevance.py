"""The relevance floor on LoCoMo, through the service's real API (its own command, not a test).

Every question of the chosen conversations, categories 1-5, is asked once with the `default`
profile, `min_relevance: 0` and top_k 50, and each result's `relevance` is kept. A floor is then
applied to those answers the way the service applies it (results below it leave before the
top 10 are taken), for each floor of a grid:

- recall@10 of categories 1-4 (answers in memory) and its cost against no floor;
- "nothing relevant": a search left with no result. LoCoMo's category 5 (adversarial) asks about
  things that were not said (the premise is wrong), so it stands for "not in memory": the
  precision and recall of "nothing relevant" against it, and how often a question of
  categories 1-4 was wrongly answered with nothing;
- how relevance separates a question's evidence turns from the other results (percentiles).

The floor is chosen on the first conversations (`--dev`, default 5) and reported on the others,
so the figure it is judged by is not the one it was fitted on. A floor above a result that
ranked past 50 could let that result in on the service; the offline figure cannot see it, so
recall here is a lower bound. Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx

from bench import as_client
from bench.locomo import (
    Conversation,
    evidence_ids,
    ingest,
    load_conversations,
    percentile,
    release_users,
    wait_for_outbox,
)

FLOORS = (0.0, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
TOP_K = 50


@dataclass(frozen=True)
class Answer:
    conversation: int  # its position, from 1
    category: int
    evidence: frozenset[str]
    results: tuple[tuple[str, float], ...]  # (dia_id, relevance), in the service's order


def ask_all(
    api: httpx.Client, users: dict[str, str], conversations: list[Conversation], workers: int
) -> list[Answer]:
    jobs = [(n, c, q) for n, c in enumerate(conversations, start=1) for q in c.questions]

    def ask(job: tuple[int, Conversation, dict[str, Any]]) -> Answer:
        number, conversation, question = job
        body = {
            "query": question["question"],
            "top_k": TOP_K,
            "as_of": conversation.as_of.isoformat(),
            "profile": "default",
            "min_relevance": 0,
        }
        path = f"/v1/users/{users[conversation.sample_id]}/search"
        response = as_client.post_sync(api, path, json=body)
        results = tuple(
            (r["memory"]["metadata"].get("dia_id"), r["relevance"])
            for r in response.json()["results"]
            if r["history_of"] is None
        )
        return Answer(
            number, question["category"], frozenset(evidence_ids(question["evidence"])), results
        )

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(ask, jobs))


def at_floor(answer: Answer, floor: float) -> list[str]:
    return [dia for dia, relevance in answer.results if relevance >= floor][:10]


def figures(answers: list[Answer], floor: float) -> dict[str, float]:
    in_memory = [a for a in answers if a.category != 5]
    adversarial = [a for a in answers if a.category == 5]
    recall = statistics.fmean(
        len(a.evidence & set(at_floor(a, floor))) / len(a.evidence) for a in in_memory
    )
    empty = [a for a in answers if not at_floor(a, floor)]
    said_nothing_right = sum(1 for a in empty if a.category == 5)
    return {
        "recall@10": recall,
        "nothing_precision": said_nothing_right / len(empty) if empty else float("nan"),
        "nothing_recall": said_nothing_right / len(adversarial) if adversarial else float("nan"),
        "false_nothing": sum(1 for a in empty if a.category != 5) / len(in_memory),
        "kept_per_question": statistics.fmean(len(at_floor(a, floor)) for a in answers),
    }


def table(answers: list[Answer], title: str) -> list[str]:
    base = figures(answers, 0.0)["recall@10"]
    lines = [
        f"### {title}: {len(answers)} questions "
        f"({sum(a.category == 5 for a in answers)} of category 5)",
        "",
        '| min_relevance | recall@10 (cat. 1-4) | cost | "nothing relevant": precision | '
        "recall (cat. 5) | cat. 1-4 answered with nothing | results kept (of 10) |",
        "|---|---|---|---|---|---|---|",
    ]
    for floor in FLOORS:
        f = figures(answers, floor)
        lines.append(
            f"| {floor:.2f} | {f['recall@10']:.3f} | {f['recall@10'] - base:+.3f} | "
            f"{f['nothing_precision']:.3f} | {f['nothing_recall']:.3f} | "
            f"{f['false_nothing']:.3f} | {f['kept_per_question']:.1f} |"
        )
    return lines


def separation(answers: list[Answer]) -> list[str]:
    """Relevance of evidence against the rest of the top 10, and of category 5's best hit."""
    evidence: list[float] = []
    other: list[float] = []
    best_in_memory: list[float] = []
    best_adversarial: list[float] = []
    for a in answers:
        top = a.results[:10]
        if a.category == 5:
            best_adversarial.append(max((r for _, r in top), default=0.0))
            continue
        best_in_memory.append(max((r for _, r in top), default=0.0))
        for dia, relevance in top:
            (evidence if dia in a.evidence else other).append(relevance)
    rows = [
        ("evidence turns in the top 10 (cat. 1-4)", evidence),
        ("other results in the top 10 (cat. 1-4)", other),
        ("best result, cat. 1-4", best_in_memory),
        ("best result, cat. 5", best_adversarial),
    ]
    lines = ["| relevance of | n | p5 | p25 | p50 | p75 | p95 |", "|---|---|---|---|---|---|---|"]
    for name, values in rows:
        if values:
            cells = " | ".join(f"{percentile(values, q):.3f}" for q in (5, 25, 50, 75, 95))
            lines.append(f"| {name} | {len(values)} | {cells} |")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--dev", type=int, default=5, help="conversations the floor is chosen on")
    parser.add_argument("--workers", type=int, default=2, help="questions asked at once")
    parser.add_argument("--keep", action="store_true", help="keep the ingested users afterwards")
    parser.add_argument("--reuse", metavar="RUN_ID", help="ask against a kept run's users")
    args = parser.parse_args()

    run_id = args.reuse or uuid.uuid4().hex[:6]
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=900)
    conversations = load_conversations(args.conversations)
    users = {c.sample_id: f"relevance-{run_id}-{c.sample_id}" for c in conversations}
    try:
        if not args.reuse:
            for number, conversation in enumerate(conversations, start=1):
                ingest(api, users[conversation.sample_id], conversation)
                print(
                    f"[ingest] {number}/{len(conversations)} {conversation.sample_id}", flush=True
                )
            wait_for_outbox(api)
        answers = ask_all(api, users, conversations, args.workers)
    finally:
        release_users(api, users.values(), keep=args.keep, run_id=run_id)
    dev = [a for a in answers if a.conversation <= args.dev]
    held_out = [a for a in answers if a.conversation > args.dev]
    lines = ["# The relevance floor on LoCoMo", ""]
    lines += [*table(dev, f"Conversations 1-{args.dev} (where the default is chosen)"), ""]
    if held_out:
        lines += table(held_out, f"Conversations {args.dev + 1}-{len(conversations)} (held out)")
        lines += [""]
    lines += ["### Relevance, all conversations", "", *separation(answers)]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
