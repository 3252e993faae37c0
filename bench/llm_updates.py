"""Updates with a local LLM: its decisions on the held-out supersedes split, alone and vetted.

    python -m bench.llm_updates --gguf qwen-1.5b [--threads 1] [--stride N] [--answers FILE]

Every case of bench/data/supersedes/heldout.jsonl (a user's memories, with FILLERS memories of
other cases, and a new message that supersedes one of them or only adds) goes through step 3 as
ingestion runs it with an LLM: the gate (COGNIS_INGEST_LLM_GATE_THRESHOLD on the nearest
memory's cosine), then, where it calls, the real prompt, the JSON schema, the guard and one retry
(app/ingest/llm_extractor.py), served by `python -m app llm-serve` (as scripts/llm.sh starts it);
where it skips or falls back, the extractor without an LLM (the supersedes model at its
threshold). The memories are shown as ingestion shows them: most similar first, m1..mN.

Each case's outcome is the memory its UPDATE (or DELETE) names, or none. Policies compared:

- `llm`: the LLM's answer as it is;
- `llm + floor F`: an LLM UPDATE of a memory the supersedes model scores below F is made an ADD
  (app/ingest/supersedes.py `vet_llm_updates`, COGNIS_INGEST_LLM_UPDATE_FLOOR);
- `no LLM`: the supersedes model alone (what a deployment without an LLM does).

The floor is not tuned on these answers: `--floor-from-train` prints the score that
FLOOR_RECALL of the training split's true updates reach with the shipped model, the rule the
default was set by. Precision = right UPDATEs / UPDATEs and DELETEs made; recall = right UPDATEs
/ cases that supersede; additions kept = cases that only add where no memory was changed. Also
seconds per decision (p50, p95), the share the gate sent to the LLM, guard rejections and
fallbacks. `--answers` keeps every LLM answer in a JSONL file and reuses it on the next run.
Prints numbers; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from app.config import IngestSettings, Settings
from app.ingest.context import message_context
from app.ingest.domain import Candidate, Extraction, IncomingMessage, Operation
from app.ingest.gate import llm_gate
from app.ingest.llm_extractor import extract_with_llm
from app.ingest.supersedes import (
    SupersedesModel,
    find_superseded,
    memory_scores,
    shipped_model,
    vet_llm_updates,
)
from app.llm.client import ChatClient
from app.ml.offline import user_cache_dir
from app.vocabulary import SEED_CATEGORIES
from bench.local_llm import resolve_gguf, serving
from bench.supersedes import (
    FILLERS,
    HELDOUT_PATH,
    TRAIN_PATH,
    Shown,
    load_cases,
    model_embed,
    shown_cases,
)

ROOT = Path(__file__).resolve().parent.parent
FLOORS = (0.0, 0.05, 0.1, 0.2, 0.25, 0.3, 0.4)
# The floor lets through this share of the training split's true updates (shipped model).
FLOOR_RECALL = 0.98
SENT_AT = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Answer:
    """One case's step 3 with the LLM: what was called, what came back, how long it took."""

    called: bool
    operations: list[tuple[str, str | None]]  # (op, target ref)
    seconds: float
    fallback: bool
    rejected: int  # answers the guard rejected (each retry counts)


def ordered(shown: Shown) -> list[Candidate]:
    """The memories as ingestion shows them: most similar to the message first, m1..mN."""
    scored = [
        replace(
            c,
            similarity=max(
                float(shown.vectors[c.content] @ shown.vectors[s]) for s in shown.sentences
            ),
        )
        for c in shown.candidates
    ]
    scored.sort(key=lambda c: -c.similarity)
    return [replace(c, ref=f"m{i}") for i, c in enumerate(scored, start=1)]


def model_scores(
    shown: Shown, candidates: list[Candidate], model: SupersedesModel
) -> dict[uuid.UUID, float]:
    views, projections = shown.views(model.direction)
    return memory_scores(views, candidates, projections, model)


def settings_for(base_url: str, gguf: str) -> Settings:
    """What the chat client reads (no database is used: the bench decides, it writes nothing)."""
    return Settings(
        database_url="postgresql+asyncpg://unused@127.0.0.1/unused",
        llm_base_url=f"{base_url}/v1",
        llm_model=Path(gguf).name,
        llm_timeout_s=600,
    )


