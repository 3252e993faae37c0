#!/usr/bin/env bash
# The project virtualenv (.venv), sourced by scripts/install.sh (what the service runs) and
# scripts/install-test-tools.sh (that, plus the test and lint tools):
#   venv_install runtime   the project and the Python client, editable: what `make up` needs
#   venv_install test      the same with the [dev,local-llm] extras (pytest, ruff, mypy, mem0ai,
#                          selenium, xllamacpp...): what `make test` needs
# Each is redone only when pyproject.toml (or the client's) changed since it last ran: its stamp
# is their hash. A current test install satisfies the runtime one (it holds it).
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PY="${COGNIS_PYTHON:-python3}"
VENV="$ROOT/.venv"
UV_REQ="uv>=0.5,<1"
# The test install's stamp keeps the name the single install used, so a clone installed before
# the split is current for both.
VENV_TEST_STAMP="$VENV/.cognis-pyproject.sha256"
VENV_RUNTIME_STAMP="$VENV/.cognis-runtime.sha256"

venv_install() {
    local kind="$1" want stamp extras
    case "$kind" in
    runtime) stamp="$VENV_RUNTIME_STAMP" extras="" ;;
    test) stamp="$VENV_TEST_STAMP" extras="[dev,onnx,local-llm]" ;;
    *) die "venv_install runtime|test, not $kind" ;;
    esac
    "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
        || die "$PY is $("$PY" --version 2>&1); Python >= 3.11 is required (set COGNIS_PYTHON)"
    if [[ ! -x "$VENV/bin/python" ]]; then
        log "creating virtualenv $VENV"
        "$PY" -m venv "$VENV"
    fi
    want=$(cat "$ROOT/pyproject.toml" "$ROOT/clients/python/pyproject.toml" | sha256sum | cut -d' ' -f1)
    if [[ "$(cat "$stamp" 2>/dev/null)" == "$want" ]] \
        || [[ "$kind" == runtime && "$(cat "$VENV_TEST_STAMP" 2>/dev/null)" == "$want" ]]; then
        log "virtualenv ($kind) up to date with pyproject.toml"
        return 0
    fi
    rm -f "$stamp"
    # The project and the Python client (with its LangGraph store: the MCP server talks to the
    # API through it), editable. uv keeps every wheel it fetched (hash-checked against the
    # index) in the per-user cache and links them in, so a fresh clone's virtualenv takes
    # seconds instead of the minutes pip spends fetching torch and its CUDA libraries again.
    local uv
    if uv=$(tool_venv uv "$UV_REQ")/bin/uv; then
        log "uv pip install -e '.${extras}' into $VENV (wheel cache: $CACHE_DIR/uv)"
        UV_CACHE_DIR="$CACHE_DIR/uv" "$uv" pip install -q --python "$VENV/bin/python" \
            -e "${ROOT}${extras}" -e "${ROOT}/clients/python[langgraph]"
    else
        log "uv unavailable: pip install -e '.${extras}' into $VENV (can take minutes)"
        "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
        "$VENV/bin/python" -m pip install -q -e "${ROOT}${extras}" \
            -e "${ROOT}/clients/python[langgraph]"
    fi
    printf '%s\n' "$want" >"$stamp"
    log "virtualenv ($kind) ready: $VENV"
}
