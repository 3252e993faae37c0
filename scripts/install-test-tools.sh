#!/usr/bin/env bash
# The test kit, beside what the service needs (scripts/install.sh): `make test` runs both.
#   scripts/install-test-tools.sh          everything below
#   scripts/install-test-tools.sh venv     only .venv's test and lint tools (`make test-fast`)
# .venv with the [dev,local-llm] extras (pytest, ruff, mypy, mem0ai, selenium, xllamacpp...),
# headless Chromium (the console's browser tests), Node.js + npm and the TypeScript client's
# locked dev dependencies, jq (the README's session), PgBouncer (the pooler tests), helm (built
# from Go source once: the chart's checks) and SmolLM2-135M (the local LLM tests). Everything
# is cached as scripts/install.sh caches (the per-user cache, Debian's packages, npm's cache)
# and idempotent: a second run only checks.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=scripts/venv.sh
. "$(dirname "${BASH_SOURCE[0]}")/venv.sh"

SCRIPTS="$ROOT/scripts"

node_install() {
    # Node.js and npm: the TypeScript client's build and tests (clients/typescript). Any
    # Node >= 18 does (Debian's apt package, or one already installed, e.g. NodeSource's 20).
    if command -v node >/dev/null && command -v npm >/dev/null \
        && node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)'; then
        log "node $(node --version) and npm $(npm --version) present"
    else
        ensure_debs nodejs npm
    fi
    # Its pinned dev dependencies (package-lock.json), from npm's own cache after the first
    # time; again only when the lock file changed (the stamp: its hash at the last install).
    local dir="$ROOT/clients/typescript" want
    want=$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)
    if [[ "$(cat "$dir/node_modules/.cognis-lock.sha256" 2>/dev/null)" == "$want" ]]; then
        log "clients/typescript/node_modules up to date with package-lock.json"
        return 0
    fi
    log "npm ci in clients/typescript"
    (cd "$dir" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error)
    printf '%s\n' "$want" >"$dir/node_modules/.cognis-lock.sha256"
}

main() {
    step "python virtualenv (+ test and lint tools)" venv_install test
    [[ "${1:-}" == venv ]] && return 0
    require_root
    # Headless Chromium and its driver: the web console's browser tests (Selenium drives them).
    step "chromium for console tests" ensure_debs chromium chromium-driver
    step "node + npm for the TypeScript client" node_install
    # jq: the README's session (tests/clients/test_readme_examples.py runs it as written).
    step "jq for the README's examples" ensure_debs jq
    # PgBouncer: the transaction-mode pooler tests/db/test_pgbouncer.py runs the API through.
    step "pgbouncer for the pooler tests" ensure_debs pgbouncer
    # helm, built with Go once and cached: the chart's checks (tests/deploy/test_helm_chart.py).
    step "helm for the chart checks" "$SCRIPTS/install-helm.sh" >/dev/null
    step "local LLM (xllamacpp + SmolLM2-135M test model)" "$SCRIPTS/install-llm.sh" >/dev/null
    log "test kit installed"
}

main "$@"
