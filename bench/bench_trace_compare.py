#!/usr/bin/env python3
"""`gpuscope trace analyze --json` on every reference trace (../shared/reference/kineto-traces),
this build against another binary (e.g. main's build) and `zcat` (the inflate floor of zlib),
interleaved round by round so that a loaded machine slows them alike. CPU time (user + sys,
microsecond resolution from wait4, the reader thread included) is the figure to compare on a
shared machine; wall time is given too. Prints median, min and max of ROUNDS (default 15)
and the largest peak RSS, and the ratio against HTA 0.6.1's recorded figure where one exists.

usage: bench/bench_trace_compare.py [BUILD_DIR] [OTHER_GPUSCOPE]
"""
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "reference",
                   "kineto-traces")
ROUNDS = int(os.environ.get("ROUNDS", "15"))
TMP = None
# HTA 0.6.1 on the same file (bench/RESULTS.md, issue 19): seconds, MiB.
HTA = {"nccl-sendrecv-rank-0.json.gz": (1.61, 212.0)}


def one(argv):
    """Wall s, CPU s (of /usr/bin/time and its child), peak RSS MiB (time's %M: a forked
    Python child's own RSS would count in wait4's ru_maxrss)."""
    rss_file = os.path.join(TMP, "rss")
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(["/usr/bin/time", "-f", "%M", "-o", rss_file] + argv, stdout=null,
                             stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err = p.stderr.read()
        p.stderr.close()
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        sys.exit("%s: exit %d: %s" % (" ".join(argv), p.returncode, err.decode()[:200]))
    with open(rss_file) as f:
        rss = int(f.read().split()[-1]) / 1024
    return wall, ru.ru_utime + ru.ru_stime, rss


def fmt(v):
    return "%.3f (%.3f-%.3f)" % (statistics.median(v), min(v), max(v))


def main():
    global TMP
    TMP = tempfile.mkdtemp(prefix="gs-bench-cmp.")
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    bins = [("this build", [os.path.join(build, "gpuscope"), "trace", "analyze", "--json"])]
    if len(sys.argv) > 2:
        bins.append(("other", [sys.argv[2], "trace", "analyze", "--json"]))
    bins.append(("zcat", ["zcat"]))
    print("| trace | binary | CPU s median (min-max) of %d | wall s median (min-max) | peak RSS MiB "
          "| vs HTA (CPU median) |" % ROUNDS)
    print("|---|---|---|---|---|---|")
    for f in sorted(glob.glob(os.path.join(REF, "*.json.gz"))):
        res = {name: ([], [], 0.0) for name, _ in bins}
        for _ in range(ROUNDS):
            for name, argv in bins:
                w, c, m = one(argv + [f])
                res[name][0].append(w)
                res[name][1].append(c)
                res[name] = (res[name][0], res[name][1], max(res[name][2], m))
        for name, _ in bins:
            walls, cpus, rss = res[name]
            hta = HTA.get(os.path.basename(f))
            ratio = ""
            if hta and name != "zcat":
                ratio = "%.0f x faster, %.3f x RSS" % (hta[0] / statistics.median(cpus), rss / hta[1])
            print("| %s | %s | %s | %s | %.1f | %s |" % (os.path.basename(f), name, fmt(cpus),
                                                          fmt(walls), rss, ratio), flush=True)
    os.unlink(os.path.join(TMP, "rss"))
    os.rmdir(TMP)


if __name__ == "__main__":
    main()
