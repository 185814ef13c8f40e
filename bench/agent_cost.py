#!/usr/bin/env python3
"""The agent's CPU and memory, thread by thread, interleaved between builds (issue 25).

Usage: bench/agent_cost.py [--reps N] [--seconds S] [--scrape S] [--syscalls] BUILD [BUILD ...]

Each BUILD is a gpuscope build directory (its gpuscope and sim/libnvidia-ml.so.1). Scenario
bench/scenarios/h100x8-64procs.json: 8 H100s and 64 real sleeping processes whose pids reach
it through GS_BENCH_PID_<n>, as bench/run.sh does. In each of N rounds (default 5) every
build's `gpuscope agent` runs in turn at its default interval (1 s) with history on, a private
data directory and sockets, /metrics fetched every --scrape seconds (default 5) over loopback
TCP as Prometheus would, 5 s before a window of S seconds (default 20). Figures of the window:

- CPU: every thread's run time from /proc/PID/task/TID/schedstat (ns), in % of one core, for
  the whole process and by thread name (gs-sampler, gs-history, gs-steps, MHD-..., the main
  thread under the process's name); nvml-sim runs inside the agent (a real driver is ioctls),
  so its share is in the sampler's figure;
- wakeups: voluntary + involuntary context switches per second, by thread;
- memory at the window's end: VmRSS, VmHWM, RssAnon, RssFile (/proc/PID/status) and Pss
  (/proc/PID/smaps_rollup).

--syscalls adds a round per build under `strace -f -c` (not timed: strace slows the agent)
and prints system calls per second by name.

Medians of the rounds, with min-max. Read the CPU figures of a loaded machine as ratios
between builds (interleaving spreads the load over all of them).
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCEN = os.path.join(ROOT, "bench", "scenarios", "h100x8-64procs.json")
WARM = 5


def threads(pid):
    """{tid: (name, run ns, context switches)} of pid's threads."""
    out = {}
    for t in os.listdir("/proc/%d/task" % pid):
        d = "/proc/%d/task/%s/" % (pid, t)
        try:
            with open(d + "schedstat") as f:
                ns = int(f.read().split()[0])
            with open(d + "comm") as f:
                name = f.read().strip()
            sw = 0
            with open(d + "status") as f:
                for line in f:
                    if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                        sw += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended meanwhile
        out[t] = (name, ns, sw)
    return out


def memory(pid):
    m = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                m[k] = int(v.split()[0]) / 1024.0
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            if line.startswith("Pss:"):
                m["Pss"] = int(line.split()[1]) / 1024.0
    return m


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_agent(build, env, tmp, secs, scrape_s, strace=False):
    data = tempfile.mkdtemp(prefix="agent.", dir=tmp)
    port = free_port()
    argv = [os.path.join(build, "gpuscope"), "agent", "--listen", "127.0.0.1:%d" % port,
            "--data-dir", data, "--history", "on", "--socket", os.path.join(data, "steps.sock"),
            "--http-socket", os.path.join(data, "agent.sock"), "--log-level", "warn"]
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    url = "http://127.0.0.1:%d/metrics" % port
    tracer = None
    try:
        time.sleep(WARM)
        if strace:
            out = os.path.join(data, "strace.txt")
            tracer = subprocess.Popen(["strace", "-f", "-c", "-o", out, "-p", str(p.pid)] +
                                      sum((["-p", t] for t in os.listdir("/proc/%d/task" % p.pid)),
                                          []), stderr=subprocess.DEVNULL)
            time.sleep(1)
        a, t0 = threads(p.pid), time.monotonic()
        end = t0 + secs
        while True:
            try:
                urllib.request.urlopen(url, timeout=5).read()
            except OSError as e:
                print("scrape: %s" % e, file=sys.stderr)
            left = end - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(scrape_s, left))
        b, t1 = threads(p.pid), time.monotonic()
        mem = memory(p.pid)
        if tracer:
            tracer.send_signal(signal.SIGINT)
            tracer.wait(timeout=30)
            tracer = None
            return parse_strace(out, t1 - t0)
    finally:
        if tracer:
            tracer.kill()
            tracer.wait()
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
    dt = t1 - t0
    cpu, sw = {}, {}
    for tid, (name, ns, s) in b.items():
        if tid not in a:
            continue  # a thread of a moment (an HTTP connection's): counted in "all" only
        key = "main" if tid == str(p.pid) else name
        cpu[key] = cpu.get(key, 0) + 100.0 * (ns - a[tid][1]) / 1e9 / dt
        sw[key] = sw.get(key, 0) + (s - a[tid][2]) / dt
    total = sum(ns for _, ns, _ in b.values()) - sum(ns for _, ns, _ in a.values())
    cpu["all"] = 100.0 * total / 1e9 / dt
    sw["all"] = sum(sw.values())
    return {"cpu": cpu, "sw": sw, "mem": mem}


