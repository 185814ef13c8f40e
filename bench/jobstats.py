"""`gpuscope jobstats` latency (issue 27): what the Slurm epilog waits for at the end of a job.

One agent on nvml-sim (h100x8-training's 8 GPUs, sampling every second) with 8 real `sleep`
processes of Slurm job 4242, one per GPU, held for SECONDS (default 30), its rate limit off
(back-to-back runs would meet its 50 requests/s per client); then times N (default
20) runs of `gpuscope jobstats 4242` over the agent's unix socket, of `--json`, and of
`--from http://127.0.0.1:PORT` (libcurl loaded), each a fresh process: /api/v1/usage, the
snapshot and 8 /api/v1/history queries. Prints median, min and max wall time of each.

usage: /usr/bin/python3 bench/jobstats.py [BUILD_DIR] [SECONDS] [N]   (default build 30 20)
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build"))
os.environ.setdefault("GPUSCOPE_BUILD_ROOT", BUILD)
from gsenv import BIN, SCENARIOS, clean_up, sim_env, start_agent  # noqa: E402

SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 30
N = int(sys.argv[3]) if len(sys.argv) > 3 else 20


def timed(args, env):
    out = []
    for _ in range(N):
        t0 = time.perf_counter()
        r = subprocess.run([BIN, "jobstats", "4242"] + args, env=env, capture_output=True)
        out.append(time.perf_counter() - t0)
        if r.returncode != 0:
            sys.exit("jobstats failed: %s" % r.stderr.decode())
    return out


def main():
    procs = []
    tmp = tempfile.mkdtemp(prefix="gs-bench-jobstats.")
    try:
        sleeps = [subprocess.Popen(["sleep", "3600"], env=dict(os.environ, SLURM_JOB_ID="4242"))
                  for _ in range(8)]
        procs += sleeps
        sc = json.load(open(os.path.join(SCENARIOS, "h100x8-training.json")))
        sc["processes"] = [{"pid": {"env": "JOB_PID_%d" % i}, "gpu": i, "name": "python3",
                            "used_memory_mib": 30000} for i in range(8)]
        path = os.path.join(tmp, "sc.json")
        json.dump(sc, open(path, "w"))
        env = sim_env(path, RUNTIME_DIRECTORY=tmp,
                      **{"JOB_PID_%d" % i: str(p.pid) for i, p in enumerate(sleeps)})
        p, base, ok = start_agent(["--data-dir", os.path.join(tmp, "data"), "--interval", "1",
                                   "--http-rate", "0"],
                                  env, procs, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        if not ok:
            sys.exit("the agent did not start")
        time.sleep(SECONDS)
        cenv = dict(os.environ, GPUSCOPE_HTTP_SOCKET=os.path.join(tmp, "agent.sock"),
                    NO_COLOR="1")
        print("8 GPUs held %.0f s, %d runs each (wall time per run):" % (SECONDS, N))
        for label, args in (("socket, table", []), ("socket, --json", ["--json"]),
                            ("--from http://127.0.0.1:PORT", ["--from", base])):
            ts = timed(args, cenv)
            print("  %-30s median %6.1f ms  min %6.1f  max %6.1f" %
                  (label, 1000 * statistics.median(ts), 1000 * min(ts), 1000 * max(ts)))
    finally:
        clean_up(procs, [tmp])


if __name__ == "__main__":
    main()
