#!/usr/bin/env bash
# The API process (with the outbox relay inside it): start | stop | status | migrate.
# Reads the connection settings that services.sh wrote to $LOCAL_DIR/cognis.env through
# scripts/role-env.sh: the migrations run first, as their own process with the owner's URL only,
# then the API with the request and worker roles' URLs only (any COGNIS_* variable already in
# the environment wins over the file).
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

ROLE_ENV="$ROOT/scripts/role-env.sh"

migrate() {  # alembic upgrade head as the tables' owner, in a process of its own
    [[ -f "$ENV_FILE" ]] || die "$ENV_FILE is missing: run scripts/services.sh start all first"
    mkdir -p "$(dirname "$LOG_FILE")"
    private_log "$LOG_FILE"
    log "migrating the database (alembic upgrade head, as the owner)"
    (cd "$ROOT" && "$ROLE_ENV" migrate "$VENV/bin/alembic" upgrade head) >>"$LOG_FILE" 2>&1 \
        || { tail -n 30 "$LOG_FILE" >&2; die "alembic upgrade head failed"; }
}

start() {
    if running; then
        log "api already running (pid $(cat "$PID_FILE")) on 127.0.0.1:$COGNIS_API_PORT"
        return 0
    fi
    migrate
    mkdir -p "$(dirname "$PID_FILE")"
    log "starting the API on 127.0.0.1:$COGNIS_API_PORT (log: $LOG_FILE)"
    cd "$ROOT"
    # No subshell around the background job: $! must be the server's own pid (role-env.sh and
    # nohup exec it), and nothing may keep the caller's stdout open.
    COGNIS_PORT="$COGNIS_API_PORT" COGNIS_LOG_JSON="${COGNIS_LOG_JSON:-true}" \
        "$ROLE_ENV" service nohup "$VENV/bin/python" -m app serve >>"$LOG_FILE" 2>&1 </dev/null &
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
    migrate) migrate ;;
    *) die "usage: $0 {start|stop|status|migrate}" ;;
esac
