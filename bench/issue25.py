#!/usr/bin/env python3
"""Issue 25's table of figures, measured in one run: gpuscope against its leanest peer, row by
row, ours and the peer's interleaved within each row.

Usage: bench/issue25.py BUILD [--quick] [--nvtop PATH] [--austin PATH] [--nvml LIB]
                              [--json FILE] [--rows NAME,...]

BUILD: a gpuscope build directory (its gpuscope, sim/libnvidia-ml.so.1, bench/floor and
python/). Prints the table in Markdown (figure, gpuscope, peer, ratio, goal, met?) on stdout,
progress on stderr, and writes every raw number as JSON to FILE (default BUILD/issue25.json).
About 11 minutes on a 2-core machine; --quick (fewer rounds, shorter windows, a 100 MB
synthetic trace instead of 1 GB) about 1 minute, for a smoke run.

Rows (NAME), each measured by the bench script that measures it alone:
  oneshot  `gpuscope` (quick check), `gpuscope query --query-gpu=` 7 fields, their floor
           (bench/floor.c) and `nvtop -s`, every command once per round in turn, CPU from
           wait4 (bench/floor.py), instructions from callgrind (one run each); on nvml-sim,
           or with --nvml LIB all of them on that libnvidia-ml (a real driver's);
  top      `gpuscope top -d 1` and nvtop's TUI (`nvtop -d 10`) in 120x40 tmux terminals and
           `gpuscope agent` (1 s, history on, /metrics scraped every 5 s) in turn each round,
           CPU from /proc/PID/task/*/schedstat over the window, peak RSS (VmHWM)
           (bench/top_vs_nvtop.py); the agent's peer, nvitop-exporter, is not installable here
           (no PyPI): its figures are those recorded in issue 25's table, not rerun;
  zerocode the zero-code tracker against the explicit gpuscope.step() + 3 phases per step
           (bench/bench_callback.py --zero-code --versus, run with /usr/bin/python3 and torch);
  trace    `gpuscope trace analyze --json` on the real Kineto trace nccl-sendrecv-rank-0.json.gz
           (../shared/reference/kineto-traces) interleaved with `zcat` (zlib's inflate alone),
           CPU from wait4, peak RSS (bench/bench_trace_compare.py); HTA 0.6.1's figures on the
           same file are those recorded by issue 19 (bench/RESULTS.md), not rerun;
  synth    a 1 GB synthetic Kineto trace (bench/gen_trace.py) analysed, wall, CPU and peak RSS;
  stacks   `gpuscope stacks --rate 100` and austin at 100 Hz (`austin -i 10ms`) attached in
           turn to the same CPU-bound Python loop, the sampler's CPU from wait4 over its wall
           time (bench/bench_stacks.py).

Peers: nvtop is looked for at --nvtop (default /tmp/perf/nvtop-src/b/src/nvtop), austin at
--austin (default: none); a row whose peer is absent measures gpuscope's side alone and says
how to build the peer. Each row runs in a child process in its own session, with a time limit:
a row that fails or overruns is reported as such and the others go on. This process is the
subreaper of everything it starts, and after each row and at exit it kills whatever is left.
"""
import argparse
import ctypes
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
REF = os.path.join(ROOT, "..", "shared", "reference", "kineto-traces")
REAL_TRACE = "nccl-sendrecv-rank-0.json.gz"
NVTOP_DEFAULT = "/tmp/perf/nvtop-src/b/src/nvtop"
BUILD_NVTOP = ("git clone https://github.com/Syllo/nvtop /tmp/perf/nvtop-src && cmake -S "
               "/tmp/perf/nvtop-src -B /tmp/perf/nvtop-src/b -DCMAKE_BUILD_TYPE=Release "
               "-DNVIDIA_SUPPORT=ON -DAMDGPU_SUPPORT=OFF -DINTEL_SUPPORT=OFF && make -C "
               "/tmp/perf/nvtop-src/b (then --nvtop /tmp/perf/nvtop-src/b/src/nvtop)")
BUILD_AUSTIN = ("git clone https://github.com/P403n1x87/austin /tmp/austin && cd /tmp/austin && "
                "autoreconf --install && ./configure && make"
                " (then --austin /tmp/austin/src/austin)")
