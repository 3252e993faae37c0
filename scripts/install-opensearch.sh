#!/usr/bin/env bash
# Install OpenSearch 2.19.x (Maven Central integ-test-zip) under $LOCAL_DIR/opensearch,
# plus the lang-painless and analysis-common modules (english analyzer, stemmers) and the
# project's Japanese analysis plugin (opensearch-plugin/analysis-ja: kuromoji on Lucene's jar),
# compiled here with the JDK's javac against the distribution's own jars.
# Artifacts are fetched with mvn (the machine's own Maven settings/mirrors) into $CACHE_DIR.
# Set COGNIS_OS_ANALYSIS_COMMON=0 to skip the extra modules, COGNIS_OS_ANALYSIS_JA=0 to skip
# the Japanese plugin.  Idempotent.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

OS_CACHE="$CACHE_DIR/opensearch"
OS_BASE="$LOCAL_DIR/opensearch"
WITH_MODULES="${COGNIS_OS_ANALYSIS_COMMON:-1}"
WITH_JA="${COGNIS_OS_ANALYSIS_JA:-1}"
JA_SOURCE="$ROOT/opensearch-plugin/analysis-ja"
JA_PLUGIN=cognis-analysis-ja
# sha256 of the Lucene kuromoji jars this script has seen (Maven's strict checksums cover others).
declare -A KUROMOJI_SHA256=(
    [9.12.3]=fb4999a9b9eb136e31774013ab24c8a32848bd943d0352aa180425f686963142
)

mvn_quiet() {
    # Run from an empty directory so that no pom.xml in the caller's cwd is picked up.
    local d="$OS_CACHE/mvn-work"
    mkdir -p "$d"
    (cd "$d" && mvn -B -q "$@") >"$OS_CACHE/mvn.log" 2>&1
}

# Fetch opensearch-<ver>.zip into $OS_CACHE/<ver>/ (verified against its sha256 on reuse).
fetch_distribution() {
    local v="$1" dir="$OS_CACHE/$1"
    if sha_verify "$dir" "$dir/SHA256SUMS" 2>/dev/null && [[ -f "$dir/opensearch-$v.zip" ]]; then
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    log "opensearch: resolving org.opensearch.distribution.integ-test-zip:opensearch:$v:zip via mvn"
    if ! mvn_quiet dependency:copy \
        -Dartifact="org.opensearch.distribution.integ-test-zip:opensearch:$v:zip" \
        -DoutputDirectory="$dir" -Dmdep.overWriteReleases=true; then
        rm -rf "$dir"
        return 1
    fi
    [[ -f "$dir/opensearch-$v.zip" ]] || { rm -rf "$dir"; return 1; }
    unzip -tq "$dir/opensearch-$v.zip" >/dev/null || { rm -rf "$dir"; die "downloaded zip is corrupt"; }
    sha_record "$dir" "$dir/SHA256SUMS" "opensearch-$v.zip"
}

