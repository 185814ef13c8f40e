#!/usr/bin/env python3
"""Runs one cmocka test program and passes its TAP output through, with one correction.

cmocka 1.1.5 (Debian 12) writes a skipped test as `not ok N # SKIP reason`; the TAP
specification's skip is `ok N # SKIP reason`, and meson's TAP reader and
scripts/test-summary.py count a `not ok` as a failure whatever its directive. So a test that
skips for a stated reason (no root, no nvml-sim, a node agent present) would fail the run.
Everything else, the exit status included, is the program's own.

Usage: cmocka-tap.py PROGRAM [ARGS...]
"""
import re
import signal
import subprocess
import sys

SKIP = re.compile(rb"^not ok (\d+)(\s+-)?\s*# SKIP", re.IGNORECASE)


def main():
    child = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE)

    def forward(signum, _frame):
        child.send_signal(signum)

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, forward)
    out = sys.stdout.buffer
    for line in child.stdout:
        out.write(SKIP.sub(rb"ok \1 # SKIP", line))
        out.flush()
    rc = child.wait()
    sys.exit(rc if rc >= 0 else 128 - rc)


if __name__ == "__main__":
    main()
