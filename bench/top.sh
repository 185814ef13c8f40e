#!/bin/sh
# `gpuscope top`'s own cost next to nvtop's (bench/RESULTS.md): each runs in a tmux terminal
# of 120x40 at a 1 s refresh on nvml-sim with 8 H100s and 64 processes (64 real sleeping
# processes whose pids reach the scenario through GS_BENCH_PID_<n>, as bench/run.sh does);
# after a 5 s warm-up, CPU time (utime + stime from /proc/PID/stat) over SECONDS (default 60)
# and the resident set at the end (VmRSS, VmHWM). nvtop loads the same nvml-sim through
# LD_LIBRARY_PATH. Usage: bench/top.sh [BUILD] [SECONDS]
set -eu
BUILD=${1:-build}
SECS=${2:-60}
ROOT=$(pwd)
SCEN=$ROOT/bench/scenarios/h100x8-64procs.json
SIMDIR=$ROOT/$BUILD/sim
pids=""
i=0
while [ $i -lt 64 ]; do
    sleep 900 &
    eval "export GS_BENCH_PID_$i=$!"
    pids="$pids $!"
    i=$((i + 1))
done
SOCK=gsbench-top-$$
trap 'tmux -L $SOCK kill-server 2>/dev/null || true; kill $pids 2>/dev/null || true' EXIT INT TERM
export GPUSCOPE_NVML_LIBRARY=$SIMDIR/libnvidia-ml.so.1 NVML_SIM_SCENARIO=$SCEN GPUSCOPE_HTTP_SOCKET=off
export TERM=screen-256color LANG=C.UTF-8 XDG_CONFIG_HOME=$(mktemp -d)
tck=$(getconf CLK_TCK)

measure() { # name command...
    name=$1
    shift
    tmux -L $SOCK -f /dev/null new-session -d -s b -x 120 -y 40 "exec $*"
    sleep 5
    pid=$(tmux -L $SOCK list-panes -t b -F '#{pane_pid}')
    t0=$(awk '{print $14 + $15}' /proc/$pid/stat)
    sleep "$SECS"
    t1=$(awk '{print $14 + $15}' /proc/$pid/stat)
    rss=$(awk '/^VmRSS/ {print $2}' /proc/$pid/status)
    hwm=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status)
    tmux -L $SOCK kill-server
    awk -v n="$name" -v d=$((t1 - t0)) -v s="$SECS" -v t="$tck" -v r="$rss" -v h="$hwm" \
        'BEGIN { printf "| %s | %d | %.2f | %.3f | %.1f | %.1f |\n", n, s, d / t, 100 * d / t / s, r / 1024, h / 1024 }'
}

echo "| program | seconds | CPU s | CPU % of one core | RSS MiB | peak RSS MiB |"
echo "|---|---|---|---|---|---|"
measure "gpuscope top -d 1" "$ROOT/$BUILD/gpuscope" top --no-save -d 1
if command -v nvtop >/dev/null 2>&1; then
    measure "nvtop -d 10 ($(nvtop --version 2>&1 | head -1))" env LD_LIBRARY_PATH=$SIMDIR nvtop -d 10
else
    echo "| nvtop | not installed (Debian contrib) | | | | |"
fi