# Fetch lang-painless + analysis-common and their runtime deps (jars) into $OS_CACHE/<ver>/modules/.
fetch_modules() {
    local v="$1" dir="$OS_CACHE/$1/modules"
    if sha_verify "$dir" "$dir/SHA256SUMS" 2>/dev/null; then
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir/jars"
    cat >"$dir/pom.xml" <<EOF
<project>
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.cognis</groupId>
  <artifactId>opensearch-modules</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>org.opensearch.plugin</groupId>
      <artifactId>lang-painless</artifactId>
      <version>$v</version>
      <exclusions><exclusion><groupId>org.opensearch</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
    <dependency>
      <groupId>org.opensearch.plugin</groupId>
      <artifactId>analysis-common</artifactId>
      <version>$v</version>
      <exclusions><exclusion><groupId>org.opensearch</groupId><artifactId>*</artifactId></exclusion></exclusions>
    </dependency>
  </dependencies>
</project>
EOF
    log "opensearch: resolving modules lang-painless + analysis-common $v via mvn"
    mvn_quiet -f "$dir/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$dir/jars" || { rm -rf "$dir"; return 1; }
    [[ -f "$dir/jars/analysis-common-$v.jar" && -f "$dir/jars/lang-painless-$v.jar" ]] || { rm -rf "$dir"; return 1; }
    local jars=()
    mapfile -t jars < <(cd "$dir" && ls jars/*.jar)
    sha_record "$dir" "$dir/SHA256SUMS" "${jars[@]}"
}

descriptor() {  # name version classname description extended
    cat <<EOF
description=$4
version=$2
name=$1
classname=$3
java.version=11
opensearch.version=$2
custom.foldername=
extended.plugins=$5
has.native.controller=false
EOF
}

install_modules() {
    local v="$1" home="$2" src="$OS_CACHE/$1/modules/jars"
    local lp="$home/modules/lang-painless" ac="$home/modules/analysis-common"
    rm -rf "$lp" "$ac"
    mkdir -p "$lp" "$ac"
    cp "$src/analysis-common-$v.jar" "$ac/"
    find "$src" -maxdepth 1 -name '*.jar' ! -name "analysis-common-$v.jar" -exec cp {} "$lp/" \;
    descriptor lang-painless "$v" org.opensearch.painless.PainlessPlugin \
        "An easy, safe and fast scripting language for OpenSearch" "" >"$lp/plugin-descriptor.properties"
    cat >"$lp/plugin-security.policy" <<'EOF'
grant {
  // needed to generate runtime classes
  permission java.lang.RuntimePermission "createClassLoader";
  // needed to find the classloader to load whitelisted classes from
  permission java.lang.RuntimePermission "getClassLoader";
};
EOF
    descriptor analysis-common "$v" org.opensearch.analysis.common.CommonAnalysisPlugin \
        "Adds \"built in\" analyzers to OpenSearch." lang-painless >"$ac/plugin-descriptor.properties"
}

# The Lucene version inside the distribution (its lucene-core jar): the kuromoji jar must match.
lucene_version() {
    local jar
    jar=$(find "$1/lib" -maxdepth 1 -name 'lucene-core-*.jar' | head -n 1)
    [[ -n "$jar" ]] || die "no lucene-core jar in $1/lib"
    jar=${jar##*/lucene-core-}
    echo "${jar%.jar}"
}

# Fetch org.apache.lucene:lucene-analysis-kuromoji:<lucene> into $OS_CACHE/lucene-<lucene>/
# (strict Maven checksums on download, then its sha256: pinned where known, recorded on reuse).
fetch_kuromoji() {
    local lv="$1" dir="$OS_CACHE/lucene-$1" jar="lucene-analysis-kuromoji-$1.jar"
    if sha_verify "$dir" "$dir/SHA256SUMS" 2>/dev/null && [[ -f "$dir/$jar" ]]; then
        echo "$dir/$jar"
        return 0
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    log "opensearch: resolving org.apache.lucene:lucene-analysis-kuromoji:$lv via mvn"
    mvn_quiet -C dependency:copy -Dartifact="org.apache.lucene:lucene-analysis-kuromoji:$lv" \
        -DoutputDirectory="$dir" -Dmdep.overWriteReleases=true || { rm -rf "$dir"; return 1; }
    [[ -f "$dir/$jar" ]] || { rm -rf "$dir"; return 1; }
    local want="${KUROMOJI_SHA256[$lv]:-}" got
    got=$(sha256sum "$dir/$jar" | cut -d' ' -f1)
    if [[ -n "$want" && "$got" != "$want" ]]; then
        rm -rf "$dir"
        die "$jar: sha256 $got, expected $want"
    fi
    sha_record "$dir" "$dir/SHA256SUMS" "$jar"
    echo "$dir/$jar"
}

# Build the plugin zip for OpenSearch <v> into the cache (once per source, version and jar) and
# print its path. javac compiles against the distribution's lib/ and the kuromoji jar; `jar`
# packs the plugin (a zip: descriptor, the plugin's jar, the kuromoji jar).
build_ja_plugin() {
    local v="$1" home="$2" kuromoji="$3" key dir
    key=$( (cd "$JA_SOURCE" && find src -name '*.java' | sort | xargs sha256sum
        echo "$v"; sha256sum "$kuromoji" | cut -d' ' -f1) | sha256sum | cut -c1-16)
    dir="$OS_CACHE/$v/analysis-ja/$key"
    if sha_verify "$dir" "$dir/SHA256SUMS" 2>/dev/null; then
        echo "$dir/$JA_PLUGIN.zip"
        return 0
    fi
    log "opensearch: building the Japanese analysis plugin ($JA_PLUGIN, OpenSearch $v)"
    rm -rf "$dir"
    mkdir -p "$dir/classes" "$dir/zip"
    "$COGNIS_JAVA_HOME/bin/javac" --release 11 -nowarn -d "$dir/classes" \
        -cp "$home/lib/*:$kuromoji" $(find "$JA_SOURCE/src" -name '*.java' | sort) >&2 \
        || { rm -rf "$dir"; die "javac failed on $JA_SOURCE"; }
    "$COGNIS_JAVA_HOME/bin/jar" cf "$dir/zip/$JA_PLUGIN-$v.jar" -C "$dir/classes" .
    cp "$kuromoji" "$dir/zip/"
    descriptor "$JA_PLUGIN" "$v" org.cognis.analysis.ja.JapaneseAnalysisPlugin \
        "Japanese analysis (kuromoji) for Cognis Memory" "" >"$dir/zip/plugin-descriptor.properties"
    (cd "$dir/zip" && "$COGNIS_JAVA_HOME/bin/jar" cfM "../$JA_PLUGIN.zip" .)
    sha_record "$dir" "$dir/SHA256SUMS" "$JA_PLUGIN.zip"
    echo "$dir/$JA_PLUGIN.zip"
}

