#!/usr/bin/env python3
"""Cost of `gpuscope stacks` on a CPU-bound Python loop (issue 12's targets: sampling at
100 Hz slows the loop by < 1 % and costs the sampler < 2 % of one core), and the time of one
stack read (build/bench/bench_stacks on a 32-frame stack).

Usage: bench/bench_stacks.py [BUILD_DIR] [TRIALS]   (default build, 7)

Each trial starts /usr/bin/python3 running a fixed amount of pure-Python work (the "step")
and times it with its own perf_counter; sampled trials attach `gpuscope stacks PID --record
-o /dev/null --rate 100` for the whole step, whose CPU time comes from wait4's rusage.
Baseline and sampled trials alternate; the medians are compared."""
import os
import signal
import statistics
import subprocess
import sys
import time

BUILD, TRIALS, BIN = "build", 7, None
PY = "/usr/bin/python3"
WORK = r'''
import sys, time
def inner(i):
    return i * i % 7
def step(n):
    s = 0
    for i in range(n):
        s += inner(i)
    return s
def deep(k, n):
    return step(n) if k == 0 else deep(k - 1, n)
print("ready", flush=True)
sys.stdin.readline()
t, c = time.perf_counter(), time.process_time()
for _ in range(60):
    deep(20, 150000)
print(time.perf_counter() - t, time.process_time() - c, flush=True)
'''


def gpuscope_sampler(pid):
    return [BIN, "stacks", str(pid), "--record", "-o", "/dev/null", "--rate", "100"]


def trial(sampler):
    """One run of the loop: (loop wall s, loop CPU s, sampler CPU s, sampler wall s); sampler:
    None (baseline) or a function of the target's pid giving the sampler's argv, attached for
    the whole loop and stopped with SIGINT (bench/issue25.py passes austin's too)."""
    p = subprocess.Popen([PY, "-c", WORK], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    assert p.stdout.readline().strip() == "ready"
    s = None
    if sampler:
        s = subprocess.Popen(sampler(p.pid), stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        time.sleep(0.3)
    t0 = time.monotonic()
    p.stdin.write("\n")
    p.stdin.flush()
    elapsed, cpu_loop = map(float, p.stdout.readline().split())
    cpu = wall = None
    if s:
        wall = time.monotonic() - t0 + 0.3
        s.send_signal(signal.SIGINT)
        _, _, ru = os.wait4(s.pid, 0)
        s.returncode = 0
        cpu = ru.ru_utime + ru.ru_stime
    p.wait()
    return elapsed, cpu_loop, cpu, wall


def main():
    global BUILD, TRIALS, BIN
    BUILD = sys.argv[1] if len(sys.argv) > 1 else "build"
    TRIALS = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    BIN = os.path.join(BUILD, "gpuscope")
    base, samp, bcpu, scpu, share = [], [], [], [], []
    trial(None)  # warm the page cache
    for _ in range(TRIALS):
        e, c, _, _ = trial(None)
        base.append(e)
        bcpu.append(c)
        e, c, cpu, wall = trial(gpuscope_sampler)
        samp.append(e)
        scpu.append(c)
        share.append(cpu / wall)
    mb, ms = statistics.median(base), statistics.median(samp)
    cb, cs = statistics.median(bcpu), statistics.median(scpu)
    print("loop wall: baseline median %.3f s, sampled at 100 Hz median %.3f s -> %+.2f %% "
          "(trials %d; baseline spread %.1f %%)" % (mb, ms, 100 * (ms / mb - 1), TRIALS,
                                                   100 * (max(base) - min(base)) / mb))
    print("loop CPU:  baseline median %.3f s, sampled median %.3f s -> %+.2f %% "
          "(baseline spread %.1f %%)" % (cb, cs, 100 * (cs / cb - 1),
                                        100 * (max(bcpu) - min(bcpu)) / cb))
    print("sampler: median %.2f %% of one core (max %.2f %%)" %
          (100 * statistics.median(share), 100 * max(share)))
    p = subprocess.Popen([PY, "-c", "import sys\ndef r(n):\n    if n == 0:\n        while True: pass\n"
                          "    return r(n - 1)\nprint('ready', flush=True)\nr(30)"],
                         stdout=subprocess.PIPE, text=True)
    p.stdout.readline()
    out = subprocess.run([os.path.join(BUILD, "bench", "bench_stacks"), str(p.pid), "5000"],
                         capture_output=True, text=True)
    p.kill()
    p.wait()
    print("one read: " + (out.stdout.strip() or out.stderr.strip()))


if __name__ == "__main__":
    main()
