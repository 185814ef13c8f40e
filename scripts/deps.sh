#!/bin/sh
# Installs the Debian packages gpuscope needs to build and test. As root it runs apt-get;
# otherwise it prints the exact command to run. Fast when everything is already there.
set -eu
# libclang-rt-dev: libFuzzer and the sanitizer runtimes for clang (make fuzz); clang only
# recommends it, and we install without recommends. prometheus: promtool and a real server for
# the agent's end-to-end test (tests/e2e/test_agent.py). wrk: the agent's /metrics benchmark
# (bench/bench_agent.sh). libcurl4-openssl-dev, zlib1g-dev: the agent's push sinks; influxdb,
# prometheus-pushgateway: real servers for tests/e2e/test_agent_push.py.
PKGS="gcc clang libclang-rt-dev meson ninja-build pkg-config libjansson-dev libmicrohttpd-dev libcmocka-dev prometheus libsqlite3-dev python3 procps time wrk libcurl4-openssl-dev zlib1g-dev influxdb prometheus-pushgateway"
# chromium: the dashboard's browser test (tests/e2e/test_web.py); nodejs, npm (each only where
# it is not on PATH): the dashboard's uPlot and playwright-core from web/package-lock.json.
PKGS="$PKGS chromium"
# libgnutls28-dev, libyaml-dev, libcrypt-dev: the agent's HTTP credentials (src/agent/auth.c:
# SHA-256 and TLS pair checks, the exporter-toolkit web config, bcrypt); openssl, curl: the test
# certificate and the TLS handshake in tests/e2e/test_agent_auth.py.
PKGS="$PKGS libgnutls28-dev libyaml-dev libcrypt-dev openssl curl"
# python3-torch (CPU): the Python package's tests train real models (tests/python/); it is
# Debian's torch for /usr/bin/python3, the interpreter every test runs with.
PKGS="$PKGS python3-torch"
# netdata-core, netdata-plugins-python, netdata-web: a real netdata whose python.d nvidia_smi
# collector runs gpuscope as nvidia-smi (tests/e2e/test_smi_netdata.py).
PKGS="$PKGS netdata-core netdata-plugins-python netdata-web"
# Debian ships node and npm apart: a node on PATH without npm still needs the npm package.
command -v node >/dev/null 2>&1 || PKGS="$PKGS nodejs"
command -v npm >/dev/null 2>&1 || PKGS="$PKGS npm"
# libelf-dev: `gpuscope stacks` finds _PyRuntime in the python binary's ELF symbols
# (src/stacks/pyfind.c).
PKGS="$PKGS libelf-dev"
# libyajl-dev: the streaming JSON parser of `gpuscope trace` (src/trace/parse.c; zlib1g-dev
# above reads the .json.gz traces).
PKGS="$PKGS libyajl-dev"
# libisal-dev: ISA-L's igzip inflates .json.gz traces several times faster than zlib
# (src/trace/parse.c; without it the build falls back to zlib).
PKGS="$PKGS libisal-dev"
# clang-format: the format check (tests/meson.build 'format', scripts/check-format.py; the tree
# is formatted by clang-format 14, Debian bookworm's).
PKGS="$PKGS clang-format"
# libncurses-dev: `gpuscope top`'s screen (src/top/); tmux: its end-to-end tests drive it
# in a real terminal (tests/e2e/test_top.py).
PKGS="$PKGS libncurses-dev tmux"
# strace: the system-call budget of the quick check (tests/e2e/test_budgets.py).
PKGS="$PKGS strace"
# pandoc: the man pages made from docs/*.md at build time (docs/meson.build, docs/install.md).
PKGS="$PKGS pandoc"
# python3-mesonpy: the wheel's build backend (pyproject.toml; tests/e2e/test_wheel.py builds
# the wheel with pip and installs it into a venv).
PKGS="$PKGS python3-mesonpy"
# debhelper (with dpkg-dev), lintian: the Debian package (make deb, debian/) and its check;
# shellcheck: the package's maintainer scripts (tests/e2e/test_deb.py).
PKGS="$PKGS debhelper lintian shellcheck"
# systemd (systemd-sysusers, systemd-analyze): the package installed into a throwaway root and
# the unit verified (test_deb, test_deploy); man-db (lexgrog, man): the man pages checked.
PKGS="$PKGS systemd man-db"
# web/node_modules: uPlot (embedded into the binary at build time) and playwright-core (the
# browser test), exactly as web/package-lock.json pins them; again when the lock file changed.
web_deps() {
    lock=web/package-lock.json
    [ -f "$lock" ] || return 0
    [ -f web/node_modules/.package-lock.json ] && [ ! "$lock" -nt web/node_modules/.package-lock.json ] && return 0
    echo "deps: npm ci --prefix web"
    npm ci --prefix web --no-audit --no-fund
}
cd "$(dirname "$0")/.."
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -z "$missing" ]; then
    web_deps
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "gpuscope: missing packages:$missing" >&2
    echo "run: sudo apt-get update && sudo apt-get install -y$missing" >&2
    exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
web_deps
