#!/usr/bin/env bash
# `make up`: install what the service needs (scripts/install.sh: no test kit), start Postgres and
# OpenSearch, migrate, start the API.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

t0=$(date +%s)
"$ROOT/scripts/install.sh"
if [[ "${COGNIS_CLUSTER:-0}" == 1 ]]; then
    # `make up-cluster`: the primary, its streaming replica (reads) and a 3-node OpenSearch
    # cluster on loopback, the engines of terraform/'s topology (docs/deployment.md).
    "$ROOT/scripts/services.sh" start postgres
    "$ROOT/scripts/pg-replica.sh" start
    "$ROOT/scripts/opensearch-cluster.sh" start
    sed -i "s|^COGNIS_OPENSEARCH_URL=.*|COGNIS_OPENSEARCH_URL=$("$ROOT/scripts/opensearch-cluster.sh" urls)|" \
        "$LOCAL_DIR/cognis.env"
else
    "$ROOT/scripts/services.sh" start all
fi
if [[ -n "${COGNIS_LLM_GGUF_PATH:-}" ]]; then
    # A local model: its server first, so the API's LLM endpoint answers from the start.
    if [[ ! -f "$COGNIS_LLM_GGUF_PATH" && "$COGNIS_LLM_GGUF_PATH" != */* ]]; then
        # A model's name (qwen-1.5b, qwen-0.5b, smollm2): installed or checked, then its file.
        COGNIS_LLM_GGUF_PATH=$("$ROOT/scripts/install-llm.sh" "$COGNIS_LLM_GGUF_PATH")
        export COGNIS_LLM_GGUF_PATH
    fi
    "$ROOT/scripts/llm.sh" start
fi
# The model service first: the API (and every other process here) embeds through it.
"$ROOT/scripts/embedder.sh" start
"$ROOT/scripts/api.sh" start
t1=$(date +%s)
llm="${COGNIS_LLM_BASE_URL:-none (the extractor without an LLM)}"
if [[ -n "${COGNIS_LLM_GGUF_PATH:-}" ]]; then
    llm="local, 127.0.0.1:${COGNIS_LLM_LOCAL_PORT:-8089} serving $COGNIS_LLM_GGUF_PATH"
fi
cat <<EOM

  Cognis Memory is ready in $((t1 - t0)) s:  http://127.0.0.1:$COGNIS_API_PORT
    OpenAPI:   http://127.0.0.1:$COGNIS_API_PORT/schema
    Readiness: http://127.0.0.1:$COGNIS_API_PORT/ready
    Model:     http://127.0.0.1:$COGNIS_EMBED_PORT/health (one model service for every process here)
    API key:   send X-API-Key (development key 'cognis-dev-key' unless COGNIS_API_KEY_HASHES is set)
    Logs:      $LOCAL_DIR/logs/   Stop: make down
    LLM:       $llm

EOM
