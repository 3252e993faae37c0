#!/usr/bin/env bash
# The machine's model service (`python -m app embed-serve`): start | stop | status.
# One copy of the embedding model and one scheduler for every API, worker and CLI process of
# this machine, which reach it through COGNIS_EMBEDDING_HTTP_URL (scripts/services.sh writes
# it to $LOCAL_DIR/cognis.env, with the bearer key COGNIS_EMBEDDING_HTTP_API_KEY that both
# sides read). Port COGNIS_EMBED_PORT (8090); the model runs on COGNIS_EMBED_SERVE_BACKEND
# (torch), queries on COGNIS_QUERY_EMBEDDING_BACKEND (onnx-int8).
#
# Supervised, as a database would be: `start` runs a small supervisor (this script's
# `supervise`, pid in run/embedder-supervisor.pid) that starts the model service (pid in
# run/embedder.pid) and starts it again whenever it dies (kill -9, out of memory), after a
# backoff of 1 s doubling to COGNIS_EMBED_RESTART_MAX_S (30) while it keeps dying young, back to
# 1 s once it has run a minute. `stop` stops the supervisor by its pid, which stops the service.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PID_FILE="$LOCAL_DIR/run/embedder.pid"
SUPERVISOR_PID_FILE="$LOCAL_DIR/run/embedder-supervisor.pid"
LOG_FILE="$LOCAL_DIR/logs/embedder.log"
ENV_FILE="$LOCAL_DIR/cognis.env"
VENV="$ROOT/.venv"
SERVICE="$VENV/bin/python -m app embed-serve"
SUPERVISOR="bash $ROOT/scripts/embedder.sh supervise"

running() {
    owned_running "$PID_FILE" "$SERVICE"
}

supervised() {
    owned_running "$SUPERVISOR_PID_FILE" "$SUPERVISOR"
}

from_env_file() {  # NAME: the caller's value, else the one services.sh wrote
    local value="${!1:-}"
    if [[ -z "$value" && -f "$ENV_FILE" ]]; then
        value=$(sed -n "s/^$1=//p" "$ENV_FILE")
    fi
    printf '%s' "$value"
}

# The supervisor: the model service in the foreground of a loop; TERM stops both.
supervise() {
    local child="" started rc delay=1 max_delay="${COGNIS_EMBED_RESTART_MAX_S:-30}"
    # shellcheck disable=SC2317  # called by the trap
    stop_child() {
        if [[ -n "$child" ]] && kill -0 "$child" 2>/dev/null; then
            kill "$child" 2>/dev/null || true
            for _ in $(seq 120); do
                kill -0 "$child" 2>/dev/null || break
                sleep 0.25
            done
            kill -9 "$child" 2>/dev/null || true
        fi
        rm -f "$PID_FILE"
        exit 0
    }
    trap stop_child TERM INT
    cd "$ROOT"
    while true; do
        started=$(date +%s)
        # It computes: the http backend (what its callers use) is not for it. No database
        # settings. The key (when services.sh made one) is the callers' own.
        env -u COGNIS_EMBEDDING_HTTP_URL -u COGNIS_DATABASE_URL \
            COGNIS_EMBEDDING_BACKEND="${COGNIS_EMBED_SERVE_BACKEND:-torch}" HF_HUB_OFFLINE=1 \
            "$VENV/bin/python" -m app embed-serve --port "$COGNIS_EMBED_PORT" </dev/null &
        child=$!
        echo "$child" >"$PID_FILE"
        rc=0
        wait "$child" || rc=$?
        child=""
        if (($(date +%s) - started >= 60)); then
            delay=1
        fi
        log "model service exited with status $rc after $(($(date +%s) - started)) s; restarting in $delay s"
        sleep "$delay" &
        wait $! || true
        delay=$((delay * 2 > max_delay ? max_delay : delay * 2))
    done
}

start() {
    if supervised; then
        log "embedder already running (supervisor pid $(cat "$SUPERVISOR_PID_FILE")) on 127.0.0.1:$COGNIS_EMBED_PORT"
        return 0
    fi
    if running; then
        log "embedder already running unsupervised (pid $(cat "$PID_FILE")): 'make down' and 'make up' to supervise it"
        return 0
    fi
    local model key
    model=$(from_env_file COGNIS_EMBEDDING_MODEL)
    key=$(from_env_file COGNIS_EMBEDDING_HTTP_API_KEY)
    [[ -n "$model" ]] || die "no embedding model: run scripts/install-models.sh or set COGNIS_EMBEDDING_MODEL"
    [[ -n "$key" ]] || log "no COGNIS_EMBEDDING_HTTP_API_KEY: any local process can use the model service (scripts/services.sh start writes one)"
    mkdir -p "$(dirname "$PID_FILE")" "$(dirname "$LOG_FILE")"
    private_log "$LOG_FILE"
    log "starting the model service on 127.0.0.1:$COGNIS_EMBED_PORT: $model (log: $LOG_FILE)"
    cd "$ROOT"
    COGNIS_EMBEDDING_MODEL="$model" COGNIS_EMBEDDING_HTTP_API_KEY="$key" COGNIS_EMBED_PORT="$COGNIS_EMBED_PORT" \
        nohup bash "$ROOT/scripts/embedder.sh" supervise >>"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$SUPERVISOR_PID_FILE"
    wait_for 300 "$LOG_FILE" "model service" -- \
        bash -c "curl -sf http://127.0.0.1:$COGNIS_EMBED_PORT/health | grep -q '\"loaded\":true'"
}

stop() {
    local stopped=0
    if supervised; then
        # Its trap stops the model service (TERM, then KILL after 30 s).
        stop_pid "embedder supervisor" "$SUPERVISOR_PID_FILE" 40
        stopped=1
    fi
    if running; then  # unsupervised (started before supervision), or its supervisor was killed
        stop_pid embedder "$PID_FILE" 30
        stopped=1
    fi
    ((stopped)) || log "embedder not running"
}

status() {
    if running; then
        local how="unsupervised"
        supervised && how="supervisor pid $(cat "$SUPERVISOR_PID_FILE")"
        printf 'embedder   up    127.0.0.1:%s  pid %s (%s)\n' "$COGNIS_EMBED_PORT" "$(cat "$PID_FILE")" "$how"
    elif supervised; then
        printf 'embedder   restarting (supervisor pid %s)\n' "$(cat "$SUPERVISOR_PID_FILE")"
        return 1
    else
        printf 'embedder   down\n'
        return 1
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    supervise) supervise ;;
    *) die "usage: $0 {start|stop|status}" ;;
esac
