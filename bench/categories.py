"""Category classifier benchmark: accuracy and confusion matrix on the labelled evaluation set.

    python -m bench.categories [--model PATH] [--margin 0.1] [--cross-validate] [--eval PATH]

The classifier learns from app/ml/category_bank.tsv; it is measured on bench/data/
category_eval.tsv, a separate set of everyday sentences (no sentence in both); --eval
bench/data/category_eval_ja.tsv measures the Japanese set instead. --cross-validate
also prints 5-fold cross-validation accuracy *on the bank alone* for several regularisation
strengths: that, not the evaluation set, is how REGULARISATION_C was chosen. Prints numbers and
a markdown confusion matrix; asserts nothing. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections import Counter
from pathlib import Path

import numpy as np

from app.ml.categories import CategoryClassifier, builtin_definitions, load_bank, training_set
from app.ml.embedder import Embedder
from app.ml.offline import user_cache_dir
from app.ml.scheduling.work import Work, WorkClass
from app.vocabulary import SEED_CATEGORIES

BENCH = Work(WorkClass.BULK)  # offline measurements: no tenant, no deadline

EVAL_PATH = Path(__file__).parent / "data" / "category_eval.tsv"
SHORT = {name: "".join(part[:3] for part in name.split("_"))[:6] for name in SEED_CATEGORIES}


def load_eval(path: Path = EVAL_PATH) -> list[tuple[str, str]]:
    """(category, sentence) pairs of the evaluation set."""
    return [(c, s) for c, sentences in load_bank(path).items() for s in sentences]


def eval_slices(path: Path = EVAL_PATH) -> dict[str, set[str]]:
    """Sentences per slice: "first-person", then each "# slice: <name> ..." section."""
    slices: dict[str, set[str]] = {"first-person": set()}
    current = "first-person"
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# slice:"):
            current = line.removeprefix("# slice:").split("(")[0].strip()
            slices[current] = set()
        elif line.strip() and not line.startswith("#"):
            slices[current].add(line.split("\t", 1)[1].strip())
    return slices


def confusion_markdown(pairs: list[tuple[str, str]]) -> str:
    """Rows: the true category; columns: the predicted one."""
    counts = Counter(pairs)
    header = "| true \\ predicted | " + " | ".join(SHORT[c] for c in SEED_CATEGORIES) + " |"
    lines = [header, "|---" * (len(SEED_CATEGORIES) + 1) + "|"]
    for truth in SEED_CATEGORIES:
        cells = " | ".join(str(counts[(truth, p)] or ".") for p in SEED_CATEGORIES)
        lines.append(f"| {truth} | {cells} |")
    return "\n".join(lines)


async def run(model: str, margin: float, cross_validate: bool, eval_path: Path = EVAL_PATH) -> None:
    embedder = Embedder(model, backend="torch", intra_op_threads=1)
    embedder.load()
    classifier = CategoryClassifier(
        embedder, uncertain_margin=margin, cache_dir=user_cache_dir("categories")
    )
    rows = load_eval(eval_path)
    bank = {s for sentences in load_bank().values() for s in sentences}
    overlap = sum(1 for _, s in rows if s in bank)
    vectors = [e.full for e in await embedder.embed([s for _, s in rows], BENCH)]
    results = await classifier.classify_detailed(vectors)
    truth = [c for c, _ in rows]
    predicted = [r.category for r in results]
    correct = np.array([t == p for t, p in zip(truth, predicted, strict=True)])
    certain = np.array([not r.uncertain for r in results])
    print(f"model: {model}")
    print(f"bank: {len(bank)} sentences; evaluation set: {len(rows)} sentences, overlap {overlap}")
    print(f"accuracy: {correct.mean():.3f} ({correct.sum()}/{len(rows)})")
    for name, members in eval_slices(eval_path).items():
        hits = [ok for ok, (_, s) in zip(correct, rows, strict=True) if s in members]
        print(f"  {name}: {np.mean(hits):.3f} ({sum(hits)}/{len(hits)})")
    print(
        f"uncertain (margin < {margin}): {(~certain).mean():.3f} of sentences; accuracy where "
        f"certain {correct[certain].mean():.3f}, where uncertain "
        f"{correct[~certain].mean() if (~certain).any() else float('nan'):.3f}"
    )
    print("\nper category (correct / total):")
    for name in SEED_CATEGORIES:
        hits = [ok for ok, t in zip(correct, truth, strict=True) if t == name]
        print(f"  {name:22s} {sum(hits)}/{len(hits)}")
    print("\nconfusion matrix:\n")
    print(confusion_markdown(list(zip(truth, predicted, strict=True))))
    print("\nmistakes:")
    for (t, s), r in zip(rows, results, strict=True):
        if t != r.category:
            print(f"  {t} -> {r.category} (margin {r.margin:.2f}): {s}")
    if cross_validate:
        from sklearn.linear_model import LogisticRegression
        from sklearn.model_selection import StratifiedKFold, cross_val_score

        sentences, labels = training_set(builtin_definitions())
        matrix = np.stack([e.full for e in await embedder.embed(sentences, BENCH)])
        folds = StratifiedKFold(5, shuffle=True, random_state=0)
        print("\n5-fold cross-validation on the bank only:")
        for c in (1.0, 4.0, 10.0, 30.0, 100.0):
            scores = cross_val_score(
                LogisticRegression(C=c, max_iter=2000), matrix, labels, cv=folds
            )
            print(f"  C={c:<5} accuracy {scores.mean():.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_model = os.environ.get(
        "COGNIS_EMBEDDING_MODEL", str(user_cache_dir("models") / "all-mpnet-base-v2")
    )
    parser.add_argument("--model", default=default_model)
    parser.add_argument("--margin", type=float, default=0.1)
    parser.add_argument("--cross-validate", action="store_true")
    parser.add_argument(
        "--eval", type=Path, default=EVAL_PATH, help="bench/data/category_eval_ja.tsv: Japanese"
    )
    args = parser.parse_args()
    asyncio.run(run(args.model, args.margin, args.cross_validate, args.eval))


if __name__ == "__main__":
    main()
