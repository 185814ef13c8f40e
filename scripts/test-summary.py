#!/usr/bin/env python3
"""Counts TAP results in one or more meson test logs and prints the closing line.

Usage: test-summary.py BUILD_DIR [BUILD_DIR...]
Each meson test speaks TAP (cmocka via CMOCKA_MESSAGE_OUTPUT=TAP, Python via tests/e2e/tap.py);
meson keeps each test's stdout in meson-logs/testlog.json. A test program that crashed or
timed out before printing its plan counts as one failure, so a crash is never silent.
Exits 1 when anything failed or nothing ran.
"""
import json
import re
import sys

OK = re.compile(r"^ok\b")
NOT_OK = re.compile(r"^not ok\b")
SKIP = re.compile(r"#\s*skip", re.IGNORECASE)
PLAN = re.compile(r"^1\.\.\d+\s*$", re.MULTILINE)


def tally(name, out, failures):
    """Counts the TAP lines of one test's output: (passed, failed, skipped)."""
    p = f = s = 0
    for row in out.splitlines():
        row = row.strip()
        if NOT_OK.match(row):
            f += 1
            failures.append(f"{name}: {row}")
        elif OK.match(row):
            if SKIP.search(row):
                s += 1
            else:
                p += 1
    return p, f, s


def count_tap_file(path):
    failures = []
    try:
        with open(path, encoding="utf-8", errors="replace") as tap:
            out = tap.read()
    except OSError as e:
        return 0, 1, 0, [f"{path}: no results ({e.strerror})"]
    p, f, s = tally(path, out, failures)
    if not PLAN.search(out):
        f += 1
        failures.append(f"{path}: no TAP plan (the run did not finish)")
    return p, f, s, failures


def count(build_dir):
    if build_dir.endswith(".tap"):
        return count_tap_file(build_dir)
    passed = failed = skipped = 0
    failures = []
    with open(f"{build_dir}/meson-logs/testlog.json", encoding="utf-8") as log:
        for line in log:
            rec = json.loads(line)
            out = rec.get("stdout", "") or ""
            p, f, s = tally(rec["name"], out, failures)
            if rec.get("result") not in ("OK", "EXPECTEDFAIL", "SKIP") and f == 0:
                f += 1
                failures.append(f"{rec['name']}: {rec.get('result')} (exit {rec.get('returncode')})")
            passed, failed, skipped = passed + p, failed + f, skipped + s
    return passed, failed, skipped, failures


def main():
    total_p = total_f = total_s = 0
    for d in sys.argv[1:]:
        p, f, s, failures = count(d)
        print(f"{d}: {p} passed, {f} failed, {s} skipped")
        for row in failures:
            print(f"  FAILED {row}")
        total_p, total_f, total_s = total_p + p, total_f + f, total_s + s
    line = f"{total_p} passed, {total_f} failed"
    if total_s:
        line += f", {total_s} skipped"
    print(line)
    return 1 if total_f or total_p == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
