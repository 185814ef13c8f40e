#!/bin/sh
# Packs a built gpuscope for a machine that has an NVIDIA GPU but no compiler or internet:
# the binary, the shared libraries it links that are not part of glibc (libjansson, ...), a
# wrapper that runs it with those libraries, the Python package (bin/python/gpuscope/: the .py
# files and libgpuscope.so, where `gpuscope run` looks: <dir of the real binary>/python), and
# scripts/gpu-check, which compares gpuscope with nvidia-smi there and checks the training
# integration. The result runs on another x86-64 Debian/Ubuntu whose glibc is at least the
# version printed below. libnvidia-ml.so.1 is not bundled: gpuscope dlopens the driver's own.
#
# Nothing of the bundle reaches a training child's LD_LIBRARY_PATH (the bundled libraries would
# shadow torch's own): for `run` the wrapper starts bin/gpuscope through the dynamic loader with
# --library-path (a setting of that one process) and points GPUSCOPE_PYTHON_DIR at the package,
# and libgpuscope.so finds lib/ through its RUNPATH $ORIGIN/../../../lib (build_rpath in
# python/gpuscope/meson.build).
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
pysrc=$(dirname "$bin")/python/gpuscope
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
# gpuscope-full: every command but the quick check, query and --version (main_light.c), which
# bin/gpuscope starts from next to itself; its libraries are a superset of gpuscope's.
full=$(dirname "$bin")/gpuscope-full
[ -x "$full" ] || { echo "make-device-bundle: no gpuscope-full next to $bin (run make build)" >&2; exit 1; }
cp "$full" "$out/bin/gpuscope-full"

# "libjansson.so.4 => /lib/x86_64-linux-gnu/libjansson.so.4 (0x...)": ldd already lists the
# whole closure, so the libraries' own dependencies come along.
ldd "$full" | while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    is_glibc "$name" && continue
    if [ ! -f "$path" ]; then
        echo "make-device-bundle: $name not found ($path)" >&2
        exit 1
    fi
    cp -L "$path" "$out/lib/$name"
    echo "bundled $name (from $path)"
done

# The Python package, laid out as in the build tree; its .so's own libraries join lib/.
if [ -f "$pysrc/libgpuscope.so" ] && [ -f "$pysrc/__init__.py" ]; then
    mkdir -p "$out/bin/python/gpuscope/_auto"
    cp "$pysrc"/*.py "$out/bin/python/gpuscope/"
    cp "$pysrc"/_auto/*.py "$out/bin/python/gpuscope/_auto/"
    cp -L "$pysrc/libgpuscope.so" "$out/bin/python/gpuscope/libgpuscope.so"
    ldd "$pysrc/libgpuscope.so" | while read -r name arrow path _; do
        [ "$arrow" = "=>" ] || continue
        is_glibc "$name" && continue
        [ -f "$out/lib/$name" ] && continue
        [ -f "$path" ] || { echo "make-device-bundle: $name not found ($path)" >&2; exit 1; }
        cp -L "$path" "$out/lib/$name"
        echo "bundled $name (from $path, for libgpuscope.so)"
    done
    runpath=$( (readelf -d "$out/bin/python/gpuscope/libgpuscope.so" 2>/dev/null || true) |
        sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
    case ":$runpath:" in
        *':$ORIGIN/../../../lib:'*) echo "bundled the Python package (libgpuscope.so RUNPATH $runpath)" ;;
        *) echo "make-device-bundle: warning: libgpuscope.so has no RUNPATH \$ORIGIN/../../../lib" \
               "(built before python/gpuscope/meson.build set build_rpath?); it will load the" \
               "target's own libjansson" >&2 ;;
    esac
else
    echo "make-device-bundle: warning: no Python package at $pysrc (gpuscope run will time" \
         "steps only from CMDs that send records)" >&2
fi

# The dynamic loader bin/gpuscope names (PT_INTERP), for the wrapper's `run` path.
interp=$( (readelf -l "$bin" 2>/dev/null || true) |
    sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p')

cat >"$out/gpuscope" <<EOF
#!/bin/sh
# gpuscope with the bundled shared libraries first on the search path. For \`run\` the loader
# gets them with --library-path (bin/gpuscope-full, which serves run), so that CMD inherits no
# LD_LIBRARY_PATH from the bundle (it would shadow torch's libraries); GPUSCOPE_PYTHON_DIR then
# names the package, because /proc/self/exe is the loader.
interp='${interp:-/lib64/ld-linux-x86-64.so.2}'
EOF
cat >>"$out/gpuscope" <<'EOF'
here=$(cd "$(dirname "$0")" && pwd)
if [ "${1:-}" = run ] && [ -x "$interp" ]; then
    GPUSCOPE_PYTHON_DIR="${GPUSCOPE_PYTHON_DIR:-$here/bin/python}" \
        exec "$interp" --library-path "$here/lib" "$here/bin/gpuscope-full" "$@"
fi
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
  ./gpu-check           compare gpuscope with nvidia-smi (tolerances: head of gpu-check),
                        then the training check (needs python3 with CUDA PyTorch)
  ./gpu-check -q        print only the differences
  ./gpuscope run --out DIR -- python3 train.py
                        profile a training (bin/python: the gpuscope Python package)

bin/gpuscope needs the libraries in lib/: run it through ./gpuscope, or set
LD_LIBRARY_PATH=\$PWD/lib yourself.
EOF

tar -czf "$out.tar.gz" -C "$(dirname "$out")" "$(basename "$out")"
echo "bundle: $out/ and $out.tar.gz (needs glibc >= ${glibc:-?} on the target)"
