#!/usr/bin/env bash
# Shared helpers for the Cognis Memory local-infrastructure scripts.
# Source it; do not run it:   . "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck disable=SC2034  # variables are used by the scripts that source this file

if [[ -n "${_COGNIS_LIB_LOADED:-}" ]]; then
    return 0
fi
_COGNIS_LIB_LOADED=1

set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
# Project-local state (git-ignored): clusters, data, logs, env file.
LOCAL_DIR="${COGNIS_LOCAL_DIR:-$ROOT/.local}"
# Per-user download cache, outside the clone, shared by clones.
CACHE_DIR="${COGNIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cognis-memory}"

COGNIS_PG_PORT="${COGNIS_PG_PORT:-55432}"
COGNIS_OS_PORT="${COGNIS_OS_PORT:-59200}"
COGNIS_OS_TRANSPORT_PORT="${COGNIS_OS_TRANSPORT_PORT:-59300}"
COGNIS_API_PORT="${COGNIS_API_PORT:-8000}"
# The machine's model service (scripts/embedder.sh): every process embeds through it.
COGNIS_EMBED_PORT="${COGNIS_EMBED_PORT:-8090}"

PG_MAJOR="${COGNIS_PG_MAJOR:-15}"
PG_BIN="/usr/lib/postgresql/$PG_MAJOR/bin"
PG_CONFIG="$PG_BIN/pg_config"

# OpenSearch 2.19.x runs on Java 17 (3.x needs Java 21).
COGNIS_JAVA_HOME="${COGNIS_JAVA_HOME:-/usr/lib/jvm/java-17-openjdk-amd64}"
OS_USER="${COGNIS_OS_USER:-opensearch}"
# Preferred first; the installer falls back to the others if one does not resolve.
OS_VERSIONS="${COGNIS_OS_VERSION:-2.19.6 2.19.5 2.19.4 2.19.3 2.19.2 2.19.1 2.19.0}"

MODELS_DIR="$CACHE_DIR/models"

export DEBIAN_FRONTEND=noninteractive

log() {
    printf '[cognis] %s\n' "$*" >&2
}

die() {
    printf '[cognis] ERROR: %s\n' "$*" >&2
    exit 1
}

# step NAME COMMAND...: run one install step, logging its seconds (the README's table of them).
step() {
    local name="$1" t0 t1
    shift
    t0=$(date +%s)
    log "== $name"
    "$@"
    t1=$(date +%s)
    log "== $name done in $((t1 - t0))s"
}

# tool_venv NAME REQUIREMENT: prints the path of a virtualenv of its own for a tool the project
# runs but does not import (uv, checkov), in the per-user cache so that clones share it;
# (re)installed when missing or when REQUIREMENT changed. uv installs it when it can.
tool_venv() {
    local venv="$CACHE_DIR/tools/$1" requirement="$2" stamp uv="$CACHE_DIR/tools/uv/bin/uv"
    stamp="$venv/.requirement"
    if [[ ! -x "$venv/bin/python" || "$(cat "$stamp" 2>/dev/null)" != "$requirement" ]]; then
        log "installing $requirement into $venv"
        rm -rf "$venv"
        "${COGNIS_PYTHON:-python3}" -m venv "$venv" >&2 || return 1
        if [[ "$1" != uv && -x "$uv" ]]; then
            UV_CACHE_DIR="$CACHE_DIR/uv" "$uv" pip install -q --python "$venv/bin/python" \
                "$requirement" >&2 || return 1
        else
            "$venv/bin/python" -m pip install -q --disable-pip-version-check "$requirement" >&2 \
                || return 1
        fi
        printf '%s\n' "$requirement" >"$stamp"
    fi
    echo "$venv"
}

# private_log FILE: create FILE if missing and make it readable by its owner only (0600):
# logs can carry user content (a request path, an error's text), so no other local user reads
# them. Run before the first write; ownership may be handed on afterwards.
private_log() {
    (umask 077 && touch "$1")
    chmod 600 "$1"
}

