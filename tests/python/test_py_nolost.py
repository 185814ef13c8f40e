"""No step record lost (issue 23 "no step lost", issue 24 items 8 and 9): unmodified PyTorch
scripts (none imports gpuscope) under `gpuscope run`, each counting its own optimizer steps.

  hang in the first second, SIGTERM at once   every step the script made is in the report
                                              (the package flushes on SIGTERM), 143 as a shell
  the same with the script's own SIGTERM      its handler still runs (exit 7), every step kept
  handler
  the main thread stuck in a C call           the steps reach steps.jsonl meanwhile (the
                                              package's sender thread, <= 0.25 s); SIGTERM
                                              still kills at once (143)
  SIGKILL of `gpuscope run` mid-run           steps.jsonl and samples.db hold the steps made
                                              until ~1 s before the kill, and `gpuscope report
                                              DIR` rebuilds the report and says it was
                                              interrupted
  a 1 MiB tmpfs as the run directory          "No space left on device", the report written to
                                              another directory (named), exit status 123
                                              (docs/run.md); skipped where mounting is refused
"""
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, Tap  # noqa: E402
from gsenv import BIN  # noqa: E402

t = Tap()

# N optimizer steps as fast as they go, then (hang) a sleep; with progress, one line
# "count unix_time" per step in that file, the script's own record of when each step ended.
TRAIN = textwrap.dedent("""
    import json, os, signal, sys, time, torch
    torch.set_num_threads(1)
    cfg = json.loads(sys.argv[1])
    if cfg.get("mark"):
        def own(sig, frame):
            open(cfg["mark"], "w").write("handled")
            sys.exit(7)
        signal.signal(signal.SIGTERM, own)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 8), torch.randn(4, 1)
    prog = open(cfg["progress"], "a", buffering=1) if cfg.get("progress") else None
    t0, n = time.time(), 0
    for s in range(cfg["steps"]):
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step(); opt.zero_grad()
        n += 1
        if prog:
            prog.write("%d %.6f\\n" % (n, time.time()))
        if cfg.get("sleep"):
            time.sleep(cfg["sleep"])
    print(json.dumps({"steps": n, "s": time.time() - t0}), flush=True)
    if cfg.get("hang") == "c":  # stuck in a C call no signal ends: a mutex locked twice
        import ctypes
        libc, mu = ctypes.CDLL(None), ctypes.create_string_buffer(64)
        libc.pthread_mutex_init(mu, None)
        libc.pthread_mutex_lock(mu)
        libc.pthread_mutex_lock(mu)
    elif cfg.get("hang"):
        time.sleep(3600)
""")


