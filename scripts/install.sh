#!/usr/bin/env bash
# One-shot local install: PostgreSQL 15 + pgvector, OpenSearch 2.19.x (+ analysis-common),
# the offline embedding models and the project virtualenv (.venv).  Idempotent.
# Then: scripts/services.sh start all
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

SCRIPTS="$ROOT/scripts"
PY="${COGNIS_PYTHON:-python3}"
VENV="$ROOT/.venv"
UV_REQ="uv>=0.5,<1"

step() {  # name script...
    local name="$1" t0 t1
    shift
    t0=$(date +%s)
    log "== $name"
    "$@"
    t1=$(date +%s)
    log "== $name done in $((t1 - t0))s"
}

venv_install() {
    "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
        || die "$PY is $("$PY" --version 2>&1); Python >= 3.11 is required (set COGNIS_PYTHON)"
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating virtualenv $VENV"
        "$PY" -m venv "$VENV"
    fi
    local stamp="$VENV/.cognis-pyproject.sha256" want
    want=$(cat "$ROOT/pyproject.toml" "$ROOT/clients/python/pyproject.toml" | sha256sum | cut -d' ' -f1)
    if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
        log "virtualenv up to date with pyproject.toml"
        return 0
    fi
    rm -f "$stamp"
    # The project and the Python client (with its LangGraph store: the MCP server talks to the
    # API through it), editable. uv keeps every wheel it fetched (hash-checked against the
    # index) in the per-user cache and links them in, so a fresh clone's virtualenv takes
    # seconds instead of the minutes pip spends fetching torch and its CUDA libraries again.
    local uv
    if uv=$(tool_venv uv "$UV_REQ")/bin/uv; then
        log "uv pip install -e '.[dev,onnx,local-llm]' into $VENV (wheel cache: $CACHE_DIR/uv)"
        UV_CACHE_DIR="$CACHE_DIR/uv" "$uv" pip install -q --python "$VENV/bin/python" \
            -e "${ROOT}[dev,onnx,local-llm]" -e "${ROOT}/clients/python[langgraph]"
    else
        log "uv unavailable: pip install -e '.[dev,onnx,local-llm]' into $VENV (can take minutes)"
        "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
        "$VENV/bin/python" -m pip install -q -e "${ROOT}[dev,onnx,local-llm]" \
            -e "${ROOT}/clients/python[langgraph]"
    fi
    printf '%s\n' "$want" >"$stamp"
    log "virtualenv ready: $VENV"
}

node_install() {
    # Node.js and npm: the TypeScript client's build and tests (clients/typescript). Any
    # Node >= 18 does (Debian's apt package, or one already installed, e.g. NodeSource's 20).
    if command -v node >/dev/null && command -v npm >/dev/null \
        && node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)'; then
        log "node $(node --version) and npm $(npm --version) present"
    else
        ensure_debs nodejs npm
    fi
    # Its pinned dev dependencies (package-lock.json), from npm's own cache after the first
    # time; again only when the lock file changed (the stamp: its hash at the last install).
    local dir="$ROOT/clients/typescript" want
    want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
    if [[ "$(cat "$dir/node_modules/.cognis-lock.sha256" 2>/dev/null)" == "$want" ]]; then
        log "clients/typescript/node_modules up to date with package-lock.json"
        return 0
    fi
    log "npm ci in clients/typescript"
    (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
    printf '%s\n' "$want" >"$dir/node_modules/.cognis-lock.sha256"
}

main() {
    require_root
    step "postgres + pgvector" "$SCRIPTS/install-postgres.sh"
    step "opensearch" "$SCRIPTS/install-opensearch.sh"
    step "embedding models" "$SCRIPTS/install-models.sh" >/dev/null
    step "python virtualenv" venv_install
    # The default embedding backends run the model through ONNX Runtime (int8 for queries): export
    # it once here, into the per-user cache, so no service or test spends its start-up on it.
    step "ONNX export of the embedding model" "$VENV/bin/python" -m app.ml.onnx_encoder \
        "$MODELS_DIR/all-mpnet-base-v2" >/dev/null
    # Headless Chromium and its driver: the web console's browser tests (Selenium drives them).
    step "chromium for console tests" ensure_debs chromium chromium-driver
    step "node + npm for the TypeScript client" node_install
    # curl and jq: the README's session (tests/test_readme.py runs it as written).
    step "curl and jq for the README's examples" ensure_debs curl jq
    # PgBouncer: the transaction-mode pooler tests/db/test_pgbouncer.py runs the API through.
    step "pgbouncer for the pooler tests" ensure_debs pgbouncer
    # helm, built with Go once and cached: the chart's checks (tests/deploy/test_helm_chart.py).
    step "helm for the chart checks" "$SCRIPTS/install-helm.sh" >/dev/null
    step "local LLM (xllamacpp + SmolLM2-135M test model)" "$SCRIPTS/install-llm.sh" >/dev/null
    log "install complete; start the services with: scripts/services.sh start all"
}

main "$@"
