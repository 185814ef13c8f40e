#!/usr/bin/env python3
"""`gpuscope top` against nvtop, and the agent's own cost, in one run on nvml-sim.

Usage: bench/top_vs_nvtop.py BUILD NVTOP [REPS [SECONDS [OLD_BUILD]]]

BUILD: a gpuscope build (its gpuscope and sim/libnvidia-ml.so.1); NVTOP: an nvtop binary (nvtop
3.x built from its sources, NVIDIA support only: it loads libnvidia-ml.so.1 by name, here
nvml-sim through LD_LIBRARY_PATH); REPS rounds (default 3) of SECONDS (default 20) each;
OLD_BUILD: another build whose top and agent are measured in the same rounds (before/after);
TOP_ONLY=1 in the environment leaves the agents out.

Scenario bench/scenarios/h100x8-64procs.json: 8 H100s and 64 real sleeping processes whose pids
reach it through GS_BENCH_PID_<n>, as bench/run.sh does. In each round, in turn:
- `gpuscope top -d 1` and `nvtop -d 10` (both 1 s), each in its own tmux terminal of 120x40;
- `gpuscope agent` at its default interval (1 s) with history on, private data directory and
  sockets, /metrics scraped every 5 s over loopback TCP (as Prometheus would).
Each runs 5 s before the window. CPU is the sum of every thread's run time from
/proc/PID/task/*/schedstat over the window (nanoseconds, not 10 ms ticks), in % of one core;
memory is VmRSS and VmHWM at the window's end. Medians of the rounds with min-max.
"""
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


def cpu_ns(pid):
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total


def mem_kib(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                out[k] = int(v.split()[0])
    return out["VmRSS"], out["VmHWM"]


def window(pid, secs, during=None):
    """(% of one core, RSS MiB, peak RSS MiB) of pid over secs after the warm-up."""
    time.sleep(WARM)
    c0, t0 = cpu_ns(pid), time.monotonic()
    end = t0 + secs
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        if during:
            during()
        time.sleep(min(5.0, left))
    c1, t1 = cpu_ns(pid), time.monotonic()
    rss, hwm = mem_kib(pid)
    return 100.0 * (c1 - c0) / 1e9 / (t1 - t0), rss / 1024.0, hwm / 1024.0


TMUX_RUNS = [0]


def in_tmux(argv, env, secs):
    """window() of argv in a tmux terminal of its own (a server per run), ended afterwards."""
    TMUX_RUNS[0] += 1
    tmux = ["tmux", "-L", "gsbench-%d-%d" % (os.getpid(), TMUX_RUNS[0]), "-f", "/dev/null"]
    subprocess.run(tmux + ["new-session", "-d", "-s", "b", "-x", "120", "-y", "40",
                           "exec " + " ".join(argv)], env=env, check=True)
    pid = None
    try:
        time.sleep(0.5)
        pid = int(subprocess.run(tmux + ["list-panes", "-t", "b", "-F", "#{pane_pid}"],
                                 capture_output=True, text=True, check=True).stdout.split()[0])
        return window(pid, secs)
    finally:
        subprocess.run(tmux + ["kill-server"], stderr=subprocess.DEVNULL)
        for _ in range(50):  # the program ends on the terminal's hang-up
            if pid is None or not os.path.exists("/proc/%d" % pid):
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def agent(build, env, tmp, secs):
    data = tempfile.mkdtemp(prefix="agent.", dir=tmp)
    port = free_port()
    p = subprocess.Popen([os.path.join(build, "gpuscope"), "agent", "--listen",
                          "127.0.0.1:%d" % port, "--data-dir", data, "--history", "on",
                          "--socket", os.path.join(data, "steps.sock"),
                          "--http-socket", os.path.join(data, "agent.sock"),
                          "--log-level", "warn"],
                         env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    url = "http://127.0.0.1:%d/metrics" % port

    def scrape():
        try:
            urllib.request.urlopen(url, timeout=5).read()
        except OSError:
            pass

    try:
        return window(p.pid, secs, scrape)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)


def fmt(xs, unit_fmt="%.3f"):
    return (unit_fmt + " (" + unit_fmt + "-" + unit_fmt + ")") % (
        statistics.median(xs), min(xs), max(xs))


def bench_env(build, tmp):
    """(environment, the 64 sleeping processes) for the scenario, private dirs in tmp; the
    caller kills the sleepers (also used by bench/issue25.py)."""
    sleepers = [subprocess.Popen(["sleep", "3600"], start_new_session=True) for _ in range(64)]
    sim = os.path.join(build, "sim")
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=os.path.join(sim, "libnvidia-ml.so.1"),
               NVML_SIM_SCENARIO=SCEN, GPUSCOPE_HTTP_SOCKET="off", TERM="screen-256color",
               LANG="C.UTF-8", XDG_CONFIG_HOME=tmp, XDG_RUNTIME_DIR=tmp, XDG_STATE_HOME=tmp)
    env.pop("LD_LIBRARY_PATH", None)
    for i, p in enumerate(sleepers):
        env["GS_BENCH_PID_%d" % i] = str(p.pid)
    return env, sleepers


