"""LoCoMo retrieval benchmark through the service's real API (its own command, not a test).

Each conversation becomes one user; each turn one memory ("Speaker: text", the session's date
as event_time, the turn's dia_id in metadata; image turns carry their caption). Every question
is asked through /search with the reference time just after the conversation's last session,
under each configuration of the ablation table. Reports evidence recall@5/10/20, recall_all@10,
MRR and nDCG@10 per category and for categories 1-4, latency per stage, and writes a Markdown
report and PNG charts. The data is read from ../shared/data and never copied.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench import as_client
from bench.foundation import LOCOMO

ROOT = Path(__file__).resolve().parent.parent
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
OFF = {"temporal": False, "dedup": False, "rerank": False, "history": False}

PAPER: dict[str, Any] = {"profile": "paper"}
# name -> the search body's switches: the ablation table, in order. The first rows take the
# paper's stages one by one; the lever rows add one lever each to the paper's full pipeline;
# "default profile" is the service's default (every lever that earned its place).
CONFIGS: dict[str, dict[str, Any]] = {
    "256D only": {**PAPER, "stages": {**OFF, "rescore_768d": False, "bm25": False}},
    "two-stage vector": {**PAPER, "stages": {**OFF, "bm25": False}},
    "BM25 only": {**PAPER, "stages": {**OFF, "vector": False}},
    "two-stage vector + sentences": {
        **PAPER,
        "stages": {**OFF, "bm25": False},
        "levers": {"sentence_vector": True},
    },
    "two-stage vector + context + sentences": {
        **PAPER,
        "stages": {**OFF, "bm25": False},
        "levers": {"sentence_vector": True, "context_vector": True},
    },
    "two-stage vector + context": {
        **PAPER,
        "stages": {**OFF, "bm25": False},
        "levers": {"context_vector": True},
    },
    "RRF 70/30 k=10": {**PAPER, "stages": dict(OFF)},
    "RRF 50/50 k=60": {
        **PAPER,
        "stages": dict(OFF),
        "rrf": {"k": 60, "weight_vector": 0.5, "weight_bm25": 0.5},
    },
    "+ temporal boost": {**PAPER, "stages": {**OFF, "temporal": True}},
    "+ de-duplication": {**PAPER, "stages": {**OFF, "temporal": True, "dedup": True}},
    "full pipeline": dict(PAPER),
    "+ context (vector)": {**PAPER, "levers": {"context_vector": True}},
    "+ context (BM25)": {**PAPER, "levers": {"context_bm25": True}},
    "+ speaker": {**PAPER, "levers": {"speaker": True}},
    "+ neighbours": {**PAPER, "levers": {"neighbours": True}},
    "+ score fusion": {**PAPER, "levers": {"score_fusion": True}},
    "+ time mentions": {**PAPER, "levers": {"time_mentions": True}},
    "+ speaker-free query": {**PAPER, "levers": {"speaker_query": True}},
    "+ balanced legs": {**PAPER, "levers": {"balanced_legs": True}},
    "+ entities": {**PAPER, "levers": {"entities": True}},
    "+ entity hop": {**PAPER, "levers": {"entity_hop": True}},
    "+ feedback": {**PAPER, "levers": {"feedback": True}},
    "+ BM25 proximity": {**PAPER, "levers": {"bm25_proximity": True}},
    "+ typed weights": {**PAPER, "levers": {"typed_weights": True}},
    "+ query parts": {**PAPER, "levers": {"query_parts": True}},
    "+ event order": {**PAPER, "levers": {"event_order": True}},
    "+ sessions": {**PAPER, "levers": {"sessions": True}},
    "+ sentence vector": {**PAPER, "levers": {"sentence_vector": True}},
    "+ specificity": {**PAPER, "levers": {"specificity": True}},
    "default profile": {"profile": "default"},
    # Leave-one-out: what each lever adds on top of the others (and the two left out, added).
    "default - context (vector)": {"profile": "default", "levers": {"context_vector": False}},
    "default - sentence vector": {"profile": "default", "levers": {"sentence_vector": False}},
    "default - specificity": {"profile": "default", "levers": {"specificity": False}},
    "default - context (BM25)": {"profile": "default", "levers": {"context_bm25": False}},
    "default - speaker": {"profile": "default", "levers": {"speaker": False}},
    "default - speaker-free query": {"profile": "default", "levers": {"speaker_query": False}},
    "default - first person": {"profile": "default", "levers": {"first_person": False}},
    "default - balanced legs": {"profile": "default", "levers": {"balanced_legs": False}},
    "default + entities": {"profile": "default", "levers": {"entities": True}},
    "default + entity hop": {"profile": "default", "levers": {"entity_hop": True}},
    "default + feedback": {"profile": "default", "levers": {"feedback": True}},
    "default + BM25 proximity": {"profile": "default", "levers": {"bm25_proximity": True}},
    "default + typed weights": {"profile": "default", "levers": {"typed_weights": True}},
    "default + neighbours": {"profile": "default", "levers": {"neighbours": True}},
    "default - time mentions": {"profile": "default", "levers": {"time_mentions": False}},
    "default + score fusion": {"profile": "default", "levers": {"score_fusion": True}},
    "default + query parts": {"profile": "default", "levers": {"query_parts": True}},
    "default + event order": {"profile": "default", "levers": {"event_order": True}},
    "default + sessions": {"profile": "default", "levers": {"sessions": True}},
    "default + query parts + sessions": {
        "profile": "default",
        "levers": {"query_parts": True, "sessions": True},
    },
}
# The two profiles: every metric per category and latency per stage are reported for both.
PROFILE_ROWS = {"full pipeline": "paper", "default profile": "default"}
TOP_K = 20


def parse_session_time(text: str) -> datetime:
    """LoCoMo writes "1:56 pm on 8 May, 2023"."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def evidence_ids(raw: list[str]) -> set[str]:
    """Some evidence entries hold several ids ("D1:3; D1:4"); normalise to single ids."""
    return {part for item in raw for part in re.findall(r"D\d+:\d+", item)}


