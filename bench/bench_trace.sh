#!/bin/sh
# `gpuscope trace analyze` speed and memory: wall time (median of RUNS) and peak RSS
# (/usr/bin/time %M) on every reference trace of ../shared/reference/kineto-traces, then on a
# synthetic trace of SYNTH_MB (default 1000) megabytes that bench/gen_trace.py writes into
# $TMPDIR (default /tmp) and deletes afterwards (SYNTH_MB=0 skips it). Also the CPU time, which
# a loaded machine inflates less than the wall time.
#
# Usage: bench/bench_trace.sh [BUILD_DIR]     (RUNS default 5)
set -eu
BUILD=${1:-build}
RUNS=${RUNS:-5}
SYNTH_MB=${SYNTH_MB:-1000}
REF=../shared/reference/kineto-traces
BIN="$BUILD/gpuscope"

# median wall seconds, median CPU seconds (user + sys) and max RSS MiB of RUNS runs of "$@"
measure() {
    i=0
    : >"$tmp/times"
    while [ $i -lt "$RUNS" ]; do
        /usr/bin/time -f "%e %U %S %M" -o "$tmp/one" "$@" >/dev/null
        cat "$tmp/one" >>"$tmp/times"
        i=$((i + 1))
    done
    wall=$(sort -n "$tmp/times" | awk '{ t[NR] = $1 } END { printf "%.3f", t[int((NR + 1) / 2)] }')
    cpu=$(awk '{ print $2 + $3 }' "$tmp/times" | sort -n |
        awk '{ c[NR] = $1 } END { printf "%.3f", c[int((NR + 1) / 2)] }')
    rss=$(awk '$4 > m { m = $4 } END { printf "%.1f", m / 1024 }' "$tmp/times")
    echo "$wall | $cpu | $rss"
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-trace.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
echo "| trace | size (gzip / JSON) | wall s (median of $RUNS) | CPU s (user+sys, median) | peak RSS MiB |"
echo "|---|---|---|---|---|"
for f in "$REF"/*.json.gz; do
    [ -f "$f" ] || continue
    gz=$(stat -c %s "$f")
    raw=$(gzip -dc "$f" | wc -c)
    echo "| $(basename "$f") | $((gz / 1000)) kB / $((raw / 1000000)) MB | $(measure "$BIN" trace analyze --json "$f") |"
done
if [ "$SYNTH_MB" -gt 0 ]; then
    /usr/bin/python3 bench/gen_trace.py "$tmp/synth.json" "$SYNTH_MB"
    sz=$(stat -c %s "$tmp/synth.json")
    RUNS=${SYNTH_RUNS:-3}
    echo "| synthetic (bench/gen_trace.py, plain JSON) | $((sz / 1000000)) MB | $(measure "$BIN" trace analyze --json "$tmp/synth.json") |"
    rm -f "$tmp/synth.json"
fi
