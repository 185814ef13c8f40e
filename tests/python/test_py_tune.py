"""`gpuscope tune` and `gpuscope run --stop-after-steps` on real PyTorch (CPU), with
tests/python/tune/loop.py: an unmodified plain loop that never imports gpuscope and applies
GPUSCOPE_TUNE itself (writing tune-applied-rank0.json as the package's tune hooks do).

  run --stop-after-steps   outcome "stopped", exit 0, the window's steps there, no process of
                           the command's group (loader workers included) left
  data-bound loop          tune picks num_workers >= 1; a separate `gpuscope run` with that
                           setting measures the same steps/s within 15 %
  compute-bound loop       no candidate, "No setting worth changing", best null
  a crashing trial         reported crashed with its exit, the others go on
  early cut and budget     a much slower trial is cut; a budget skips what would not fit
  refusals                 no training steps in the baseline; a hook that saw no DataLoader
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, Tap  # noqa: E402
from gsenv import BIN  # noqa: E402

t = Tap()
HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "tune", "loop.py")
TMP = tempfile.mkdtemp(prefix="gs-tune-")


def tune(name, *args, env=None, timeout=240):
    out = os.path.join(TMP, name)
    e = pyhelp.child_env(NO_COLOR="1", **(env or {}))
    p = subprocess.run([BIN, "tune", "--out", out, *args], env=e, capture_output=True,
                       text=True, timeout=timeout)
    try:
        with open(os.path.join(out, "tune.json")) as f:
            doc = json.load(f)
    except (OSError, ValueError):
        doc = {}
    return p, doc, out


def trials(doc):
    return {x["settings"]: x for x in doc.get("trials", [])}


def window_sps(out, warmup, steps):
    """steps/s of steps warmup+1..warmup+steps, timed from the end of step warmup (rank 0)."""
    t1 = {}
    with open(os.path.join(out, "steps.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "step" and r.get("rank", 0) == 0:
                t1[r["step"]] = r["t1"]
    last = max(s for s in t1 if s <= warmup + steps)
    return (last - warmup) / (t1[last] - t1[warmup])


def group_alive(pgid, wait_s=5.0):
    """Whether a live (not zombie) process of group pgid is left, after up to wait_s for
    those that got SIGKILL to go."""
    until = time.monotonic() + wait_s
    while True:
        alive = False
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    with open("/proc/%s/stat" % d) as f:
                        fields = f.read().rsplit(")", 1)[1].split()
                    alive |= int(fields[2]) == pgid and fields[0] != "Z"
                except (OSError, ValueError, IndexError):
                    pass
        if not alive or time.monotonic() > until:
            return alive
        time.sleep(0.1)


# ---- gpuscope run --stop-after-steps ----
out = os.path.join(TMP, "stop")
env = pyhelp.child_env(NO_COLOR="1", GPUSCOPE_TUNE='{"dataloader": {"num_workers": 2}}')
t0 = time.monotonic()
p = subprocess.run([BIN, "run", "--out", out, "--stop-after-steps", "15", "--", PYTHON, LOOP,
                    "data", "100000"], env=env, capture_output=True, text=True, timeout=120)
took = time.monotonic() - t0
rep = json.load(open(os.path.join(out, "metrics_report.json")))
oc = rep["outcome"]
t.ok(p.returncode == 0, "run --stop-after-steps: exit 0", p.stderr[-2000:])
t.ok(oc["status"] == "stopped" and oc["stopped_after_steps"] == 15,
     "run --stop-after-steps: outcome stopped after its window", oc)
t.ok(15 <= oc["steps_completed"] < 1000, "run --stop-after-steps: the window's steps and "
     "not the 100000 asked (%d)" % oc["steps_completed"])
t.ok("stopped: by gpuscope run (--stop-after-steps 15)" in p.stderr,
     "run --stop-after-steps: the summary says so", p.stderr[-1500:])
t.ok(not any(f["id"] == "run_failed" for f in rep["findings"]),
     "run --stop-after-steps: no run_failed finding")
t.ok(not group_alive(rep["run"]["pid"]), "run --stop-after-steps: nothing of the command's "
     "process group is left (loader workers)")
t.ok(took < 60, "run --stop-after-steps: took %.1f s" % took)

# ---- a data-bound loop: tune finds workers, a separate run confirms ----
p, doc, out = tune("data", "--steps", "20", "--warmup", "3", "--", PYTHON, LOOP, "data",
                   "100000")
tr = trials(doc)
best = next((x for x in doc.get("trials", []) if x["name"] == doc.get("best")), None)
t.ok(p.returncode == 0 and best is not None, "data-bound: tune names a best trial",
     p.stdout[-3000:] + p.stderr[-2000:])
nw = best and best["gpuscope_tune"]["dataloader"].get("num_workers", 0)
t.ok(bool(best) and nw >= 1, "data-bound: the best has num_workers >= 1 (%s)" % nw)
t.ok("DataLoader(..., num_workers=" in p.stdout and "steps/s" in p.stdout,
     "data-bound: the table and the DataLoader line", p.stdout[-3000:])
t.ok(tr.get("(unchanged)", {}).get("status") == "measured", "data-bound: baseline measured")
t.ok(os.path.exists(os.path.join(out, "tune.html")) and
     "gpuscope tune" in open(os.path.join(out, "tune.html")).read(),
     "data-bound: tune.html has the trial table")
if best:
    conf = os.path.join(TMP, "confirm")
    env = pyhelp.child_env(NO_COLOR="1", GPUSCOPE_TUNE=json.dumps(best["gpuscope_tune"]))
    subprocess.run([BIN, "run", "--out", conf, "--stop-after-steps", "23", "--stacks", "off",
                    "--", PYTHON, LOOP, "data", "100000"], env=env, capture_output=True,
                   timeout=120)
    got = window_sps(conf, 3, 20)
    want = best["window"]["steps_per_second"]
    base = tr["(unchanged)"]["window"]["steps_per_second"]
    t.ok(pyhelp.near(got, want, 0.15), "data-bound: a separate run with %s measures %.2f "
         "steps/s, tune's %.2f (baseline %.2f), within 15 %%" % (best["settings"], got, want,
                                                                 base))
    cmp = subprocess.run([BIN, "compare", os.path.join(out, "trial-00-baseline"),
                          os.path.join(out, best["dir"])], capture_output=True, text=True,
                         timeout=60, env=pyhelp.child_env(NO_COLOR="1"))
    t.ok(cmp.returncode == 0, "data-bound: gpuscope compare baseline best", cmp.stderr)

# ---- a compute-bound loop: nothing worth changing ----
p, doc, out = tune("compute", "--steps", "10", "--warmup", "2", "--", PYTHON, LOOP, "compute",
                   "100000")
t.ok(p.returncode == 0 and doc.get("best") is None and len(doc.get("trials", [])) == 1,
     "compute-bound: no candidate, no best", p.stdout[-2000:] + p.stderr[-1500:])
t.ok("No setting worth changing" in p.stdout, "compute-bound: says so")

# ---- a crashing trial, an early cut ----
p, doc, out = tune("crash", "--steps", "12", "--warmup", "2", "--only-try", "--try",
                   "num_workers=1", "--try", "env.LOOP_SLEEP=0.03", "--cut-margin", "0.3", "--",
                   PYTHON, LOOP, "crash", "100000")
tr = trials(doc)
crashed = tr.get("num_workers=1", {})
t.ok(crashed.get("status") == "crashed" and "exit 3" in (crashed.get("note") or ""),
     "crash: the trial that crashes is reported with its exit", crashed)
slow = tr.get("env.LOOP_SLEEP=0.03", {})
t.ok(slow.get("status") == "cut early", "early cut: the much slower trial is cut", slow)
t.ok(p.returncode == 0 and "crashed" in p.stdout and "cut early" in p.stdout,
     "crash and cut: the others went on, the table says both", p.stdout[-2000:])

# ---- the budget ----
p, doc, out = tune("budget", "--steps", "10", "--warmup", "2", "--budget", "1s", "--only-try",
                   "--try", "num_workers=1,2", "--", PYTHON, LOOP, "data", "100000")
st = [x["status"] for x in doc.get("trials", [])]
t.ok(st[:1] == ["measured"] and st[1:] == ["skipped", "skipped"],
     "budget: the trials that would not fit are skipped (%s)" % st, p.stdout[-1500:])

# ---- refusals ----
p, doc, out = tune("nosteps", "--", PYTHON, "-c", "print('no training here')")
t.ok(p.returncode == 1 and "shows no training steps" in p.stderr,
     "refused: a baseline without training steps", p.stderr[-1500:])
p, doc, out = tune("nodl", "--steps", "8", "--warmup", "2", "--only-try", "--try",
                   "num_workers=2", "--", PYTHON, LOOP, "nodl", "100000")
tr = trials(doc)
t.ok(tr.get("num_workers=2", {}).get("status") == "not applied" and
     "saw no DataLoader" in (tr.get("num_workers=2", {}).get("note") or ""),
     "refused: a trial whose hook saw no DataLoader is not applied", p.stdout[-1500:])

pyhelp.exit_now(t.done())