# Peers that cannot be run here (Python packages, no PyPI on this machine): their figures as
# recorded, with where and when.
NVITOP_EXPORTER = {"cpu_pct": 1.40, "rss_mib": 30.6,
                   "source": "nvitop-exporter's figures as recorded in issue 25's table (8-GPU "
                             "nvml-sim, 1 s, scraped every 5 s), not rerun: nvitop is a Python "
                             "package not installable here"}
HTA_REAL = {"cpu_s": 1.61, "rss_mib": 212.0,
            "source": "HTA 0.6.1 on the same file, whole process, wall time (its CPU time was "
                      "not recorded: compared here with gpuscope's CPU time, which a loaded "
                      "machine inflates less than wall), median of 3, recorded by issue 19 "
                      "(bench/RESULTS.md, 2026-12-01), not rerun: HTA is a Python package "
                      "not installable here"}
HTA_SYNTH = "HTA did not finish 500 MB in 600 s (as recorded in issue 25's table, not rerun)"

# Settings per mode: (default, --quick)
SETTINGS = {
    "oneshot_rounds": (41, 11),
    "top_reps": (6, 1), "top_secs": (20.0, 8.0),
    "zerocode_rounds": (60, 12), "zerocode_steps": (320, 320),
    "trace_rounds": (15, 5),
    "synth_mb": (1000, 100), "synth_runs": (3, 1),
    "stacks_trials": (9, 3),
}


def log(msg):
    print("issue25: " + msg, file=sys.stderr, flush=True)


def spread(xs):
    """(median, low, high): quartiles when there are 4 or more values, else min-max."""
    xs = list(xs)
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4)
        return statistics.median(xs), q[0], q[2], "p25-p75"
    return statistics.median(xs), min(xs), max(xs), "min-max"


def summary(xs):
    med, lo, hi, kind = spread(xs)
    return {"median": med, "low": lo, "high": hi, "spread": kind, "n": len(xs), "values": xs}


# ---------------------------------------------------------------------------------------------
# Rows (each runs in a child process; returns a dict of raw figures)


def row_oneshot(a, s, tmp):
    import floor  # bench/floor.py
    nvtop = a.nvtop if a.nvtop and os.access(a.nvtop, os.X_OK) else None
    cmds = floor.commands(a.build, tmp, nvtop, a.nvml)
    keep = {"floor quick": "floor_quick", "`gpuscope` (quick check)": "quick",
            "floor query": "floor_query", "`gpuscope query --query-gpu=` 7 fields": "query",
            "`nvtop -s`": "nvtop"}
    cmds = [(keep[n], c, e) for n, c, e in cmds if n in keep]
    for _, c, e in cmds:
        floor.run_once(c, e)  # warm-up (page cache)
    cpu = {k: [] for k, _, _ in cmds}
    for r in range(s["oneshot_rounds"]):
        for k, c, e in cmds:
            cpu[k].append(floor.run_once(c, e)[0])
    out = {"cpu_ms": {k: summary(v) for k, v in cpu.items()}, "instructions": {},
           "nvml_calls": {}, "argv": {k: c for k, c, _ in cmds}}
    if shutil.which("valgrind"):
        for k, c, e in cmds:
            v = floor.instructions(c, e, tmp)  # an int, or (total, of it in nvmlInit_v2)
            if isinstance(v, tuple):
                out.setdefault("instructions_less_nvmlinit", {})[k] = v[0] - v[1]
                v = v[0]
            out["instructions"][k] = v
    for k, c, e in cmds:
        if k != "nvtop" and not a.nvml:  # nvml-sim counts them
            out["nvml_calls"][k] = floor.nvml_calls(c, e, tmp)
    out["nvml"] = a.nvml or "nvml-sim (BUILD/sim), 8 H100s"
    if not nvtop:
        out["nvtop_missing"] = a.nvtop
    return out


