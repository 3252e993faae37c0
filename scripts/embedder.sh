#!/usr/bin/env bash
# The machine's model service (`python -m app embed-serve`): start | stop | status.
# One copy of the embedding model and one scheduler for every API, worker and CLI process of
# this machine, which reach it through COGNIS_EMBEDDING_HTTP_URL (scripts/services.sh writes
# it to $LOCAL_DIR/cognis.env). Port COGNIS_EMBED_PORT (8090); the model runs on
# COGNIS_EMBED_SERVE_BACKEND (torch), queries on COGNIS_QUERY_EMBEDDING_BACKEND (onnx-int8).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PID_FILE="$LOCAL_DIR/run/embedder.pid"
LOG_FILE="$LOCAL_DIR/logs/embedder.log"
ENV_FILE="$LOCAL_DIR/cognis.env"
VENV="$ROOT/.venv"

running() {
    owned_running "$PID_FILE" "$VENV/bin/python -m app embed-serve"
}

start() {
    if running; then
        log "embedder already running (pid $(cat "$PID_FILE")) on 127.0.0.1:$COGNIS_EMBED_PORT"
        return 0
    fi
    local model="${COGNIS_EMBEDDING_MODEL:-}"
    if [[ -z "$model" && -f "$ENV_FILE" ]]; then
        model=$(sed -n 's/^COGNIS_EMBEDDING_MODEL=//p' "$ENV_FILE")
    fi
    [[ -n "$model" ]] || die "no embedding model: run scripts/install-models.sh or set COGNIS_EMBEDDING_MODEL"
    mkdir -p "$(dirname "$PID_FILE")" "$(dirname "$LOG_FILE")"
    private_log "$LOG_FILE"
    log "starting the model service on 127.0.0.1:$COGNIS_EMBED_PORT: $model (log: $LOG_FILE)"
    cd "$ROOT"
    # It computes: the http backend (what its callers use) is not for it. No database settings.
    env -u COGNIS_EMBEDDING_HTTP_URL -u COGNIS_DATABASE_URL \
        COGNIS_EMBEDDING_BACKEND="${COGNIS_EMBED_SERVE_BACKEND:-torch}" \
        COGNIS_EMBEDDING_MODEL="$model" HF_HUB_OFFLINE=1 \
        nohup "$VENV/bin/python" -m app embed-serve --port "$COGNIS_EMBED_PORT" \
        >>"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    wait_for 300 "$LOG_FILE" "model service" -- \
        bash -c "curl -sf http://127.0.0.1:$COGNIS_EMBED_PORT/health | grep -q '\"loaded\":true'"
}

stop() {
    if ! running; then
        log "embedder not running"
        return 0
    fi
    stop_pid embedder "$PID_FILE" 30
}

status() {
    if running; then
        printf 'embedder   up    127.0.0.1:%s  pid %s\n' "$COGNIS_EMBED_PORT" "$(cat "$PID_FILE")"
    else
        printf 'embedder   down\n'
        return 1
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 {start|stop|status}" ;;
esac
