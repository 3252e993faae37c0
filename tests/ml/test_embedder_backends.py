"""The embedding backends (torch, ONNX, ONNX int8) against each other, on the provisioned model.

No Postgres or OpenSearch: these load the model in-process. ONNX exports go to a temporary
folder (or COGNIS_TEST_ONNX_CACHE_DIR, to reuse them between runs), never the model folder.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from app.config import Settings
from app.ml import onnx_encoder
from app.ml.embedder import Embedder, matryoshka
from app.vocabulary import COARSE_DIM, EMBEDDING_DIM
from tests import services

SENTENCES = [
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Melanie is planning a camping trip with her kids to the mountains.",
    "What did you think of the pottery class?",
    "ok",
]
ONNX_MISSING = "onnxruntime/onnx not installed (pip install -e '.[onnx]')"
HAS_ONNX = all(importlib.util.find_spec(m) for m in ("onnxruntime", "onnx"))
# Lowest cosine to torch's vector that each backend keeps. fp32 ONNX is the same computation;
# dynamic int8 is lossy (all-mpnet-base-v2: mean 0.989, min 0.974 over 200 LoCoMo turns, and
# ~0.96 for a two-letter text), which is why it is not the default.
MIN_COSINE = {"onnx": 0.999, "onnx-int8": 0.95}
needs_onnx = pytest.mark.skipif(not HAS_ONNX, reason=ONNX_MISSING)


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    configured = os.environ.get("COGNIS_TEST_ONNX_CACHE_DIR")
    return Path(configured) if configured else tmp_path_factory.mktemp("onnx")


@pytest.fixture(scope="module")
def torch_vectors(model_path: str) -> np.ndarray:
    return np.stack([e.full for e in Embedder(model_path).embed_sync(SENTENCES)])


def _embedder(backend: str, model_path: str, onnx_cache: Path, **options: Any) -> Embedder:
    if backend != "torch" and not HAS_ONNX:
        pytest.skip(ONNX_MISSING)
    return Embedder(model_path, backend=backend, onnx_cache_dir=str(onnx_cache), **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["torch", "onnx", "onnx-int8"])
def test_backend_returns_unit_full_and_coarse_vectors(
    backend: str, model_path: str, onnx_cache: Path
) -> None:
    embeddings = _embedder(backend, model_path, onnx_cache).embed_sync(SENTENCES)

    assert len(embeddings) == len(SENTENCES)
    for e in embeddings:
        assert e.full.shape == (EMBEDDING_DIM,) and e.coarse.shape == (COARSE_DIM,)
        assert np.linalg.norm(e.full) == pytest.approx(1.0, abs=1e-5)
        assert np.linalg.norm(e.coarse) == pytest.approx(1.0, abs=1e-5)
        prefix = e.full[:COARSE_DIM]
        np.testing.assert_allclose(e.coarse, prefix / np.linalg.norm(prefix), atol=1e-6)


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_backend_stays_close_to_torch(
    backend: str, model_path: str, onnx_cache: Path, torch_vectors: np.ndarray
) -> None:
    embedder = _embedder(backend, model_path, onnx_cache)
    vectors = np.stack([e.full for e in embedder.embed_sync(SENTENCES)])

    cosines = np.sum(vectors * torch_vectors, axis=1)
    assert cosines.min() >= MIN_COSINE[backend], cosines
    # The same texts in another batch order embed the same (the encoder sorts by length).
    again = np.stack([e.full for e in embedder.embed_sync(SENTENCES[::-1])])[::-1]
    np.testing.assert_allclose(again, vectors, atol=1e-3)


@needs_onnx
def test_onnx_export_is_reused_and_leaves_the_model_folder_alone(
    model_path: str, onnx_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = sorted(p.relative_to(model_path) for p in Path(model_path).rglob("*"))
    _embedder("onnx", model_path, onnx_cache).load()
    export_dir = onnx_encoder.export_dir_for(model_path, onnx_cache)
    model_file = export_dir / onnx_encoder.FP32_FILE
    written = model_file.stat().st_mtime_ns

    def no_second_export(*args: object) -> None:
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_encoder, "export_fp32", no_second_export)
    embedder = _embedder("onnx", model_path, onnx_cache)
    embedder.embed_sync(["reused"])

    assert model_file.stat().st_mtime_ns == written
    assert export_dir.parent == onnx_cache
    assert sorted(p.relative_to(model_path) for p in Path(model_path).rglob("*")) == before
    assert not list(export_dir.glob("*.tmp"))


def test_matryoshka_zero_pads_a_384d_model_without_changing_cosines() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(3, 384)).astype(np.float32)

    embeddings = matryoshka(vectors)

    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    for e, u in zip(embeddings, unit, strict=True):
        assert e.full.shape == (EMBEDDING_DIM,)
        assert not e.full[384:].any()
        np.testing.assert_allclose(e.full[:384], u, atol=1e-6)
        assert np.linalg.norm(e.coarse) == pytest.approx(1.0, abs=1e-6)
        np.testing.assert_allclose(
            e.coarse, u[:COARSE_DIM] / np.linalg.norm(u[:COARSE_DIM]), atol=1e-6
        )
    full = np.stack([e.full for e in embeddings])
    np.testing.assert_allclose(full @ full.T, unit @ unit.T, atol=1e-5)


def test_matryoshka_rejects_more_than_768_dimensions() -> None:
    with pytest.raises(ValueError, match="at most"):
        matryoshka(np.ones((1, EMBEDDING_DIM + 1), dtype=np.float32))


@pytest.mark.models  # loads all-MiniLM-L6-v2 (and exports it to ONNX)
@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_a_384d_model_is_padded_by_every_backend(backend: str, onnx_cache: Path) -> None:
    minilm = services.CACHE_DIR / "models" / "all-MiniLM-L6-v2"
    if not (minilm / "modules.json").exists():
        pytest.skip(f"no all-MiniLM-L6-v2 at {minilm}")
    (e,) = _embedder(backend, str(minilm), onnx_cache).embed_sync(SENTENCES[:1])

    assert e.full.shape == (EMBEDDING_DIM,)
    assert not e.full[384:].any() and e.full[:384].any()
    assert np.linalg.norm(e.full) == pytest.approx(1.0, abs=1e-5)


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="backend"):
        Embedder("any", backend="tensorrt")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Settings(database_url="postgresql+asyncpg://x/y", embedding_backend="tensorrt")  # type: ignore[arg-type]


@needs_onnx
async def test_queries_get_their_own_int8_embedder_unless_told_to_share(
    model_path: str, onnx_cache: Path, torch_vectors: np.ndarray
) -> None:
    from app.runtime import Runtime

    base = Settings(
        database_url="postgresql+asyncpg://x/y",
        embedding_model=model_path,
        embedding_onnx_cache_dir=str(onnx_cache),
    )
    shared = Runtime.build(base.model_copy(update={"query_embedding_backend": "same"}))
    split = Runtime.build(base)  # the default
    try:
        assert shared.query_embedder is shared.embedder
        assert split.query_embedder is not split.embedder
        assert (split.embedder.backend, split.query_embedder.backend) == ("torch", "onnx-int8")
        assert not split.models_loaded
        split.load_models()
        assert split.models_loaded

        stored = split.embedder.embed_sync(SENTENCES[:1])[0].full
        query = (await split.query_embedder.embed_query(SENTENCES[0])).full
        np.testing.assert_allclose(stored, torch_vectors[0], atol=1e-5)  # memories: still torch
        cosine = float(np.dot(query, torch_vectors[0]))
        assert MIN_COSINE["onnx-int8"] <= cosine < 0.99999  # queries: int8, close but not equal
    finally:
        await shared.close()
        await split.close()


def test_concurrent_preparations_export_each_model_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh machine's first test run starts many API processes at once: one exports, the
    others wait for it and reuse its files (ONNX Runtime's quantiser writes a scratch file of a
    fixed name beside its input, so two of them at once broke each other)."""
    import threading
    import time

    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"w")
    active: list[str] = []
    exports: list[str] = []
    overlaps: list[list[str]] = []

    def fake(kind: str, file: str):
        def export(*args: object) -> None:
            export_dir = Path(str(args[-1]))
            active.append(kind)
            if len(active) > 1:
                overlaps.append(list(active))
            time.sleep(0.05)  # long enough for an unlocked second exporter to overlap
            export_dir.mkdir(parents=True, exist_ok=True)
            (export_dir / file).write_text(kind)
            exports.append(kind)
            active.remove(kind)

        return export

    monkeypatch.setattr(onnx_encoder, "export_fp32", fake("fp32", onnx_encoder.META_FILE))
    monkeypatch.setattr(onnx_encoder, "export_int8", fake("int8", onnx_encoder.INT8_FILE))
    cache = tmp_path / "onnx"
    results: list[Path] = []
    threads = [
        threading.Thread(
            target=lambda: results.append(
                onnx_encoder.prepare(str(model), quantized=True, cache_dir=cache)
            )
        )
        for _ in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(exports) == ["fp32", "int8"]
    assert overlaps == []
    assert results == [onnx_encoder.export_dir_for(str(model), cache)] * 6


@pytest.mark.parametrize("backend", ["torch", "onnx-int8"])
def test_counting_tokens_leaves_the_models_tokenizer_as_the_model_set_it(
    backend: str, model_path: str, onnx_cache: Path
) -> None:
    """The scheduler counts tokens on the event loop's thread while the model tokenizes on its
    own. A count through the model's own tokenizer switched its padding off under a running
    call, which then failed to make a tensor of texts of unequal length (a 500 under load)."""
    embedder = _embedder(backend, model_path, onnx_cache, cost_unit="tokens")
    embedder.embed_sync(SENTENCES)  # the model's tokenizer now pads, as every model call sets
    tokenizer = embedder._model.tokenizer.backend_tokenizer
    padding_during_a_call = tokenizer.padding
    assert padding_during_a_call is not None

    counts = embedder.token_counts(SENTENCES)

    assert tokenizer.padding == padding_during_a_call
    assert counts[3] < counts[0] and all(c >= 3 for c in counts)  # [CLS] ok [SEP]: 3
