#!/usr/bin/env bash
# The API process (with the outbox relay inside it): start | stop | status.
# Reads the connection settings that services.sh wrote to $LOCAL_DIR/cognis.env; any COGNIS_*
# variable already in the environment wins over the file.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PID_FILE="$LOCAL_DIR/run/api.pid"
LOG_FILE="$LOCAL_DIR/logs/api.log"
ENV_FILE="$LOCAL_DIR/cognis.env"
VENV="$ROOT/.venv"

running() {
    owned_running "$PID_FILE" "$VENV/bin/python -m app serve"
}

load_env() {
    [[ -f "$ENV_FILE" ]] || die "$ENV_FILE is missing: run scripts/services.sh start all first"
    local line key
    while IFS= read -r line; do
        [[ "$line" =~ ^[A-Z_]+= ]] || continue
        key="${line%%=*}"
        # Values already exported by the caller take precedence over the generated file.
        [[ -n "${!key:-}" ]] || export "$line"
    done <"$ENV_FILE"
}

start() {
    if running; then
        log "api already running (pid $(cat "$PID_FILE")) on 127.0.0.1:$COGNIS_API_PORT"
        return 0
    fi
    load_env
    mkdir -p "$(dirname "$PID_FILE")" "$(dirname "$LOG_FILE")"
    private_log "$LOG_FILE"
    log "migrating the database (alembic upgrade head)"
    (cd "$ROOT" && "$VENV/bin/alembic" upgrade head) >>"$LOG_FILE" 2>&1 \
        || { tail -n 30 "$LOG_FILE" >&2; die "alembic upgrade head failed"; }
    log "starting the API on 127.0.0.1:$COGNIS_API_PORT (log: $LOG_FILE)"
    cd "$ROOT"
    # No subshell around the background job: $! must be the server's own pid, and nothing
    # may keep the caller's stdout open.
    COGNIS_PORT="$COGNIS_API_PORT" COGNIS_LOG_JSON="${COGNIS_LOG_JSON:-true}" \
        nohup "$VENV/bin/python" -m app serve >>"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    wait_for 300 "$LOG_FILE" "API readiness" -- \
        curl -sf -o /dev/null "http://127.0.0.1:$COGNIS_API_PORT/ready"
}

stop() {
    if ! running; then
        log "api not running"
        rm -f "$PID_FILE"
        return 0
    fi
    stop_pid api "$PID_FILE" 30
}

status() {
    if running; then
        printf 'api        up    127.0.0.1:%s  pid %s\n' "$COGNIS_API_PORT" "$(cat "$PID_FILE")"
    else
        printf 'api        down\n'
        return 1
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    *) die "usage: $0 {start|stop|status}" ;;
esac