# Install the plugin into <home> with opensearch-plugin, unless this very zip is there already.
install_ja_plugin() {
    local v="$1" home="$2" kuromoji zip stamp_file="$2/.cognis-ja-plugin" sum pid
    kuromoji=$(fetch_kuromoji "$(lucene_version "$home")") || return 1
    zip=$(build_ja_plugin "$v" "$home" "$kuromoji") || return 1
    sum=$(sha256sum "$zip" | cut -d' ' -f1)
    if [[ -d "$home/plugins/$JA_PLUGIN" && "$(cat "$stamp_file" 2>/dev/null)" == "$sum" ]]; then
        log "opensearch: $JA_PLUGIN already installed"
        return 0
    fi
    pid=$(cat "$LOCAL_DIR/run/opensearch.pid" 2>/dev/null || true)
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
        die "opensearch is running (pid $pid) and its plugin $JA_PLUGIN needs (re)installing: run scripts/services.sh stop opensearch first"
    fi
    if [[ -d "$home/plugins/$JA_PLUGIN" ]]; then
        OPENSEARCH_JAVA_HOME="$COGNIS_JAVA_HOME" "$home/bin/opensearch-plugin" remove "$JA_PLUGIN" >&2
    fi
    OPENSEARCH_JAVA_HOME="$COGNIS_JAVA_HOME" "$home/bin/opensearch-plugin" install --batch \
        "file://$zip" >&2 || return 1
    chmod -R u+rwX,go+rX,go-w "$home/plugins/$JA_PLUGIN"
    printf '%s' "$sum" >"$stamp_file"
    log "opensearch: installed $JA_PLUGIN (kuromoji ${kuromoji##*/})"
}

ensure_user() {
    if ! id -u "$OS_USER" >/dev/null 2>&1; then
        log "creating system user $OS_USER"
        useradd --system --user-group --home-dir /nonexistent --no-create-home \
            --shell /usr/sbin/nologin "$OS_USER"
    fi
}

