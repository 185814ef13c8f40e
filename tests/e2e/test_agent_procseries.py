"""The bound on per-process series on `gpuscope agent`'s /metrics, on a generated nvml-sim
scenario with many processes (2 H100s, 600 processes of distinct GPU memory sizes).

With `process_metrics = on` and the default `process_metrics_max` (256), one scrape must carry
at most 256 per-process lines, those of the processes holding the most GPU memory (the sizes
the agent itself reports on /api/v1/processes), and say how many series and processes it left
out; a smaller cap given on the command line keeps the top of the same order.
"""
import json
import os
import re
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BIN, get_text, sim_env, start_agent, stop_proc  # noqa: E402

t = Tap()
N_PROCS = 600
FAMILIES = ("gpuscope_process_gpu_memory_bytes", "gpuscope_process_sm_utilization_ratio",
            "gpuscope_process_cpu_ratio", "gpuscope_process_resident_memory_bytes",
            "gpuscope_process_start_time_seconds")


def scenario(path):
    base = json.load(open(os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")))
    doc = {k: base[k] for k in ("scenario_version", "driver_version", "cuda_driver_version",
                                "templates")}
    doc["description"] = "2 H100, %d small processes (test_agent_procseries)" % N_PROCS
    doc["gpus"] = base["gpus"][:2]
    doc["processes"] = [{"id": "p%d" % i, "pid": 20000 + i, "gpu": i % 2, "type": "compute",
                         "name": "/usr/bin/worker",
                         # distinct sizes, not in pid order: 1..600 MiB
                         "used_memory_mib": (i * 7919) % N_PROCS + 1}
                        for i in range(N_PROCS)]
    doc["events"] = []
    with open(path, "w") as f:
        json.dump(doc, f)


def lines(text, name):
    return [ln for ln in text.splitlines() if ln.startswith(name + "{") or ln.startswith(name + " ")]


def label(line, key):
    return re.search(r'[{,]%s="([^"]*)"' % key, line).group(1)


def check(port, cap):
    _, m = get_text("http://127.0.0.1:%d/metrics" % port)
    _, body = get_text("http://127.0.0.1:%d/api/v1/processes" % port)
    procs = json.loads(body)["processes"]
    t.eq(len(procs), N_PROCS, "cap %d: /api/v1/processes lists all %d processes" % (cap, N_PROCS))
    per = sum(len(lines(m, f)) for f in FAMILIES)
    t.ok(0 < per <= cap, "cap %d: at most %d per-process lines in one scrape" % (cap, cap),
         detail=per)
    kept = {(int(label(ln, "gpu")), int(label(ln, "pid")))
            for f in FAMILIES for ln in lines(m, f)}
    size = {(p["gpu"], p["pid"]): p["gpu_memory"] or 0 for p in procs}
    dropped = set(size) - kept
    t.ok(kept and dropped and min(size[k] for k in kept) >= max(size[k] for k in dropped),
         "cap %d: the processes kept hold the most GPU memory" % cap,
         detail=(len(kept), len(dropped)))
    gauge = lines(m, "gpuscope_processes_dropped")
    t.ok(gauge and int(float(gauge[0].split()[-1])) == len(dropped),
         "cap %d: gpuscope_processes_dropped counts the processes left out" % cap,
         detail=(gauge, len(dropped)))
    sgauge = lines(m, "gpuscope_process_series_dropped")
    each = per // len(kept) if kept else 0
    t.ok(sgauge and int(float(sgauge[0].split()[-1])) == each * len(dropped),
         "cap %d: gpuscope_process_series_dropped counts their series" % cap,
         detail=(sgauge, each, len(dropped)))


def main():
    if not os.path.exists(BIN):
        t.skip("process series cap", "no gpuscope binary at %s" % BIN)
        return t.done()
    tmp = tempfile.mkdtemp(prefix="gs-procseries.")
    scen = os.path.join(tmp, "many.json")
    scenario(scen)
    for cap, extra in ((256, []), (40, ["--process-metrics-max", "40"])):
        p, _, ok = start_agent(["--data-dir", tmp, "--history", "off", "--process-metrics", "on"]
                               + extra, sim_env(scen, "10"))
        t.ok(ok, "cap %d: the agent answers" % cap)
        if ok:
            check(p.port, cap)
        t.eq(stop_proc(p), 0, "cap %d: the agent stops cleanly" % cap)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
