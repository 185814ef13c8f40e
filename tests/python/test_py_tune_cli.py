"""`gpuscope tune` (the driver) and `gpuscope run --stop-after-steps` on real PyTorch (CPU),
with tests/python/tune/loop.py: unmodified scripts that never import gpuscope, whose trials the
package's hooks apply (GPUSCOPE_TUNE, tune-applied-rank<R>.json; tests/python/test_py_tune.py
tests the hooks themselves).

  run --stop-after-steps   outcome "stopped", exit 0, the window's steps there, no process of
                           the command's group (loader workers included) left
  data-bound loop          tune picks num_workers >= 1; a separate `gpuscope run` with that
                           setting measures the same steps/s within 15 %
  compute-bound loop       no candidate, "No setting worth changing", best null
  a crashing trial         reported crashed with its exit, the others go on
  early cut and budget     a much slower trial is cut; a budget skips what would not fit
  refusals                 no training steps in the baseline; a hook that saw no DataLoader
  HF-Trainer-shaped        framework hf: the worker count goes in GPUSCOPE_TUNE's
                           training_args, the change is a TrainingArguments line; a learning
                           rate of 50 (--try args.learning_rate) is flagged: its loss diverges
  2-rank DDP (torchrun)    both ranks get the trial (tune-applied-rank0/1.json), two ranks
  Ctrl-C                   kill(SIGINT) at tune during a trial, and a terminal's Ctrl-C
                           during the baseline: exit 130, what was measured written, the
                           trial's run stopped its command, nothing left
  ms-swift (a stand-in)     its flags appended to the command (--dataloader_num_workers 2),
                           the change spelled as a swift flag
  a GPU (nvml-sim at 70 %)  the table's GPU utilization is the window's (samples.db); a
                           pin_memory trial on a machine without CUDA is refused by the hooks:
                           not applied, with their error
"""
import atexit
import json
import os
import pty
import select
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import FAKE_HF, PYTHON, Tap  # noqa: E402
from gsenv import BIN, free_port  # noqa: E402
import signal  # noqa: E402

t = Tap()
HERE = os.path.dirname(os.path.abspath(__file__))
LOOP = os.path.join(HERE, "tune", "loop.py")
TMP = tempfile.mkdtemp(prefix="gs-tune-cli-")
atexit.register(shutil.rmtree, TMP, True)


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


# ---- usage ----
for args, what in ((["run", "--stop-after-steps", "0", "--", "true"], "a number of steps"),
                   (["run", "--stop-grace", "-1", "--", "true"], "a number of seconds"),
                   (["tune", "--try", "batch=4", "--", "true"], "not a setting tune can change"),
                   (["tune", "--budget", "10x", "--", "true"], "not a duration"),
                   (["tune", "--scope", "eval", "--", "true"], "not all or train")):
    p = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=30,
                       env=pyhelp.child_env())
    t.ok(p.returncode == 2 and what in p.stderr, "usage: %s refused" % " ".join(args), p.stderr)
