"""Facts from messages without an LLM: train and measure the fact model (app/ingest/facts.py).

    python -m bench.facts train      # cross-validate, choose L2 and the threshold, write the model
    python -m bench.facts            # the shipped model on the held-out units, LongMemEval cover

Data (bench/data/facts/, labelled by hand for this project): chat_train.tsv and chat_heldout.tsv,
units written the way people write to assistants (the held-out file written after the training
one, with other people and phrasings); longmemeval_train.tsv and longmemeval_heldout.tsv, units
(`fact_units`) of user turns of the LongMemEval development split (../shared/data, MIT), a
sample of turns that carry an answer and of others, split by session (a quarter of sessions,
by a hash of their id, held out). A unit is labelled 1 when it tells something about the user
or the people they name (what they are, have, did, plan, like, feel), a request that tells
such a thing included, 0 for greetings, thanks, reactions, small talk and bare requests.

Training: 5-fold cross-validation on the training units (LongMemEval units grouped by session);
L2 is the value of L2_GRID with the best cross-validated recall at the target precision; the
threshold is the lowest of a grid at which the cross-validated precision, and every higher
threshold's, is >= TARGET_PRECISION. Deterministic (fixed seed, Newton's method).

Evaluation also reads every user turn of the split that carries an answer (`has_answer`) and
counts the share that keep at least one unit as a fact: a turn with none loses its answer.
Embeddings are cached under results/facts/ (not in git).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import hashlib
import json
import lzma
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.ingest.facts import (
    CUES,
    MODEL_PATH,
    FactModel,
    fact_units,
    said_of_self,
    unit_features,
)
from app.ml.embedder import Embedder
from app.ml.offline import user_cache_dir
from app.ml.scheduling.work import Work, WorkClass
from bench.logistic import fit_logistic

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data" / "facts"
SPLITS = {
    "train": {"chat": DATA / "chat_train.tsv", "longmemeval": DATA / "longmemeval_train.tsv"},
    "heldout": {"chat": DATA / "chat_heldout.tsv", "longmemeval": DATA / "longmemeval_heldout.tsv"},
}
LONGMEMEVAL = Path(
    os.environ.get(
        "COGNIS_LONGMEMEVAL_DEV",
        ROOT.parent / "shared" / "data" / "longmemeval-dev" / "longmemeval_oracle_dev.json.xz",
    )
)
CACHE = ROOT / "results" / "facts"
SEED = 41
FOLDS = 5
L2_GRID = (10.0, 30.0, 100.0, 300.0, 1000.0, 3000.0)
# A dimension that barely moves (all-mpnet-base-v2 has two, std ~1e-7) is left unscaled.
MIN_SCALE = 1e-4
TARGET_PRECISION = 0.90
THRESHOLDS = tuple(round(t / 100, 2) for t in range(5, 96))
BENCH = Work(WorkClass.BULK)  # offline measurements: no tenant, no deadline

Embed = Callable[[list[str]], Awaitable[np.ndarray]]


@dataclass(frozen=True, slots=True)
class Unit:
    text: str
    label: int
    source: str  # "chat" or "longmemeval"
    group: str  # cross-validation group: a LongMemEval session, else the unit itself


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\t", "\t").replace("\\\\", "\\")


def load_units(split: str) -> list[Unit]:
    """A split's labelled units, chat ones first."""
    units: list[Unit] = []
    for source, path in SPLITS[split].items():
        with path.open(encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
                if source == "chat":
                    units.append(Unit(row["unit"], int(row["label"]), source, row["unit"]))
                else:
                    text = _unescape(row["unit"])
                    units.append(Unit(text, int(row["label"]), source, row["session_id"]))
    return units


def answer_turns(path: Path = LONGMEMEVAL) -> list[tuple[str, int, str]]:
    """Every distinct user turn of the split that carries an answer: (session id, turn, text)."""
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        questions = json.load(handle)
    seen: set[str] = set()
    turns: list[tuple[str, int, str]] = []
    for question in questions:
        for sid, session in zip(
            question["haystack_session_ids"], question["haystack_sessions"], strict=True
        ):
            if sid in seen:
                continue
            seen.add(sid)
            turns.extend(
                (sid, i, turn["content"])
                for i, turn in enumerate(session)
                if turn["role"] == "user" and turn.get("has_answer")
            )
    return turns


def cached_embed(model_path: str, threads: int) -> Embed:
    """Unit-normalised 768D vectors of texts, cached on disk by text (results/facts/)."""
    embedder = Embedder(model_path, backend="torch", intra_op_threads=threads)
    cache_path = CACHE / f"{Path(model_path).name}.npz"
    memo: dict[str, np.ndarray] = {}
    if cache_path.exists():
        with np.load(cache_path) as stored:
            memo = {key: stored[key] for key in stored.files}

    def key(text: str) -> str:
        return hashlib.sha1(text.encode("utf-8")).hexdigest()  # noqa: S324 (a cache key)

    async def embed(texts: list[str]) -> np.ndarray:
        missing = sorted({t for t in texts if key(t) not in memo})
        if missing:
            embedder.load()
            for start in range(0, len(missing), 256):
                batch = missing[start : start + 256]
                for text, e in zip(batch, await embedder.embed(batch, BENCH), strict=True):
                    memo[key(text)] = e.full.astype(np.float32)
            CACHE.mkdir(parents=True, exist_ok=True)
            np.savez(cache_path, **memo)  # type: ignore[arg-type]
        return np.stack([memo[key(t)] for t in texts]) if texts else np.zeros((0, 768))

    return embed


def fit(
    x: np.ndarray, y: np.ndarray, l2: float, embedding_model: str, threshold: float = 0.5
) -> FactModel:
    """The logistic regression (bench/logistic.py) over the units' features."""
    mean, scale, weights, bias = fit_logistic(x, y, l2, MIN_SCALE)
    dimensions = x.shape[1] - len(CUES)
    return FactModel(mean, scale, weights, bias, threshold, embedding_model, dimensions)


@dataclass(frozen=True, slots=True)
class Scores:
    threshold: float
    kept: int  # units judged facts
    right: int  # of them, labelled facts
    facts: int  # units labelled facts
    units: int

    @property
    def precision(self) -> float:
        return self.right / self.kept if self.kept else 1.0

    @property
    def recall(self) -> float:
        return self.right / self.facts if self.facts else 1.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def score(labels: np.ndarray, probabilities: np.ndarray, threshold: float) -> Scores:
    kept = probabilities >= threshold
    return Scores(
        threshold,
        int(kept.sum()),
        int((kept & (labels == 1)).sum()),
        int(labels.sum()),
        len(labels),
    )


def cross_validated(units: Sequence[Unit], x: np.ndarray, l2: float) -> np.ndarray:
    """Out-of-fold P(fact): FOLDS folds of groups, each scored by a model fitted on the rest."""
    groups = sorted({u.group for u in units})
    order = np.random.default_rng(SEED).permutation(len(groups))
    fold_of = {groups[g]: k % FOLDS for k, g in enumerate(order)}
    folds = np.array([fold_of[u.group] for u in units])
    y = np.array([u.label for u in units], dtype=np.float64)
    out = np.zeros(len(units))
    for k in range(FOLDS):
        held = folds == k
        model = fit(x[~held], y[~held], l2, "cv")
        z = ((x[held] - model.mean) / model.scale) @ model.weights + model.bias
        out[held] = 1.0 / (1.0 + np.exp(-z))
    return out


def choose_threshold(labels: np.ndarray, probabilities: np.ndarray) -> float:
    """The lowest threshold whose precision, and every higher one's, is >= TARGET_PRECISION."""
    chosen = THRESHOLDS[-1]
    for t in reversed(THRESHOLDS):
        if score(labels, probabilities, t).precision < TARGET_PRECISION:
            break
        chosen = t
    return chosen


async def features_of(units: Sequence[Unit], embed: Embed) -> np.ndarray:
    texts = [u.text for u in units]
    return unit_features(texts, await embed(texts))


async def train(args: argparse.Namespace) -> None:
    embed = cached_embed(args.model, args.threads)
    embedding_model = Path(args.model).name
    units = load_units("train")
    x = await features_of(units, embed)
    y = np.array([u.label for u in units], dtype=np.float64)
    print(
        f"train: {len(units)} units ({int(y.sum())} facts), "
        f"{sum(u.source == 'chat' for u in units)} written, "
        f"{sum(u.source == 'longmemeval' for u in units)} from LongMemEval"
    )
    print("\n| L2 | CV threshold | CV precision | CV recall | CV F1 |\n|---|---|---|---|---|")
    best: tuple[float, float, float, np.ndarray] | None = None
    for l2 in L2_GRID:
        oof = cross_validated(units, x, l2)
        t = choose_threshold(y, oof)
        s = score(y, oof, t)
        print(f"| {l2:g} | {t:.2f} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} |")
        if best is None or s.recall > best[2]:
            best = (l2, t, s.recall, oof)
    assert best is not None
    l2, threshold, _, oof = best
    cv = score(y, oof, threshold)
    print(
        f"\nchosen L2 {l2:g}, threshold {threshold:.2f}: {FOLDS}-fold CV precision "
        f"{cv.precision:.3f}, recall {cv.recall:.3f}"
    )
    model = fit(x, y, l2, embedding_model, threshold)
    payload = {
        "version": 1,
        "trained_by": "python -m bench.facts train",
        "data": [str(p.relative_to(ROOT)) for p in SPLITS["train"].values()],
        "units": len(units),
        "seed": SEED,
        "l2": l2,
        "target_precision": TARGET_PRECISION,
        "cross_validation": {
            "folds": FOLDS,
            "precision": round(cv.precision, 4),
            "recall": round(cv.recall, 4),
        },
        **model.to_json(),
    }
    MODEL_PATH.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {MODEL_PATH.relative_to(ROOT)}")


def _row(name: str, s: Scores) -> str:
    return (
        f"| {name} | {s.units} | {s.facts} | {s.precision:.3f} ({s.right}/{s.kept}) | "
        f"{s.recall:.3f} ({s.right}/{s.facts}) | {s.f1:.3f} |"
    )


async def evaluate(args: argparse.Namespace) -> None:
    from app.ingest.facts import shipped_fact_model

    model = shipped_fact_model()
    embed = cached_embed(args.model, args.threads)
    if not model.reads(args.model):
        raise SystemExit(f"the fact model reads {model.embedding_model}, not {args.model}")
    units = load_units("heldout")
    texts = [u.text for u in units]
    vectors = await embed(texts)
    # A plain statement about oneself is a fact whatever its score (app/ingest/facts.py).
    probabilities = np.where([said_of_self(t) for t in texts], 1.0, model.scores(texts, vectors))
    labels = np.array([u.label for u in units])
    print(f"shipped model: threshold {model.threshold:.2f} (embedder {model.embedding_model})")
    print("\nHeld-out units (never tuned on):\n")
    print("| source | units | facts | precision | recall | F1 |\n|---|---|---|---|---|---|")
    for source in ("chat", "longmemeval"):
        mask = np.array([u.source == source for u in units])
        print(_row(source, score(labels[mask], probabilities[mask], model.threshold)))
    print(_row("all", score(labels, probabilities, model.threshold)))
    print("\n| threshold | precision | recall | F1 |\n|---|---|---|---|")
    for t in THRESHOLDS[::10]:
        s = score(labels, probabilities, t)
        print(f"| {t:.2f} | {s.precision:.3f} | {s.recall:.3f} | {s.f1:.3f} |")
    if args.errors:
        for u, p in zip(units, probabilities, strict=True):
            if (p >= model.threshold) != bool(u.label):
                print(f"  {p:.2f} label={u.label} {u.source}: {u.text[:120]!r}")

    turns = answer_turns()
    trained_sessions = {u.group for u in load_units("train") if u.source == "longmemeval"}
    turn_units = [fact_units(text) for _, _, text in turns]
    flat = [u for us in turn_units for u in us]
    flat_vectors = await embed(flat)
    started = time.perf_counter()
    for _ in range(args.repeat):
        kept = model.is_fact(flat, flat_vectors)
    per_unit = (time.perf_counter() - started) / (args.repeat * len(flat))
    covered = []
    at = 0
    for units_of_turn in turn_units:
        covered.append(any(kept[at : at + len(units_of_turn)]))
        at += len(units_of_turn)
    unseen = [
        c for (sid, _, _), c in zip(turns, covered, strict=True) if sid not in trained_sessions
    ]
    print(
        "\nLongMemEval dev user turns that carry an answer (has_answer), "
        "kept with at least one fact unit:\n"
    )
    print("| turns | units | kept >= 1 unit | share |\n|---|---|---|---|")
    print(f"| all {len(turns)} | {len(flat)} | {sum(covered)} | {np.mean(covered):.3f} |")
    print(f"| sessions not in training {len(unseen)} | - | {sum(unseen)} | {np.mean(unseen):.3f} |")
    print(f"units kept as facts: {np.mean(kept):.3f} of {len(flat)}")
    if args.errors:
        for (sid, i, text), c in zip(turns, covered, strict=True):
            if not c:
                print(f"  dropped {sid}#{i}: {text[:200]!r}")
    started = time.perf_counter()
    for _ in range(args.repeat):
        for _, _, text in turns:
            fact_units(text)
    split_per_turn = (time.perf_counter() - started) / (args.repeat * len(turns))
    sample = flat[:256]
    started = time.perf_counter()
    embedder = Embedder(args.model, backend="torch", intra_op_threads=args.threads)
    embedder.load()
    started = time.perf_counter()
    await embedder.embed(sample, BENCH)
    embed_per_unit = (time.perf_counter() - started) / len(sample)
    print(
        f"\nspeed: splitting {1 / split_per_turn:,.0f} turns/s; features + model "
        f"{1 / per_unit:,.0f} units/s; embedding (torch, {args.threads} threads) "
        f"{1 / embed_per_unit:,.0f} units/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=("train", "evaluate"), default="evaluate")
    parser.add_argument(
        "--model",
        default=os.environ.get(
            "COGNIS_EMBEDDING_MODEL", str(user_cache_dir("models") / "all-mpnet-base-v2")
        ),
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5, help="timing repetitions (evaluate)")
    parser.add_argument("--errors", action="store_true", help="list the units it gets wrong")
    args = parser.parse_args()
    asyncio.run(train(args) if args.command == "train" else evaluate(args))


if __name__ == "__main__":
    main()
