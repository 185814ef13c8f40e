#!/bin/sh
# `make run`: the main job. On a machine with an NVIDIA driver it watches the real GPUs; on a
# machine without one it runs the same binary on nvml-sim with a bundled 8-GPU scenario.
set -eu
BUILD=${1:-build}
if [ -z "${GPUSCOPE_NVML_LIBRARY:-}" ] && ! [ -e /proc/driver/nvidia/version ]; then
    echo "gpuscope: no NVIDIA driver here; running on nvml-sim (sim/scenarios/h100x8-training.json)" >&2
    export GPUSCOPE_NVML_LIBRARY="$BUILD/sim/libnvidia-ml.so.1"
    export NVML_SIM_SCENARIO="${NVML_SIM_SCENARIO:-sim/scenarios/h100x8-training.json}"
fi
exec "$BUILD/gpuscope" -i 1