async def ask(client: ChatClient, shown: Shown, candidates: list[Candidate], gate: float) -> Answer:
    context = message_context(
        "bench", uuid.uuid4(), IncomingMessage(shown.case.message, sent_at=SENT_AT), None
    )
    if not llm_gate(candidates, gate).call:
        return Answer(False, [], 0.0, False, 0)

    async def no_llm() -> Extraction:
        return Extraction(operations=[], extractor="deterministic")

    started = time.perf_counter()
    extraction = await extract_with_llm(client, context, candidates, SEED_CATEGORIES, 2000, no_llm)
    seconds = time.perf_counter() - started
    rejected = (extraction.failure or "").count("invalid answer")
    ops = [(op.op, op.target.ref if op.target else None) for op in extraction.operations]
    return Answer(True, ops, seconds, extraction.fallback_used, rejected)


def outcome(
    answer: Answer,
    candidates: list[Candidate],
    scores: dict[uuid.UUID, float],
    floor: float | None,
    no_llm_target: uuid.UUID | None,
) -> uuid.UUID | None:
    """The memory the case's decision replaces or deletes (None: nothing changed). floor None:
    the LLM's answer as it is."""
    if not answer.called or answer.fallback:
        return no_llm_target
    by_ref = {c.ref: c for c in candidates}
    operations = [
        Operation(op=op, content="x", target=by_ref.get(ref) if ref else None)
        for op, ref in answer.operations
    ]
    if floor:
        vet_llm_updates(operations, scores, floor)
    changed = [
        op.target.memory_id for op in operations if op.op in ("UPDATE", "DELETE") and op.target
    ]
    return changed[0] if changed else None


def tally(cases: list[Shown], decided: list[uuid.UUID | None]) -> tuple[int, int, int, int, int]:
    """(made, right, expected, additions, additions kept)."""
    made = right = kept = 0
    for shown, target in zip(cases, decided, strict=True):
        if target is not None:
            made += 1
            right += target == shown.target_id
        elif shown.case.target is None:
            kept += 1
    expected = sum(s.case.target is not None for s in cases)
    additions = len(cases) - expected
    return made, right, expected, additions, kept


def floor_from_train(model: SupersedesModel, train: list[Shown]) -> float:
    """The highest floor that FLOOR_RECALL of the training split's true updates reach."""
    scores = []
    for shown in train:
        if shown.target_id is None:
            continue
        scored = model_scores(shown, shown.candidates, model)
        scores.append(scored.get(shown.target_id, 0.0))
    return float(np.quantile(scores, 1 - FLOOR_RECALL))


