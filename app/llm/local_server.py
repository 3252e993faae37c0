"""A local OpenAI-compatible LLM server: llama.cpp through xllamacpp's prebuilt CPU wheel.

    python -m app llm-serve            # COGNIS_LLM_GGUF_PATH, COGNIS_LLM_LOCAL_PORT, ..._THREADS

Serves /v1/chat/completions with JSON-schema-constrained output (`response_format`), /health
(503 while the model loads, 200 once ready) and /v1/models, on 127.0.0.1 only. scripts/llm.sh
runs it as a managed service (pid file, log, readiness); `make up` starts it when the GGUF
setting is given. Any other OpenAI-compatible endpoint works the same through
COGNIS_LLM_BASE_URL (compose.yaml and terraform use that).
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import structlog

from app.config import LOCAL_LLM_ALIAS, LlmSettings

log = structlog.get_logger(__name__)

HOST = "127.0.0.1"


def serve_gguf(llm: LlmSettings) -> int:
    """Load the GGUF, listen on 127.0.0.1:llm_local_port, block until SIGTERM or SIGINT."""
    if not llm.llm_gguf_path:
        raise SystemExit("COGNIS_LLM_GGUF_PATH is not set: name the GGUF file to serve")
    path = Path(llm.llm_gguf_path).expanduser()
    if not path.is_file():
        raise SystemExit(f"COGNIS_LLM_GGUF_PATH {path} is not a file")
    # Spinning OpenMP workers steal the cores the other processes need on a shared machine;
    # set before llama.cpp starts its thread pool.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import xllamacpp
    except ImportError as exc:
        raise SystemExit(
            "xllamacpp is not installed: run scripts/install-llm.sh (or make install-test)"
        ) from exc

    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.hostnames = [HOST]
    params.port = llm.llm_local_port
    params.model_alias = {llm.llm_model or LOCAL_LLM_ALIAS}
    params.n_ctx = llm.llm_local_context
    params.n_parallel = 1
    params.cpuparams.n_threads = llm.llm_local_threads
    params.cpuparams_batch.n_threads = llm.llm_local_threads
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    log.info(
        "llm.local_loading",
        gguf=str(path),
        port=llm.llm_local_port,
        threads=llm.llm_local_threads,
        context=llm.llm_local_context,
    )
    server = xllamacpp.Server(params)
    log.info("llm.local_listening", address=server.listening_address)
    stop.wait()
    log.info("llm.local_stopping")
    return 0
