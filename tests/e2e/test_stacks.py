"""End-to-end tests of `gpuscope stacks` against Debian's /usr/bin/python3 (CPython 3.11):
hot functions whose own clocks give the expected shares, threads in known OS states,
generators, a C function's Python caller, a target that exits while sampled, a target whose
code objects and threads churn under the reader, the three --record formats, the top view,
and the permission message. Optional: GPUSCOPE_STACKS_EXTRA_PYTHONS (colon-separated
interpreter commands, e.g. a trixie chroot's python3.13, docs/stacks.md) runs the dump test
on those too."""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import xml.dom.minidom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import BIN  # noqa: E402
from tap import Tap  # noqa: E402

PY = "/usr/bin/python3"
TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stacks_targets")
t = Tap()
procs = []


def start(script, *args, py=(PY,)):
    p = subprocess.Popen(list(py) + [os.path.join(TARGETS, script)] + list(args),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(p)
    line = p.stdout.readline()
    if line.strip() != "ready":
        raise RuntimeError("%s did not start: %s %s" % (script, line, p.stderr.read()))
    return p


def stacks(*args, timeout=60, **kw):
    return subprocess.run([BIN, "stacks"] + [str(a) for a in args], capture_output=True,
                          text=True, timeout=timeout, **kw)


def line_of(script, marker):
    with open(os.path.join(TARGETS, script)) as f:
        for n, line in enumerate(f, 1):
            if marker in line:
                return n
    raise KeyError(marker)


def parse_collapsed(text):
    out = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        out.append((stack.split(";"), int(count)))
    return out


def fn(label):
    return label.split(" (")[0]


tmp = tempfile.mkdtemp(prefix="gs-stacks-")
try:
    # ---- usage ----
    r = stacks("--help")
    t.ok(r.returncode == 0 and "--record" in r.stdout and "--dump" in r.stdout, "--help")
    r = stacks()
    t.eq(r.returncode, 2, "no PID: usage error")
    r = stacks("1", "--rate", "0")
    t.ok(r.returncode == 2 and "--rate" in r.stderr, "--rate 0 refused", r.stderr)
    r = stacks("--record", "1")
    t.ok(r.returncode == 2 and "-o" in r.stderr, "--record without -o refused", r.stderr)
    r = stacks("99999999999")
    t.eq(r.returncode, 2, "a PID out of range is a usage error")
    dead = subprocess.Popen(["true"])
    dead.wait()
    r = stacks(dead.pid, "--dump")
    t.ok(r.returncode == 6 and "no process" in r.stderr and r.stderr.count("\n") == 1,
         "a gone PID: exit 6, one line", r.stderr)
    sl = subprocess.Popen(["sleep", "30"])
    procs.append(sl)
    time.sleep(0.1)
    r = stacks(sl.pid, "--dump")
    t.ok(r.returncode == 6 and "no python" in r.stderr, "a non-Python process: exit 6", r.stderr)

    # ---- dump: threads, OS states, generator, lines ----
    def dump_checks(py, tag):
        p = start("threads.py", py=py)
        time.sleep(0.3)
        r = stacks(p.pid, "--dump", "--json")
        if not t.ok(r.returncode == 0, "%s: --dump --json exits 0" % tag, r.stderr):
            return
        d = json.loads(r.stdout)
        th = d["threads"]
        t.eq(len(th), 4, "%s: four threads" % tag)
        by_fn = {x["frames"][0]["function"]: x for x in th if x["frames"]}
        main = [x for x in th if x.get("main")]
        t.ok(len(main) == 1 and main[0]["tid"] == p.pid, "%s: the main thread is marked" % tag)
        mf = [f["function"] for f in main[0]["frames"]] if main else []
        t.ok(mf[-1:] == ["<module>"] and "main_loop" in mf,
             "%s: main thread: main_loop under <module>" % tag, mf)
        if mf and mf[0] == "numbers":
            t.eq(main[0]["frames"][1]["function"], "main_loop",
                 "%s: the generator's frame sits on its consumer" % tag)
        else:
            t.ok(mf[:1] == ["main_loop"], "%s: main thread in main_loop or its generator" % tag, mf)
        w = by_fn.get("Event.wait") or by_fn.get("Condition.wait")
        t.ok(w is not None and "futex" in w.get("what", ""),
             "%s: the Event waiter is on a futex" % tag, json.dumps(th, indent=1)[:2000])
        s = by_fn.get("sleeper")
        t.ok(s is not None and s["what"].startswith("sleeping") and
             s["frames"][0]["line"] == line_of("threads.py", "LINE_SLEEP"),
             "%s: sleeper: sleeping, at its line" % tag, s)
        rd = by_fn.get("reader")
        t.ok(rd is not None and "recv" in rd["what"] and
             rd["frames"][0]["line"] == line_of("threads.py", "LINE_RECV"),
             "%s: reader: in I/O recv, at its line" % tag, rd)
        r = stacks(p.pid, "--dump")
        t.ok(r.returncode == 0 and "[main]" in r.stdout and
             "reader (%s:%d)" % (os.path.join(TARGETS, "threads.py"), line_of("threads.py", "LINE_RECV"))
             in r.stdout, "%s: text dump names function (file:line)" % tag, r.stdout)
        p.kill()

    dump_checks((PY,), "python3.11")
    for extra in filter(None, os.environ.get("GPUSCOPE_STACKS_EXTRA_PYTHONS", "").split(":")):
        dump_checks(shlex.split(extra), extra)

    # ---- shares: sampled vs the target's own clocks, C-extension caller ----
    spent = os.path.join(tmp, "spent.json")
    p = start("hot.py", spent)
    time.sleep(0.3)
    out = os.path.join(tmp, "hot.txt")
    r = stacks(p.pid, "--record", "-o", out, "--duration", "4", "--rate", "100")
    p.send_signal(signal.SIGTERM)
    p.wait(10)
    t.ok(r.returncode == 0 and os.path.exists(out), "--record collapsed exits 0", r.stderr)
    own = {}
    total = 0
    for stack, n in parse_collapsed(open(out).read()):
        own[fn(stack[-1])] = own.get(fn(stack[-1]), 0) + n
        total += n
    clocks = json.load(open(spent))
    csum = sum(clocks.values())
    t.ok(total >= 300, "about 100 samples a second (%d in 4 s)" % total)
    for name in ("alpha", "beta", "gamma"):
        got = 100.0 * own.get(name, 0) / max(total, 1)
        want = 100.0 * clocks[name] / csum
        t.ok(abs(got - want) <= 5, "%s: sampled %.1f %% vs own clock %.1f %% (within 5 points)"
             % (name, got, want), own)
    t.ok(own.get("gamma", 0) > 0, "the Python caller of a C function (zlib.crc32) shows")

    # ---- the formats and the top view ----
    p = start("hot.py", os.path.join(tmp, "spent2.json"))
    svg = os.path.join(tmp, "hot.svg")
    r = stacks(p.pid, "--record", "-o", svg, "--duration", "1")
    ok = r.returncode == 0
    try:
        doc = xml.dom.minidom.parse(svg)
        titles = [n.firstChild.data for n in doc.getElementsByTagName("title") if n.firstChild]
        ok = ok and any(x.startswith("alpha (") for x in titles)
    except Exception as e:  # noqa: BLE001
        ok = False
        r = e
    t.ok(ok, "--record -o x.svg: a well-formed SVG flame graph with alpha in it", r)
    js = os.path.join(tmp, "hot.speedscope.json")
    r = stacks(p.pid, "--record", "-o", js, "--duration", "1")
    try:
        d = json.load(open(js))
        names = [f["name"] for f in d["shared"]["frames"]]
        prof = d["profiles"][0]
        ok = (r.returncode == 0 and prof["type"] == "sampled" and "alpha" in names and
              len(prof["samples"]) == len(prof["weights"]) and
              all(0 <= i < len(names) for s in prof["samples"] for i in s))
    except Exception as e:  # noqa: BLE001
        ok, r = False, e
    t.ok(ok, "--record -o x.json: speedscope sampled profile", r)
    r = stacks(p.pid, "--record", "-o", os.path.join(tmp, "x.out"), "--format", "speedscope",
               "--duration", "0.5")
    t.ok(r.returncode == 0 and open(os.path.join(tmp, "x.out")).read().startswith("{"),
         "--format overrides the extension")
    r = stacks(p.pid, "--duration", "2.2", env=dict(os.environ, NO_COLOR="1"))
    t.ok(r.returncode == 0 and "%Own" in r.stdout and re.search(r"alpha \(", r.stdout) and
         "\x1b[" not in r.stdout, "top view in a pipe: plain table with alpha", r.stdout[-800:])
    p.kill()

    # ---- a target that exits while sampled ----
    p = start("brief.py")
    t0 = time.monotonic()
    out = os.path.join(tmp, "brief.txt")
    r = stacks(p.pid, "--record", "-o", out, "--duration", "10")
    el = time.monotonic() - t0
    t.ok(r.returncode == 0 and "exited" in r.stderr and el < 5 and os.path.getsize(out) > 0,
         "a target that exits mid-record: partial profile written (%.1f s)" % el, r.stderr)

    # ---- memory that changes under the reader ----
    p = start("churn.py")
    out = os.path.join(tmp, "churn.txt")
    r = stacks(p.pid, "--record", "-o", out, "--duration", "3", "--rate", "500", "--idle")
    st = parse_collapsed(open(out).read()) if os.path.exists(out) else []
    n = sum(c for _, c in st)
    deep = max((len(s) for s, _ in st), default=0)
    t.ok(r.returncode == 0 and n > 500 and deep > 50,
         "churning code objects and threads: %d samples, deepest %d frames" % (n, deep), r.stderr)
    t.ok(any(fn(s[-1]).startswith("f_") for s, _ in st),
         "freshly compiled functions are read (when caught)")
    p.kill()

    # ---- permission ----
    if os.geteuid() == 0:
        p = start("brief.py")
        r = subprocess.run([BIN, "stacks", str(p.pid), "--dump"], capture_output=True, text=True,
                           preexec_fn=lambda: (os.setgid(65534), os.setuid(65534)))
        t.ok(r.returncode == 4 and "permission" in r.stderr.lower() and
             r.stderr.count("\n") == 1, "another user's process: exit 4, one line why", r.stderr)
    else:
        t.skip("another user's process: exit 4", "needs root")
finally:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    subprocess.run(["rm", "-rf", tmp])
sys.exit(t.done())
