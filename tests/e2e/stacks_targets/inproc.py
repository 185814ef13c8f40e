"""The in-process sampler (gpuscope.stacks) on this interpreter: argv[1] "api" starts it by
hand and writes argv[2]; "auto" relies on GPUSCOPE_STACKS_INPROC (the package starts it at
import and writes $GPUSCOPE_RUN_DIR/stacks-inproc-PID.txt at exit)."""
import sys
import time

import gpuscope  # noqa: F401  (auto mode: starts the sampler)
import gpuscope.stacks


def hot_inproc(sec):
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < sec:
        n += 1
    return n


def cold_inproc(sec):
    time.sleep(sec)


if sys.argv[1] == "api":
    s = gpuscope.stacks.start(rate=200)
    hot_inproc(1.0)
    cold_inproc(0.3)
    s.write(sys.argv[2])
    s.write(sys.argv[2] + ".svg")
    print(s.samples)
    s.stop()
else:
    hot_inproc(1.0)
