"""`gpuscope run`'s hang watchdog recorded in the final report, with real torch on CPU and a
training script that never imports gpuscope (stacks_targets/ddp_hang.py, which writes its own
truth: when it started and when each step ended):

  - a 2-rank gloo DDP job under torch.distributed.run whose rank 1 sleeps at step 30 while
    rank 0 waits in the gradient all-reduce, stopped with SIGTERM once the watchdog fired:
    the report's "hangs" names rank 1 as the one outside a collective at the script's sleep
    line, outcome "hung" stopped by SIGTERM, the hang finding first (no run_failed),
    train_runtime the job's wall time on the test's own clock, and the step lines carry
    "[rank N]"; no NCCL flight recorder pointer when the ranks have none;
  - one process on a GPU an nvml-sim scenario keeps 95 % busy with another tenant's process:
    the watchdog still fires (the run's own process has no SM activity), and --log-steps 0
    silences the step lines;
  - one process that stops before its first step: the watchdog fires on no step and no CPU.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import BIN, SIM, clean_up_at_exit, free_port  # noqa: E402
from tap import Tap  # noqa: E402

PY = "/usr/bin/python3"
HERE = os.path.dirname(os.path.abspath(__file__))
TRAIN = os.path.join(HERE, "stacks_targets", "ddp_hang.py")
with open(TRAIN) as f:
    HANG_LINE = [i for i, s in enumerate(f, 1) if "the rank hangs here" in s][0]
t = Tap()
TMP = tempfile.mkdtemp(prefix="gs-run-hang-")
procs = []
clean_up_at_exit(procs, [TMP])


def scenario():
    """GPU 0 at 95 % for another tenant's process; the run's process (CMD) on it idle."""
    s = {"scenario_version": 1, "description": "hang on a shared GPU",
         "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-1111-2222-3333-444444444444",
                   "pci": {"bus": "0x18", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
                   "power": {"default_limit_w": 700}, "architecture": "hopper",
                   "metrics": {"util_gpu_pct": 95, "power_w": 520}}],
         "processes": [{"id": "child", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"}, "gpu": 0,
                        "used_memory_mib": 1024, "sm_util_pct": 0},
                       {"id": "tenant", "pid": 4000001, "gpu": 0, "used_memory_mib": 30000,
                        "sm_util_pct": 95}]}
    path = os.path.join(TMP, "shared.json")
    with open(path, "w") as fh:
        json.dump(s, fh)
    return path


def hang_run(name, args, cmd, env_extra, timeout=150):
    """Runs gpuscope run, waits for the watchdog's line on stderr, then SIGTERM; returns
    (exit status, stderr, report, the test's wall clock of gpuscope run, fired)."""
    out = os.path.join(TMP, name)
    env = dict(os.environ, NO_COLOR="1", **env_extra)
    env.pop("GPUSCOPE_LOG_STEPS", None)
    err_path = os.path.join(TMP, name + ".err")
    err = open(err_path, "w")
    t0 = time.time()
    p = subprocess.Popen([BIN, "run", "--out", out, "--hang-after", "3", "--hang-min", "3"] +
                         args + ["--"] + cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
    procs.append(p)
    fired = False
    end = time.monotonic() + timeout
    while time.monotonic() < end and p.poll() is None:
        with open(err_path) as fh:
            text = fh.read()
        # the watchdog's lines, and for a 2-rank job the ranks' answers (flight recorder)
        if "no step for" in text and ("flight recorder" in text or "rank" not in name):
            fired = True
            break
        time.sleep(0.5)
    stop_at = time.time()
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
    t1 = time.time()
    err.close()
    with open(err_path) as fh:
        text = fh.read()
    rep = {}
    try:
        with open(os.path.join(out, "metrics_report.json")) as fh:
            rep = json.load(fh)
    except OSError:
        pass
    return p.returncode, text, rep, (t0, stop_at, t1), fired


def truth(prefix, rank):
    """The script's own record: its start and its steps' end times."""
    start, steps = None, []
    try:
        with open("%s.rank%d" % (prefix, rank)) as fh:
            for line in fh:
                w = line.split()
                if w[0] == "start":
                    start = float(w[1])
                elif w[0] == "step":
                    steps.append(float(w[2]))
    except OSError:
        pass
    return start, steps


# ---- 2 ranks, rank 1 hangs at step 30, SIGTERM after the watchdog ----
tr = os.path.join(TMP, "ddp")
rc, err, rep, (t0, stop_at, t1), fired = hang_run(
    "ddp-2rank", [],
    [PY, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
     str(free_port()), "--redirects", "1", "--tee", "1", "--log_dir", os.path.join(TMP, "tlogs"),
     TRAIN, tr, "30"],
    {"GPUSCOPE_NVML_LIBRARY": os.path.join(TMP, "no-nvml.so")})
t.ok(fired, "2 ranks: the watchdog fired", err[-3000:])
hangs = rep.get("hangs") or [{}]
h = hangs[-1]
ranks = {r.get("rank"): r for r in h.get("ranks", [])}
r1, r0 = ranks.get(1, {}), ranks.get(0, {})
t.eq(h.get("stuck_ranks"), [1], "the hang names rank 1 as the rank outside a collective")
t.ok(r1.get("file") == TRAIN and r1.get("line") == HANG_LINE and not r1.get("in_collective"),
     "rank 1's main thread at the script's sleep line (%s:%d)" % (os.path.basename(TRAIN), HANG_LINE),
     json.dumps(r1))
t.ok(r0.get("in_collective") is True and r0.get("user_file") == TRAIN,
     "rank 0 waits in a collective (DDP's all-reduce in backward), called from the script",
     json.dumps(r0))
_, steps1 = truth(tr, 1)
_, steps0 = truth(tr, 0)
last = max(steps1) if steps1 else float("nan")
t.ok(len(steps1) == 29 and len(steps0) == 29, "the script's truth: 29 steps on each rank",
     (len(steps0), len(steps1)))
# The hang starts at the last step record received: at most the package's batching (1 s)
# after rank 1's true last step, never before the script's first steps.
t.ok(steps1 and last - 2.5 <= h.get("started_at", 0) <= last + 1.5,
     "hang started_at within the batching of rank 1's last step (%.2f vs %.2f)" %
     (h.get("started_at", 0), last))
t.ok(h.get("until_job_end") is True and h.get("ended_at") is None and
     stop_at - 1 <= h["started_at"] + h["duration_seconds"] <= t1,
     "the hang lasted until the job was stopped (duration %.1f s)" % h.get("duration_seconds", -1),
     json.dumps(h)[:600])
oc = rep.get("outcome") or {}
t.ok(oc.get("status") == "hung" and oc.get("stopped_by") == "SIGTERM" and oc.get("hang") == 1,
     "outcome: hung, stopped by SIGTERM", json.dumps(oc)[:400])
ids = [f.get("id") for f in rep.get("findings", [])]
f0 = (rep.get("findings") or [{}])[0]
t.ok(ids[:1] == ["hang"] and "run_failed" not in ids and "rank 1 is not in a collective" in
     f0.get("title", "") and "ddp_hang.py:%d" % HANG_LINE in f0.get("title", "") and
     "stopped by SIGTERM" in f0.get("title", ""),
     "the hang finding first, naming rank 1 and its line; no run_failed", json.dumps(f0)[:800])
wall = t1 - t0
rt = rep.get("train_runtime") or 0
t.ok(wall - 3.0 <= rt <= wall, "train_runtime is the job's wall time (%.2f s; test's clock %.2f s)"
     % (rt, wall))
span = rep.get("steps_span_seconds") or 0
t.ok(0 < span < rt - 3, "steps_span_seconds is the span of the steps (%.2f s)" % span)
done = oc.get("steps_completed") or 0
t.ok(done == 29, "every step the script made is counted: the sender flushed before the stop "
     "(%d of 29)" % done)
t.ok("[rank 0] Step 10:" in err and "[rank 1] Step 10:" in err and
     "\nStep 10:" not in err, "the step lines carry [rank N] under torchrun", err[-2000:])
t.ok("no NCCL flight recorder dump" in err and "flight recorder of each rank" not in err and
     h.get("nccl_dump") is None and h.get("nccl_unavailable"),
     "no flight recorder pointer when every rank has none (torch 1.13)", err[-1500:])
t.ok("outcome                      hung: stopped by SIGTERM" in err and "fix the failure" not in err,
     "the summary: hung, stopped by SIGTERM, no 'fix the failure'", err[-2500:])

# ---- a GPU kept busy by another tenant: the run's own SM activity gates the watchdog ----
tr = os.path.join(TMP, "shared")
rc, err, rep, _, fired = hang_run(
    "shared", ["--interval", "0.2", "--log-steps", "0"], [PY, TRAIN, tr, "30", "0"],
    {"GPUSCOPE_NVML_LIBRARY": SIM, "NVML_SIM_SCENARIO": scenario()})
h = (rep.get("hangs") or [{}])[-1]
t.ok(fired and "the run's processes idle on their shared GPUs" in err,
     "shared GPU at 95 %: the watchdog fired on the run's own idle process", err[-2000:])
t.ok(h.get("gpus") == "the run's processes idle on their shared GPUs" and
     (h.get("ranks") or [{}])[0].get("line") == HANG_LINE, "the report's hang on the shared GPU",
     json.dumps(h)[:600])
t.ok("Step " not in err, "--log-steps 0: no step lines", err[-1500:])

# ---- no step at all: the watchdog fires on no step and no CPU ----
tr = os.path.join(TMP, "nostep")
rc, err, rep, _, fired = hang_run("nostep", [], [PY, TRAIN, tr, "1", "0"],
                                  {"GPUSCOPE_NVML_LIBRARY": os.path.join(TMP, "no-nvml.so")})
h = (rep.get("hangs") or [{}])[-1]
start, steps = truth(tr, 0)
t.ok(fired and "no step yet" in err and not steps, "no step yet: the watchdog fired", err[-2000:])
t.ok(h.get("steps_before") == 0 and (h.get("ranks") or [{}])[0].get("line") == HANG_LINE and
     (rep.get("outcome") or {}).get("status") == "hung",
     "the report: a hang before the first step, at the sleep line", json.dumps(h)[:600])

sys.exit(t.done())
