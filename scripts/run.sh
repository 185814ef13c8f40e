#!/bin/sh
# `make run`: the main job, the agent (docs/agent.md). On a machine with an NVIDIA driver it
# runs `gpuscope agent` on the real GPUs with deploy/agent.conf (http://127.0.0.1:9400/); on a
# machine without one, `gpuscope demo`: the same agent on nvml-sim with the bundled 8x H100
# training scenario and a temporary data dir. Ctrl-C stops either. Extra arguments go to the
# agent: `make run ARGS="--listen 127.0.0.1:9500"`; NVML_SIM_SCENARIO=NAME|PATH picks
# another scenario for the demo.
set -eu
BUILD=${1:-build}
[ $# -gt 0 ] && shift
if [ -z "${GPUSCOPE_NVML_LIBRARY:-}" ] && ! [ -e /proc/driver/nvidia/version ]; then
    echo "gpuscope: no NVIDIA driver here; running the agent on nvml-sim (gpuscope demo)" >&2
    exec "$BUILD/gpuscope" demo --scenario "${NVML_SIM_SCENARIO:-h100x8-training}" "$@"
fi
echo "gpuscope: NVIDIA driver found; running the agent on this machine's GPUs (Ctrl-C to stop)" >&2
exec "$BUILD/gpuscope" agent --config deploy/agent.conf "$@"