def parse_strace(path, secs):
    rates = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 5 and parts[0][0].isdigit() and parts[-1] not in ("total",):
                try:
                    rates[parts[-1]] = int(parts[3]) / secs
                except ValueError:
                    pass
    return rates


def fmt(xs, f="%.4f"):
    return (f + " (" + f + "-" + f + ")") % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--scrape", type=float, default=5.0)
    ap.add_argument("--syscalls", action="store_true")
    ap.add_argument("builds", nargs="+")
    o = ap.parse_args()
    builds = [os.path.abspath(b) for b in o.builds]
    for b in builds:
        if not os.access(os.path.join(b, "gpuscope"), os.X_OK):
            sys.exit("%s: no gpuscope executable there" % b)
    sleepers = [subprocess.Popen(["sleep", "3600"], start_new_session=True) for _ in range(64)]
    tmp = tempfile.mkdtemp(prefix="gs-agent-cost.")
    base = dict(os.environ, NVML_SIM_SCENARIO=SCEN, GPUSCOPE_HTTP_SOCKET="off", LANG="C.UTF-8",
                XDG_CONFIG_HOME=tmp, XDG_RUNTIME_DIR=tmp, XDG_STATE_HOME=tmp)
    base.pop("LD_LIBRARY_PATH", None)
    for i, p in enumerate(sleepers):
        base["GS_BENCH_PID_%d" % i] = str(p.pid)
    res = {b: [] for b in builds}
    sc = {}
    try:
        for r in range(o.reps):
            for b in builds:
                env = dict(base, GPUSCOPE_NVML_LIBRARY=os.path.join(b, "sim", "libnvidia-ml.so.1"))
                res[b].append(run_agent(b, env, tmp, o.seconds, o.scrape))
                x = res[b][-1]
                print("round %d: %s: %.4f %% of a core, RSS %.1f MiB" %
                      (r + 1, b, x["cpu"]["all"], x["mem"]["VmRSS"]), file=sys.stderr)
        if o.syscalls:
            for b in builds:
                env = dict(base, GPUSCOPE_NVML_LIBRARY=os.path.join(b, "sim", "libnvidia-ml.so.1"))
                sc[b] = run_agent(b, env, tmp, o.seconds, o.scrape, strace=True)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d rounds of %.0f s (after %d s each), /metrics every %.0f s; medians (min-max)\n" %
          (o.reps, o.seconds, WARM, o.scrape))
    for b in builds:
        xs = res[b]
        print("### %s\n" % b)
        print("| figure | value |\n|---|---|")
        names = sorted({k for x in xs for k in x["cpu"]}, key=lambda k: (k != "all", k))
        for k in names:
            print("| CPU %% of one core, %s | %s |" %
                  (k, fmt([x["cpu"].get(k, 0.0) for x in xs])))
        for k in names:
            print("| wakeups per second, %s | %s |" %
                  (k, fmt([x["sw"].get(k, 0.0) for x in xs], "%.2f")))
        for k in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "Pss"):
            print("| %s MiB | %s |" % (k, fmt([x["mem"][k] for x in xs], "%.2f")))
        if b in sc:
            tot = sum(sc[b].values())
            print("| system calls per second (strace -f -c, one round) | %.1f: %s |" % (
                tot, ", ".join("%s %.1f" % kv for kv in
                               sorted(sc[b].items(), key=lambda kv: -kv[1])[:8])))
        print()


if __name__ == "__main__":
    main()
