#!/usr/bin/env bash
# The helm binary for the chart's checks (charts/cognis-memory, make check-deploy and
# tests/deploy/test_helm_chart.py): built once with the Go toolchain from the Go module proxy
# (`go install helm.sh/helm/v4/cmd/helm@VERSION`, the module's go.sum checks every dependency),
# kept in the per-user cache with its sha256 beside it. Idempotent: a cached binary whose
# checksum and version match is used as it is. Prints the binary's path.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

HELM_VERSION="${COGNIS_HELM_VERSION:-v4.3.2}"
DIR="$CACHE_DIR/tools/helm-$HELM_VERSION"
BIN="$DIR/helm"

# One build at a time: parallel test workers and check-deploy may all ask for it.
mkdir -p "$CACHE_DIR/tools"
exec 9>"$CACHE_DIR/tools/helm.lock"
flock 9

if [[ -x "$BIN" ]] && sha_verify "$DIR" "$DIR/helm.sha256" \
    && "$BIN" version --template '{{.Version}}' 2>/dev/null | grep -qx "$HELM_VERSION"; then
    echo "$BIN"
    exit 0
fi
command -v go >/dev/null || die "go is needed to build helm $HELM_VERSION (apt-get install golang-go, or a Go toolchain >= 1.24)"
log "building helm $HELM_VERSION with go install (minutes on 2 cores; cached in $DIR)"
rm -rf "$DIR"
mkdir -p "$DIR"
GOBIN="$DIR" GOFLAGS=-buildvcs=false CGO_ENABLED=0 \
    go install -trimpath -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
sha_record "$DIR" "$DIR/helm.sha256" helm
log "helm $HELM_VERSION: $(cut -d' ' -f1 "$DIR/helm.sha256")"
echo "$BIN"
