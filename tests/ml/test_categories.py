"""The category classifier: trained on the example bank, measured on the separate evaluation
set, extended by a deployment's own categories, deferring to a judge only when uncertain."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from app.ml import categories
from app.ml.categories import (
    CategoryClassifier,
    CategoryDefinition,
    builtin_definitions,
    load_bank,
)
from app.ml.embedder import Embedder
from app.ml.offline import user_cache_dir
from app.ml.scheduling.work import Work, WorkClass
from app.vocabulary import SEED_CATEGORIES
from bench.categories import load_eval


@pytest.fixture(scope="module")
def embedder(model_path: str) -> Embedder:
    model = Embedder(model_path, backend="torch", intra_op_threads=1)
    model.load()
    return model


async def _vectors(embedder: Embedder, texts: list[str]) -> list[np.ndarray]:
    return [e.full for e in await embedder.embed(texts, Work(WorkClass.BULK))]


def test_the_bank_covers_every_category_and_shares_nothing_with_the_evaluation_set() -> None:
    bank = load_bank()
    assert set(bank) == set(SEED_CATEGORIES)
    assert min(len(sentences) for sentences in bank.values()) >= 20
    evaluation = load_eval()
    assert {c for c, _ in evaluation} == set(SEED_CATEGORIES)
    assert not {s for _, s in evaluation} & {s for ss in bank.values() for s in ss}


def test_a_fitted_regression_is_kept_on_disk_and_read_back_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every process start trains; the fit (seconds of CPU) runs once per set of examples."""
    rng = np.random.default_rng(7)
    labels = ["hobbies", "travel", "work"] * 20
    centres = {label: rng.normal(size=16) for label in set(labels)}
    vectors = np.stack([centres[label] + rng.normal(scale=0.8, size=16) for label in labels])
    queries = rng.normal(size=(9, 16))

    fitted = categories._fitted(vectors, labels, tmp_path)
    assert len(list(tmp_path.glob("fitted-*.npz"))) == 1

    def no_fit(*_: object) -> object:
        raise AssertionError("fitted again although the same examples were kept")

    with monkeypatch.context() as patched:
        patched.setattr(categories, "_fit", no_fit)
        restored = categories._fitted(vectors, labels, tmp_path)
    assert list(restored.classes_) == list(fitted.classes_)  # type: ignore[attr-defined]
    np.testing.assert_array_equal(
        restored.predict_proba(queries),  # type: ignore[attr-defined]
        fitted.predict_proba(queries),  # type: ignore[attr-defined]
    )

    # Other examples (one label changed) are fitted anew, beside the first.
    categories._fitted(vectors, ["travel", *labels[1:]], tmp_path)
    assert len(list(tmp_path.glob("fitted-*.npz"))) == 2


def test_the_japanese_examples_cover_every_category_apart_from_their_evaluation_set() -> None:
    bank = load_bank()
    kana_or_kanji = re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")
    for category in SEED_CATEGORIES:
        assert sum(1 for s in bank[category] if kana_or_kanji.search(s)) >= 8, category
    evaluation = load_eval(Path("bench/data/category_eval_ja.tsv"))
    assert {c for c, _ in evaluation} == set(SEED_CATEGORIES)
    assert not {s for _, s in evaluation} & {s for ss in bank.values() for s in ss}


async def test_accuracy_on_the_evaluation_set(embedder: Embedder) -> None:
    classifier = CategoryClassifier(embedder, cache_dir=user_cache_dir("categories"))
    evaluation = load_eval()
    predicted = await classifier.classify(await _vectors(embedder, [s for _, s in evaluation]))
    accuracy = np.mean([p == c for p, (c, _) in zip(predicted, evaluation, strict=True)])
    # docs/benchmarks/categories.md reports 0.917 (the nearest-description rule: about half).
    assert accuracy >= 0.88


async def test_a_deployments_own_category_is_learnt_from_its_examples(embedder: Embedder) -> None:
    async def definitions() -> list[CategoryDefinition]:
        pets = CategoryDefinition(
            "pets",
            "Pets and animals the person keeps",
            (
                "I have a golden retriever called Max.",
                "My cat sleeps on my bed.",
                "I keep two rabbits in the garden.",
                "I take my dog to the vet every year.",
                "My parrot can say hello.",
                "I feed the goldfish twice a day.",
            ),
        )
        kept = ("dietary", "hobbies", "relationships")
        return [*(d for d in builtin_definitions() if d.name in kept), pets]

    classifier = CategoryClassifier(
        embedder, load_definitions=definitions, cache_dir=user_cache_dir("categories")
    )
    assert set(await classifier.names()) == {"dietary", "hobbies", "relationships", "pets"}
    (category,) = await classifier.classify(
        await _vectors(embedder, ["Our puppy chewed my slippers again."])
    )
    assert category == "pets"


async def test_the_judge_decides_only_uncertain_cases_among_the_offered_choices(
    embedder: Embedder,
) -> None:
    asked: list[list[str]] = []

    async def second_choice(text: str, choices: list[str]) -> str | None:
        asked.append(choices)
        return choices[1]

    vectors = await _vectors(embedder, ["I'm vegan."])
    cache = user_cache_dir("categories")
    sure = CategoryClassifier(embedder, uncertain_margin=0.0, cache_dir=cache, judge=second_choice)
    (certain,) = await sure.classify_detailed(vectors, ["I'm vegan."])
    assert certain.category == "dietary" and not certain.uncertain
    assert certain.decided_by == "examples" and asked == []

    unsure = CategoryClassifier(
        embedder, uncertain_margin=1.01, cache_dir=cache, judge=second_choice
    )
    (judged,) = await unsure.classify_detailed(vectors, ["I'm vegan."])
    assert judged.uncertain and judged.decided_by == "llm"
    assert len(asked) == 1 and len(asked[0]) == 3 and asked[0][0] == "dietary"
    assert judged.category == asked[0][1]

    async def invents(text: str, choices: list[str]) -> str | None:
        return "astrology"

    unsure.judge = invents
    (kept,) = await unsure.classify_detailed(vectors, ["I'm vegan."])
    assert kept.category == "dietary" and kept.decided_by == "examples"