def main():
    a = sys.argv[1:]
    if len(a) < 2:
        sys.exit(__doc__)
    build, nvtop = os.path.abspath(a[0]), os.path.abspath(a[1])
    reps = int(a[2]) if len(a) > 2 else 3
    secs = float(a[3]) if len(a) > 3 else 20.0
    old = os.path.abspath(a[4]) if len(a) > 4 else None
    if not shutil.which("tmux"):
        sys.exit("tmux is needed")
    tmp = tempfile.mkdtemp(prefix="gs-top-vs-nvtop.")
    env, sleepers = bench_env(build, tmp)
    sim = os.path.join(build, "sim")
    res = {}
    try:
        for r in range(reps):
            runs = [("gpuscope top -d 1",
                     lambda: in_tmux([os.path.join(build, "gpuscope"), "top", "--no-save", "-d",
                                      "1"], env, secs)),
                    ("nvtop -d 10",
                     lambda: in_tmux(["env", "LD_LIBRARY_PATH=" + sim, nvtop, "-d", "10"], env,
                                     secs)),
                    ("gpuscope agent (1 s, history, /metrics every 5 s)",
                     lambda: agent(build, env, tmp, secs))]
            if os.environ.get("TOP_ONLY") == "1":
                runs = runs[:2]
            if old:
                oenv = dict(env, GPUSCOPE_NVML_LIBRARY=os.path.join(old, "sim",
                                                                    "libnvidia-ml.so.1"))
                runs.insert(1, ("gpuscope top -d 1, OLD_BUILD",
                                lambda: in_tmux([os.path.join(old, "gpuscope"), "top",
                                                 "--no-save", "-d", "1"], oenv, secs)))
                if os.environ.get("TOP_ONLY") != "1":
                    runs.append(("the same agent, OLD_BUILD",
                                  lambda: agent(old, oenv, tmp, secs)))
            for name, fn in runs:
                res.setdefault(name, []).append(fn())
                print("round %d: %s: %.3f %% of a core, RSS %.1f MiB" %
                      ((r + 1, name) + res[name][-1][:2]), file=sys.stderr)
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d rounds of %.0f s (after %d s each), medians (min-max)\n" % (reps, secs, WARM))
    print("| program | CPU % of one core | RSS MiB | peak RSS MiB |")
    print("|---|---|---|---|")
    for name, xs in res.items():
        print("| %s | %s | %s | %s |" % (name, fmt([x[0] for x in xs]),
                                         fmt([x[1] for x in xs], "%.1f"),
                                         fmt([x[2] for x in xs], "%.1f")))
    top, nv = res["gpuscope top -d 1"], res["nvtop -d 10"]
    print("\ntop / nvtop: CPU %.2f (goal <= 0.2), RSS %.2f (goal <= 1)" % (
        statistics.median([x[0] for x in top]) / statistics.median([x[0] for x in nv]),
        statistics.median([x[1] for x in top]) / statistics.median([x[1] for x in nv])))


if __name__ == "__main__":
    main()
