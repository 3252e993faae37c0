#!/usr/bin/env bash
# The local LLM server (xllamacpp, OpenAI-compatible, 127.0.0.1 only): start | stop | status.
# Needs COGNIS_LLM_GGUF_PATH: a GGUF file, or a model scripts/install-llm.sh provides by name
# (`qwen-1.5b`, `qwen-0.5b`, or `smollm2`, the small test model). Port COGNIS_LLM_LOCAL_PORT (8089), threads
# COGNIS_LLM_LOCAL_THREADS (1: see docs/benchmarks/local-llm.md before raising it).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PID_FILE="$LOCAL_DIR/run/llm.pid"
LOG_FILE="$LOCAL_DIR/logs/llm.log"
VENV="$ROOT/.venv"
PORT="${COGNIS_LLM_LOCAL_PORT:-8089}"

running() {
    [[ -f "$PID_FILE" ]] && kill -0 "$(cat "$PID_FILE")" 2>/dev/null
}

resolve_gguf() {
    local gguf="${COGNIS_LLM_GGUF_PATH:-}"
    [[ -n "$gguf" ]] || die "COGNIS_LLM_GGUF_PATH is not set: name a GGUF file (or qwen-1.5b, qwen-0.5b, smollm2)"
    if [[ ! -f "$gguf" && "$gguf" != */* ]]; then # a model's name: installed (or checked) first
        gguf=$("$ROOT/scripts/install-llm.sh" "$gguf")
    fi
    [[ -f "$gguf" ]] || die "COGNIS_LLM_GGUF_PATH $gguf is not a file"
    printf '%s\n' "$gguf"
}

start() {
    if running; then
        log "llm already running (pid $(cat "$PID_FILE")) on 127.0.0.1:$PORT"
        return 0
    fi
    local gguf t0
    gguf=$(resolve_gguf)
    mkdir -p "$(dirname "$PID_FILE")" "$(dirname "$LOG_FILE")"
    log "starting the local LLM on 127.0.0.1:$PORT: $gguf (log: $LOG_FILE)"
    t0=$(date +%s%N)
    cd "$ROOT"
    COGNIS_LLM_GGUF_PATH="$gguf" COGNIS_LLM_LOCAL_PORT="$PORT" \
        OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}" \
        nohup "$VENV/bin/python" -m app llm-serve >>"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    # /health answers 503 while the model loads, 200 once it can serve.
    wait_for 300 "$LOG_FILE" "local LLM readiness" -- \
        curl -sf -o /dev/null "http://127.0.0.1:$PORT/health"
    local ms=$((($(date +%s%N) - t0) / 1000000))
    log "local LLM ready in $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s"
}

stop() {
    if ! running; then
        rm -f "$PID_FILE"
        return 0
    fi
    stop_pid "the local LLM" "$PID_FILE" 10
}

status() {
    if running; then
        printf 'llm        up    127.0.0.1:%s  pid %s\n' "$PORT" "$(cat "$PID_FILE")"
    else
        printf 'llm        down\n'
        return 1
    fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) status ;;
*) die "usage: $0 start|stop|status" ;;
esac
