"""Embeddings computed once per message and reused when the versioned store asks again."""

from __future__ import annotations

from app.ml.embedder import Embedder, Embedding


class ReusingEmbedder(Embedder):
    """An Embedder that answers from embeddings already computed (step 3 embeds every new
    content before the write transaction opens), delegating anything else to the real model."""

    def __init__(self, inner: Embedder, known: dict[str, Embedding]) -> None:
        # Deliberately not calling Embedder.__init__: this wraps a loaded model, owns none.
        self.model_name = inner.model_name
        self._inner = inner
        self._known = dict(known)

    @property
    def loaded(self) -> bool:
        return self._inner.loaded

    def load(self) -> None:
        self._inner.load()

    async def embed(self, texts: list[str]) -> list[Embedding]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._known))
        if missing:
            self._known.update(zip(missing, await self._inner.embed(missing), strict=True))
        return [self._known[t] for t in texts]