def row_top(a, s, tmp):
    import top_vs_nvtop as tv  # bench/top_vs_nvtop.py
    if not shutil.which("tmux"):
        raise RuntimeError("tmux is needed (apt-get install tmux)")
    tv.WARM = 5 if not a.quick else 3
    nvtop = a.nvtop if a.nvtop and os.access(a.nvtop, os.X_OK) else None
    env, sleepers = tv.bench_env(a.build, tmp)
    sim = os.path.join(a.build, "sim")
    gs = os.path.join(a.build, "gpuscope")
    secs = s["top_secs"]
    res = {"top": [], "nvtop": [], "agent": []}
    try:
        for r in range(s["top_reps"]):
            runs = [("top", lambda: tv.in_tmux([gs, "top", "--no-save", "-d", "1"], env, secs))]
            if nvtop:
                runs.append(("nvtop", lambda: tv.in_tmux(
                    ["env", "LD_LIBRARY_PATH=" + sim, nvtop, "-d", "10"], env, secs)))
            runs.append(("agent", lambda: tv.agent(a.build, env, tmp, secs)))
            if r % 2:
                runs.reverse()
            for k, fn in runs:
                res[k].append(fn())
                log("top round %d: %s %.3f %% of a core, peak RSS %.1f MiB"
                    % (r + 1, k, res[k][-1][0], res[k][-1][2]))
    finally:
        for p in sleepers:
            p.kill()
            p.wait()
    out = {"window_s": secs, "warm_s": tv.WARM, "rounds": s["top_reps"]}
    for k, xs in res.items():
        if xs:
            out[k] = {"cpu_pct": summary([x[0] for x in xs]),
                      "rss_mib": summary([x[1] for x in xs]),
                      "peak_rss_mib": summary([x[2] for x in xs])}
    if not nvtop:
        out["nvtop_missing"] = a.nvtop
    return out


ZC_LINE = re.compile(r"overhead median (-?[\d.]+) us/step \(quartiles (-?[\d.]+) \.\. (-?[\d.]+)\)")
ZC_BARE = re.compile(r"bare (-?[\d.]+) us/step, tracker (-?[\d.]+) us/step")
ZC_DIFF = re.compile(r"tracker minus explicit, median of rounds (-?[\d.]+) us/step")
ZC_EXPL = re.compile(r"interleaved: (-?[\d.]+) us/step")


def row_zerocode(a, s, tmp):
    py = "/usr/bin/python3"
    argv = [py, os.path.join(HERE, "bench_callback.py"), "--zero-code", "--versus", "--steps",
            str(s["zerocode_steps"]), "--rounds", str(s["zerocode_rounds"])]
    env = dict(os.environ, PYTHONPATH=os.path.join(a.build, "python"), OMP_NUM_THREADS="1")
    r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=a.row_timeout)
    if r.returncode != 0:
        raise RuntimeError("bench_callback.py --zero-code --versus: exit %d: %s"
                           % (r.returncode, ((r.stderr or r.stdout).strip().splitlines()
                                             or ["?"])[-1]))
    text = r.stdout
    over = ZC_LINE.findall(text)
    bare, diff, expl = ZC_BARE.search(text), ZC_DIFF.search(text), ZC_EXPL.search(text)
    if len(over) < 2 or not (bare and diff and expl):
        raise RuntimeError("bench_callback.py printed no figures this script knows: "
                           + text.strip()[-400:])
    f = [tuple(map(float, o)) for o in over]
    return {"argv": argv, "stdout": text,
            "bare_us": float(bare.group(1)), "tracker_us": float(bare.group(2)),
            "explicit_us": float(expl.group(1)),
            "tracker_overhead_us": {"median": f[0][0], "low": f[0][1], "high": f[0][2],
                                    "spread": "p25-p75"},
            "explicit_overhead_us": {"median": f[1][0], "low": f[1][1], "high": f[1][2],
                                     "spread": "p25-p75"},
            "tracker_minus_explicit_us": float(diff.group(1))}