main() {
    require_root
    ensure_debs unzip curl ca-certificates maven
    [[ -x "$COGNIS_JAVA_HOME/bin/java" ]] || ensure_debs openjdk-17-jre-headless
    [[ -x "$COGNIS_JAVA_HOME/bin/java" ]] || die "Java 17 not found at $COGNIS_JAVA_HOME (set COGNIS_JAVA_HOME)"
    # javac and jar build the Japanese plugin (the integ-test zip bundles no JDK).
    if [[ "$WITH_JA" == "1" && ! -x "$COGNIS_JAVA_HOME/bin/javac" ]]; then
        ensure_debs openjdk-17-jdk-headless
    fi
    mkdir -p "$OS_CACHE"

    local v="" cand
    # Prefer a version already cached (no network), in preference order.
    for cand in $OS_VERSIONS; do
        if [[ -f "$OS_CACHE/$cand/opensearch-$cand.zip" ]] && sha_verify "$OS_CACHE/$cand" "$OS_CACHE/$cand/SHA256SUMS"; then
            v="$cand"; break
        fi
    done
    if [[ -z "$v" ]]; then
        for cand in $OS_VERSIONS; do
            if fetch_distribution "$cand"; then v="$cand"; break; fi
            log "opensearch $cand did not resolve; trying the next version"
        done
    fi
    [[ -n "$v" ]] || { tail -n 20 "$OS_CACHE/mvn.log" >&2 || true; die "no OpenSearch version in [$OS_VERSIONS] resolved"; }
    log "opensearch: version $v (cached zip verified: $OS_CACHE/$v/opensearch-$v.zip)"

    local modules_ok=0
    if [[ "$WITH_MODULES" == "1" ]]; then
        if fetch_modules "$v"; then
            modules_ok=1
        else
            log "WARNING: could not resolve analysis-common/lang-painless; continuing without them (see $OS_CACHE/mvn.log)"
        fi
    fi

    ensure_user
    local home="$OS_BASE/opensearch-$v"
    local stamp
    stamp="$(cat "$OS_CACHE/$v/SHA256SUMS") modules=$modules_ok $( ((modules_ok)) && cat "$OS_CACHE/$v/modules/SHA256SUMS")"
    mkdir -p "$OS_BASE"
    chmod 755 "$LOCAL_DIR" "$OS_BASE"
    if [[ -f "$home/.cognis-stamp" && "$(cat "$home/.cognis-stamp")" == "$stamp" ]]; then
        log "opensearch: $home already installed"
    else
        local pid
        pid=$(cat "$LOCAL_DIR/run/opensearch.pid" 2>/dev/null || true)
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
            die "opensearch is running (pid $pid) and needs reinstalling: run scripts/services.sh stop opensearch first"
        fi
        log "opensearch: unpacking into $home"
        rm -rf "$home" "$OS_BASE/unpack.tmp"
        mkdir -p "$OS_BASE/unpack.tmp"
        unzip -q "$OS_CACHE/$v/opensearch-$v.zip" -d "$OS_BASE/unpack.tmp"
        mv "$OS_BASE/unpack.tmp/opensearch-$v" "$home"
        rmdir "$OS_BASE/unpack.tmp"
        if ((modules_ok)); then
            install_modules "$v" "$home"
            log "opensearch: added modules lang-painless, analysis-common"
        fi
        chown -R root:root "$home"
        chmod -R u+rwX,go+rX,go-w "$home"
        printf '%s' "$stamp" >"$home/.cognis-stamp"
    fi
    if [[ "$WITH_JA" == "1" ]]; then
        install_ja_plugin "$v" "$home" || die "the Japanese analysis plugin did not build or install (see $OS_CACHE/mvn.log); COGNIS_OS_ANALYSIS_JA=0 skips it"
    fi
    ln -sfn "opensearch-$v" "$OS_BASE/current"

    # Config dir (OPENSEARCH_PATH_CONF), data and logs: owned by the opensearch user.
    mkdir -p "$OS_BASE/config" "$OS_BASE/data" "$OS_BASE/logs" "$OS_BASE/tmp"
    if [[ ! -f "$OS_BASE/config/log4j2.properties" || "$home/config/log4j2.properties" -nt "$OS_BASE/config/log4j2.properties" ]]; then
        cp "$home/config/log4j2.properties" "$OS_BASE/config/"
    fi
    # Absolute paths for GC log / heap dumps / error files (the defaults are relative).
    sed -e "s#logs/#$OS_BASE/logs/#g" -e "s#HeapDumpPath=data#HeapDumpPath=$OS_BASE/data#" \
        "$home/config/jvm.options" >"$OS_BASE/config/jvm.options"
    mkdir -p "$OS_BASE/config/jvm.options.d"
    printf -- '-Xms%s\n-Xmx%s\n' "${COGNIS_OS_HEAP:-512m}" "${COGNIS_OS_HEAP:-512m}" >"$OS_BASE/config/jvm.options.d/heap.options"
    cat >"$OS_BASE/config/opensearch.yml" <<EOF
# Generated by scripts/install-opensearch.sh (Cognis Memory local dev node).
cluster.name: cognis-local
node.name: cognis-local-1
network.host: 127.0.0.1
http.port: $COGNIS_OS_PORT
transport.port: $COGNIS_OS_TRANSPORT_PORT
discovery.type: single-node
path.data: $OS_BASE/data
path.logs: $OS_BASE/logs
EOF
    chown -R "$OS_USER:$OS_USER" "$OS_BASE/config" "$OS_BASE/data" "$OS_BASE/logs" "$OS_BASE/tmp"
    chmod 750 "$OS_BASE/config" "$OS_BASE/data" "$OS_BASE/tmp"
    chmod 755 "$OS_BASE/logs"
    ensure_traversable "$OS_USER" "$home/bin/opensearch"
    ensure_traversable "$OS_USER" "$OS_BASE/data"
    log "opensearch: ready to start (scripts/services.sh start opensearch); home=$OS_BASE/current"
}

main "$@"
