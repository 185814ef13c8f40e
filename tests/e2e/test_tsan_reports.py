#!/usr/bin/env python3
"""The ThreadSanitizer build's last test (tests/meson.build): every report that TSan wrote
(TSAN_OPTIONS log_path=PREFIX: one file PREFIX.<pid> per process that raced) is a failure, its
text shown. An agent started by an end-to-end test writes its stderr to a pipe the test may
never read, so a race there would otherwise pass unseen. `make test` removes old reports before
the run.

Usage: test_tsan_reports.py PREFIX
"""
import glob
import sys

from tap import Tap


def main():
    prefix = sys.argv[1]
    t = Tap()
    reports = []
    for path in sorted(glob.glob(glob.escape(prefix) + ".*")):
        with open(path, encoding="utf-8", errors="replace") as f:
            reports.append((path, f.read()))
    for path, text in reports:
        first = next((row for row in text.splitlines() if "ThreadSanitizer" in row), "report")
        t.ok(False, "%s: %s" % (path, first.strip("= ")), detail=text[:20000])
    if not reports:
        t.ok(True, "no ThreadSanitizer reports (%s.*)" % prefix)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
