#!/bin/sh
# Puts NVIDIA's real nvml.h on this machine for one test only: tests/abi, which compiles our
# own NVML declarations (src/backend/nvml_abi.h) beside it and compares every size, offset and
# constant. The product never includes nvml.h.
#
# The header ships in Debian's libnvidia-ml-dev, component non-free. This is the only place
# gpuscope uses non-free: we add it in a separate sources file that mirrors the URIs, suites
# and keyring of the existing Debian one, and touch nothing else.
#
# On bookworm the package itself is not installable with only main + non-free: it depends on
# libnvidia-ml1 -> nvidia-alternative -> glx-alternative-nvidia, which lives in contrib, and it
# would put a real libnvidia-ml.so.1 (a driver component) on a machine that has no driver and
# runs nvml-sim. The package's only payload is /usr/include/nvml.h, so unless apt can install
# it without pulling anything else we fetch it with `apt-get download` (signature-checked like
# any install) and extract that one header to /usr/local/include/nvml.h.
#
# Never fails the caller: when the archive cannot be reached, or we are not root, it prints
# "deps-abi: skipped: ..." and exits 0; the ABI test then reports itself as skipped.
# Quick and silent when nvml.h is already there.
set -u

PKG=libnvidia-ml-dev
SRC_FILE=/etc/apt/sources.list.d/gpuscope-nonfree.sources
BASE_SOURCES=/etc/apt/sources.list.d/debian.sources
DEST=/usr/local/include/nvml.h
STAMP=/usr/local/share/gpuscope/nvml-h-source

skip() {
    echo "deps-abi: skipped: $*" >&2
    exit 0
}

have_header() {
    [ -r /usr/include/nvml.h ] || [ -r "$DEST" ]
}

# Prints a deb822 sources file with the same stanzas as $BASE_SOURCES (Types, URIs, Suites,
# Signed-By and the snapshot comment) but Components: non-free.
nonfree_sources() {
    echo "# Added by gpuscope scripts/deps-abi.sh: non-free, only for libnvidia-ml-dev (nvml.h),"
    echo "# which tests/abi compiles against. Mirrors $BASE_SOURCES."
    awk '
        /^[ \t]*$/ { if (n) print ""; n = 0; next }
        /^Components:/ { print "Components: non-free"; n++; next }
        /^(Types|URIs|Suites|Signed-By|Architectures):/ || /^#/ { print; n++ }
    ' "$BASE_SOURCES"
}

if have_header; then
    exit 0
fi
command -v apt-get >/dev/null 2>&1 || skip "no apt-get (not Debian/Ubuntu); install nvml.h by hand"
if [ "$(id -u)" -ne 0 ]; then
    skip "not root; run: sudo $0"
fi
[ -r "$BASE_SOURCES" ] || skip "$BASE_SOURCES not found; add non-free for $PKG by hand"

tmp=$(mktemp -d) || skip "mktemp failed"
trap 'rm -rf "$tmp"' EXIT INT TERM

nonfree_sources >"$tmp/nonfree.sources"
if ! cmp -s "$tmp/nonfree.sources" "$SRC_FILE" 2>/dev/null; then
    cp "$tmp/nonfree.sources" "$SRC_FILE" || skip "cannot write $SRC_FILE"
    echo "deps-abi: added $SRC_FILE (non-free, for $PKG only)"
fi

export DEBIAN_FRONTEND=noninteractive
# Refresh only the non-free indexes; List-Cleanup=0 keeps the other sources' lists intact.
APT_NET="-o Acquire::Retries=0 -o Acquire::http::Timeout=15 -o Acquire::https::Timeout=15"
# shellcheck disable=SC2086
if ! timeout 120 apt-get update -qq $APT_NET \
        -o Dir::Etc::sourcelist="$SRC_FILE" -o Dir::Etc::sourceparts=- \
        -o APT::Get::List-Cleanup=0 >"$tmp/update.log" 2>&1 ||
        grep -q '^[EW]: Failed to fetch\|^E: ' "$tmp/update.log"; then
    sed 's/^/deps-abi:   /' "$tmp/update.log" >&2
    skip "Debian archive unreachable (apt-get update on $SRC_FILE failed)"
fi
ver=$(apt-cache policy "$PKG" 2>/dev/null | awk '/Candidate:/ { print $2 }')
if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
    skip "$PKG has no candidate in the configured archive"
fi

# A real install only if apt would add this one package and nothing else (a machine whose
# driver came from Debian already has libnvidia-ml1).
if apt-get install -s --no-install-recommends "$PKG" >"$tmp/sim.log" 2>&1 &&
        [ "$(grep -c '^Inst ' "$tmp/sim.log")" -eq 1 ]; then
    echo "deps-abi: installing $PKG $ver"
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $APT_NET "$PKG" ||
        skip "apt-get install $PKG failed"
    exit 0
fi

echo "deps-abi: $PKG $ver is not installable alone here (needs the driver library); extracting nvml.h"
# apt-get download drops root to _apt; give it a directory it can write.
chmod 0777 "$tmp"
# shellcheck disable=SC2086
(cd "$tmp" && timeout 120 apt-get download -qq $APT_NET "$PKG=$ver" >"$tmp/dl.log" 2>&1) ||
    { sed 's/^/deps-abi:   /' "$tmp/dl.log" >&2; skip "apt-get download $PKG failed"; }
deb=$(ls "$tmp"/"$PKG"_*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || skip "apt-get download $PKG produced no .deb"
mkdir "$tmp/x" && dpkg-deb -x "$deb" "$tmp/x" || skip "dpkg-deb -x $deb failed"
[ -r "$tmp/x/usr/include/nvml.h" ] || skip "$PKG $ver has no usr/include/nvml.h"
mkdir -p "$(dirname "$DEST")" "$(dirname "$STAMP")"
install -m 0644 "$tmp/x/usr/include/nvml.h" "$DEST.tmp" && mv "$DEST.tmp" "$DEST" ||
    skip "cannot write $DEST"
echo "$PKG $ver (Debian non-free, extracted by scripts/deps-abi.sh)" >"$STAMP"
echo "deps-abi: installed $DEST from $PKG $ver"
