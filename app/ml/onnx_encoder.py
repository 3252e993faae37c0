"""A sentence-transformers model exported once to ONNX (optionally int8) and run by ONNX Runtime.

sentence-transformers' own ``backend="onnx"`` needs optimum-onnx, whose releases pin
transformers < 4.58 while sentence-transformers 6 needs transformers >= 5: the two cannot be
installed together. So the whole model (transformer, pooling, normalisation) is traced to one ONNX
graph with torch's exporter, and ONNX Runtime with the saved tokenizer runs it; no hub is asked.

The export goes to a cache folder, never into the (read-mostly) model folder, and is reused as
long as the source model's files are unchanged. `scripts/install.sh` makes it (`python -m
app.ml.onnx_encoder MODEL`), so a service never spends its start-up exporting. Processes that
do export hold a lock on the export folder meanwhile: ONNX Runtime's quantiser writes a scratch
file of a fixed name beside its input, so two quantisers of one model must not run at once (a
fresh machine's first test run started a dozen APIs that did). Each file is also written under
a temporary name and renamed, so a reader never sees it half-written.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from app.ml.offline import user_cache_dir

log = structlog.get_logger(__name__)

FP32_FILE = "model.onnx"
INT8_FILE = "model_int8.onnx"
META_FILE = "cognis_export.json"
# Bumped when the export itself changes, so old exports are redone rather than trusted.
EXPORT_FORMAT = 2  # 2: int8 per tensor, checked against fp32 (per channel broke, see export_int8)
# Texts an int8 export is checked on before it is used, and the least cosine to fp32 it must
# keep on each (a sound export keeps 0.95-0.99 on these; a broken one falls near 0).
AGREEMENT_PROBES = (
    "Caroline went to the LGBTQ support group on 7 May 2023.",
    "Melanie is planning a camping trip with her kids to the mountains.",
    "What did you think of the pottery class?",
)
MIN_AGREEMENT = 0.9


def default_cache_dir() -> Path:
    return user_cache_dir("onnx")


def source_fingerprint(model_name_or_path: str) -> str:
    """Identifies the source model: its name, and for a local folder its files' sizes and times."""
    digest = hashlib.sha256(f"{EXPORT_FORMAT}:{model_name_or_path}".encode())
    root = Path(model_name_or_path)
    if root.is_dir():
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "onnx" not in p.parts):
            stat = path.stat()
            digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


def export_dir_for(model_name_or_path: str, cache_dir: str | os.PathLike[str] | None) -> Path:
    name = Path(model_name_or_path.rstrip("/")).name or "model"
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    return root / f"{name}-{source_fingerprint(model_name_or_path)}"


def _write_atomically(target: Path, write: Any) -> None:
    """Run write(tmp_path) and rename the result onto target."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide the export from other users
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def export_fp32(model_name_or_path: str, target_dir: Path) -> None:
    """Trace the whole SentenceTransformer (all modules) to one ONNX graph plus its tokenizer."""
    import torch
    from sentence_transformers import SentenceTransformer

    target_dir.mkdir(parents=True, exist_ok=True)
    model = SentenceTransformer(model_name_or_path, device="cpu").eval()
    features = model.preprocess(["an example sentence to trace", "another"])
    input_names = [k for k, v in features.items() if isinstance(v, torch.Tensor)]

    class _SentenceEmbedding(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            batch: dict[str, Any] = dict(zip(input_names, tensors, strict=True))
            batch["modality"] = "text"
            return self.inner(batch)["sentence_embedding"]

    axes = {name: {0: "batch", 1: "sequence"} for name in input_names}
    axes["sentence_embedding"] = {0: "batch"}

    def write(tmp: Path) -> None:
        with torch.inference_mode():
            torch.onnx.export(
                _SentenceEmbedding(),
                tuple(features[name] for name in input_names),
                str(tmp),
                input_names=input_names,
                output_names=["sentence_embedding"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )

    _write_atomically(target_dir / FP32_FILE, write)
    model.tokenizer.save_pretrained(str(target_dir))
    meta = {
        "source": model_name_or_path,
        "max_seq_length": model.max_seq_length,
        "inputs": input_names,
        "dimension": model.get_embedding_dimension(),
    }
    _write_atomically(
        target_dir / META_FILE, lambda tmp: tmp.write_text(json.dumps(meta, indent=2) + "\n")
    )


def _int8_nodes(model_file: Path) -> list[str]:
    """MatMuls with constant weights, less the feed-forward down-projections.

    Those take the GELU output, whose few huge activations do not survive int8 (per tensor, at
    run time): quantising them too drops all-mpnet-base-v2's cosine to fp32 from ~0.99 to
    ~0.92, while keeping them in fp32 costs only a fraction of the speed-up.
    """
    import onnx

    graph = onnx.load(str(model_file), load_external_data=False).graph
    weights = {init.name for init in graph.initializer}
    return [
        node.name
        for node in graph.node
        if node.op_type == "MatMul"
        and len(node.input) == 2
        and node.input[1] in weights
        and not ("/output/dense/" in node.name and "attention" not in node.name)
    ]


def export_int8(target_dir: Path) -> None:
    """Dynamic int8 quantisation (weights ahead of time, activations per call) of the fp32 graph,
    checked against it before it is kept.

    Weights are quantised per tensor. Per channel was the better choice until ONNX Runtime 1.32,
    whose per-channel MatMul weights came out scrambled (cosine to fp32 ~0.05 instead of
    ~0.99): every search embedded its query with them, silently. Per tensor keeps 0.96-0.99 on
    every version tried, and the check below refuses any export that drifts from fp32, whatever
    the next release changes."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    def write(tmp: Path) -> None:
        quantize_dynamic(
            str(target_dir / FP32_FILE),
            str(tmp),
            weight_type=QuantType.QInt8,
            per_channel=False,
            op_types_to_quantize=["MatMul"],
            nodes_to_quantize=_int8_nodes(target_dir / FP32_FILE),
            extra_options={"MatMulConstBOnly": True},
        )
        agreement = _agreement(target_dir, target_dir / FP32_FILE, tmp)
        if agreement < MIN_AGREEMENT:
            import onnxruntime

            raise RuntimeError(
                f"the int8 export of {target_dir.name} disagrees with its fp32 graph (cosine "
                f"{agreement:.3f} < {MIN_AGREEMENT}) with onnxruntime {onnxruntime.__version__}: "
                "use COGNIS_QUERY_EMBEDDING_BACKEND=onnx (or torch) until this is fixed"
            )

    _write_atomically(target_dir / INT8_FILE, write)


