#!/usr/bin/env python3
"""One-shot wall time and peak RSS of gpuscope commands on nvml-sim.

Usage: bench/oneshot.py BUILD_DIR [RUNS]

Runs each command RUNS times (default 20) against the 8-GPU / 64-process bench scenario
(bench/run.sh starts the 64 processes) and the bundled 8-GPU training scenario,
reports min / median / max wall milliseconds (measured around fork+exec+wait) and the peak RSS
from `/usr/bin/time -v` of one extra run, and prints a Markdown table for bench/RESULTS.md.
The first run of each command is a discarded warm-up (page cache, dynamic loader).
"""
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(cmd, env, runs):
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)  # warm-up
    walls = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
        walls.append((time.perf_counter() - t0) * 1000.0)
    out = subprocess.run(["/usr/bin/time", "-v"] + cmd, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, check=True).stderr
    rss = next(int(line.split(":")[1]) for line in out.splitlines()
               if "Maximum resident set size" in line)
    return min(walls), statistics.median(walls), max(walls), rss


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    env = dict(os.environ)
    env["GPUSCOPE_NVML_LIBRARY"] = os.path.join(build, "sim", "libnvidia-ml.so.1")
    env["NVML_SIM_TIME"] = "100"
    env["NO_COLOR"] = "1"
    exe = os.path.join(build, "gpuscope")
    scenarios = [
        ("8 GPUs, 64 real processes", os.path.join(ROOT, "bench", "scenarios",
                                                    "h100x8-64procs.json")),
        ("8 GPUs, 8 processes", os.path.join(ROOT, "sim", "scenarios", "h100x8-training.json")),
    ]
    cmds = [
        ("gpuscope", [exe]),
        ("gpuscope --json", [exe, "--json"]),
        ("gpuscope query --query-gpu=index,name,utilization.gpu,memory.used,memory.total,"
         "temperature.gpu,power.draw --format=csv",
         [exe, "query", "--query-gpu=index,name,utilization.gpu,memory.used,memory.total,"
          "temperature.gpu,power.draw", "--format=csv"]),
        ("gpuscope query --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv",
         [exe, "query", "--query-compute-apps=pid,process_name,used_memory,gpu_uuid",
          "--format=csv"]),
    ]
    print("| scenario | command | runs | min ms | median ms | max ms | peak RSS KiB |")
    print("|---|---|---|---|---|---|---|")
    for what, path in scenarios:
        env["NVML_SIM_SCENARIO"] = path
        for label, cmd in cmds:
            lo, med, hi, rss = measure(cmd, env, runs)
            print(f"| {what} | `{label}` | {runs} | {lo:.2f} | {med:.2f} | {hi:.2f} | {rss} |")


if __name__ == "__main__":
    main()