def report(out):
    try:
        with open(os.path.join(out, "metrics_report.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def step_lines(out):
    try:
        with open(os.path.join(out, "steps.jsonl")) as f:
            return sum('"type":"step"' in x for x in f)
    except OSError:
        return 0


def start(tmp, out, cfg, **env):
    env = pyhelp.child_env(NO_COLOR="1", **env)
    return subprocess.Popen([BIN, "run", "--out", out, "--", PYTHON, script, json.dumps(cfg)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def first_line(proc, timeout=120):
    """The script's own count (its JSON line), read as soon as it is printed."""
    line = proc.stdout.readline()
    try:
        return json.loads(line)
    except ValueError:
        return None


def finish(proc, timeout=60):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    return out, err


with tempfile.TemporaryDirectory() as tmp:
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)

    # ---- a hang in the first second, SIGTERM at once: the package flushes on the signal ----
    for name, mark, code in (("term", None, 143), ("own", os.path.join(tmp, "mark"), 7)):
        out = os.path.join(tmp, name)
        cfg = {"steps": 29, "hang": True}
        if mark:
            cfg["mark"] = mark
        proc = start(tmp, out, cfg)
        mine = first_line(proc)
        proc.send_signal(signal.SIGTERM)  # gpuscope run passes it on to the script
        _, err = finish(proc)
        rep = report(out)
        t.ok(mine is not None and mine["steps"] == 29, f"{name}: the script made 29 steps",
             detail=mine)
        t.ok(rep.get("steps") == 29, f"{name}: SIGTERM right after 29 steps "
             f"({mine and round(mine['s'], 2)} s): all 29 in the report",
             detail=f"got {rep.get('steps')}\n" + err[-1500:])
        t.eq(step_lines(out), 29, f"{name}: steps.jsonl has the 29 step records")
        t.ok(proc.returncode == code, f"{name}: exit status {code}"
             + (" (the script's own handler still ran)" if mark else " (128 + SIGTERM)"),
             detail=f"got {proc.returncode}\n" + err[-800:])
        if mark:
            t.ok(os.path.exists(mark), "own: the script's SIGTERM handler ran")

    # ---- the main thread stuck in a C call: SIGTERM still ends the process at once ----
    out = os.path.join(tmp, "stuck")
    proc = start(tmp, out, {"steps": 29, "hang": "c"})
    mine = first_line(proc)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and step_lines(out) < 29:
        time.sleep(0.05)
    t.eq(step_lines(out), 29, "stuck in C: the 29 steps reach steps.jsonl while the main "
         "thread is stuck (the package's sender thread)")
    time.sleep(0.3)  # surely in the C call
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _, err = finish(proc, timeout=20)
    t.ok(proc.returncode == 143 and time.monotonic() - t0 < 10,
         "stuck in C: SIGTERM kills as the default action would (143 after %.1f s)"
         % (time.monotonic() - t0), detail=f"got {proc.returncode}\n" + err[-800:])
    t.eq(report(out).get("steps"), 29, "stuck in C: all 29 steps in the report")

    # ---- SIGKILL of gpuscope run mid-run, then gpuscope report DIR ----
    out = os.path.join(tmp, "kill")
    progress = os.path.join(tmp, "progress")
    proc = start(tmp, out, {"steps": 100000, "sleep": 0.01, "progress": progress})
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and step_lines(out) < 100:
        time.sleep(0.1)
    time.sleep(1.0)
    t_kill = time.time()
    os.kill(proc.pid, signal.SIGKILL)  # gpuscope run only; the script goes on
    proc.wait()
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGKILL)  # then the script (gpuscope run's process group)
    finish(proc)
    with open(progress) as f:
        made = [(int(a), float(b)) for a, b in (x.split() for x in f if len(x.split()) == 2)]
    by_kill = max((n for n, ts in made if ts <= t_kill), default=0)
    second_before = max((n for n, ts in made if ts <= t_kill - 1.25), default=0)
    jsonl = step_lines(out)
    t.ok(second_before <= jsonl <= by_kill,
         f"kill: steps.jsonl holds {jsonl} steps; the script had made {second_before} 1.25 s "
         f"before the kill and {by_kill} at it")
    try:
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(out, "samples.db"), uri=True)
        stored = db.execute("SELECT count(*) FROM step").fetchone()[0]
        db.close()
    except sqlite3.Error as e:
        stored = str(e)
    second_before2 = max((n for n, ts in made if ts <= t_kill - 2.25), default=0)
    t.ok(isinstance(stored, int) and second_before2 <= stored <= by_kill,
         f"kill: samples.db holds {stored} steps (flushed every second: at least the "
         f"{second_before2} made 2.25 s before the kill)")
    t.ok(not os.path.exists(os.path.join(out, "metrics_report.json")),
         "kill: no metrics_report.json (gpuscope run never ended)")
    p = subprocess.run([BIN, "report", out, "--data", "-o", os.path.join(tmp, "kill.json")],
                       capture_output=True, text=True, timeout=60)
    t.ok(p.returncode == 0, "kill: gpuscope report DIR reads the interrupted directory",
         detail=p.stderr)
    t.ok("the run was interrupted" in p.stderr, "kill: and says the run was interrupted",
         detail=p.stderr)
    try:
        with open(os.path.join(tmp, "kill.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    rrep = doc.get("report") or {}
    run = rrep.get("run") or {}
    t.ok(run.get("interrupted") is True and rrep.get("steps") == jsonl,
         f"kill: the rebuilt report: interrupted, {rrep.get('steps')} steps (steps.jsonl "
         f"{jsonl})", detail=json.dumps(run)[:600])

    with open(os.path.join(out, "steps.jsonl"), "a") as f:
        f.write('{"peer_pid":1,"peer_uid":0,"conn":1,"v":1,"type":"st')  # a line cut short
    p = subprocess.run([BIN, "report", out, "--data", "-o", os.path.join(tmp, "kill2.json")],
                       capture_output=True, text=True, timeout=60)
    try:
        with open(os.path.join(tmp, "kill2.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    run = (doc.get("report") or {}).get("run") or {}
    t.ok(p.returncode == 0 and run.get("rebuilt_lines_skipped") == 1 and
         (doc.get("report") or {}).get("steps") == jsonl,
         "kill: a last line cut short is left out (counted), the steps before it kept",
         detail=p.stderr + json.dumps(run)[:400])

    # ---- a full disk: a 1 MiB tmpfs as the run directory ----
    mnt = os.path.join(tmp, "small")
    os.mkdir(mnt)
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt],
                       capture_output=True, text=True)
    if m.returncode != 0:
        t.skip("full disk", "mounting a tmpfs is not permitted here (%s)" % m.stderr.strip())
    else:
        try:
            fallback = os.path.join(tmp, "fallback")
            os.mkdir(fallback)
            out = os.path.join(mnt, "run")
            # ~450 bytes a step record: 3000 steps outgrow 1 MiB
            proc = start(tmp, out, {"steps": 3000}, TMPDIR=fallback)
            _, err = finish(proc, timeout=240)
            t.ok(proc.returncode == 123, "full disk: exit status 123 although the script "
                 "exited 0", detail=f"got {proc.returncode}\n" + err[-1500:])
            t.ok("No space left on device" in err, "full disk: the error is named",
                 detail=err[-1500:])
            moved = [os.path.join(fallback, d, "metrics_report.json")
                     for d in os.listdir(fallback) if d.startswith("gpuscope-report-")]
            rep = report(os.path.dirname(moved[0])) if moved else {}
            t.ok(len(moved) == 1 and rep.get("steps") == 3000 and moved[0] in err,
                 "full disk: the report (3000 steps) written to another directory, which "
                 "stderr names", detail=err[-1500:])
            t.ok("is incomplete" in err, "full disk: a last line says what the directory lacks",
                 detail=err[-600:])
        finally:
            subprocess.run(["umount", "-l", mnt], capture_output=True)

pyhelp.exit_now(t.done())
