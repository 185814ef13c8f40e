#!/bin/sh
# Instructions one one-shot command executes (valgrind callgrind's total: repeatable whatever
# else the machine does), on the bundled 8-GPU training scenario of nvml-sim with its clock
# frozen and no agent. Compares two builds of gpuscope on the same sim library.
#
# Usage: bench/oneshot_instructions.sh BUILD [OTHER_BUILD]   (e.g. build /tmp/old/build)
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
sim="$root/build/sim/libnvidia-ml.so.1"
[ -f "$sim" ] || { echo "build nvml-sim first (make build)" >&2; exit 2; }
count() {
    out=$(mktemp)
    env -u GPUSCOPE_HTTP_SOCKET GPUSCOPE_NVML_LIBRARY="$sim" NVML_SIM_TIME=100 \
        NVML_SIM_SCENARIO="$root/sim/scenarios/h100x8-training.json" \
        XDG_RUNTIME_DIR=/nonexistent \
        valgrind --tool=callgrind --callgrind-out-file="$out" "$@" >/dev/null 2>"$out.err"
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out.err"
    rm -f "$out" "$out.err"
}
printf '%-28s %14s %14s %14s\n' build "gpuscope -P" "query (5 fields)" "gpuscope --json"
for b in "$@"; do
    printf '%-28s %14s %14s %14s\n' "$b" "$(count "$b/gpuscope" -P)" \
        "$(count "$b/gpuscope" query --query-gpu=index,utilization.gpu,memory.used,temperature.gpu,power.draw --format=csv)" \
        "$(count "$b/gpuscope" --json)"
done
