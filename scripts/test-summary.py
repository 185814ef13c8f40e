#!/usr/bin/env python3
"""Counts TAP results in one or more meson test logs and prints the closing line.

Usage: test-summary.py BUILD_DIR [BUILD_DIR...]
Each meson test speaks TAP (cmocka via CMOCKA_MESSAGE_OUTPUT=TAP, Python via tests/e2e/tap.py);
meson keeps each test's stdout in meson-logs/testlog.json. A test program that crashed or
timed out before printing its plan counts as one failure, so a crash is never silent.
Then one more check, "no process left by the tests": every process the tests started carries
GPUSCOPE_TEST_RUN=<its build directory> (tests/meson.build, tests/e2e/gsenv.py); any such
process still running is a failure, listed with its pid and command line, and then killed.
Exits 1 when anything failed or nothing ran.
"""
import json
import os
import re
import signal
import sys
import time

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


def left_by_tests(build_dirs):
    """[(pid, command line)] of the processes whose environment has GPUSCOPE_TEST_RUN naming one
    of build_dirs."""
    runs = {os.path.realpath(d).encode() for d in build_dirs}
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue  # gone, or not ours to read
        for entry in env:
            if entry.startswith(b"GPUSCOPE_TEST_RUN=") and \
                    os.path.realpath(entry.split(b"=", 1)[1]) in runs:
                left.append((int(pid), cmd or "[zombie]"))
                break
    return left


def kill_left(left, grace=2.0):
    """SIGTERM to each process of left, SIGKILL to those still there after grace seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, _ in left:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        end = time.monotonic() + grace
        while sig == signal.SIGTERM and time.monotonic() < end and \
                any(os.path.exists(f"/proc/{pid}") for pid, _ in left):
            time.sleep(0.05)


def check_left(build_dirs):
    """The closing TAP check: (passed, failed)."""
    left = left_by_tests(build_dirs)
    if not left:
        print("ok - no process left by the tests")
        return 1, 0
    print(f"not ok - no process left by the tests: {len(left)} left (killed now)")
    for pid, cmd in left:
        print(f"#   {pid} {cmd[:200]}")
    kill_left(left)
    return 0, 1


def main():
    total_p = total_f = total_s = 0
    for d in sys.argv[1:]:
        p, f, s, failures = count(d)
        print(f"{d}: {p} passed, {f} failed, {s} skipped")
        for row in failures:
            print(f"  FAILED {row}")
        total_p, total_f, total_s = total_p + p, total_f + f, total_s + s
    p, f = check_left([d for d in sys.argv[1:] if not d.endswith(".tap")])
    total_p, total_f = total_p + p, total_f + f
    line = f"{total_p} passed, {total_f} failed"
    if total_s:
        line += f", {total_s} skipped"
    print(line)
    return 1 if total_f or total_p == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
