#!/bin/sh
# Installs BINDIR/nvidia-smi as a symlink to gpuscope (meson -Dnvidia_smi_symlink=true), so that
# tools that run nvidia-smi get gpuscope's nvidia-smi compatible command line. Never over a real
# nvidia-smi: when the destination holds one, or (outside a DESTDIR staging install) one is on
# PATH that the link would shadow or be shadowed by, the link is skipped with a message.
# Usage (meson install script): install-nvidia-smi-link.sh BINDIR
set -eu
bindir=$1
case $bindir in
/*) dir="${DESTDIR:-}$bindir" ;;
*) dir="${MESON_INSTALL_DESTDIR_PREFIX:?}/$bindir" ;;
esac
link="$dir/nvidia-smi"
ours() { [ -L "$1" ] && [ "$(basename "$(readlink "$1")")" = gpuscope ]; }
if [ -e "$link" ] || [ -L "$link" ]; then
    if ours "$link"; then
        echo "nvidia-smi link: $link already points to gpuscope"
        exit 0
    fi
    echo "nvidia-smi link: NOT installed: $link exists and is not gpuscope (a real nvidia-smi?)" >&2
    exit 0
fi
if [ -z "${DESTDIR:-}" ]; then
    real=$(command -v nvidia-smi 2>/dev/null || true)
    if [ -n "$real" ] && ! ours "$real"; then
        echo "nvidia-smi link: NOT installed: the driver's nvidia-smi is at $real" >&2
        exit 0
    fi
fi
ln -s gpuscope "$link"
echo "nvidia-smi link: $link -> gpuscope"