def _agreement(export_dir: Path, reference: Path, candidate: Path) -> float:
    """The least cosine between two graphs' vectors of AGREEMENT_PROBES."""
    import onnxruntime as ort
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(export_dir))
    features = tokenizer(list(AGREEMENT_PROBES), padding=True, return_tensors="np")

    def vectors(model_file: Path) -> np.ndarray:
        session = ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"])
        feed = {i.name: np.asarray(features[i.name], dtype=np.int64) for i in session.get_inputs()}
        (out,) = session.run(None, feed)
        out = np.asarray(out, dtype=np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    return float((vectors(reference) * vectors(candidate)).sum(axis=1).min())


@contextlib.contextmanager
def _export_lock(export_dir: Path) -> Iterator[None]:
    """Exclusive, across processes, for as long as one of them exports into `export_dir`."""
    export_dir.parent.mkdir(parents=True, exist_ok=True)
    with (export_dir.parent / f".{export_dir.name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def prepare(
    model_name_or_path: str,
    *,
    quantized: bool,
    cache_dir: str | os.PathLike[str] | None = None,
) -> Path:
    """The export folder of this model, exported (and quantised) first if it is not there yet.

    A process that finds the export complete takes no lock; one that does not waits for any
    other exporter and then looks again, so each model is exported once per machine."""
    export_dir = export_dir_for(model_name_or_path, cache_dir)
    wanted = [export_dir / META_FILE] + ([export_dir / INT8_FILE] if quantized else [])
    if all(path.exists() for path in wanted):
        return export_dir
    with _export_lock(export_dir):
        if not (export_dir / META_FILE).exists():
            log.info("embedder.onnx_export", model=model_name_or_path, to=str(export_dir))
            export_fp32(model_name_or_path, export_dir)
        if quantized and not (export_dir / INT8_FILE).exists():
            log.info("embedder.onnx_quantize", model=model_name_or_path, to=str(export_dir))
            export_int8(export_dir)
    return export_dir


class OnnxSentenceEncoder:
    """encode(texts) -> (n, dim) float32, like SentenceTransformer.encode for text."""

    def __init__(
        self,
        model_name_or_path: str,
        *,
        quantized: bool = False,
        cache_dir: str | os.PathLike[str] | None = None,
        threads: int | None = None,
        device: str = "cpu",
    ) -> None:
        try:
            import onnxruntime as ort
        except ModuleNotFoundError as exc:  # pragma: no cover - depends on the install
            raise RuntimeError(
                "the onnx embedding backends need onnxruntime and onnx: "
                "pip install 'cognis-memory[onnx]'"
            ) from exc
        from transformers import AutoTokenizer

        self.export_dir = prepare(model_name_or_path, quantized=quantized, cache_dir=cache_dir)
        model_file = self.export_dir / (INT8_FILE if quantized else FP32_FILE)
        meta = json.loads((self.export_dir / META_FILE).read_text())
        self._inputs: list[str] = meta["inputs"]
        self.max_seq_length: int = meta["max_seq_length"]
        self.dimension: int = meta["dimension"]
        self.model_file = model_file

        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads:
            options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle workers would otherwise spin after each call, taking the cores that the database,
        # OpenSearch and the event loop share with the embedder.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        providers = ["CPUExecutionProvider"]
        if device.startswith("cuda") and "CUDAExecutionProvider" in ort.get_available_providers():
            providers.insert(0, "CUDAExecutionProvider")
        self._session = ort.InferenceSession(str(model_file), options, providers=providers)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.export_dir))

    def _run(self, texts: list[str]) -> np.ndarray:
        features = self.tokenizer(
            texts,
            padding=True,
            truncation="longest_first",
            max_length=self.max_seq_length,
            return_tensors="np",
        )
        feed = {name: np.asarray(features[name], dtype=np.int64) for name in self._inputs}
        (vectors,) = self._session.run(["sentence_embedding"], feed)
        return np.asarray(vectors, dtype=np.float32)

    def encode(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        # Longest first, as sentence-transformers does, so each batch pads to similar lengths.
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out: np.ndarray = np.empty((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), batch_size):
            chunk = order[start : start + batch_size]
            out[chunk] = self._run([texts[i] for i in chunk])
        return out


def main(argv: list[str] | None = None) -> int:
    """`python -m app.ml.onnx_encoder MODEL`: export (fp32 and int8) into the cache, once."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("model", help="a sentence-transformers model folder (or hub name)")
    parser.add_argument("--cache-dir", default=None, help="default: ~/.cache/cognis-memory/onnx")
    args = parser.parse_args(argv)
    export_dir = prepare(args.model, quantized=True, cache_dir=args.cache_dir)
    print(export_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
