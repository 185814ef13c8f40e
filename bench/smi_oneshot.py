"""Wall time of one nvidia-smi style command of `gpuscope query` (fork + exec + NVML init +
one sample + print), 15 runs each, on nvml-sim's 8-GPU h100x8-training scenario.
Usage: python3 bench/smi_oneshot.py [BUILD_DIR]  (results: bench/RESULTS.md)."""
import sys
import os, subprocess, time, statistics
B = sys.argv[1] if len(sys.argv) > 1 else "build"
env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=B + "/sim/libnvidia-ml.so.1",
           NVML_SIM_SCENARIO="sim/scenarios/h100x8-training.json", NVML_SIM_TIME="600")
for args in (["--query-gpu=index,utilization.gpu,memory.used", "--format=csv"], [], ["-L"], ["--version"],
             ["-q"], ["-q", "-x"], ["-q", "-d", "MEMORY,UTILIZATION"], ["dmon", "-c", "1"], ["pmon", "-c", "1"]):
    ts = []
    for _ in range(15):
        t = time.perf_counter()
        subprocess.run([B + "/gpuscope", "query"] + args, env=env, stdout=subprocess.DEVNULL, check=True)
        ts.append((time.perf_counter() - t) * 1000)
    print("%-45s median %6.1f ms  min %6.1f ms" % (" ".join(args) or "(table)", statistics.median(ts), min(ts)))
