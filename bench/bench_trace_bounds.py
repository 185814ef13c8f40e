#!/usr/bin/env python3
"""Time and memory of `gpuscope trace analyze` on adversarial traces (issue 24 items 10, 11):
one event whose name is a string of N MiB (the parser must stay linear: yajl alone lexes a
token that a chunk cuts again from its start with every chunk), 2 M `ProfilerStep#N` events
with no GPU activity, and 3 M distinct CPU op names (both must stay in bounded tables: memory
grows with GPU activities only). Each trace is written into $TMPDIR, analysed RUNS times
(default 3) under /usr/bin/time, and deleted; the table gives the median wall time, the
spread (min-max), the median CPU time and the largest peak RSS.

usage: bench/bench_trace_bounds.py [BUILD_DIR] [OLD_GPUSCOPE]
  OLD_GPUSCOPE: another build's binary measured side by side (e.g. main's), optional.
"""
import os
import statistics
import subprocess
import sys
import tempfile

RUNS = int(os.environ.get("RUNS", "3"))


def write_long_string(path, mib):
    with open(path, "w") as f:
        f.write('{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "')
        chunk = "x" * (1 << 20)
        for _ in range(mib):
            f.write(chunk)
        f.write('", "ts": 1, "dur": 2}, {"ph": "X", "cat": "cpu_op", "name": "aten::mm", '
                '"ts": 3, "dur": 4}]}')


def write_steps(path, n):
    with open(path, "w", buffering=1 << 20) as f:
        f.write('{"traceEvents": [\n')
        for i in range(n):
            f.write('{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", '
                    '"ts": %d, "dur": 90},\n' % (i, i * 100))
        f.write('{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1}]}\n')


def write_ops(path, n):
    with open(path, "w", buffering=1 << 20) as f:
        f.write('{"traceEvents": [\n')
        for i in range(n):
            f.write('{"ph": "X", "cat": "cpu_op", "name": "aten::op_%d_with_a_longer_name", '
                    '"ts": %d, "dur": %d},\n' % (i, i * 10, 1 + i % 7))
        f.write('{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 100000}]}\n')


def measure(binary, path):
    walls, cpus, rss = [], [], 0
    with tempfile.NamedTemporaryFile("r") as tf:
        for _ in range(RUNS):
            r = subprocess.run(["/usr/bin/time", "-f", "%e %U %S %M", "-o", tf.name, binary,
                                "trace", "analyze", "--json", path],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               timeout=900)
            if r.returncode != 0:
                return "exit %d: %s" % (r.returncode, r.stderr.strip()[:80])
            tf.seek(0)
            e, u, s, m = tf.read().split()[-4:]
            walls.append(float(e))
            cpus.append(float(u) + float(s))
            rss = max(rss, int(m))
    return "%.2f (%.2f-%.2f) | %.2f | %.1f" % (statistics.median(walls), min(walls), max(walls),
                                              statistics.median(cpus), rss / 1024)


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    bins = [("this build", os.path.join(build, "gpuscope"))]
    if len(sys.argv) > 2:
        bins.append(("other", sys.argv[2]))
    cases = [
        ("name of 4 MiB", write_long_string, 4),
        ("name of 16 MiB", write_long_string, 16),
        ("name of 64 MiB", write_long_string, 64),
        ("2 M ProfilerStep events, no GPU activity", write_steps, 2_000_000),
        ("3 M distinct CPU op names", write_ops, 3_000_000),
    ]
    only = os.environ.get("CASES")
    print("| trace | size MB | binary | wall s (median of %d, min-max) | CPU s | peak RSS MiB |"
          % RUNS)
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="gs-bench-bounds.") as d:
        for i, (label, gen, n) in enumerate(cases):
            if only and str(i) not in only.split(","):
                continue
            path = os.path.join(d, "t.json")
            gen(path, n)
            mb = os.path.getsize(path) / 1e6
            for name, b in bins:
                print("| %s | %.0f | %s | %s |" % (label, mb, name, measure(b, path)), flush=True)
            os.unlink(path)


if __name__ == "__main__":
    main()
