#!/bin/sh
# Builds the libFuzzer targets (fuzz/meson.build) with clang in BUILD_DIR and runs each one for
# FUZZ_SECONDS on its seed corpus fuzz/corpus/<name>/ (and fuzz/<name>.dict when there is one),
# as `make fuzz` and `make test` do.
#
# Usage: scripts/fuzz.sh [BUILD_DIR]        (default build-fuzz; FUZZ_SECONDS default 20)
#
# New inputs a run finds go to a temporary directory (libFuzzer writes to its first corpus
# directory only), so the committed corpus never grows here. Results are TAP, one line per
# target, printed and written to BUILD_DIR/fuzz-results.tap for scripts/test-summary.py; a
# crash, leak, UBSan report, timeout or out-of-memory is a "not ok" line with the log's tail
# and the saved input under BUILD_DIR/fuzz-artifacts/. Exits 1 when anything failed.
set -u
B=${1:-build-fuzz}
SECS=${FUZZ_SECONDS:-20}
TAP="$B/fuzz-results.tap"
LOGS="$B/fuzz-logs"
ARTIFACTS="$B/fuzz-artifacts"

case "$SECS" in '' | *[!0-9]*) echo "fuzz: FUZZ_SECONDS must be a whole number" >&2; exit 2 ;; esac
mkdir -p "$B"
rm -f "$TAP" # never count the results of an earlier run
lines=""
n=0
failed=0

# Adds one TAP line; a failure's details (the file $3) follow as "#" lines. Not in a pipe: it
# counts in this shell.
result() {
    n=$((n + 1))
    if [ "$1" = ok ]; then
        line="ok $n - $2"
    else
        failed=$((failed + 1))
        line="not ok $n - $2"
    fi
    echo "$line"
    lines="$lines$line
"
    if [ "$1" != ok ]; then
        detail=$(sed 's/^/#   /' "$3")
        echo "$detail"
        lines="$lines$detail
"
    fi
}

finish() {
    lines="${lines}1..$n
"
    printf '%s' "$lines" >"$TAP"
    echo "1..$n"
    echo "fuzz: $((n - failed)) passed, $failed failed ($SECS s per target; logs in $LOGS)"
    [ "$failed" -eq 0 ]
    exit $?
}

if [ ! -f "$B/build.ninja" ]; then
    if ! CC=clang meson setup "$B" -Dfuzz=true -Dtests=false >"$B/setup.log" 2>&1; then
        result "not ok" "configure $B (CC=clang meson setup -Dfuzz=true)" "$B/setup.log"
        finish
    fi
fi
if ! ninja -C "$B" fuzzers >"$B/build.log" 2>&1; then
    tail -n 30 "$B/build.log" >"$B/build.tail"
    result "not ok" "build the fuzz targets in $B" "$B/build.tail"
    finish
fi

mkdir -p "$LOGS" "$ARTIFACTS"
for src in fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    short=${name#fuzz_}
    exe="$B/fuzz/$name"
    corpus="fuzz/corpus/$short"
    log="$LOGS/$short.log"
    if [ ! -x "$exe" ]; then
        echo "$exe was not built: is $B set up with CC=clang and -Dfuzz=true? (rm -rf $B)" >"$log"
        result "not ok" "$name" "$log"
        continue
    fi
    if [ ! -d "$corpus" ]; then
        echo "every target needs a seed corpus in $corpus/" >"$log"
        result "not ok" "$name" "$log"
        continue
    fi
    rm -f "$ARTIFACTS/$short-"* # what a failure lists must come from this run
    # A dictionary helps where the parser compares inside an uninstrumented library (jansson's
    # hash lookups hide the scenario keys from libFuzzer's comparison tracing).
    dict=""
    [ -f "fuzz/$short.dict" ] && dict="-dict=fuzz/$short.dict"
    work=$(mktemp -d "${TMPDIR:-/tmp}/gs-fuzz-$short.XXXXXX")
    # -timeout: one input running this long is a hang; timeout(1) guards the whole run.
    UBSAN_OPTIONS=print_stacktrace=1 timeout -k 10 $((SECS + 120)) "$exe" \
        -max_total_time="$SECS" -print_final_stats=1 -timeout=25 -rss_limit_mb=2048 \
        -artifact_prefix="$ARTIFACTS/$short-" $dict "$work" "$corpus" >"$log" 2>&1
    rc=$?
    rm -rf "$work"
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    stats=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 |
        sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+).*/cov \1, ft \2, corpus \3/')
    if [ "$rc" -eq 0 ]; then
        result ok "$name: ${runs:-?} runs in $SECS s, ${stats:-no stats}"
    else
        {
            echo "exit status $rc; full log: $log"
            for a in "$ARTIFACTS/$short-"*; do
                [ -e "$a" ] && echo "reproduce: $exe $a"
            done
            grep -E 'ERROR|SUMMARY|runtime error|Test unit written' "$log" | head -n 8
            tail -n 15 "$log"
        } >"$log.why"
        result "not ok" "$name: ${runs:-?} runs, ${stats:-no stats}" "$log.why"
    fi
done
finish
