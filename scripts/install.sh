#!/usr/bin/env bash
# What the service needs, installed once and cached (`make install`; `make up` runs it):
# PostgreSQL 15 + pgvector, OpenSearch 2.19.x (+ its Japanese analyzer), the offline embedding
# models (and their ONNX export) and the project virtualenv (.venv) with the runtime packages.
# Idempotent: a second run only checks. The test kit (pytest and the linters, chromium, node,
# pgbouncer, helm, the local LLM test model) is scripts/install-test-tools.sh's (`make test`).
# Then: scripts/services.sh start all
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/venv.sh
. "$(dirname "${BASH_SOURCE[0]}")/venv.sh"

SCRIPTS="$ROOT/scripts"

main() {
    require_root
    step "postgres + pgvector" "$SCRIPTS/install-postgres.sh"
    step "opensearch" "$SCRIPTS/install-opensearch.sh"
    step "embedding models" "$SCRIPTS/install-models.sh" >/dev/null
    step "python virtualenv (runtime)" venv_install runtime
    # The default embedding backends run the model through ONNX Runtime (int8 for queries): export
    # it once here, into the per-user cache, so no service or test spends its start-up on it.
    step "ONNX export of the embedding model" "$VENV/bin/python" -m app.ml.onnx_encoder \
        "$MODELS_DIR/all-mpnet-base-v2" >/dev/null
    # curl: the scripts' health checks (OpenSearch's, the API's).
    step "curl for the health checks" ensure_debs curl
    log "install complete; start the services with: scripts/services.sh start all"
}

main "$@"