p = subprocess.run([BIN, "tune", "--help"], capture_output=True, text=True, timeout=30)
t.ok(p.returncode == 0 and "--try KEY=V1,V2" in p.stdout and "docs/tune.md" in p.stdout,
     "usage: tune --help")

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
p, doc, out = tune("data", "--steps", "60", "--warmup", "5", "--", PYTHON, LOOP, "data",
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
bw = tr.get("(unchanged)", {}).get("window", {})
t.ok(pyhelp.near(bw.get("tokens_per_second"), 128 * (bw.get("steps_per_second") or 0), 1e-6) and
     any(line.startswith("tokens/s") for line in p.stdout.splitlines()),
     "data-bound: the window's tokens/s (128 a step) and its row in the table (%s)"
     % bw.get("tokens_per_second"))
t.ok(os.path.exists(os.path.join(out, "tune.html")) and
     "gpuscope tune" in open(os.path.join(out, "tune.html")).read(),
     "data-bound: tune.html has the trial table")
if best:
    conf = os.path.join(TMP, "confirm")
    env = pyhelp.child_env(NO_COLOR="1", GPUSCOPE_TUNE=json.dumps(best["gpuscope_tune"]))
    subprocess.run([BIN, "run", "--out", conf, "--stop-after-steps", "65", "--stacks", "off",
                    "--", PYTHON, LOOP, "data", "100000"], env=env, capture_output=True,
                   timeout=120)
    got = window_sps(conf, 5, 60)
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

# ---- an HF-Trainer-shaped script ----
p, doc, out = tune("hf", "--steps", "10", "--warmup", "2", "--only-try", "--try", "num_workers=2",
                   "--try", "args.learning_rate=50", "--cut-margin", "0", "--", PYTHON, LOOP,
                   "hf", "100000", env={"PYTHONPATH": FAKE_HF + os.pathsep + pyhelp.PYROOT})
tr = trials(doc)
nw = tr.get("num_workers=2", {})
t.ok(doc.get("framework") == "hf" and
     (nw.get("gpuscope_tune") or {}).get("training_args") == {"dataloader_num_workers": 2},
     "HF: the worker count reaches TrainingArguments (GPUSCOPE_TUNE training_args)",
     p.stdout[-2000:] + p.stderr[-1000:])
applied = {}
try:
    applied = json.load(open(os.path.join(out, nw.get("dir", "-"), "tune-applied-rank0.json")))
except (OSError, ValueError):
    pass
t.ok(applied.get("applied", {}).get("training_args.dataloader_num_workers") == 2,
     "HF: the trial's run directory says it was applied", applied)
lr = tr.get("args.learning_rate=50", {})
t.ok(lr.get("loss_diverges") is True and nw.get("loss_diverges") is False and
     (nw.get("loss_difference") or 0) < 1e-3,
     "HF: lr 50 flagged (its loss diverges: %s), num_workers=2 trains the same (%s)"
     % (lr.get("loss_difference"), nw.get("loss_difference")))
t.ok(doc.get("best") != lr.get("name") and (doc.get("best") is None or
                                            "TrainingArguments(..., dataloader_num_workers=2)"
                                            in (doc.get("change") or "")),
     "HF: a diverging trial is never the best; the change is a TrainingArguments line",
     doc.get("change"))

# ---- a 2-rank DDP job: both ranks get each trial ----
logs = os.path.join(TMP, "ddp-logs")
p, doc, out = tune("ddp", "--steps", "8", "--warmup", "2", "--only-try", "--try",
                   "num_workers=1", "--", PYTHON, "-m", "torch.distributed.run",
                   "--nproc_per_node", "2", "--master_port", str(free_port()), "--redirects",
                   "1", "--tee", "1", "--log_dir", logs, LOOP, "data", "100000",
                   env={"OMP_NUM_THREADS": "1"})
tr = trials(doc)
one = tr.get("num_workers=1", {})
ranks = []
for r in (0, 1):
    try:
        a = json.load(open(os.path.join(out, one.get("dir", "-"), "tune-applied-rank%d.json" % r)))
        ranks.append(a.get("applied", {}).get("dataloader.num_workers"))
    except (OSError, ValueError):
        ranks.append(None)
t.ok(ranks == [1, 1], "DDP: both ranks applied the trial (%s)" % ranks,
     p.stdout[-2000:] + p.stderr[-1000:])
t.ok(one.get("status") == "measured" and one.get("window", {}).get("ranks") == 2 and
     tr.get("(unchanged)", {}).get("window", {}).get("ranks") == 2,
     "DDP: baseline and trial measured over two ranks", one)

# ---- Ctrl-C ----
out = os.path.join(TMP, "ctrlc")
pt = subprocess.Popen([BIN, "tune", "--out", out, "--steps", "3000", "--warmup", "2",
                       "--only-try", "--try", "num_workers=1", "--", PYTHON, LOOP, "data",
                       "100000"], env=pyhelp.child_env(NO_COLOR="1", LOOP_SLEEP="0.001"),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
pt_steps = os.path.join(out, "trial-00-baseline", "steps.jsonl")
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        if sum(1 for _ in open(pt_steps)) > 20:
            break
    except OSError:
        pass
    time.sleep(0.2)
pt.send_signal(signal.SIGINT)
try:
    so, se = pt.communicate(timeout=60)
except subprocess.TimeoutExpired:
    pt.kill()
    so, se = pt.communicate()
t.ok(pt.returncode == 130, "Ctrl-C: exit 130 (%s)" % pt.returncode, se[-1500:])
doc = {}
try:
    doc = json.load(open(os.path.join(out, "tune.json")))
except (OSError, ValueError):
    pass
st = [(x["status"], x["note"]) for x in doc.get("trials", [])]
t.ok(doc.get("interrupted") is True and st[:1] == [("cut early", "interrupted (Ctrl-C)")],
     "Ctrl-C: tune.json says what was measured (%s)" % st, so[-1500:])
rep = {}
try:
    rep = json.load(open(os.path.join(out, "trial-00-baseline", "metrics_report.json")))
except (OSError, ValueError):
    pass
t.ok(rep.get("outcome", {}).get("status") == "interrupted" and
     not group_alive(rep.get("run", {}).get("pid", -1)),
     "Ctrl-C: the trial's run stopped its command and wrote its report", rep.get("outcome"))

# ---- a terminal's Ctrl-C (tune and its trial's gpuscope run in the terminal's group) ----
out = os.path.join(TMP, "ctrlc-tty")
master, slave = pty.openpty()


def _ctty():
    import fcntl
    import termios
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


pt = subprocess.Popen([BIN, "tune", "--out", out, "--steps", "3000", "--warmup", "2", "--",
                       PYTHON, LOOP, "data", "100000"],
                      env=pyhelp.child_env(NO_COLOR="1", LOOP_SLEEP="0.001"), stdin=slave,
                      stdout=slave, stderr=slave, start_new_session=True, preexec_fn=_ctty)
os.close(slave)
pt_steps = os.path.join(out, "trial-00-baseline", "steps.jsonl")
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        if sum(1 for _ in open(pt_steps)) > 20:
            break
    except OSError:
        pass
    time.sleep(0.2)
os.write(master, b"\x03")
buf = b""
end = time.monotonic() + 60
while pt.poll() is None and time.monotonic() < end:
    r, _, _ = select.select([master], [], [], 0.1)
    if r:
        try:
            buf += os.read(master, 65536)
        except OSError:
            break
if pt.poll() is None:
    pt.kill()
pt.wait()
os.close(master)
text = buf.decode(errors="replace")
rep = {}
try:
    rep = json.load(open(os.path.join(out, "trial-00-baseline", "metrics_report.json")))
except (OSError, ValueError):
    pass
t.ok(pt.returncode == 130 and "interrupted (Ctrl-C) during the baseline" in text,
     "terminal Ctrl-C: exit 130, says so (%s)" % pt.returncode, text[-1500:])
t.ok(rep.get("outcome", {}).get("status") == "interrupted" and
     not group_alive(rep.get("run", {}).get("pid", -1)),
     "terminal Ctrl-C: the baseline's run stopped its command's group and wrote its report",
     rep.get("outcome"))

# ---- ms-swift: flags appended ----
p, doc, out = tune("swift", "--steps", "20", "--warmup", "3", "--only-try", "--try",
                   "num_workers=2", "--", os.path.join(HERE, "tune", "swift"), "sft")
tr = trials(doc)
two = tr.get("num_workers=2", {})
log = ""
try:
    log = open(os.path.join(out, two.get("name", "-") + ".log")).read()
except OSError:
    pass
t.ok(doc.get("framework") == "ms-swift" and two.get("status") == "measured" and
     "swift: num_workers=2" in log and two.get("gpuscope_tune") is None,
     "ms-swift: the trial's flag reached the command line, no GPUSCOPE_TUNE",
     p.stdout[-2000:] + p.stderr[-800:])
t.ok(doc.get("best") is None or doc.get("change") == "swift ... --dataloader_num_workers 2",
     "ms-swift: the change is a swift flag (%s)" % doc.get("change"))

# ---- a GPU (nvml-sim): the window's utilization; pin_memory refused without CUDA ----
gpu = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0d0e0f10-1111-2222-3333-444444444444",
       "pci": {"bus": "0x19", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
       "power": {"default_limit_w": 700}, "architecture": "hopper",
       "metrics": {"util_gpu_pct": 70, "power_w": 300}}
scen = os.path.join(TMP, "gpu.json")
with open(scen, "w") as f:
    json.dump({"scenario_version": 1, "gpus": [gpu],
               "processes": [{"id": "child", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"}, "gpu": 0,
                              "used_memory_mib": 1024, "sm_util_pct": 70}]}, f)
p, doc, out = tune("gpu", "--steps", "30", "--warmup", "3", "--only-try", "--try",
                   "pin_memory=true", "--", PYTHON, LOOP, "data", "100000",
                   env={"GPUSCOPE_NVML_LIBRARY": pyhelp.SIM, "NVML_SIM_SCENARIO": scen})
tr = trials(doc)
base = tr.get("(unchanged)", {})
t.ok(base.get("gpu_utilization_source") == "window" and
     pyhelp.near(base.get("gpu_utilization_percent"), 70, 0.01),
     "GPU: the baseline's utilization over its window is the GPU's 70 %% (%s, %s)"
     % (base.get("gpu_utilization_percent"), base.get("gpu_utilization_source")),
     p.stdout[-2000:] + p.stderr[-1000:])
t.ok(any(line.startswith("GPU utilization %") and "70.0" in line
         for line in p.stdout.splitlines()), "GPU: the table's GPU utilization row")
pin = tr.get("pin_memory=true", {})
t.ok(pin.get("status") == "not applied" and "CUDA" in (pin.get("note") or ""),
     "GPU without CUDA in torch: the pin_memory trial is not applied, the hooks say why",
     pin)

rc = t.done()
shutil.rmtree(TMP, True)
pyhelp.exit_now(rc)
