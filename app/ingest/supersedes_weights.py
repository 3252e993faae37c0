"""The supersedes models' weights: one logistic regression per language it reads, trained by
`python -m bench.supersedes train` and shipped as app/ingest/supersedes_model.json (English,
features in app/ingest/supersedes_en.py) and supersedes_model_ja.json (Japanese,
app/ingest/supersedes_ja.py). app/ingest/supersedes.py decides with them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from app.ingest import supersedes_en, supersedes_ja
from app.ml.language import detect_language

MODEL_PATH = Path(__file__).with_name("supersedes_model.json")
# One model per language it reads: its file; a message in another language is not judged.
MODEL_PATHS = {"en": MODEL_PATH, "ja": Path(__file__).with_name("supersedes_model_ja.json")}

# A pair's features, or None for a pair the language's model does not judge.
Featurize = Callable[[str, str, float, float | None, float], list[float] | None]
# Per language the model reads: its features' names and the function that computes them.
FEATURE_SETS: dict[str, tuple[tuple[str, ...], Featurize]] = {
    "en": (supersedes_en.FEATURES, supersedes_en.pair_features),
    "ja": (supersedes_ja.FEATURES, supersedes_ja.pair_features),
}


@dataclass(frozen=True, slots=True)
class SupersedesModel:
    """Standardised features, one weight each, a bias; `threshold` is the shipped default.
    `direction`: a unit vector of the embedder `embedding_model` (768D English, 512D
    multilingual), from the mean difference (sentence - memory) of superseding pairs to that of
    pairs that only add. `language`: the messages it judges, which picks its features."""

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    bias: float
    threshold: float
    direction: np.ndarray
    embedding_model: str
    language: str = "en"

    @property
    def featurize(self) -> Featurize:
        return FEATURE_SETS[self.language][1]

    def cues(self, sentence: str) -> list[str]:
        """The cue words the sentence matched, for the reason (Japanese: no word boundaries
        to show them by in the features' names)."""
        return supersedes_ja.matched_cues(sentence) if self.language == "ja" else []

    def scores(self, features: np.ndarray) -> np.ndarray:
        """The probability that each row's memory is superseded by its sentence."""
        z = ((features - self.mean) / self.scale) @ self.weights + self.bias
        return 1.0 / (1.0 + np.exp(-z))

    def top_features(self, row: list[float], count: int = 3) -> list[tuple[str, float]]:
        """The features that pushed this pair's score up most, with their values."""
        contributions = (np.asarray(row) - self.mean) / self.scale * self.weights
        order = np.argsort(-contributions)[:count]
        return [(self.features[i], row[i]) for i in order if contributions[i] > 0]

    def to_json(self) -> dict[str, object]:
        return {
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weights": [round(float(v), 6) for v in self.weights],
            "bias": round(self.bias, 6),
            "threshold": round(self.threshold, 4),
            "embedding_model": self.embedding_model,
            "language": self.language,
            "direction": [round(float(v), 6) for v in self.direction],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SupersedesModel:
        language = str(data.get("language", "en"))
        features = tuple(data["features"])
        if language not in FEATURE_SETS or features != FEATURE_SETS[language][0]:
            raise ValueError("supersedes model was trained on other features: retrain it")
        return cls(
            features=features,
            mean=np.asarray(data["mean"], dtype=np.float64),
            scale=np.asarray(data["scale"], dtype=np.float64),
            weights=np.asarray(data["weights"], dtype=np.float64),
            bias=float(data["bias"]),
            threshold=float(data["threshold"]),
            direction=np.asarray(data["direction"], dtype=np.float32),
            embedding_model=str(data["embedding_model"]),
            language=language,
        )


@cache
def shipped_model(language: str = "en") -> SupersedesModel:
    """The model of one language trained by `python -m bench.supersedes train`, read once."""
    path = MODEL_PATHS[language]
    return SupersedesModel.from_json(json.loads(path.read_text(encoding="utf-8")))


def model_for(content: str) -> SupersedesModel:
    """The model that judges a message: the Japanese one for a Japanese message (kana, or what
    the language detector reads as Japanese), else the English one, as before there was a
    second."""
    return shipped_model("ja" if detect_language(content) == "ja" else "en")
