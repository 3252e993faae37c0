"""Corrections without an LLM: precision and recall of the detector and its matcher.

    python -m bench.corrections [--thresholds 0.3,0.35,...] [--threshold 0.6] [--errors]

Reads bench/data/corrections.jsonl (written for this project, from no benchmark): each case is
a user's current memories, a new message, and what should happen: ADD (a new memory, today's
behaviour), or UPDATE / DELETE of one of the memories (`target`, its index). Every case runs
through app/ingest/corrections.py as ingestion runs it: the intent from the message, its claim
embedded with the service's model (768D cosine, as step 3a's exact re-score), the target among
the memories shown.

A predicted correction is right when its operation and target are the expected ones. Precision:
right corrections / corrections made (a wrong UPDATE or DELETE of a memory is the costly
error); recall: right corrections / expected corrections. The sweep over thresholds is how
`ingest_correction_threshold` was chosen (docs/benchmarks/corrections.md). Prints numbers;
asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.config import IngestSettings
from app.ingest.corrections import Intent, detect_intent, find_target
from app.ingest.domain import Candidate
from app.ml.embedder import Embedder
from app.ml.offline import user_cache_dir
from app.ml.scheduling.work import Work, WorkClass

BENCH = Work(WorkClass.BULK)  # offline measurements: no tenant, no deadline
CASES_PATH = Path(__file__).parent / "data" / "corrections.jsonl"
DEFAULT_THRESHOLDS = ",".join(f"{t / 100:.2f}" for t in range(30, 95, 5))


@dataclass(frozen=True, slots=True)
class Case:
    case_id: int
    memories: list[str]
    message: str
    expected: str  # ADD | UPDATE | DELETE
    target: int | None
    # "written-with-the-rules" (seen while the rules were made) or "written-after-the-rules"
    # (written once they were fixed, never tuned on: the fairer estimate).
    group: str


@dataclass(frozen=True, slots=True)
class Scores:
    threshold: float
    made: int
    right: int
    expected: int
    errors: list[tuple[Case, str]]

    @property
    def precision(self) -> float:
        return self.right / self.made if self.made else 1.0

    @property
    def recall(self) -> float:
        return self.right / self.expected if self.expected else 1.0


def load_cases(path: Path = CASES_PATH) -> list[Case]:
    cases = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            cases.append(
                Case(
                    row["id"],
                    row["memories"],
                    row["message"],
                    row["expected"],
                    row["target"],
                    row["set"],
                )
            )
    return cases


def outcome(
    intent: Intent | None, candidates: list[Candidate], similarity: dict[uuid.UUID, float], t: float
) -> tuple[str, int | None]:
    """(operation, index of its target) for one case at threshold t."""
    if intent is None:
        return "ADD", None
    correction = find_target(intent, candidates, similarity, t)
    if correction is None:
        return "ADD", None
    index = next(i for i, c in enumerate(candidates) if c is correction.target)
    return intent.op, index


def score(
    cases: list[Case],
    intents: list[Intent | None],
    candidates: list[list[Candidate]],
    similarities: list[dict[uuid.UUID, float]],
    threshold: float,
) -> Scores:
    made = right = 0
    errors = []
    for case, intent, shown, similarity in zip(
        cases, intents, candidates, similarities, strict=True
    ):
        op, target = outcome(intent, shown, similarity, threshold)
        if op != "ADD":
            made += 1
        if op != "ADD" and (op, target) == (case.expected, case.target):
            right += 1
        elif (op, target) != (case.expected, case.target):
            errors.append((case, f"{op} {'' if target is None else f'm{target}'}".strip()))
    expected = sum(case.expected != "ADD" for case in cases)
    return Scores(threshold, made, right, expected, errors)


async def run(args: argparse.Namespace) -> None:
    cases = load_cases(Path(args.cases))
    intents = [detect_intent(case.message) for case in cases]
    embedder = Embedder(args.model, backend="torch", intra_op_threads=args.threads)
    embedder.load()
    texts = sorted(
        {m for case in cases for m in case.memories}
        | {intent.claim for intent in intents if intent is not None}
    )
    vectors = {
        text: embedding.full
        for text, embedding in zip(texts, await embedder.embed(texts, BENCH), strict=True)
    }
    candidates: list[list[Candidate]] = []
    similarities: list[dict[uuid.UUID, float]] = []
    for case, intent in zip(cases, intents, strict=True):
        shown = [shown_candidate(i, memory) for i, memory in enumerate(case.memories)]
        candidates.append(shown)
        similarities.append(
            {c.memory_id: float(np.dot(vectors[c.content], vectors[intent.claim])) for c in shown}
            if intent is not None
            else {}
        )
    expected = sum(case.expected != "ADD" for case in cases)
    detected = sum(intent is not None for intent in intents)
    negatives = [i for i, case in enumerate(cases) if case.expected == "ADD"]
    print(
        f"{len(cases)} cases: {expected} corrections expected "
        f"({sum(c.expected == 'UPDATE' for c in cases)} UPDATE, "
        f"{sum(c.expected == 'DELETE' for c in cases)} DELETE), {len(negatives)} ADD; "
        f"an intent detected in {detected} messages "
        f"({sum(intents[i] is not None for i in negatives)} of them expected ADD)"
    )
    print("\n| threshold | corrections made | right | precision | recall |")
    print("|---|---|---|---|---|")
    for threshold in (float(t) for t in args.thresholds.split(",")):
        s = score(cases, intents, candidates, similarities, threshold)
        print(
            f"| {threshold:.2f} | {s.made} | {s.right} | {s.precision:.3f} | "
            f"{s.recall:.3f} ({s.right}/{s.expected}) |"
        )
    chosen = score(cases, intents, candidates, similarities, args.threshold)
    print(
        f"\nat the setting's threshold {args.threshold:.2f}: precision {chosen.precision:.3f}, "
        f"recall {chosen.recall:.3f}; {len(chosen.errors)} cases differ from the expected"
    )
    for group in sorted({case.group for case in cases}):
        chosen_cases = [i for i, case in enumerate(cases) if case.group == group]
        part = score(
            [cases[i] for i in chosen_cases],
            [intents[i] for i in chosen_cases],
            [candidates[i] for i in chosen_cases],
            [similarities[i] for i in chosen_cases],
            args.threshold,
        )
        print(
            f"  {group} ({len(chosen_cases)} cases): precision {part.precision:.3f} "
            f"({part.right}/{part.made}), recall {part.recall:.3f} ({part.right}/{part.expected})"
        )
    if args.errors:
        for case, got in chosen.errors:
            want = f"{case.expected} {'' if case.target is None else f'm{case.target}'}".strip()
            print(f"  #{case.case_id} {case.message!r}: got {got}, expected {want}")


def shown_candidate(index: int, content: str, similarity: float = 0.0) -> Candidate:
    """A plain current memory shown to the detector as `m<index>` (its case's or a test's)."""
    return Candidate(
        ref=f"m{index}",
        memory_id=uuid.uuid4(),
        content=content,
        category="other",
        scope="USER",
        session_id=None,
        event_time=None,
        similarity=similarity,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--model",
        default=os.environ.get(
            "COGNIS_EMBEDDING_MODEL", str(user_cache_dir("models") / "all-mpnet-base-v2")
        ),
    )
    parser.add_argument("--cases", default=str(CASES_PATH))
    parser.add_argument("--thresholds", default=DEFAULT_THRESHOLDS)
    parser.add_argument(
        "--threshold",
        type=float,
        default=IngestSettings().ingest_correction_threshold,
        help="the one whose errors are listed (default: the setting's default)",
    )
    parser.add_argument("--errors", action="store_true", help="list the cases it gets wrong")
    parser.add_argument("--threads", type=int, default=1)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
