#!/usr/bin/env bash
# Ensure PostgreSQL 15 (+ server headers) from Debian and pgvector built from
# Debian trixie's `pgvector` source package.  Idempotent.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PGV_CACHE="$CACHE_DIR/pgvector"
APT_DIR="$CACHE_DIR/apt-trixie"
SRC_SUITE="${COGNIS_PGVECTOR_SUITE:-trixie}"

# The Debian mirror URI, read from this system's own apt sources (deb822 or one-line).
debian_mirror() {
    local uri=""
    if [[ -r /etc/apt/sources.list.d/debian.sources ]]; then
        uri=$(awk '
            BEGIN { RS=""; FS="\n" }
            {
                u=""; s=""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)   { u = $i; sub(/^URIs:[ \t]*/, "", u); split(u, a, /[ \t]+/); u = a[1] }
                    if ($i ~ /^Suites:/) { s = $i }
                }
                if (u != "" && s !~ /-security/ && u !~ /security/) { print u; exit }
            }' /etc/apt/sources.list.d/debian.sources)
    fi
    if [[ -z "$uri" ]]; then
        local f
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [[ -r "$f" ]] || continue
            uri=$(awk '$1 ~ /^deb(-src)?$/ {
                    i = 2; if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                    if ($i !~ /security/ && $(i+1) !~ /-security/) { print $i; exit }
                }' "$f")
            [[ -n "$uri" ]] && break
        done
    fi
    [[ -n "$uri" ]] || die "could not find a Debian mirror URI in /etc/apt/sources.list{,.d/}"
    printf '%s\n' "${uri%/}"
}

apt_private() {
    apt-get -q \
        -o Dir::Etc::sourcelist="$APT_DIR/sources.list" \
        -o Dir::Etc::sourceparts=- \
        -o Dir::State::Lists="$APT_DIR/lists" \
        -o Dir::Cache="$APT_DIR/cache" \
        -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= \
        -o APT::Sandbox::User=root \
        -o APT::Get::List-Cleanup=false \
        "$@"
}

fetch_pgvector_source() {
    mkdir -p "$PGV_CACHE"
    if compgen -G "$PGV_CACHE/pgvector_*.dsc" >/dev/null && sha_verify "$PGV_CACHE" "$PGV_CACHE/SHA256SUMS"; then
        log "pgvector source: using cached $(basename "$(first_match "$PGV_CACHE"/pgvector_*.dsc)")"
        return 0
    fi
    rm -f "$PGV_CACHE"/pgvector_* "$PGV_CACHE/SHA256SUMS"
    local mirror
    mirror=$(debian_mirror)
    log "pgvector source: fetching from Debian $SRC_SUITE (private apt config in $APT_DIR)"
    mkdir -p "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
    printf 'deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
        "$mirror" "$SRC_SUITE" >"$APT_DIR/sources.list"
    apt_private update >"$APT_DIR/update.log" 2>&1 || { tail -n 20 "$APT_DIR/update.log" >&2; die "private apt-get update failed"; }
    # --download-only: apt verifies the files against the signed Sources/.dsc checksums.
    (cd "$PGV_CACHE" && apt_private source --download-only pgvector) >"$APT_DIR/source.log" 2>&1 \
        || { tail -n 20 "$APT_DIR/source.log" >&2; die "apt-get source pgvector failed"; }
    local files=()
    mapfile -t files < <(cd "$PGV_CACHE" && ls pgvector_*)
    sha_record "$PGV_CACHE" "$PGV_CACHE/SHA256SUMS" "${files[@]}"
}

main() {
    require_root
    ensure_debs "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" "postgresql-client-$PG_MAJOR" \
        build-essential dpkg-dev ca-certificates curl unzip
    log "PostgreSQL $PG_MAJOR: $("$PG_BIN/postgres" --version)"

    local ext_dir
    ext_dir="$("$PG_CONFIG" --sharedir)/extension"
    if [[ -f "$ext_dir/vector.control" && -f "$("$PG_CONFIG" --pkglibdir)/vector.so" ]]; then
        log "pgvector already installed: $(awk -F"'" '/default_version/ {print $2}' "$ext_dir/vector.control")"
        return 0
    fi

    fetch_pgvector_source
    local dsc build
    dsc=$(first_match "$PGV_CACHE"/pgvector_*.dsc) || die "no pgvector .dsc in $PGV_CACHE"
    build="$CACHE_DIR/build"
    rm -rf "$build/pgvector-src"
    mkdir -p "$build"
    log "pgvector: unpacking $(basename "$dsc")"
    # dpkg-source checks the .dsc checksums (the signature may be unverifiable without debian-keyring).
    dpkg-source -x "$dsc" "$build/pgvector-src" >"$build/pgvector-unpack.log" 2>&1 \
        || { tail -n 20 "$build/pgvector-unpack.log" >&2; die "dpkg-source -x failed"; }
    log "pgvector: building against $PG_CONFIG"
    (
        cd "$build/pgvector-src"
        make -s PG_CONFIG="$PG_CONFIG" OPTFLAGS="" >"$build/pgvector-build.log" 2>&1
        make -s PG_CONFIG="$PG_CONFIG" OPTFLAGS="" install >>"$build/pgvector-build.log" 2>&1
    ) || { tail -n 30 "$build/pgvector-build.log" >&2; die "pgvector build failed"; }
    [[ -f "$ext_dir/vector.control" ]] || die "pgvector install did not produce $ext_dir/vector.control"
    log "pgvector installed: $(awk -F"'" '/default_version/ {print $2}' "$ext_dir/vector.control")"
}

main "$@"
