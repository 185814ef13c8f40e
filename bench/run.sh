#!/bin/sh
# `make bench`: one-shot wall time / peak RSS of the CLI and the CPU cost of a sampling cycle,
# on nvml-sim with 8 H100s and 64 processes. 64 real (sleeping) processes are started so that
# the procfs part of a cycle reads real files; their pids reach the scenario through
# GS_BENCH_PID_<n>. Paste the output into bench/RESULTS.md with the date and machine.
set -eu
BUILD=${1:-build}
SCEN=bench/scenarios/h100x8-64procs.json
pids=""
i=0
while [ $i -lt 64 ]; do
    sleep 600 &
    eval "export GS_BENCH_PID_$i=$!"
    pids="$pids $!"
    i=$((i + 1))
done
trap 'kill $pids 2>/dev/null || true' EXIT INT TERM
echo "## $(date -u +%Y-%m-%d) on $(nproc) cores, $(uname -m), $(sed -n 's/^model name\t: //p' /proc/cpuinfo | head -1)"
echo
echo "### Start-up and call cost (bench/startup.py $BUILD 200)"
echo
/usr/bin/python3 bench/startup.py "$BUILD" 200
echo
echo "### The floor: one-shot commands against bench/floor.c and nvtop -s (bench/floor.py $BUILD 41)"
echo
/usr/bin/python3 bench/floor.py "$BUILD" 41 $(command -v nvtop || true)
echo
echo "### One-shot commands (bench/oneshot.py $BUILD 20)"
echo
/usr/bin/python3 bench/oneshot.py "$BUILD" 20
echo
echo "### Sampling cycle, own CPU excluding time inside NVML (bench_cycle, 2000 cycles, 5 runs)"
echo
echo '| mode | run | own µs median | own µs p90 | total µs median | NVML calls/cycle |'
echo '|---|---|---|---|---|---|'
for mode in basic procs; do
    for run in 1 2 3 4 5; do
        NVML_SIM_TIME=100 "$BUILD/bench/bench_cycle" "$BUILD/sim/libnvidia-ml.so.1" "$SCEN" 2000 $mode |
            awk -v mode=$mode -v run=$run '
                /^mode=/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
                /^own_us/ { for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
                END { printf "| %s | %d | %s | %s | %s | %s |\n", mode, run, v["own_us_median"],
                      v["own_us_p90"], v["total_us_median"], v["nvml_calls_per_cycle"] }'
    done
done
echo
BENCH_AGENT_SECONDS=${BENCH_AGENT_SECONDS:-120} ./bench/bench_agent.sh "$BUILD"
echo
echo "## Python stacks (bench/bench_stacks.py: one read, 100 Hz overhead)"
/usr/bin/python3 bench/bench_stacks.py "$BUILD" 9
echo "### gpuscope trace analyze (bench/bench_trace.sh $BUILD)"
echo
./bench/bench_trace.sh "$BUILD"
echo
echo "### gpuscope trace analyze on adversarial traces (bench/bench_trace_bounds.py $BUILD)"
echo
/usr/bin/python3 bench/bench_trace_bounds.py "$BUILD"
echo
echo "### Applying a gpuscope tune trial in the training process (bench/bench_tune_hooks.py)"
echo
PYTHONPATH="$BUILD/python" OMP_NUM_THREADS=1 /usr/bin/python3 bench/bench_tune_hooks.py

echo "### gpuscope top vs nvtop (bench/top.sh $BUILD 60)"
echo
sh bench/top.sh "$BUILD" 60