# ensure_traversable USER PATH
# The service users (postgres, opensearch) reach their files under $LOCAL_DIR, so every folder
# above PATH must be traversable by USER (o+x: entering it, not listing it). A folder of the
# project that is not (a clone inside `mktemp -d`, mode 700) is opened; a blocker outside the
# project is named, from the top.
ensure_traversable() {
    local user="$1" path="$2" dir="" part
    local -a parts
    IFS=/ read -ra parts <<<"${path#/}"
    for part in "${parts[@]}"; do
        dir="$dir/$part"
        [[ -d "$dir" ]] || return 0
        runuser -u "$user" -- test -x "$dir" && continue
        case "$dir/" in
        "$ROOT"/* | "$LOCAL_DIR"/*)
            log "opening $dir to other users (o+x) so that $user can reach $path"
            chmod o+x "$dir"
            ;;
        *)
            die "user $user cannot traverse $dir (needed for $path); run 'chmod o+x $dir' or set COGNIS_LOCAL_DIR elsewhere"
            ;;
        esac
    done
}

require_root() {
    [[ "$(id -u)" -eq 0 ]] || die "$(basename "$0") must run as root (it installs packages / creates users)"
}

# wait_for TIMEOUT_SECONDS LOGFILE DESCRIPTION -- COMMAND [ARGS...]
# Polls COMMAND once a second until it succeeds.  On timeout prints a clear
# message plus the tail of LOGFILE (may be "" or a missing file) and returns 1.
wait_for() {
    local timeout="$1" logfile="$2" what="$3"
    shift 3
    [[ "${1:-}" == "--" ]] && shift
    local start now
    start=$(date +%s)
    while true; do
        if "$@" >/dev/null 2>&1; then
            return 0
        fi
        now=$(date +%s)
        if (( now - start >= timeout )); then
            log "timed out after ${timeout}s waiting for $what"
            if [[ -n "$logfile" && -r "$logfile" ]]; then
                log "last lines of $logfile:"
                tail -n 30 "$logfile" | sed 's/^/    /' >&2
            fi
            return 1
        fi
        sleep 1
    done
}

# Write "sha256  name" lines for the given files (relative to DIR) into STAMP.
sha_record() {
    local dir="$1" stamp="$2"
    shift 2
    (cd "$dir" && sha256sum -- "$@") >"$stamp"
}

# Verify a stamp written by sha_record; returns non-zero on mismatch/missing.
sha_verify() {
    local dir="$1" stamp="$2"
    [[ -s "$stamp" ]] || return 1
    (cd "$dir" && sha256sum --quiet -c "$stamp") >/dev/null 2>&1
}

# True when every named Debian package is installed.
debs_installed() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || return 1
    done
}

# apt-get install the missing ones among the given packages (update only if needed).
ensure_debs() {
    local missing=() p
    for p in "$@"; do
        debs_installed "$p" || missing+=("$p")
    done
    ((${#missing[@]} == 0)) && return 0
    require_root
    log "installing Debian packages: ${missing[*]}"
    if ! apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        log "apt-get update"
        apt-get update -q >/dev/null
        apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# Print the first existing path among the (glob-expanded) arguments; fail if none.
first_match() {
    local f
    for f in "$@"; do
        if [[ -e "$f" ]]; then
            printf '%s\n' "$f"
            return 0
        fi
    done
    return 1
}

# owned_running PID_FILE COMMAND: true only while PID_FILE names a live process running COMMAND
# (this clone's interpreter and module). `kill -0` alone also succeeds on a killed process its
# parent has not reaped (a zombie) and on an unrelated program that was given the pid later. A
# stale pid file is removed.
owned_running() {
    local pid_file=$1 command=$2 pid state args
    [[ -f "$pid_file" ]] || return 1
    pid=$(cat "$pid_file")
    if [[ "$pid" =~ ^[0-9]+$ ]] \
        && state=$(ps -o stat= -p "$pid" 2>/dev/null) && [[ "$state" != Z* ]] \
        && args=$(ps -o args= -p "$pid" 2>/dev/null) \
        && [[ "$args" == "$command"* ]]; then
        return 0
    fi
    rm -f "$pid_file"
    return 1
}

# stop_pid NAME PID_FILE SECONDS: SIGTERM the pid in PID_FILE, SIGKILL it if it is still alive
# after SECONDS, then remove the pid file. The caller checks first that the pid is its own.
stop_pid() {
    local name=$1 pid_file=$2 seconds=$3 pid
    pid=$(cat "$pid_file")
    log "stopping $name (pid $pid)"
    kill "$pid"
    for _ in $(seq $((seconds * 4))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.25
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name did not stop in $seconds s; killing pid $pid"
        kill -9 "$pid"
    fi
    rm -f "$pid_file"
}

# ---------------------------------------------------------------- service users

IS_ROOT=0
[[ "$(id -u)" -eq 0 ]] && IS_ROOT=1

as_user() {  # USER CMD...
    local u="$1"
    shift
    # cd / so that the service user never trips over an unreadable caller cwd (e.g. /root).
    if ((IS_ROOT)); then (cd / && runuser -u "$u" -- "$@"); else "$@"; fi
}

own() {  # USER PATH...
    local u="$1"
    shift
    if ((IS_ROOT)); then chown "$u:$(id -gn "$u")" "$@"; fi
}

# ---------------------------------------------------------------- opensearch nodes
# Shared by scripts/services.sh (the single node) and scripts/opensearch-cluster.sh (three).

# PostgreSQL refuses to run as root: as root it runs as its service user, else as the caller
# (the primary, scripts/services.sh, and its replica, scripts/pg-replica.sh).
if ((IS_ROOT)); then PG_OS_USER="postgres"; else PG_OS_USER="$(id -un)"; fi

OS_BASE="$LOCAL_DIR/opensearch"
OS_HOME="$OS_BASE/current"
# OpenSearch refuses to run as root: as root it runs as its service user, else as the caller.
if ((IS_ROOT)); then OS_RUN_USER="$OS_USER"; else OS_RUN_USER="$(id -un)"; fi

# opensearch_pid PID_FILE [CONFIG_DIR]: the pid in PID_FILE, if it is a live OpenSearch JVM
# (pid files go stale) started with CONFIG_DIR, when given (one node of several).
opensearch_pid() {
    local pid_file=$1 config=${2:-} pid
    pid=$(cat "$pid_file" 2>/dev/null || true)
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q 'org.opensearch.bootstrap.OpenSearch' || return 1
    if [[ -n "$config" ]]; then
        tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF -- "-Dopensearch.path.conf=$config" || return 1
    fi
    echo "$pid"
}

# opensearch_installed: the distribution, Java and (as root) the service user are there.
opensearch_installed() {
    [[ -x "$OS_HOME/bin/opensearch" ]] || die "OpenSearch not installed: run scripts/install-opensearch.sh"
    [[ -x "$COGNIS_JAVA_HOME/bin/java" ]] || die "Java not found at $COGNIS_JAVA_HOME (set COGNIS_JAVA_HOME)"
    if ((IS_ROOT)) && ! id -u "$OS_RUN_USER" >/dev/null 2>&1; then
        die "user $OS_RUN_USER missing: run scripts/install-opensearch.sh"
    fi
}

# opensearch_disk_watermarks CONFIG_FILE: a development node on a shared disk judges free space
# in absolute terms: with the default percentages, a large disk at 90 % use (tens of GB free)
# blocks index creation.
opensearch_disk_watermarks() {
    if ! grep -q '^cluster.routing.allocation.disk.watermark' "$1"; then
        printf '%s\n' \
            'cluster.routing.allocation.disk.watermark.low: 2gb' \
            'cluster.routing.allocation.disk.watermark.high: 1gb' \
            'cluster.routing.allocation.disk.watermark.flood_stage: 512mb' \
            >>"$1"
    fi
}

# opensearch_launch NAME CONFIG_DIR TMP_DIR PID_FILE STDOUT_LOG: start one node in the
# background (-d) as the service user; returns once its JVM has written PID_FILE.
opensearch_launch() {
    local name=$1 config=$2 tmp=$3 pid_file=$4 stdout=$5
    private_log "$stdout"
    : >"$stdout"
    as_user "$OS_RUN_USER" env \
        JAVA_HOME="$COGNIS_JAVA_HOME" OPENSEARCH_JAVA_HOME="$COGNIS_JAVA_HOME" \
        OPENSEARCH_PATH_CONF="$config" OPENSEARCH_TMPDIR="$tmp" \
        OPENSEARCH_JAVA_OPTS="${OPENSEARCH_JAVA_OPTS:-}" \
        "$OS_HOME/bin/opensearch" -d -p "$pid_file" >>"$stdout" 2>&1 </dev/null \
        || { tail -n 30 "$stdout" >&2; die "$name failed to launch (log: $stdout)"; }
    # The JVM writes it once it has bootstrapped: seconds on a quiet machine, far more on a
    # busy one, so the same bound as the health wait that follows.
    wait_for "${COGNIS_OS_START_TIMEOUT:-120}" "$stdout" "the $name pid file" -- test -s "$pid_file" \
        || die "$name did not write $pid_file"
}

# opensearch_terminate NAME PID: SIGTERM, SIGKILL after 60 s, and wait for the exit.
opensearch_terminate() {
    local name=$1 pid=$2 i
    log "$name: stopping (pid $pid)"
    kill -TERM "$pid"
    for ((i = 0; i < 60; i++)); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 1
    done
    if kill -0 "$pid" 2>/dev/null; then
        log "$name: still running after 60s, sending SIGKILL"
        kill -KILL "$pid" 2>/dev/null || true
        for ((i = 0; i < 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 1
        done
    fi
    kill -0 "$pid" 2>/dev/null && die "$name pid $pid did not exit"
    return 0
}

# opensearch_health PORT: the cluster's health status (green, yellow, red), or nothing.
opensearch_health() {
    curl -fsS -m 3 "http://127.0.0.1:$1/_cluster/health" 2>/dev/null \
        | sed -n 's/.*"status":"\([a-z]*\)".*/\1/p' || true
}
