#!/bin/sh
# The agent's own cost (issue 3): `gpuscope agent` on the 8-GPU, 64-process scenario with history
# on at 1 s for BENCH_AGENT_SECONDS (default 120; the issue asks for 5 min: BENCH_AGENT_SECONDS=300),
# sampling VmRSS/VmHWM (/proc/PID/status), Pss and Anonymous (/proc/PID/smaps_rollup) and
# utime+stime (/proc/PID/stat) at the end; then /metrics latency and throughput with wrk
# (rate limit off for wrk: --http-rate 0), and history.db bytes per GPU per day extrapolated
# from the run. Called by bench/run.sh, which exports GS_BENCH_PID_<n> for the 64 real
# sleeping processes. CPU includes the time spent inside nvml-sim (it runs in our process);
# bench_cycle in run.sh separates it. BENCH_AGENT_WRK=0 skips the wrk part (the quiet run).
set -eu
BUILD=${1:-build}
SECS=${BENCH_AGENT_SECONDS:-120}
PORT=${BENCH_AGENT_PORT:-19499}
SCEN=bench/scenarios/h100x8-64procs.json
DATA=$(mktemp -d "${TMPDIR:-/tmp}/gs-bench-agent.XXXXXX")
GPUSCOPE_NVML_LIBRARY="$BUILD/sim/libnvidia-ml.so.1" NVML_SIM_SCENARIO=$SCEN \
    "$BUILD/gpuscope" agent --listen 127.0.0.1:$PORT --data-dir "$DATA" --interval 1 \
    --history on --http-rate 0 --log-level warn &
AG=$!
trap 'kill $AG 2>/dev/null || true; rm -rf "$DATA"' EXIT INT TERM
sleep 2
tck=$(getconf CLK_TCK)
cpu() { awk '{ print $14 + $15 }' /proc/$AG/stat; }
c0=$(cpu); t0=$(date +%s.%N)
sleep "$SECS"
c1=$(cpu); t1=$(date +%s.%N)
rss=$(awk '/^VmRSS/ { print $2 }' /proc/$AG/status)
hwm=$(awk '/^VmHWM/ { print $2 }' /proc/$AG/status)
# smaps_rollup: Pss shares each library page among the processes mapping it; Anonymous is the
# private memory (heap, malloc arenas, touched stacks, libraries' relocated data); Rss minus
# Anonymous is file-backed pages, mostly shared libraries (libc, sqlite, curl/TLS, MHD, sim).
pss=$(awk '/^Pss:/ { print $2 }' /proc/$AG/smaps_rollup)
anon=$(awk '/^Anonymous:/ { print $2 }' /proc/$AG/smaps_rollup)
curl -s -o /dev/null "http://127.0.0.1:$PORT/metrics" # flush settles below
sleep 6
db=$(du -cb "$DATA"/history.db* | awk 'END { print $1 }')
echo "### Agent, 8 GPUs + 64 processes, interval 1 s, history on, ${SECS} s (bench/bench_agent.sh)"
echo
awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v tck="$tck" -v rss="$rss" -v hwm="$hwm" \
    -v db="$db" -v secs="$SECS" -v pss="$pss" -v anon="$anon" 'BEGIN {
    cpu = (c1 - c0) / tck; wall = t1 - t0
    printf "| figure | value |\n|---|---|\n"
    printf "| CPU (utime+stime, incl. nvml-sim) | %.3f s over %.1f s = %.3f %% of one core |\n", cpu, wall, 100 * cpu / wall
    printf "| VmRSS at end | %.1f MiB |\n| VmHWM (peak RSS) | %.1f MiB |\n", rss / 1024, hwm / 1024
    printf "| Pss at end (smaps_rollup) | %.1f MiB |\n", pss / 1024
    printf "| private anonymous at end (smaps_rollup Anonymous) | %.1f MiB |\n", anon / 1024
    printf "| file-backed (VmRSS - Anonymous; shared libraries) | %.1f MiB |\n", (rss - anon) / 1024
    printf "| history.db (+wal) after %d s | %d bytes |\n", secs + 8, db
    printf "| history bytes per GPU per day (extrapolated linearly from this run) | %.1f MiB |\n", db / 8 / (secs + 8) * 86400 / 1048576
}'
echo
if [ "${BENCH_AGENT_WRK:-1}" = 0 ]; then
    echo "wrk skipped (BENCH_AGENT_WRK=0)"
elif command -v wrk >/dev/null 2>&1; then
    echo '```'
    echo "\$ wrk -t2 -c16 -d10s --latency http://127.0.0.1:$PORT/metrics"
    wrk -t2 -c16 -d10s --latency "http://127.0.0.1:$PORT/metrics" | grep -E 'Latency|50%|99%|Requests/sec|requests in|Non-2xx|Socket'
    echo "\$ wrk -t1 -c1 -d10s --latency http://127.0.0.1:$PORT/metrics"
    wrk -t1 -c1 -d10s --latency "http://127.0.0.1:$PORT/metrics" | grep -E 'Latency|50%|99%|Requests/sec|requests in|Non-2xx|Socket'
    echo '```'
else
    echo "wrk not installed (make deps): /metrics latency not measured"
fi