@dataclass
class Conversation:
    sample_id: str
    turns: list[dict[str, Any]]
    questions: list[dict[str, Any]]
    as_of: datetime


def load_conversations(limit: int | None) -> list[Conversation]:
    data = json.loads(LOCOMO.read_text())
    conversations = []
    for sample in data[:limit]:
        talk = sample["conversation"]
        sessions = sorted(
            (int(k.split("_")[1]), k) for k in talk if re.fullmatch(r"session_\d+", k) and talk[k]
        )
        turns, last = [], None
        for _, key in sessions:
            when = parse_session_time(talk[f"{key}_date_time"])
            session = f"{sample['sample_id']}:{key}"
            last = when if last is None or when > last else last
            for turn in talk[key]:
                text = f"{turn['speaker']}: {turn['text']}"
                if turn.get("blip_caption"):
                    text += f" [shares an image: {turn['blip_caption']}]"
                turns.append(
                    {
                        "content": text,
                        "speaker": turn["speaker"],
                        "event_time": when.isoformat(),
                        # USER scope: every turn stays visible everywhere; the session only
                        # orders the conversation (context, neighbours).
                        "session_id": session,
                        "metadata": {"dia_id": turn["dia_id"]},
                    }
                )
        questions = [q for q in sample["qa"] if evidence_ids(q.get("evidence", []))]
        assert last is not None
        conversations.append(
            Conversation(sample["sample_id"], turns, questions, last + timedelta(hours=1))
        )
    return conversations


