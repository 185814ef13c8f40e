"""gpuscope trace analyze on the real Kineto traces of ../shared/reference/kineto-traces/: every
number of that folder's README (Holistic Trace Analysis 0.6.1's results) must come out of
`--json` (microsecond sums equal, percentages within 0.1 points, ratios within their rounding),
plus the text tables, the legacy CPU-only format, a directory argument, the job's stragglers
by the leave-one-out rule (generated two-rank traces), malformed input
(`file:offset: what`, exit status 2, never a crash) and a generated trace past the bounded
tables (3000 profiler steps, 10,000 op names, a 3 MiB name)."""
import gzip
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from gsenv import BIN, SRC  # noqa: E402
from tap import Tap  # noqa: E402

t = Tap()
REF = os.path.join(SRC, "..", "shared", "reference", "kineto-traces")
README = os.path.join(REF, "README.md")
R0_GZ = os.path.join(REF, "two-ranks-rank-0.json.gz")


def analyze(*args, ok=True):
    p = subprocess.run([BIN, "trace", "analyze", *args], capture_output=True, text=True,
                       timeout=120)
    if ok and p.returncode != 0:
        raise RuntimeError("gpuscope trace analyze %s: %d %s" % (args, p.returncode, p.stderr))
    return p


def num(s):
    s = s.strip().strip("`")
    return None if s == "nan" else float(s)


def tables(text):
    """The markdown tables of a README section, each as a list of rows (lists of cells),
    keyed by the sentence before it."""
    out = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("|---"):
            title = ""
            for j in range(i - 1, -1, -1):
                if lines[j].strip():
                    title = lines[j]
                    break
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            out[title] = rows
        else:
            i += 1
    return out


def close(got, want, tol):
    if want is None:
        return got is None
    return got is not None and abs(got - want) <= tol


def check_section(files, text):
    paths = [os.path.join(REF, f) for f in files]
    doc = json.loads(analyze("--json", *paths).stdout)
    ranks = {r["rank"]: r for r in doc["ranks"]}
    label = ", ".join(files)
    tabs = tables(text)
    n = 0
    for title, rows in tabs.items():
        if "get_temporal_breakdown" in title:
            for row in rows:
                r = ranks[int(row[0])]["temporal"]
                for k, v in zip(("idle_us", "compute_us", "non_compute_us", "kernel_span_us"),
                                row[1:5]):
                    t.eq(r[k], int(v), "%s rank %s temporal %s" % (label, row[0], k))
                for k, v in zip(("idle_pct", "compute_pct", "non_compute_pct"), row[5:8]):
                    t.ok(close(r[k], num(v), 0.1), "%s rank %s temporal %s %s" % (label, row[0], k, v),
                         detail="got %r" % r[k])
                n += 1
        elif "get_gpu_kernel_breakdown(include_memory_kernels" in title:
            got = {x["type"]: x for x in doc["job"]["kernel_types"]}
            t.eq(sorted(got), sorted(r[0] for r in rows), "%s kernel types: the same rows" % label)
            for row in rows:
                g = got.get(row[0], {"sum_us": None, "pct": None})
                t.eq(g["sum_us"], int(row[1]), "%s kernel type %s sum" % (label, row[0]))
                t.ok(close(g["pct"], num(row[2]), 0.1), "%s kernel type %s %% %s" % (label, row[0], row[2]),
                     detail="got %r" % g["pct"])
            n += 1
        elif "get_idle_time_breakdown" in title:
            by_rank = {}
            for row in rows:
                by_rank.setdefault(int(row[0]), []).append(row)
            for rk, rws in by_rank.items():
                got = {(x["stream"], x["cause"]): x for x in ranks[rk]["idle_by_stream"]}
                t.eq(sorted(got), sorted((int(r[1]), r[2]) for r in rws),
                     "%s rank %d idle: the same (stream, cause) rows" % (label, rk))
                for row in rws:
                    g = got.get((int(row[1]), row[2]), {"idle_us": None, "ratio": None})
                    t.eq(g["idle_us"], int(row[3]), "%s rank %d stream %s %s idle" % (label, rk, row[1], row[2]))
                    t.ok(close(g["ratio"], num(row[4]), 0.005 + 1e-9),
                         "%s rank %d stream %s %s ratio %s" % (label, rk, row[1], row[2], row[4]),
                         detail="got %r" % g["ratio"])
            n += 1
        elif "get_gpu_kernel_breakdown(num_kernels" in title:
            for row in rows:
                rk, typ, name = int(row[0]), row[1], row[2].strip("`")
                cands = [k for k in ranks[rk]["top_kernels"] if k["type"] == typ and
                         (k["name"] == "others" if name == "others" else k["name"][:90] == name)]
                t.eq(len(cands), 1, "%s rank %d %s kernel %s: one row" % (label, rk, typ, name[:40]))
                if cands:
                    t.eq(cands[0]["sum_us"], int(row[3]), "%s rank %d kernel %s sum" % (label, rk, name[:40]))
                    t.ok(close(cands[0]["mean_us"], num(row[4]), 0.05 + 1e-9),
                         "%s rank %d kernel %s mean %s" % (label, rk, name[:40], row[4]),
                         detail="got %r" % cands[0]["mean_us"])
            n += 1
    for m in re.finditer(r"rank (\d+): ([0-9.]+|nan) %", text):
        g = ranks[int(m.group(1))]["comm_comp_overlap_pct"]
        t.ok(close(g, num(m.group(2)), 0.1), "%s rank %s comm/comp overlap %s %%" % (label, m.group(1), m.group(2)),
             detail="got %r" % g)
        n += 1
    t.eq(n >= 5, True, "%s: all five figures found in the README" % label)
    return doc