def row_trace(a, s, tmp):
    import bench_trace_compare as btc  # bench/bench_trace_compare.py
    btc.TMP = tmp
    path = os.path.join(REF, REAL_TRACE)
    if not os.path.exists(path):
        raise RuntimeError("%s not found (the reference traces are in ../shared/reference/"
                           "kineto-traces beside the repository)" % path)
    bins = [("gpuscope", [os.path.join(a.build, "gpuscope"), "trace", "analyze", "--json"]),
            ("zcat", ["zcat"])]
    res = {k: [] for k, _ in bins}
    for _ in bins:  # warm-up (page cache)
        btc.one(_[1] + [path])
    for r in range(s["trace_rounds"]):
        for k, argv in (bins if r % 2 == 0 else bins[::-1]):
            res[k].append(btc.one(argv + [path]))
    out = {"file": REAL_TRACE, "gz_bytes": os.path.getsize(path)}
    for k, xs in res.items():
        out[k] = {"wall_s": summary([x[0] for x in xs]), "cpu_s": summary([x[1] for x in xs]),
                  "peak_rss_mib": max(x[2] for x in xs)}
    return out


def row_synth(a, s, tmp):
    import bench_trace_compare as btc
    btc.TMP = tmp
    path = os.path.join(tmp, "synth.json")
    t0 = time.monotonic()
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "gen_trace.py"), path,
                    str(s["synth_mb"])], check=True, timeout=a.row_timeout)
    log("synth: wrote %d MB in %.0f s" % (os.path.getsize(path) / 1e6, time.monotonic() - t0))
    try:
        xs = [btc.one([os.path.join(a.build, "gpuscope"), "trace", "analyze", "--json", path])
              for _ in range(s["synth_runs"])]
        size = os.path.getsize(path)
    finally:
        os.unlink(path)
    return {"mb": size / 1e6, "wall_s": summary([x[0] for x in xs]),
            "cpu_s": summary([x[1] for x in xs]), "peak_rss_mib": max(x[2] for x in xs)}


def row_stacks(a, s, tmp):
    import bench_stacks as bs  # bench/bench_stacks.py
    bs.BIN = os.path.join(a.build, "gpuscope")
    austin = a.austin if a.austin and os.access(a.austin, os.X_OK) else None
    kinds = [("baseline", None), ("gpuscope", bs.gpuscope_sampler)]
    if austin:
        kinds.append(("austin", lambda pid: [austin, "-i", "10ms", "-p", str(pid), "-o",
                                             "/dev/null"]))
    bs.trial(None)  # warm-up
    res = {k: [] for k, _ in kinds}
    for r in range(s["stacks_trials"]):
        order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
        for k, fn in order:
            res[k].append(bs.trial(fn))
    out = {"rate_hz": 100, "trials": s["stacks_trials"],
           "loop_cpu_s": {k: summary([x[1] for x in xs]) for k, xs in res.items()}}
    for k, xs in res.items():
        if k != "baseline":
            out[k] = {"cpu_pct": summary([100.0 * x[2] / x[3] for x in xs])}
    if not austin:
        out["austin_missing"] = ("no austin at %s" % a.austin) if a.austin else \
            "no --austin PATH given"
    return out


ROWS = [("oneshot", row_oneshot), ("top", row_top), ("zerocode", row_zerocode),
        ("trace", row_trace), ("synth", row_synth), ("stacks", row_stacks)]


def run_row(a):
    """In the child: measure one row, write its JSON to a.out."""
    s = {k: v[1 if a.quick else 0] for k, v in SETTINGS.items()}
    fn = dict((n, f) for n, f in ROWS)[a.row]
    tmp = tempfile.mkdtemp(prefix="row-%s." % a.row, dir=os.path.dirname(a.out))
    t0 = time.monotonic()
    try:
        res = {"ok": True, "data": fn(a, s, tmp)}
    except BaseException as e:  # SystemExit from the bench scripts' helpers too
        res = {"ok": False, "error": "%s: %s" % (type(e).__name__, e),
               "traceback": traceback.format_exc()[-2000:]}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["seconds"] = time.monotonic() - t0
    with open(a.out, "w") as f:
        json.dump(res, f)
    return 0


# ---------------------------------------------------------------------------------------------
# The parent: children in their own sessions, the leftovers killed


def set_subreaper():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def descendants(root):
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()[:120]
    except OSError:
        return "?"


def reap():
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass


