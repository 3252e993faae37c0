#!/usr/bin/env bash
# `make dist`: the publishable artefacts, built here into dist/ (git-ignored; DIST=dir elsewhere)
# and checked, never uploaded:
#   cognis_memory_client-<v>-py3-none-any.whl  the Python client (clients/python), a wheel named
#                                              so it cannot be taken for PyPI's unrelated cognis*
#   cognis-memory-client-<v>.tgz               the TypeScript client (npm pack of clients/typescript)
#   cognis-memory-<v>.tgz                      the Helm chart (helm package; without helm, a tar
#                                              of charts/cognis-memory that `helm install` takes)
#   cognis-memory-image-<v>-context.tar.gz     the image: with a Docker engine, `docker build` and
#                                              cognis-memory-image-<v>.tar (docker save) too;
#                                              without one (here), the build context the Dockerfile
#                                              needs, reproducible, every COPY source checked
#   SHA256SUMS                                 of each
# Offline: the wheel builds with .venv's setuptools, npm installs the pinned dev dependencies
# from its cache (`npm ci --prefer-offline`, as the tests do), helm is one already installed.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
PY="$ROOT/.venv/bin/python"
DIST="$(mkdir -p "${DIST:-$ROOT/dist}" && cd "${DIST:-$ROOT/dist}" && pwd -P)"
VERSION=$("$PY" -c 'import tomllib; print(tomllib.load(open("clients/python/pyproject.toml", "rb"))["project"]["version"])')
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
rm -f "$DIST"/cognis* "$DIST/SHA256SUMS"

log "python client: wheel"
# Built from a copy: setuptools' build/ and *.egg-info stay out of the tree (and of the image's
# build context, which takes clients/python whole).
cp -r clients/python "$WORK/python"
rm -rf "$WORK/python/build" "$WORK/python"/*.egg-info
"$PY" -m pip wheel --quiet --no-deps --no-index --no-build-isolation -w "$DIST" "$WORK/python"

log "typescript client: npm pack"
command -v npm >/dev/null || die "npm is missing: make install-test installs node and npm"
(
    cd clients/typescript
    want=$(sha256sum package-lock.json | cut -d' ' -f1)
    if [[ "$(cat node_modules/.cognis-lock.sha256 2>/dev/null)" != "$want" ]]; then
        npm ci --no-audit --no-fund --prefer-offline --loglevel=error
        echo "$want" >node_modules/.cognis-lock.sha256
    fi
    npm pack --silent --pack-destination "$DIST" >/dev/null
)

log "helm chart"
HELM=$(command -v helm || true)
for candidate in "$CACHE_DIR"/tools/helm-*/helm; do
    [[ -z "$HELM" && -x "$candidate" ]] && HELM="$candidate"
done
CHART_VERSION=$(sed -n 's/^version: *//p' charts/cognis-memory/Chart.yaml)
if [[ -n "$HELM" ]]; then
    "$HELM" lint --strict charts/cognis-memory -f charts/cognis-memory/ci/default-values.yaml >/dev/null
    "$HELM" package charts/cognis-memory --destination "$DIST" >/dev/null
else
    log "no helm binary (scripts/install-helm.sh builds one): the chart folder as helm package lays it out"
    tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C charts \
        -cf - cognis-memory | gzip -n >"$DIST/cognis-memory-$CHART_VERSION.tgz"
fi

log "image"
"$PY" scripts/image_context.py "$DIST/cognis-memory-image-$VERSION-context.tar.gz" >/dev/null
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
    docker build -t "cognis-memory:$VERSION" - <"$DIST/cognis-memory-image-$VERSION-context.tar.gz"
    docker save "cognis-memory:$VERSION" -o "$DIST/cognis-memory-image-$VERSION.tar"
else
    log "no Docker engine: the build context only (docker build - < dist/cognis-memory-image-$VERSION-context.tar.gz elsewhere)"
    if [[ -x "$ROOT/.venv/bin/hadolint" ]]; then
        "$ROOT/.venv/bin/hadolint" Dockerfile
    fi
fi

(cd "$DIST" && sha256sum cognis* >SHA256SUMS)
log "dist: $DIST"
(cd "$DIST" && ls -l cognis* SHA256SUMS)