def readme_sections():
    text = open(README).read()
    parts = re.split(r"^## ", text, flags=re.M)[1:]
    for p in parts:
        head, _, body = p.partition("\n")
        files = [f.strip(" `") for f in head.split(",")]
        if all(f.endswith(".json.gz") for f in files):
            yield files, body


if not os.path.isfile(README):
    t.skip("reference traces", "../shared/reference/kineto-traces is absent")
    sys.exit(t.done())

sections = list(readme_sections())
t.eq(len(sections), 4, "README: four sections of reference traces")
for files, body in sections:
    check_section(files, body)

# Text tables: headings and aligned rows, no colour into a pipe.
p = analyze(os.path.join(REF, "alexnet-idle.json.gz"))
t.ok("temporal breakdown" in p.stdout and "idle time by stream and cause" in p.stdout
     and "\x1b[" not in p.stdout, "text: tables, no colour into a pipe", detail=p.stdout[:400])
t.ok(re.search(r"^idle\s+12929684\s+99\.49$", p.stdout, re.M) is not None, "text: the idle row",
     detail=p.stdout[:400])
adv = json.loads(analyze("--json", "--advice", os.path.join(REF, "alexnet-idle.json.gz")).stdout)
t.eq(sorted(f["id"] for f in adv.get("findings", [])), ["profile_host_wait", "profile_htod"],
     "--advice: alexnet's findings (HtoD copies, host wait)")
p = analyze("--advice", os.path.join(REF, "alexnet-idle.json.gz"))
t.ok("profile_htod" in p.stdout and "Memcpy HtoD (Pageable -> Device)" in p.stdout,
     "--advice text: the finding quotes the kernel", detail=p.stdout[-600:])
hm = analyze("--help")
t.ok("usage: gpuscope trace analyze" in hm.stdout and hm.returncode == 0, "--help")

