#!/usr/bin/env python3
"""Where `gpuscope top`'s memory and system calls go, on nvml-sim (issue 25).

Usage: bench/top_profile.py BUILD [SECONDS [smaps|strace|both]]

Runs `gpuscope top --no-save -d 1` in a 120x40 tmux terminal on
bench/scenarios/h100x8-64procs.json (8 H100, 64 real sleeping processes, as bench/top_vs_nvtop.py),
and after 5 s of warm-up:
- smaps: the resident memory of each mapping of the process (/proc/PID/smaps), grouped by file
  (anonymous mappings as [heap], [stack], [anon]), largest first, with smaps_rollup's totals;
- strace: `strace -f -c` of the same command over SECONDS (default 20), the system calls per
  second (per frame at -d 1), and the bytes written to the terminal per frame
  (`strace -f -e trace=write` of fd 1).
"""
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCEN = os.path.join(ROOT, "bench", "scenarios", "h100x8-64procs.json")
WARM = 5


def tmux_run(argv, env, secs, probe):
    tmux = ["tmux", "-L", "gsprof-%d" % os.getpid(), "-f", "/dev/null"]
    subprocess.run(tmux + ["new-session", "-d", "-s", "b", "-x", "120", "-y", "40",
                           "exec " + " ".join(argv)], env=env, check=True)
    pid = tpid = None
    try:
        time.sleep(0.5)
        pid = int(subprocess.run(tmux + ["list-panes", "-t", "b", "-F", "#{pane_pid}"],
                                 capture_output=True, text=True, check=True).stdout.split()[0])
        time.sleep(WARM)
        tpid = top_pid(pid)
        return probe(pid, secs)
    finally:
        if pid:
            try:
                os.kill(tpid or pid, signal.SIGINT)  # top ends; strace writes its summary
            except OSError:
                pass
            for _ in range(50):
                if not os.path.exists("/proc/%d" % pid):
                    break
                time.sleep(0.1)
        subprocess.run(tmux + ["kill-server"], stderr=subprocess.DEVNULL)
        for p in (tpid, pid):  # nothing left behind, whatever the signal did
            if p and os.path.exists("/proc/%d" % p):
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass


def top_pid(pid):
    """The gpuscope process: pid itself, or strace's child."""
    for _ in range(50):
        try:
            with open("/proc/%d/comm" % pid) as f:
                if f.read().strip() != "strace":
                    return pid
            kids = open("/proc/%d/task/%d/children" % (pid, pid)).read().split()
            if kids:
                return int(kids[0])
        except OSError:
            pass
        time.sleep(0.1)
    return pid


def smaps(pid, secs):
    pid = top_pid(pid)
    groups = collections.Counter()
    name = None
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                name = parts[5] if len(parts) > 5 else "[anon]"
                name = os.path.basename(name) if name.startswith("/") else name
            elif line.startswith("Rss:"):
                groups[name] += int(line.split()[1])
    roll = {}
    with open("/proc/%d/smaps_rollup" % pid) as f:
        for line in f:
            m = re.match(r"^(\w+):\s+(\d+) kB", line)
            if m:
                roll[m.group(1)] = int(m.group(2))
    with open("/proc/%d/status" % pid) as f:
        threads = [l.split()[1] for l in f if l.startswith("Threads:")][0]
    print("| mapping | RSS KiB |\n|---|---|")
    for k, v in groups.most_common():
        if v:
            print("| %s | %d |" % (k, v))
    print("\nsmaps_rollup: Rss %d KiB, Pss %d, Anonymous %d, file-backed %d (Shared_Clean %d, "
          "Private_Clean %d), Private_Dirty %d; %s threads" % (
              roll["Rss"], roll["Pss"], roll["Anonymous"], roll["Rss"] - roll["Anonymous"],
              roll["Shared_Clean"], roll["Private_Clean"], roll["Private_Dirty"], threads))


def main():
    a = sys.argv[1:]
    if not a:
        sys.exit(__doc__)
    build = os.path.abspath(a[0])
    secs = float(a[1]) if len(a) > 1 else 20.0
    what = a[2] if len(a) > 2 else "both"
    sleepers = [subprocess.Popen(["sleep", "3600"], start_new_session=True) for _ in range(64)]
    tmp = tempfile.mkdtemp(prefix="gs-top-prof.")
    sim = os.path.join(build, "sim")
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=os.path.join(sim, "libnvidia-ml.so.1"),
               NVML_SIM_SCENARIO=SCEN, GPUSCOPE_HTTP_SOCKET="off", TERM="screen-256color",
               LANG="C.UTF-8", XDG_CONFIG_HOME=tmp, XDG_RUNTIME_DIR=tmp, XDG_STATE_HOME=tmp)
    env.pop("LD_LIBRARY_PATH", None)
    for i, p in enumerate(sleepers):
        env["GS_BENCH_PID_%d" % i] = str(p.pid)
    top = [os.path.join(build, "gpuscope"), "top", "--no-save", "-d", "1"]
    try:
        if what in ("smaps", "both"):
            tmux_run(top, env, secs, smaps)
        if what in ("strace", "both"):
            out = os.path.join(tmp, "strace.txt")
            t = {}

            def wait(pid, s):
                t[0] = time.monotonic()
                time.sleep(s)
                t[1] = time.monotonic()

            # -c counts from the start: warm-up and start-up included, so run twice and subtract
            tmux_run(["strace", "-f", "-c", "-o", out] + top, env, secs, wait)
            long_run = open(out).read()
            tmux_run(["strace", "-f", "-c", "-o", out] + top, env, 0, wait)
            short_run = open(out).read()

            def calls(text):
                c = {}
                for line in text.splitlines():
                    p = line.split()
                    if len(p) >= 5 and p[-1] != "total" and p[3].isdigit():
                        c[p[-1]] = int(p[3])
                    elif len(p) >= 6 and p[-1] != "total" and p[4].isdigit():
                        c[p[-1]] = int(p[4])
                return c
            lc, sc = calls(long_run), calls(short_run)
            print("\nsystem calls per second (-d 1: per frame), steady state over %.0f s:" % secs)
            print("| call | per frame |\n|---|---|")
            tot = 0
            for k in sorted(lc, key=lambda k: -(lc[k] - sc.get(k, 0))):
                d = (lc[k] - sc.get(k, 0)) / secs
                tot += d
                if d >= 0.05:
                    print("| %s | %.1f |" % (k, d))
            print("| total | %.1f |" % tot)
            wout = os.path.join(tmp, "writes.txt")
            w = {}

            def wall(pid, s):
                w[0] = time.time()
                time.sleep(s)
                w[1] = time.time()
            tmux_run(["strace", "-f", "-ttt", "-e", "trace=write", "-e", "signal=none", "-o",
                      wout] + top, env, secs, wall)
            n = b = 0
            for line in open(wout):
                m = re.search(r"^\d+\s+([\d.]+) write\(1, .*= (\d+)$", line)
                if m and w[0] <= float(m.group(1)) < w[1]:
                    n += 1
                    b += int(m.group(2))
            print("\nterminal writes in the steady state: %.2f writes, %.0f bytes per second "
                  "(-d 1: per frame)" % (n / secs, b / secs))
    finally:
        for p in sleepers:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
