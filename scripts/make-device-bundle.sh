#!/bin/sh
# Packs a built gpuscope for a machine that has an NVIDIA GPU but no compiler or internet:
# the binary, the shared libraries it links that are not part of glibc (libjansson, ...), a
# wrapper that points LD_LIBRARY_PATH into the bundle, and scripts/gpu-check, which compares
# gpuscope with nvidia-smi there. The result runs on another x86-64 Debian/Ubuntu whose glibc
# is at least the version printed below. libnvidia-ml.so.1 is not bundled: gpuscope dlopens
# the driver's own.
#
# usage: scripts/make-device-bundle.sh [BUILD_DIR | GPUSCOPE_BINARY] [OUT_DIR]
#        (defaults: build, gpuscope-bundle; also writes OUT_DIR.tar.gz)
# on the GPU machine:
#        tar xzf gpuscope-bundle.tar.gz && ./gpuscope-bundle/gpu-check
#        (or: LD_LIBRARY_PATH=$PWD/gpuscope-bundle/lib ./gpuscope-bundle/bin/gpuscope ...)
set -eu

src=${1:-build}
out=${2:-gpuscope-bundle}
root=$(cd "$(dirname "$0")/.." && pwd)

if [ -d "$src" ]; then
    bin=$src/gpuscope
else
    bin=$src
fi
[ -x "$bin" ] || { echo "make-device-bundle: no gpuscope binary at $bin (run make build)" >&2; exit 1; }
command -v ldd >/dev/null 2>&1 || { echo "make-device-bundle: needs ldd" >&2; exit 1; }

# glibc's own libraries (and the vDSO): the target system provides these, and they must match
# its dynamic loader, so they never travel.
is_glibc() {
    case "$1" in
        linux-vdso.so.*|ld-linux*.so.*|libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|\
        librt.so.*|libresolv.so.*|libutil.so.*|libanl.so.*|libnsl.so.*|libmvec.so.*) return 0 ;;
    esac
    return 1
}

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp "$bin" "$out/bin/gpuscope"

# "libjansson.so.4 => /lib/x86_64-linux-gnu/libjansson.so.4 (0x...)": ldd already lists the
# whole closure, so the libraries' own dependencies come along.
ldd "$bin" | while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_glibc "$name" && continue
    if [ ! -f "$path" ]; then
        echo "make-device-bundle: $name not found ($path)" >&2
        exit 1
    fi
    cp -L "$path" "$out/lib/$name"
    echo "bundled $name (from $path)"
done

cat >"$out/gpuscope" <<'EOF'
#!/bin/sh
# gpuscope with the bundled shared libraries first on the search path.
here=$(cd "$(dirname "$0")" && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/bin/gpuscope" "$@"
EOF
chmod 0755 "$out/gpuscope"
cp "$root/scripts/gpu-check" "$out/gpu-check"
chmod 0755 "$out/gpu-check"

glibc=$( (objdump -T "$out/bin/gpuscope" "$out"/lib/* 2>/dev/null || true) |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -t. -k1,1n -k2,2n -k3,3n | tail -n 1)
version=$("$out/gpuscope" --version 2>/dev/null || echo "gpuscope (version unknown)")

cat >"$out/README.txt" <<EOF
$version, bundled $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -m) $(. /etc/os-release 2>/dev/null && echo "$PRETTY_NAME")
Needs: x86-64 Linux with glibc >= ${glibc:-?}, an NVIDIA driver (libnvidia-ml.so.1), python3.

  ./gpuscope ...        gpuscope with LD_LIBRARY_PATH set to ./lib
  ./gpu-check           compare gpuscope with nvidia-smi (tolerances: head of gpu-check)
  ./gpu-check -q        print only the differences

bin/gpuscope needs the libraries in lib/: run it through ./gpuscope, or set
LD_LIBRARY_PATH=\$PWD/lib yourself.
EOF

tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
echo "bundle: $out/ and $out.tar.gz (needs glibc >= ${glibc:-?} on the target)"