@dataclass
class Scores:
    """Per-question metrics, grouped by category."""

    values: dict[str, dict[int, list[float]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )

    def add(self, category: int, metric: str, value: float) -> None:
        self.values[metric][category].append(value)

    def mean(self, metric: str, categories: tuple[int, ...]) -> float:
        pool = [v for c in categories for v in self.values[metric].get(c, [])]
        return statistics.fmean(pool) if pool else float("nan")


def score_question(ranked: list[str], evidence: set[str], scores: Scores, category: int) -> None:
    for k in (5, 10, 20):
        scores.add(category, f"recall@{k}", len(evidence & set(ranked[:k])) / len(evidence))
    scores.add(category, "recall_all@10", float(evidence <= set(ranked[:10])))
    first = next((i for i, d in enumerate(ranked, start=1) if d in evidence), None)
    scores.add(category, "mrr", 1 / first if first else 0.0)
    dcg = sum(1 / math.log2(i + 1) for i, d in enumerate(ranked[:10], start=1) if d in evidence)
    ideal = sum(1 / math.log2(i + 1) for i in range(1, min(len(evidence), 10) + 1))
    scores.add(category, "ndcg@10", dcg / ideal)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def ingest(api: httpx.Client, user: str, conversation: Conversation) -> None:
    for offset in range(0, len(conversation.turns), 100):
        write_batch(api, user, conversation.turns[offset : offset + 100])


def write_batch(api: httpx.Client, user: str, batch: list[dict[str, Any]]) -> None:
    """One batch, as a client would send it (bench/as_client.py): a busy answer (503) is sent
    again after Retry-After, a batch refused for its size (413) in the parts that fit."""
    as_client.post_batch_sync(api, user, batch)


def wait_for_outbox(api: httpx.Client, timeout_s: float = 3600) -> None:
    """Until every memory is in the index and has its sentence vectors and its entities (the
    sentence and entity workers read them once the writes are done: levers sentence_vector
    and entity_hop read what they stored)."""
    deadline = time.monotonic() + timeout_s
    shown = None
    while time.monotonic() < deadline:
        ready = api.get("/ready").json()
        sentences = ready.get("sentences_pending", 0)
        # The entity hop reads what the entity worker found (absent: COGNIS_ENTITIES off).
        sentences += ready.get("entities_pending", 0)
        if ready.get("outbox_pending") == 0 and sentences == 0:
            time.sleep(1.0)  # one refresh interval, so the last documents are searchable
            return
        if sentences and sentences // 500 != shown:
            shown = sentences // 500
            print(f"[ingest] {sentences} memories wait for sentences or entities", flush=True)
        time.sleep(0.5)
    raise RuntimeError("the outbox, the sentence or the entity worker did not finish in time")


def release_users(api: httpx.Client, users: Iterable[str], *, keep: bool, run_id: str) -> None:
    """Erase the bench's users, or keep them (--keep) for a later --reuse."""
    if keep:
        print(f"kept the memories: rerun with --reuse {run_id}", flush=True)
        return
    for user in users:
        api.delete(f"/v1/users/{user}")


def run(args: argparse.Namespace) -> int:
    run_id = args.reuse or uuid.uuid4().hex[:6]
    out = Path(args.out or ROOT / "results" / f"locomo-{datetime.now(UTC):%Y%m%d-%H%M%S}")
    out.mkdir(parents=True, exist_ok=True)
    api = httpx.Client(base_url=args.api, headers={"X-API-Key": args.key}, timeout=900)
    conversations = load_conversations(args.conversations)
    configs = {name: CONFIGS[name] for name in (args.configs or CONFIGS)}
    users = {c.sample_id: f"locomo-{run_id}-{c.sample_id}" for c in conversations}
    scores = {name: Scores() for name in configs}
    latency: dict[str, list[float]] = defaultdict(list)
    stage_ms: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    total_questions = sum(len(c.questions) for c in conversations)
    try:
        started = time.perf_counter()
        for number, conversation in enumerate(conversations, start=1):
            if args.reuse:
                break  # the memories of an earlier --keep run are there already
            ingest(api, users[conversation.sample_id], conversation)
            print(
                f"[ingest] {number}/{len(conversations)} {conversation.sample_id}: "
                f"{len(conversation.turns)} turns ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        if not args.no_wait:
            wait_for_outbox(api)
        ingest_s = max(time.perf_counter() - started, 1e-9)
        asked = 0
        started = time.perf_counter()

        def ask(job: tuple[Conversation, dict[str, Any]]) -> list[tuple[str, dict, float]]:
            """All configurations for one question, in a row: the query embedding is cached."""
            conversation, question = job
            answers = []
            for name, switches in configs.items():
                body = {
                    "query": question["question"],
                    "top_k": TOP_K,
                    "as_of": conversation.as_of.isoformat(),
                    **switches,
                }
                t0 = time.perf_counter()
                path = f"/v1/users/{users[conversation.sample_id]}/search"
                response = as_client.post_sync(api, path, json=body)
                elapsed = (time.perf_counter() - t0) * 1000
                answers.append((name, response.json(), elapsed))
            return answers

        jobs = [(c, q) for c in conversations for q in c.questions]
        with ThreadPoolExecutor(args.workers) as pool:
            for (_, question), answers in zip(jobs, pool.map(ask, jobs), strict=True):
                evidence = evidence_ids(question["evidence"])
                for name, result, elapsed in answers:
                    ranked = [
                        r["memory"]["metadata"].get("dia_id")
                        for r in result["results"]
                        if r["history_of"] is None
                    ]
                    score_question(ranked, evidence, scores[name], question["category"])
                    latency[name].append(elapsed)
                    if name in PROFILE_ROWS:
                        for stage, ms in result["stage_durations_ms"].items():
                            stage_ms[name][stage].append(ms)
                        stage_ms[name]["server_total_ms"].append(result["duration_ms"])
                asked += 1
                if asked % 100 == 0 or asked == total_questions:
                    rate = asked / (time.perf_counter() - started)
                    print(
                        f"[search] {asked}/{total_questions} questions "
                        f"({rate:.1f}/s, {len(configs)} configurations each)",
                        flush=True,
                    )
    finally:
        # A reused run's users stay: they were kept for more runs than this one.
        release_users(api, users.values(), keep=args.keep or bool(args.reuse), run_id=run_id)
    report = write_report(out, scores, latency, stage_ms, conversations, ingest_s, args)
    print(report)
    print(f"report and charts written to {out}")
    return 0


def write_report(
    out: Path,
    scores: dict[str, Scores],
    latency: dict[str, list[float]],
    stage_ms: dict[str, dict[str, list[float]]],
    conversations: list[Conversation],
    ingest_s: float,
    args: argparse.Namespace,
) -> str:
    turns = sum(len(c.turns) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    main = (1, 2, 3, 4)
    lines = [
        "# LoCoMo retrieval benchmark",
        "",
        f"{len(conversations)} conversations, {turns} turns, {questions} questions with "
        f"evidence; top {TOP_K} per search; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; "
        + (
            f"memories of run {args.reuse} reused."
            if args.reuse
            else f"ingestion {turns / ingest_s:.1f} turns/s through the batch API."
        )
        + (
            f" {args.workers} questions asked at once: latencies include queueing."
            if args.workers > 1
            else ""
        ),
        "",
        "## Ablation (categories 1-4)",
        "",
        "| configuration | recall@5 | recall@10 | recall@20 | recall_all@10 | MRR | nDCG@10 "
        "| p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in scores.items():
        lines.append(
            f"| {name} | {s.mean('recall@5', main):.3f} | {s.mean('recall@10', main):.3f} | "
            f"{s.mean('recall@20', main):.3f} | {s.mean('recall_all@10', main):.3f} | "
            f"{s.mean('mrr', main):.3f} | {s.mean('ndcg@10', main):.3f} | "
            f"{percentile(latency[name], 50):.1f} | {percentile(latency[name], 95):.1f} |"
        )
    lines += ["", "## Recall@10 per category", ""]
    header = "| configuration | " + " | ".join(f"{c} {n}" for c, n in CATEGORIES.items()) + " |"
    lines += [header, "|---" * (len(CATEGORIES) + 1) + "|"]
    for name, s in scores.items():
        cells = " | ".join(f"{s.mean('recall@10', (c,)):.3f}" for c in CATEGORIES)
        lines.append(f"| {name} | {cells} |")
    for row, profile in PROFILE_ROWS.items():
        final = scores.get(row)
        if final is None:
            continue
        lines += ["", f"## Profile `{profile}` ({row}), every metric per category", ""]
        metrics = ("recall@5", "recall@10", "recall@20", "recall_all@10", "mrr", "ndcg@10")
        lines += ["| category | " + " | ".join(metrics) + " |", "|---" * (len(metrics) + 1) + "|"]
        groups = [(f"{c} {n}", (c,)) for c, n in CATEGORIES.items()] + [("1-4", main)]
        for label, cats in groups:
            cells = " | ".join(f"{final.mean(m, cats):.3f}" for m in metrics)
            lines.append(f"| {label} | {cells} |")
    for row, by_stage in stage_ms.items():
        lines += ["", f"## Latency of profile `{PROFILE_ROWS[row]}` (server side, per stage)", ""]
        lines += ["| stage | n | p50 ms | p95 ms | p99 ms |", "|---|---|---|---|---|"]
        for stage, values in sorted(by_stage.items()):
            lines.append(
                f"| {stage} | {len(values)} | {percentile(values, 50):.2f} | "
                f"{percentile(values, 95):.2f} | {percentile(values, 99):.2f} |"
            )
        http = latency[row]
        lines.append(
            f"\nHTTP round trip, {row}: p50 {percentile(http, 50):.1f} ms, "
            f"p95 {percentile(http, 95):.1f} ms, p99 {percentile(http, 99):.1f} ms. "
            "The query embedding is cached after the first configuration of each question, "
            "so per-configuration latencies after the first are without it."
        )
    report = "\n".join(lines) + "\n"
    (out / "report.md").write_text(report)
    (out / "scores.json").write_text(
        json.dumps(
            {
                name: {m: {str(c): v for c, v in by.items()} for m, by in s.values.items()}
                for name, s in scores.items()
            }
        )
    )
    charts(out, scores, stage_ms)
    return report


def charts(
    out: Path, scores: dict[str, Scores], all_stage_ms: dict[str, dict[str, list[float]]]
) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no charts", file=sys.stderr)
        return
    names = list(scores)
    main = (1, 2, 3, 4)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    width = 0.25
    for offset, k in enumerate((5, 10, 20)):
        values = [scores[n].mean(f"recall@{k}", main) for n in names]
        ax.bar(
            [i + (offset - 1) * width for i in range(len(names))],
            values,
            width,
            label=f"recall@{k}",
        )
    ax.set_xticks(range(len(names)), names, rotation=25, ha="right")
    ax.set_ylim(0, 1)
    ax.set_title("LoCoMo evidence recall, categories 1-4")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "recall.png", dpi=120)
    plt.close(fig)
    stage_ms = all_stage_ms.get("default profile") or all_stage_ms.get("full pipeline")
    if stage_ms:
        stages = [s for s in sorted(stage_ms) if s != "server_total_ms"]
        fig, ax = plt.subplots(figsize=(8, 4))
        ax.barh(stages, [percentile(stage_ms[s], 50) for s in stages], label="p50")
        ax.barh(stages, [percentile(stage_ms[s], 95) for s in stages], alpha=0.4, label="p95")
        ax.set_xlabel("ms")
        ax.set_title("Full pipeline: per-stage latency")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / "latency.png", dpi=120)
        plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--api", default=os.environ.get("COGNIS_API", "http://127.0.0.1:8000"))
    parser.add_argument("--key", default=os.environ.get("COGNIS_API_KEY", "cognis-dev-key"))
    parser.add_argument("--conversations", type=int, help="only the first N conversations")
    parser.add_argument("--configs", nargs="*", choices=list(CONFIGS), help="a subset")
    parser.add_argument("--out", help="results folder (default results/locomo-<time>)")
    parser.add_argument("--keep", action="store_true", help="keep the ingested users afterwards")
    parser.add_argument(
        "--reuse", metavar="RUN_ID", help="ask against a kept run's users (they stay kept)"
    )
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help="with --reuse: ask at once, without waiting for the outbox and the background "
        "workers (sentence vectors, entities) of the whole service",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="questions asked at once (latencies are only comparable at 1, the default)",
    )
    return run(parser.parse_args())


if __name__ == "__main__":
    sys.exit(main())