async def run(args: argparse.Namespace) -> None:
    model = shipped_model()
    embed = model_embed(args.model, args.embed_threads)
    cases = await shown_cases(load_cases(HELDOUT_PATH), embed)
    cases = cases[:: args.stride]
    if args.limit:
        cases = cases[: args.limit]
    if args.floor_from_train:
        train = await shown_cases(load_cases(TRAIN_PATH), embed)
        print(
            f"floor from the training split ({FLOOR_RECALL:.0%} of its updates reach it): "
            f"{floor_from_train(model, train):.3f}"
        )
    shown_candidates = [ordered(s) for s in cases]
    scores = [model_scores(s, c, model) for s, c in zip(cases, shown_candidates, strict=True)]
    no_llm = []
    for shown, candidates in zip(cases, shown_candidates, strict=True):
        views, projections = shown.views(model.direction)
        found = find_superseded(views, candidates, projections, model.threshold, model)
        no_llm.append(found.target.memory_id if found else None)

    gguf = resolve_gguf(args.gguf)
    saved = Path(args.answers) if args.answers else None
    answers: dict[str, Answer] = {}
    if saved and saved.exists():
        for line in saved.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            answers[row["message"]] = Answer(
                row["called"], [tuple(o) for o in row["operations"]], row["seconds"],
                row["fallback"], row["rejected"],
            )  # fmt: skip
    gate = IngestSettings().ingest_llm_gate_threshold
    missing = [i for i, s in enumerate(cases) if s.case.message not in answers]
    ready_s = None
    if missing:
        with serving(gguf, args.threads) as served:
            ready_s = served.ready_s
            client = ChatClient(settings_for(served.url, gguf).llm)
            try:
                for done, i in enumerate(missing, start=1):
                    answer = await ask(client, cases[i], shown_candidates[i], gate)
                    answers[cases[i].case.message] = answer
                    if saved:
                        with saved.open("a", encoding="utf-8") as out:
                            row = {"message": cases[i].case.message, **asdict(answer)}
                            out.write(json.dumps(row) + "\n")
                    if done % 10 == 0 or done == len(missing):
                        print(f"  {done}/{len(missing)} cases asked", flush=True)
            finally:
                await client.close()
    got = [answers[s.case.message] for s in cases]
    called = [a for a in got if a.called]
    seconds = sorted(a.seconds for a in called)
    print(
        f"\nmodel: {Path(gguf).name}, {args.threads} thread(s); held-out: {len(cases)} cases, "
        f"{FILLERS} fillers each"
    )
    if ready_s is not None:
        print(f"start to ready: {ready_s:.1f} s")
    if seconds:
        p95 = seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))]
        print(
            f"gate: {len(called)}/{len(cases)} cases sent to the LLM "
            f"({len(called) / len(cases):.0%});"
            f" seconds per LLM decision p50 {statistics.median(seconds):.2f}, p95 {p95:.2f}"
        )
        print(
            f"guard: {sum(a.rejected for a in called)} answers rejected, "
            f"{sum(a.fallback for a in called)} cases fell back to the extractor without an LLM"
        )
    print("\n| policy | changes made | right | precision | recall | additions kept |")
    print("|---|---|---|---|---|---|")
    rows = [("no LLM (supersedes model)", no_llm)]
    for floor in FLOORS:
        label = "LLM" if floor == 0 else f"LLM + floor {floor:.2f}"
        rows.append((label, [
            outcome(a, c, sc, floor, n)
            for a, c, sc, n in zip(got, shown_candidates, scores, no_llm, strict=True)
        ]))  # fmt: skip
    # Where the vetted LLM changed nothing, the model without an LLM may still (an union).
    floor = IngestSettings().ingest_llm_update_floor
    rows.append((f"LLM + floor {floor:.2f}, else no LLM", [
        outcome(a, c, sc, floor, n) or n
        for a, c, sc, n in zip(got, shown_candidates, scores, no_llm, strict=True)
    ]))  # fmt: skip
    for label, decided in rows:
        made, right, expected, additions, kept = tally(cases, decided)
        precision = right / made if made else 1.0
        print(
            f"| {label} | {made} | {right} | {precision:.3f} | {right / expected:.3f} "
            f"({right}/{expected}) | {kept}/{additions} |"
        )
    if args.errors:
        floor = IngestSettings().ingest_llm_update_floor
        for shown, a, c, sc, n in zip(cases, got, shown_candidates, scores, no_llm, strict=True):
            target = outcome(a, c, sc, floor, n)
            if target != shown.target_id:
                names = {x.memory_id: x.content for x in c}
                print(
                    f"  want {names.get(shown.target_id)!r} got {names.get(target)!r}: "
                    f"{shown.case.message!r} {a.operations}"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", default="qwen-1.5b", help="a GGUF file or a model's name")
    parser.add_argument("--threads", type=int, default=1, help="the LLM server's threads")
    parser.add_argument(
        "--model",
        default=os.environ.get(
            "COGNIS_EMBEDDING_MODEL", str(user_cache_dir("models") / "all-mpnet-base-v2")
        ),
    )
    parser.add_argument("--embed-threads", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0, help="only the first N cases")
    parser.add_argument("--stride", type=int, default=1, help="every Nth case (a quicker sample)")
    parser.add_argument("--answers", help="JSONL file of LLM answers to reuse and extend")
    parser.add_argument("--floor-from-train", action="store_true")
    parser.add_argument("--errors", action="store_true", help="list the cases it gets wrong")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
