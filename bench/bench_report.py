#!/usr/bin/env python3
"""`gpuscope report` and `gpuscope compare` on a large synthetic run (issue 15).

    bench/bench_report.py BUILD_DIR [STEPS] [HOURS] [GPUS]

Makes a run directory the way `gpuscope run` leaves one (metrics_report.json, steps.jsonl with
STEPS step records and a log record every 10 steps, samples.db with one sample per GPU per
second for HOURS over GPUS GPUs, written through sqlite3 into a history file that
`gpuscope run` made), then times `gpuscope report DIR` (5 runs, wall and peak RSS from
/usr/bin/time) and reports the page's size. Defaults: 100000 steps, 2 h, 8 GPUs.
"""
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
hours = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
ngpu = int(sys.argv[4]) if len(sys.argv) > 4 else 8
BIN = os.path.join(build, "gpuscope")
random.seed(1)

with tempfile.TemporaryDirectory() as tmp:
    # an empty history file made by gpuscope run itself (its schema, application_id)
    seed = os.path.join(tmp, "seed")
    subprocess.run([BIN, "run", "--out", seed, "--no-auto", "--", "true"],
                   capture_output=True, check=True,
                   env=dict(os.environ, GPUSCOPE_NVML_LIBRARY="/nonexistent"))
    d = os.path.join(tmp, "run")
    os.mkdir(d)
    shutil.copy(os.path.join(seed, "samples.db"), os.path.join(d, "samples.db"))
    t0 = 1764430000.0
    dur = hours * 3600
    db = sqlite3.connect(os.path.join(d, "samples.db"))
    rows = []
    for s in range(int(dur)):
        for g in range(ngpu):
            rows.append(((int((t0 + s) * 1000)) * 256 + g, random.randint(60, 99) / 100,
                         40e9 + random.random() * 1e9, 300 + random.random() * 100,
                         60 + random.randint(0, 10)))
    db.executemany("INSERT INTO sample (id, utilization_gpu, memory_used, power_draw, "
                   "temperature_gpu) VALUES (?, ?, ?, ?, ?)", rows)
    db.commit()
    db.close()
    per = dur / steps
    with open(os.path.join(d, "steps.jsonl"), "w") as f:
        for i in range(steps):
            b = t0 + i * per
            f.write(json.dumps({"peer_pid": 1, "peer_uid": 0, "conn": 1, "v": 1, "type": "step",
                                "step": i + 1, "t0": b + per * 0.1, "t1": b + per, "rank": 0,
                                "device": 0, "samples": 8,
                                "ms": {"data": per * 100, "forward": per * 400,
                                       "backward": per * 300, "optimizer_step": per * 100,
                                       "other": per * 100, "total_step": per * 900}}) + "\n")
            if i % 10 == 0:
                f.write(json.dumps({"v": 1, "type": "log", "step": i + 1, "t": b,
                                    "values": {"loss": 2.0 / (1 + i / 1000),
                                               "learning_rate": 1e-4}}) + "\n")
    rep = {"schema": "1.0", "train_runtime": dur, "steps": steps, "ranks": 1,
           "data_loading_time_ratio": 0.1,
           "phases": {"data": {"mean_ms": per * 100, "p50_ms": per * 100, "p95_ms": per * 100,
                               "total_ms": dur * 100, "count": steps}},
           "gpus": [{"index": g, "name": "NVIDIA H100 80GB HBM3"} for g in range(ngpu)],
           "run": {"name": "bench", "start_time": t0, "end_time": t0 + dur,
                   "steps_from": t0, "steps_to": t0 + dur},
           "findings": []}
    with open(os.path.join(d, "metrics_report.json"), "w") as f:
        json.dump(rep, f)
    size_in = {n: os.path.getsize(os.path.join(d, n)) for n in os.listdir(d)}
    walls, rss = [], []
    for _ in range(5):
        a = time.perf_counter()
        p = subprocess.run(["/usr/bin/time", "-f", "%M", BIN, "report", "-o",
                            os.path.join(tmp, "r.html"), d], capture_output=True, text=True,
                           check=True)
        walls.append(time.perf_counter() - a)
        rss.append(int(p.stderr.strip().splitlines()[-1]))
    print("input: %d steps, %d log records, %d samples (%d GPUs x %.1f h at 1 s); files %s"
          % (steps, (steps + 9) // 10, int(dur) * ngpu, ngpu, hours,
             ", ".join("%s %.1f MB" % (k, v / 1e6) for k, v in sorted(size_in.items()))))
    print("gpuscope report: median %.2f s wall (min %.2f, max %.2f) over 5 runs, peak RSS %.1f MB"
          % (statistics.median(walls), min(walls), max(walls), max(rss) / 1024))
    print("page: %d bytes" % os.path.getsize(os.path.join(tmp, "r.html")))
