#!/usr/bin/env python3
"""`gpuscope tune`'s own cost per trial (issue 28): start-up and teardown against the trial's
length, on real PyTorch (CPU).

Usage: bench/tune_overhead.py BUILD_DIR [REPEATS]

For window lengths of 20, 100 and 400 steps (warmup 5) of tests/python/tune/loop.py in its
data-bound mode (4 ms per sample, batches of 8, num_workers=0), REPEATS times (default 3)
each: `gpuscope tune --only-try` (the baseline trial alone: the loop as it is, so that the bare
run below does the same work). Per trial, from
tune.json and the trial's steps.jsonl: the trial's whole time (tune's fork to its end),
start-up (fork to the first step's begin: `gpuscope run`, Python, torch, the package),
the steps (first step's begin to the last step's end: warmup, window, the few steps the
package sent before the stop), after the last step (the stop: SIGTERM to the group, the
report, exit). Beside it: the same loop run bare for the same number of steps (python3
loop.py, no gpuscope), and `python3 -c "import torch"`, both timed from outside. Medians
over the repeats; prints a Markdown table for bench/RESULTS.md.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOOP = os.path.join(ROOT, "tests", "python", "tune", "loop.py")
PY = "/usr/bin/python3"


def wall(cmd, env):
    t0 = time.monotonic()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return time.monotonic() - t0


def main():
    build = os.path.abspath(sys.argv[1])
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    gs = os.path.join(build, "gpuscope")
    env = dict(os.environ, NO_COLOR="1", OMP_NUM_THREADS="1",
               PYTHONPATH=os.path.join(build, "python"))
    env.pop("GPUSCOPE_TUNE", None)
    tmp = tempfile.mkdtemp(prefix="gs-bench-tune-")
    imp = statistics.median(wall([PY, "-c", "import torch"], env) for _ in range(reps))
    print("| window steps | trial s | start-up s | steps s | after last step s | "
          "overhead (start-up + after) | bare loop s (same steps) | spread of trial s |")
    print("|---|---|---|---|---|---|---|---|")
    for steps in (20, 100, 400):
        tot, start, run, after = [], [], [], []
        for r in range(reps):
            out = os.path.join(tmp, "w%d-%d" % (steps, r))
            subprocess.run([gs, "tune", "--out", out, "--steps", str(steps), "--warmup", "5",
                            "--only-try", "--", PY, LOOP, "data",
                            "1000000"], env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, check=True)
            doc = json.load(open(os.path.join(out, "tune.json")))
            for t in doc["trials"]:
                tot.append(t["seconds"])
                start.append(t["startup_seconds"])
                after.append(t["after_last_step_seconds"])
                run.append(t["seconds"] - t["startup_seconds"] - t["after_last_step_seconds"])
        bare = statistics.median(wall([PY, LOOP, "data", str(steps + 5)], env)
                                 for _ in range(reps))
        m = statistics.median
        print("| %d | %.2f | %.2f | %.2f | %.2f | %.0f %% | %.2f | %.2f-%.2f |"
              % (steps, m(tot), m(start), m(run), m(after),
                 100 * (m(start) + m(after)) / m(tot), bare, min(tot), max(tot)))
    print("\n`python3 -c 'import torch'`: %.2f s (median of %d)" % (imp, reps))
    shutil.rmtree(tmp, True)


if __name__ == "__main__":
    main()