def sweep():
    """Kill every process still below this one (orphans come back to us: subreaper), after
    reaping the ended ones that came back."""
    me = os.getpid()
    reap()
    left = descendants(me)
    if left:
        log("killing %d leftover process(es): %s" % (len(left), "; ".join(
            "%d %s" % (pid, cmdline(pid)) for pid in left)))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            reap()
            left = descendants(me)
            if not left:
                return
            time.sleep(0.1)


def row_limits(s):
    """Time limit of each row, seconds: a few times what it should take."""
    top = s["top_reps"] * 3 * (s["top_secs"] + 8)
    return {"oneshot": 120 + s["oneshot_rounds"] * 2, "top": 60 + 2 * top,
            "zerocode": 60 + s["zerocode_rounds"] * 8, "trace": 60 + s["trace_rounds"] * 6,
            "synth": 120 + s["synth_mb"] * 0.6, "stacks": 60 + s["stacks_trials"] * 30}


def run_child(a, name, limit, tmp):
    out = os.path.join(tmp, name + ".json")
    argv = [sys.executable, os.path.abspath(__file__), a.build, "--row", name, "--out", out,
            "--row-timeout", str(int(limit))]
    if a.quick:
        argv.append("--quick")
    if a.nvtop:
        argv += ["--nvtop", a.nvtop]
    if a.austin:
        argv += ["--austin", a.austin]
    if a.nvml:
        argv += ["--nvml", a.nvml]
    p = subprocess.Popen(argv, start_new_session=True, stdout=sys.stderr)
    try:
        p.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=3)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        return {"ok": False, "error": "did not finish within its limit of %d s" % limit}
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)  # whatever stayed in the row's session
        except ProcessLookupError:
            pass
        sweep()
    if not os.path.exists(out):
        return {"ok": False, "error": "the row's process ended with status %d and no result"
                % p.returncode}
    with open(out) as f:
        return json.load(f)


# ---------------------------------------------------------------------------------------------
# The table


def fmt_s(d, f="%.2f", unit=""):
    return (f + "%s (" + f + "-" + f + ")") % (d["median"], unit, d["low"], d["high"])


def verdict(ok):
    return "✓" if ok else "**✗**"


