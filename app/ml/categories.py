"""Pick a memory's category: a logistic regression over the embeddings of labelled examples.

The examples are a bank of everyday sentences per category (category_bank.tsv, written for this
project: first person, and the third-person style of LLM-written facts), plus whatever examples
a deployment stores in the `categories` table for its own categories. Measured on a separate
labelled set in docs/benchmarks/categories.md (the former nearest-description rule scored about
half of it).

When the best and second-best probabilities are closer than `uncertain_margin`, the answer is
"uncertain": an LLM, when one is configured, chooses among the three most likely categories;
otherwise (or when its answer is not one of them) the most likely one stands.

The classifier's list is the table's, read again after `DEFINITIONS_MAX_AGE_S` or when a
writer finds it out of date (`forget`): a row a deployment adds or removes is learnt without a
restart. Whether a name is a category is decided by app/memories/categories.py.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import structlog

from app.ml.embedder import Embedder
from app.ml.scheduling.work import Work, WorkClass
from app.vocabulary import SEED_CATEGORIES

log = structlog.get_logger(__name__)

BANK_PATH = Path(__file__).with_name("category_bank.tsv")
# Inverse regularisation of the logistic regression, chosen by 5-fold cross-validation on the
# bank alone (bench/categories.py --cross-validate), never on the evaluation set.
REGULARISATION_C = 4.0
JUDGE_CHOICES = 3
# How long the table's rows are trusted before they are read again.
DEFINITIONS_MAX_AGE_S = 30.0


@dataclass(frozen=True, slots=True)
class CategoryDefinition:
    name: str
    description: str
    examples: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Classification:
    category: str
    probability: float
    margin: float  # best probability minus the second best
    uncertain: bool
    decided_by: str  # "examples" | "llm"


# (text, the most likely categories) -> the LLM's choice among them, or None.
CategoryJudge = Callable[[str, list[str]], Awaitable[str | None]]
DefinitionsLoader = Callable[[], Awaitable[list[CategoryDefinition]]]


def load_bank(path: Path = BANK_PATH) -> dict[str, list[str]]:
    """category -> example sentences, from a `category<TAB>sentence` file (# comments)."""
    bank: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        category, sentence = line.split("\t", 1)
        bank.setdefault(category, []).append(sentence.strip())
    return bank


def builtin_definitions() -> list[CategoryDefinition]:
    """The seed 15 with no extra examples: what a store without the table uses."""
    return [CategoryDefinition(name, name.replace("_", " ")) for name in SEED_CATEGORIES]


def training_set(definitions: list[CategoryDefinition]) -> tuple[list[str], list[str]]:
    """(sentences, labels): the bank's examples of each defined category, its own examples,
    and (for a category with none) its description."""
    bank = load_bank()
    sentences: list[str] = []
    labels: list[str] = []
    for definition in definitions:
        examples = [*bank.get(definition.name, []), *definition.examples]
        for sentence in examples or [definition.description]:
            sentences.append(sentence)
            labels.append(definition.name)
    return sentences, labels


class CategoryClassifier:
    def __init__(
        self,
        embedder: Embedder,
        load_definitions: DefinitionsLoader | None = None,
        uncertain_margin: float = 0.1,
        cache_dir: Path | None = None,
        judge: CategoryJudge | None = None,
        max_age_s: float = DEFINITIONS_MAX_AGE_S,
    ) -> None:
        self._embedder = embedder
        self._load_definitions = load_definitions
        self._uncertain_margin = uncertain_margin
        self._cache_dir = cache_dir
        self.judge = judge
        self._max_age_s = max_age_s
        self._definitions: list[CategoryDefinition] | None = None
        self._read_at = 0.0
        self._model: object | None = None
        self._trained_on: list[CategoryDefinition] | None = None
        self._lock = asyncio.Lock()

    async def definitions(self) -> list[CategoryDefinition]:
        """This deployment's categories, read again once they are older than max_age_s."""
        stale = time.monotonic() - self._read_at > self._max_age_s
        if self._definitions is None or (stale and self._load_definitions is not None):
            loaded: list[CategoryDefinition] = []
            if self._load_definitions is not None:
                try:
                    loaded = await self._load_definitions()
                except Exception as exc:  # no table yet (an old schema): the built-in 15
                    log.warning("categories.table_unreadable", error=str(exc))
            self._definitions = loaded or builtin_definitions()
            self._read_at = time.monotonic()
        return self._definitions

    def forget(self) -> None:
        """Read the table again at the next use (a writer found a row this copy lacks, or one
        it has that is gone); the model is trained again if the rows changed."""
        self._read_at = float("-inf")

    async def names(self) -> tuple[str, ...]:
        return tuple(d.name for d in await self.definitions())

    async def current_names(self) -> tuple[str, ...]:
        """The names read now, for a list an LLM is about to be shown (a call that costs far
        more than the read): its answer is held to exactly the rows of this moment."""
        self.forget()
        return await self.names()

    async def _trained(self) -> object:
        # Locked: concurrent first callers (several worker loops) train once.
        async with self._lock:
            definitions = await self.definitions()
            if self._model is None or definitions != self._trained_on:
                sentences, labels = training_set(definitions)
                vectors = await self._example_vectors(sentences)
                self._model = await anyio.to_thread.run_sync(
                    _fitted, vectors, labels, self._cache_dir
                )
                self._trained_on = definitions
                log.info("categories.trained", examples=len(sentences), categories=len(set(labels)))
        return self._model

    async def _example_vectors(self, sentences: list[str]) -> np.ndarray:
        """The examples' embeddings, cached on disk per model (sentence -> vector): the bank is
        embedded once per machine, not at every start; new examples are embedded and added."""
        key = hashlib.sha256(f"{self._embedder.model_name}\n{self._embedder.backend}".encode())
        path = self._cache_dir / f"{key.hexdigest()[:24]}.npz" if self._cache_dir else None
        cached: dict[str, np.ndarray] = {}
        if path is not None and path.exists():
            try:
                with np.load(path) as stored:
                    cached = dict(zip(stored["sentences"].tolist(), stored["vectors"], strict=True))
            except (OSError, ValueError, KeyError) as exc:
                log.warning("categories.cache_unreadable", path=str(path), error=str(exc))
        missing = list(dict.fromkeys(s for s in sentences if s not in cached))
        if missing:
            # The example bank: background work of no tenant, behind every request.
            embedded = await self._embedder.embed(missing, Work(WorkClass.BULK))
            cached.update(zip(missing, (e.full for e in embedded), strict=True))
            if path is not None:
                vectors = np.stack(list(cached.values()))
                _save_arrays(path, sentences=np.array(list(cached)), vectors=vectors)
        return np.stack([cached[s] for s in sentences])

    async def prepare(self) -> None:
        """Train now (at start-up) rather than on the first memory that needs a category. An
        embedder that cannot answer yet (a remote one being down) does not stop the start:
        training is then retried by the first memory that needs a category."""
        try:
            await self._trained()
        except Exception as exc:
            log.warning("categories.training_deferred", error=str(exc))

    async def classify_detailed(
        self, vectors: list[np.ndarray], texts: list[str] | None = None
    ) -> list[Classification]:
        """A category for each unit 768D vector; `texts` (the same items) let the judge decide
        the uncertain ones."""
        if not vectors:
            return []
        model = await self._trained()
        probabilities = model.predict_proba(np.stack(vectors))  # type: ignore[attr-defined]
        classes = [str(c) for c in model.classes_]  # type: ignore[attr-defined]
        results = []
        for i, row in enumerate(probabilities):
            order = np.argsort(-row)
            margin = float(row[order[0]] - row[order[1]]) if len(order) > 1 else 1.0
            best = classes[order[0]]
            uncertain = margin < self._uncertain_margin
            decided_by = "examples"
            if uncertain and self.judge is not None and texts is not None:
                choices = [classes[j] for j in order[:JUDGE_CHOICES]]
                chosen = await self.judge(texts[i], choices)
                if chosen in choices and chosen is not None:
                    best, decided_by = chosen, "llm"
            results.append(
                Classification(best, float(row[order[0]]), margin, uncertain, decided_by)
            )
        return results

    async def classify(
        self, vectors: list[np.ndarray], texts: list[str] | None = None
    ) -> list[str]:
        """Category for each unit 768D vector."""
        return [c.category for c in await self.classify_detailed(vectors, texts)]


def _regression() -> Any:
    from sklearn.linear_model import LogisticRegression

    # Balanced: a deployment's category with a handful of examples is not drowned by the bank's
    # 30 per category (for the 15 alone, with equal counts, it changes nothing).
    return LogisticRegression(C=REGULARISATION_C, max_iter=2000, class_weight="balanced")


def _fit(vectors: np.ndarray, labels: list[str]) -> object:
    return _regression().fit(vectors, labels)


# What a fitted regression is: restoring these gives the same predict_proba as the fit.
FITTED_ATTRIBUTES = ("classes_", "coef_", "intercept_", "n_iter_", "n_features_in_")


def _fitted(vectors: np.ndarray, labels: list[str], cache_dir: Path | None) -> object:
    """The regression fitted to these examples, kept on disk beside their vectors: the fit takes
    seconds of CPU (about 6 s for the bank on a busy 2-core machine), and every process start
    trains, so a machine fits each set of examples once. The key is everything the fit reads
    (the vectors, the labels, the settings, scikit-learn's version): other examples, another
    model or another version fit again. Stored as arrays, never as a pickle."""
    import sklearn

    if cache_dir is None:
        return _fit(vectors, labels)
    key = hashlib.sha256(np.ascontiguousarray(vectors).tobytes())
    key.update("\n".join(labels).encode())
    key.update(f"{_regression().get_params()}|{sklearn.__version__}".encode())
    path = cache_dir / f"fitted-{key.hexdigest()[:24]}.npz"
    if path.exists():
        try:
            with np.load(path) as stored:
                model = _regression()
                for name in FITTED_ATTRIBUTES:
                    value = stored[name]
                    setattr(model, name, value.item() if value.ndim == 0 else value)
                return model
        except (OSError, ValueError, KeyError) as exc:
            log.warning("categories.cache_unreadable", path=str(path), error=str(exc))
    model = _fit(vectors, labels)
    _save_arrays(path, **{name: np.asarray(getattr(model, name)) for name in FITTED_ATTRIBUTES})
    return model


def _save_arrays(path: Path, **arrays: np.ndarray) -> None:
    """A cache file of arrays, written whole or not at all (a failure is only logged)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
        np.savez(tmp, **arrays)  # type: ignore[arg-type]
        tmp.replace(path)  # atomic: concurrent processes never read half a file
    except OSError as exc:
        log.warning("categories.cache_unwritable", path=str(path), error=str(exc))