with tempfile.TemporaryDirectory() as d:
    # A directory: every trace in it, ranks from distributedInfo.
    for f in ("two-ranks-rank-0.json.gz", "two-ranks-rank-1.json.gz"):
        os.symlink(os.path.join(REF, f), os.path.join(d, f))
    doc = json.loads(analyze("--json", d).stdout)
    t.eq([r["rank"] for r in doc["ranks"]], [0, 1], "a directory: both ranks")
    t.eq(len(doc["job"]["stragglers"]), 2, "a directory: stragglers table over two ranks")
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))

    # The job's stragglers by the project's one rule (docs/report.md, STRAGGLER): each rank's
    # compute against the median of the OTHER ranks, 1.15x and 1 ms. Two ranks, rank 1's GEMMs
    # 1.2x rank 0's: +20 % of its peer, a straggler (a median over both would read +9.1 %);
    # 1.1x: no straggler.
    def kineto(path, rank, gemm_us, steps=10):
        ev, ts = [], 1000
        for i in range(steps):
            ev.append({"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn",
                       "ts": ts + 10, "dur": gemm_us, "pid": 0, "tid": 7,
                       "args": {"device": 0, "stream": 7, "correlation": 2 * i + 1}})
            ev.append({"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float",
                       "ts": ts + 20 + gemm_us, "dur": 500, "pid": 0, "tid": 13,
                       "args": {"device": 0, "stream": 13, "correlation": 2 * i + 2}})
            ts += gemm_us + 1000
        with open(path, "w") as f:
            json.dump({"schemaVersion": 1, "distributedInfo": {"rank": rank, "world_size": 2},
                       "traceEvents": ev}, f)

    for slow_us, want in ((12000, [(0, 100000, -16.7, False), (1, 120000, 20.0, True)]),
                          (11000, [(0, 100000, -9.1, False), (1, 110000, 10.0, False)])):
        kineto(os.path.join(d, "r0.json"), 0, 10000)
        kineto(os.path.join(d, "r1.json"), 1, slow_us)
        st = json.loads(analyze("--json", d).stdout)["job"]["stragglers"]
        got = [(s["rank"], s["compute_us"], round(s["compute_vs_others_pct"], 1), s["straggler"])
               for s in st]
        t.eq(got, want, "stragglers, leave-one-out: rank 1 at %.1fx rank 0's compute"
             % (slow_us / 10000))
        if slow_us == 12000:
            txt = analyze(d).stdout
            t.ok(re.search(r"^\s*1\s+120000\s+\+20\.0%.*straggler$", txt, re.M) is not None
                 and "compute > 1.15 x the other ranks' median" in txt,
                 "text: the ranks table names rank 1 a straggler, +20.0% of the others",
                 detail=txt[-600:])
    for f in os.listdir(d):
        os.unlink(os.path.join(d, f))

    # Plain .json, uncompressed; rank from the file name when distributedInfo is absent.
    legacy = [{"name": "ProfilerStep#1", "ph": "X", "ts": 100, "dur": 300, "tid": 1,
               "pid": "CPU functions", "args": {}},
              {"name": "aten::mm", "ph": "X", "ts": 110, "dur": 50, "tid": 1,
               "pid": "CPU functions", "args": {}},
              {"name": "aten::mm", "ph": "X", "ts": 200, "dur": 70, "tid": 1,
               "pid": "CPU functions", "args": {}}]
    lp = os.path.join(d, "worker_rank3.json")
    with open(lp, "w") as f:
        json.dump(legacy, f)
    doc = json.loads(analyze("--json", lp).stdout)
    r = doc["ranks"][0]
    t.eq((r["rank"], r["format"], r["gpu_activities"]), (3, "legacy", 0),
         "legacy CPU-only format: rank from the name, no GPU activity")
    t.ok("CPU-only" in r.get("note", ""), "legacy: says there is no GPU activity", detail=r)
    t.eq([(c["name"], c["count"], c["sum_us"]) for c in r["cpu_ops"]], [("aten::mm", 2, 120.0)],
         "legacy: CPU op totals")
    t.eq([(s["step"], s["cpu_us"]) for s in r["steps"]], [(1, 300)], "legacy: the profiler step")

    # Malformed input: file:offset: what, exit 2, for truncated, not JSON, too deep, no events.
    bad = {
        "trunc.json": b'{"traceEvents": [{"ph": "X", "ts": 1',
        "garbage.json": b'{"traceEvents": [}',
        "deep.json": b'{"traceEvents": [' + b"[" * 100 + b"]" * 100 + b"]}",
        "noevents.json": b'{"schemaVersion": 1}',
        "huge.json": b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1e999, "dur": 1}]}',
        "empty.json": b"",
    }
    for name, data in bad.items():
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data)
        p = analyze(path, ok=False)
        t.ok(p.returncode == 2 and re.match(re.escape(path) + r":\d+: \S", p.stderr.split("gpuscope trace: ", 1)[-1]),
             "malformed %s: file:offset: what, exit 2" % name, detail="%d %s" % (p.returncode, p.stderr))
    # A truncated gzip stream.
    with open(os.path.join(REF, "alexnet-idle.json.gz"), "rb") as f:
        raw = f.read()
    path = os.path.join(d, "cut.json.gz")
    with open(path, "wb") as f:
        f.write(raw[: len(raw) // 2])
    p = analyze(path, ok=False)
    t.ok(p.returncode == 2 and (path + ":") in p.stderr, "truncated gzip: file:offset: what",
         detail="%d %s" % (p.returncode, p.stderr))
    p = analyze(os.path.join(d, "missing.json"), ok=False)
    t.ok(p.returncode != 0 and "missing.json" in p.stderr, "a missing file is named",
         detail=p.stderr)

    # Bounded tables and long names through the command: 3000 profiler steps, 10,000 distinct
    # op names (8192 fit), a 3 MiB name; gzip-compressed, so the inflater reads it too.
    ev = ['{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#%d", "ts": %d, "dur": 90}'
          % (i, i * 100) for i in range(3000)]
    ev += ['{"ph": "X", "cat": "cpu_op", "name": "aten::op_%d", "ts": %d, "dur": 1}' % (i, i)
           for i in range(10000)]
    ev.append('{"ph": "X", "cat": "cpu_op", "name": "%s", "ts": 5, "dur": 7000}' % ("y" * (3 << 20)))
    ev.append('{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 5, "dur": 9000}')
    path = os.path.join(d, "bounded-rank-0.json.gz")
    with gzip.open(path, "wt") as f:
        f.write('{"traceEvents": [%s]}' % ",\n".join(ev))
    r = json.loads(analyze("--json", path).stdout)["ranks"][0]
    t.eq((r["profiler_steps"], len(r["steps"]), r.get("steps_omitted"), r["steps"][-1]["step"]),
         (3000, 1024, 1976, 2999), "3000 steps: the latest 1024 listed, 1976 counted")
    ops = r["cpu_ops"]
    t.eq([(o["name"][:8], o["count"], o["sum_us"]) for o in ops[:2]],
         [("aten::mm", 1, 9000.0), ("yyyyyyyy", 1, 7000.0)], "busiest ops exact past the op table")
    t.eq(len(ops[1]["name"]), 1 << 20, "a 3 MiB name is cut at 1 MiB")
    fold = r.get("cpu_ops_folded") or {}
    t.ok(fold.get("names", 0) > 0 and fold.get("count") == fold.get("names")
         and fold.get("sum_us") == float(fold.get("count")),
         "op names past the table: folded and counted", detail=fold)
    # A pipe is read as a file: plain (zcat | ...) and compressed alike.
    with open(R0_GZ, "rb") as f:
        raw = f.read()
    want = json.loads(analyze("--json", R0_GZ).stdout)["ranks"][0]
    for label, data in (("gzip", raw), ("plain", gzip.decompress(raw))):
        p = subprocess.run([BIN, "trace", "analyze", "--json", "/dev/stdin"], input=data,
                           capture_output=True, timeout=120)
        got = json.loads(p.stdout or b"{}").get("ranks", [{}])[0]
        got.pop("file", None)
        t.eq(got, {k: v for k, v in want.items() if k != "file"},
             "a %s trace through a pipe: the same figures" % label)
    p = analyze(path)
    t.ok("(1976 earlier profiler steps not listed: the latest 1024 are)" in p.stdout and
         re.search(r"\(\d+ more op names, folded together when the op table was full: \d+ calls",
                   p.stdout), "text: the omitted steps and folded ops are said", detail=p.stdout[-600:])

# trace diff: two ranks side by side; a trace against itself changes nothing.
R0, R1 = (os.path.join(REF, "two-ranks-rank-%d.json.gz" % i) for i in (0, 1))
p = subprocess.run([BIN, "trace", "diff", "--json", R0, R1], capture_output=True, text=True,
                   timeout=120)
t.eq(p.returncode, 0, "trace diff: exit 0")
d = json.loads(p.stdout or "{}")
tmp = {r["what"]: r for r in d.get("temporal", [])}
t.eq((tmp.get("idle", {}).get("a_us"), tmp.get("idle", {}).get("b_us")), (321378, 328671),
     "trace diff: idle of A and B are the analysis' figures")
kt = {r["what"]: r for r in d.get("kernel_types", [])}
t.eq((kt.get("COMMUNICATION", {}).get("a_us"), kt.get("COMMUNICATION", {}).get("b_us")),
     (195327, 168027), "trace diff: communication kernel time of A and B")
ks = d.get("kernels", [])
t.ok(ks and ks[0]["what"].startswith("ncclKernel_SendRecv") and ks[0]["delta_us"] == -27300,
     "trace diff: the NCCL kernel changed most (-27300 us)", detail=ks[:1])
t.ok(any(k["status"] == "vanished" and k["b_us"] == 0 for k in ks),
     "trace diff: kernels that vanished are marked", detail=[k["status"] for k in ks])
p = subprocess.run([BIN, "trace", "diff", "--json", R0, R0], capture_output=True, text=True,
                   timeout=120)
d = json.loads(p.stdout or "{}")
t.ok(p.returncode == 0 and all(k["delta_us"] == 0 for k in d.get("kernels", []) + d.get("temporal", [])),
     "trace diff: a trace against itself: no change")
p = subprocess.run([BIN, "trace", "diff", R0, R1], capture_output=True, text=True, timeout=120)
t.ok(p.returncode == 0 and "kernels whose time changed most" in p.stdout and
     "vanished" in p.stdout, "trace diff: text tables", detail=p.stdout[:400])
p = subprocess.run([BIN, "trace", "diff", R0], capture_output=True, text=True, timeout=60)
t.eq(p.returncode, 2, "trace diff with one argument: usage error")

sys.exit(t.done())