def table(res, a):
    rows = []  # (figure, gpuscope, peer, ratio, goal, met)
    notes = []

    def note(text):
        """A footnote's mark for text (once per distinct text)."""
        if text not in notes:
            notes.append(text)
        return "note %d" % (notes.index(text) + 1)

    def note_nvtop(d):
        return note("no nvtop at %s; build it: %s" % (d["nvtop_missing"], BUILD_NVTOP))

    def failed(name, figure):
        r = res.get(name)
        if r is None:
            return False
        if not r.get("ok"):
            err = " ".join(r.get("error", "?").split()).replace("|", "\\|")
            rows.append((figure, "not measured: " + err[:300], "", "", "", ""))
            return True
        return False

    def tab_oneshot():
        r = res.get("oneshot")
        if r and not failed("oneshot", "one-shot commands"):
            d = r["data"]
            on = "" if not a.nvml else " (%s)" % note("one-shot rows on %s" % a.nvml)
            c, ins = d["cpu_ms"], d["instructions"]
            nv = c.get("nvtop")
            for key, figure in (("quick", "one-shot quick check (`gpuscope`), CPU"),
                                ("query", "`gpuscope query --query-gpu=` 7 fields, CPU")):
                figure = figure.replace(", CPU", on + ", CPU")
                if nv:
                    ratio = c[key]["median"] / nv["median"]
                    fl = c["floor_" + key]["median"] / nv["median"]
                    rows.append((figure, fmt_s(c[key], unit=" ms"),
                                 "`nvtop -s` " + fmt_s(nv, unit=" ms"), "%.2f" % ratio, "≤ 0.5",
                                 verdict(ratio <= 0.5) + (" (its floor: %.2f)" % fl)))
                else:
                    rows.append((figure, fmt_s(c[key], unit=" ms"),
                                 "`nvtop -s` not measured (%s)" % note_nvtop(d), "", "≤ 0.5", ""))
                if nv and key in ins and "nvtop" in ins:
                    ratio = ins[key] / ins["nvtop"]
                    rows.append((figure.replace(", CPU", ", instructions (callgrind)"),
                                 "{:,}".format(ins[key]), "`nvtop -s` {:,}".format(ins["nvtop"]),
                                 "%.2f" % ratio, "≤ 0.5", verdict(ratio <= 0.5) + (
                                     " (its floor: %.2f)" % (ins["floor_" + key] / ins["nvtop"]))))
                li = d.get("instructions_less_nvmlinit", {})
                if nv and key in li and "nvtop" in li:
                    ratio = li[key] / li["nvtop"]
                    rows.append((figure.replace(", CPU", ", instructions less nvml-sim's "
                                                "nvmlInit_v2"), "{:,}".format(li[key]),
                                 "`nvtop -s` {:,}".format(li["nvtop"]), "%.2f" % ratio, "≤ 0.5",
                                 verdict(ratio <= 0.5) + (" (its floor: %.2f)"
                                                          % (li["floor_" + key] / li["nvtop"]))))
                ratio = c[key]["median"] / c["floor_" + key]["median"]
                rows.append((figure.replace(", CPU", " over its floor (bench/floor.c), CPU"),
                             fmt_s(c[key], unit=" ms"),
                             "floor %s" % fmt_s(c["floor_" + key], unit=" ms"), "%.2f" % ratio,
                             "≤ 1.3", verdict(ratio <= 1.3)))

    def tab_top():
        r = res.get("top")
        if r and not failed("top", "`gpuscope top` / agent"):
            d = r["data"]
            nv = d.get("nvtop")
            t = d["top"]
            for k, figure, f, unit, goal in (("cpu_pct", "`gpuscope top` at 1 s, CPU", "%.3f",
                                              " %", 0.2),
                                             ("peak_rss_mib", "`gpuscope top` peak RSS", "%.1f",
                                              " MiB", 1.0)):
                if nv:
                    ratio = t[k]["median"] / nv[k]["median"]
                    rows.append((figure, fmt_s(t[k], f, unit), "nvtop TUI (`-d 10`) "
                                 + fmt_s(nv[k], f, unit), "%.2f" % ratio, "≤ %g" % goal,
                                 verdict(ratio <= goal)))
                else:
                    rows.append((figure, fmt_s(t[k], f, unit), "nvtop not measured (%s)"
                                 % note_nvtop(d), "", "≤ %g" % goal, ""))
            ag = d["agent"]
            cpu, rss = ag["cpu_pct"]["median"], ag["peak_rss_mib"]["median"]
            rows.append(("agent at 1 s, history on, /metrics every 5 s, CPU",
                         fmt_s(ag["cpu_pct"], "%.3f", " %"),
                         "nvitop-exporter %.2f %% (%s)" % (NVITOP_EXPORTER["cpu_pct"],
                                                           note(NVITOP_EXPORTER["source"])),
                         "%.3f" % (cpu / NVITOP_EXPORTER["cpu_pct"]), "≤ 0.05 % of a core",
                         verdict(cpu <= 0.05)))
            rows.append(("agent peak RSS", fmt_s(ag["peak_rss_mib"], "%.1f", " MiB"),
                         "nvitop-exporter %.1f MiB (%s)" % (NVITOP_EXPORTER["rss_mib"],
                                                           note(NVITOP_EXPORTER["source"])),
                         "%.2f" % (rss / NVITOP_EXPORTER["rss_mib"]), "≤ 8 MiB",
                         verdict(rss <= 8.0)))

    def tab_zerocode():
        r = res.get("zerocode")
        if r and not failed("zerocode", "zero-code tracker vs explicit API, per step"):
            d = r["data"]
            t, e = d["tracker_overhead_us"], d["explicit_overhead_us"]
            ratio = t["median"] / e["median"] if e["median"] > 0 else float("nan")
            rows.append(("zero-code tracker vs explicit API, overhead per step (CPU)",
                         fmt_s(t, unit=" µs") + ", tracker − explicit %+.2f µs"
                         % d["tracker_minus_explicit_us"],
                         "explicit `gpuscope.step()` + 3 phases " + fmt_s(e, unit=" µs"),
                         "%.2f" % ratio, "≤ 1 (tracker ≤ explicit)",
                         verdict(d["tracker_minus_explicit_us"] <= 0)))

    def tab_trace():
        r = res.get("trace")
        if r and not failed("trace", "trace analyze, a real Kineto trace"):
            d = r["data"]
            g, z = d["gpuscope"], d["zcat"]
            x = HTA_REAL["cpu_s"] / g["cpu_s"]["median"]
            rows.append(("trace analyze, %s (%.1f MB .json.gz), CPU" % (d["file"],
                                                                        d["gz_bytes"] / 1e6),
                         fmt_s(g["cpu_s"], "%.3f", " s") + "; wall " + fmt_s(g["wall_s"], "%.3f",
                                                                              " s"),
                         "HTA %.2f s (%s)" % (HTA_REAL["cpu_s"], note(HTA_REAL["source"])),
                         "%.1f× faster" % x, "≥ 50×", verdict(x >= 50) + (
                             " (`zcat` alone: %.3f s, %.0f× HTA)"
                             % (z["cpu_s"]["median"], HTA_REAL["cpu_s"] / z["cpu_s"]["median"]))))
            ratio = g["peak_rss_mib"] / HTA_REAL["rss_mib"]
            rows.append(("trace analyze, %s, peak RSS" % d["file"], "%.1f MiB" % g["peak_rss_mib"],
                         "HTA %.0f MiB (%s)" % (HTA_REAL["rss_mib"], note(HTA_REAL["source"])),
                         "%.3f" % ratio, "≤ 0.05", verdict(ratio <= 0.05)))

    def tab_synth():
        r = res.get("synth")
        if r and not failed("synth", "trace analyze, synthetic trace"):
            d = r["data"]
            full = d["mb"] >= 900
            rows.append(("trace analyze, %.0f MB synthetic (bench/gen_trace.py), wall" % d["mb"],
                         fmt_s(d["wall_s"], "%.2f", " s") + "; CPU " + fmt_s(d["cpu_s"], "%.2f",
                                                                              " s"),
                         "HTA: " + note(HTA_SYNTH), "", "≤ 15 s (1 GB)",
                         verdict(d["wall_s"]["median"] <= 15) if full else "— (--quick size)"))
            rows.append(("trace analyze, %.0f MB synthetic, peak RSS" % d["mb"],
                         "%.1f MiB" % d["peak_rss_mib"], "", "", "≤ 64 MiB",
                         verdict(d["peak_rss_mib"] <= 64) if full else "— (--quick size)"))

    def tab_stacks():
        r = res.get("stacks")
        if r and not failed("stacks", "`gpuscope stacks` at 100 Hz"):
            d = r["data"]
            g = d["gpuscope"]["cpu_pct"]
            if "austin" in d:
                au = d["austin"]["cpu_pct"]
                peer, ratio = "austin 3.x (`-i 10ms`) " + fmt_s(au, unit=" %"), "%.2f" % (
                    g["median"] / au["median"])
            else:
                peer, ratio = "austin not measured (%s)" % note(
                    "%s; build it: %s" % (d["austin_missing"], BUILD_AUSTIN)), ""
            rows.append(("`gpuscope stacks` at 100 Hz, the sampler's CPU", fmt_s(g, unit=" %"),
                         peer, ratio, "< 2 % of a core", verdict(g["median"] < 2)))

    for name, fn in (("oneshot", tab_oneshot), ("top", tab_top), ("zerocode", tab_zerocode),
                     ("trace", tab_trace), ("synth", tab_synth), ("stacks", tab_stacks)):
        try:
            fn()
        except Exception as e:  # a row's figures this table cannot read: say so, go on
            rows.append(("row %s" % name, "not tabulated: %s: %s (raw figures in the JSON)"
                         % (type(e).__name__, " ".join(str(e).split())[:200]), "", "", "", ""))

    lines = ["| figure | gpuscope | peer | ratio | goal | met? |", "|---|---|---|---|---|---|"]
    for row in rows:
        lines.append("| " + " | ".join(row) + " |")
    if notes:
        lines.append("")
        lines += ["%d. %s" % (i + 1, n) for i, n in enumerate(notes)]
    return "\n".join(lines)


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def git_head():
    r = subprocess.run(["git", "-C", ROOT, "log", "-1", "--format=%h %cd", "--date=short"],
                       capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("build", help="gpuscope build directory")
    ap.add_argument("--quick", action="store_true", help="a ~1-minute smoke run")
    ap.add_argument("--nvtop", default=NVTOP_DEFAULT, help="nvtop binary (default %(default)s)")
    ap.add_argument("--austin", help="austin binary (built from its sources)")
    ap.add_argument("--nvml", help="the one-shot row on this libnvidia-ml (a real driver's, "
                    "e.g. /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1) instead of nvml-sim")
    ap.add_argument("--json", help="raw figures to this file (default BUILD/issue25.json)")
    ap.add_argument("--rows", help="comma-separated rows to measure (default all: %s)"
                    % ",".join(n for n, _ in ROWS))
    ap.add_argument("--row", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--row-timeout", type=int, default=600, help=argparse.SUPPRESS)
    a = ap.parse_args()
    a.build = os.path.abspath(a.build)
    if a.row:
        return run_row(a)
    for f in ("gpuscope", "sim/libnvidia-ml.so.1"):
        if not os.path.exists(os.path.join(a.build, f)):
            sys.exit("issue25: %s not found: BUILD must be a built gpuscope build directory "
                     "(meson setup BUILD && ninja -C BUILD)" % os.path.join(a.build, f))
    names = [n for n, _ in ROWS]
    want = a.rows.split(",") if a.rows else names
    bad = [n for n in want if n not in names]
    if bad:
        sys.exit("issue25: unknown row(s) %s; rows: %s" % (", ".join(bad), ", ".join(names)))
    for what, path in (("nvtop", a.nvtop), ("austin", a.austin)):
        if not path or not os.access(path, os.X_OK):
            log("%s not found%s: its rows measure gpuscope alone; build it: %s"
                % (what, " at " + path if path else " (--austin PATH)",
                   BUILD_NVTOP if what == "nvtop" else BUILD_AUSTIN))
    a.json = a.json or os.path.join(a.build, "issue25.json")
    subreaper = set_subreaper()

    def on_signal(sig, _frame):
        sweep()
        sys.exit(128 + sig)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    s = {k: v[1 if a.quick else 0] for k, v in SETTINGS.items()}
    limits = row_limits(s)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "build": a.build,
            "commit": git_head(), "quick": a.quick, "settings": s,
            "command": " ".join(["bench/issue25.py"] + sys.argv[1:]),
            "machine": "%s, %d cores, %s" % (platform.machine(), os.cpu_count(),
                                            platform.node()),
            "load_start": loadavg(), "nvtop": a.nvtop, "austin": a.austin, "nvml": a.nvml,
            "subreaper": subreaper}
    res = {}
    tmp = tempfile.mkdtemp(prefix="gs-issue25.")
    t0 = time.monotonic()
    try:
        for name in want:
            log("row %s (limit %d s), load %s" % (name, limits[name], loadavg()))
            res[name] = run_child(a, name, limits[name], tmp)
            res[name]["load_after"] = loadavg()
            if not res[name].get("ok"):
                log("row %s FAILED: %s" % (name, res[name].get("error")))
                if res[name].get("traceback"):
                    print(res[name]["traceback"], file=sys.stderr)
            else:
                log("row %s done in %.0f s" % (name, res[name].get("seconds", 0)))
    finally:
        sweep()
        shutil.rmtree(tmp, ignore_errors=True)
    meta["load_end"] = loadavg()
    meta["seconds"] = time.monotonic() - t0
    with open(a.json, "w") as f:
        json.dump({"meta": meta, "rows": res}, f, indent=1)
    print("Issue 25's table, %s, build %s (commit %s), %s; load average %s at the start, %s "
          "at the end; %.0f s.\n" % (meta["date"], a.build, meta["commit"], meta["machine"],
                                     meta["load_start"], meta["load_end"], meta["seconds"]))
    print("Command: `%s`\n" % meta["command"])
    print(table(res, a))
    print("\nMedians with their spread in brackets (p25-p75 with 4 or more values, else "
          "min-max). Raw numbers: %s" % a.json)
    return 0 if all(r.get("ok") for r in res.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
