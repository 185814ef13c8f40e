"""`gpuscope run --profile STEPS` on Debian's torch 1.13 (CPU, no Kineto): the package drives
torch.profiler for the window (python/gpuscope/_profile.py), writes one trace per window and
rank into DIR/profile in torch's older CPU-only format, and `gpuscope run` analyses the last
window into the report's "profile" section (src/trace/window.c): steps labelled with the
training step numbers, CPU op figures, a note that there is no GPU activity. Also the window
spec parser on both sides, every:P:N windows, a run that ends inside its window, and a bad
--profile value.
"""
import json
import os
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
from gpuscope import _profile  # noqa: E402

t = Tap()

# the spec, as documented
t.eq(_profile.parse("100:110"), (100, 10, 0), "parse 100:110: steps 100..109")
t.eq(_profile.parse("every:500:5"), (500, 5, 500), "parse every:500:5")
t.eq(_profile.parse("1:4"), (2, 2, 0), "parse 1:4: the window starts at step 2 at the earliest")
for bad in ("", "5", "5:5", "7:3", "every:5", "every:5:5", "every:1:1", "a:b", "every:x:1"):
    try:
        _profile.parse(bad)
        t.ok(False, "parse %r is refused" % bad)
    except ValueError:
        t.ok(True, "parse %r is refused" % bad)

TRAIN = textwrap.dedent("""
    import sys
    import torch
    import gpuscope
    torch.set_num_threads(1)
    m = torch.nn.Sequential(torch.nn.Linear(128, 128), torch.nn.ReLU(), torch.nn.Linear(128, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(int(sys.argv[1])):
        with gpuscope.step(samples=16):
            x = torch.randn(16, 128)
            loss = m(x).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
""")


def run(tmp, name, profile, steps):
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    out = os.path.join(tmp, name)
    p = subprocess.run([BIN, "run", "--out", out, "--profile", profile, "--", PYTHON, script,
                        str(steps)], env=pyhelp.child_env(), capture_output=True, text=True,
                       timeout=240)
    return p, out


with tempfile.TemporaryDirectory() as tmp:
    p, out = run(tmp, "one", "4:7", 10)
    t.eq(p.returncode, 0, "gpuscope run --profile 4:7: exit 0")
    files = sorted(os.listdir(os.path.join(out, "profile"))) if os.path.isdir(
        os.path.join(out, "profile")) else []
    t.eq(files, ["rank0-step4.json"], "one trace for the window, named by rank and first step")
    rep = json.load(open(os.path.join(out, "metrics_report.json")))
    prof = rep.get("profile") or {}
    t.eq((prof.get("steps"), prof.get("windows"), prof.get("window_first_step")), ("4:7", 1, 4),
         "report: profile section with the spec and the window")
    r = (prof.get("ranks") or [{}])[0]
    t.eq((r.get("format"), r.get("gpu_activities")), ("legacy", 0),
         "torch 1.13 CPU writes the legacy format; no GPU activity")
    t.ok("CPU-only" in r.get("note", ""), "the report says there are CPU op figures only",
         detail=r.get("note"))
    t.eq([s["step"] for s in r.get("steps", [])], [4, 5, 6],
         "ProfilerStep#N carry the training steps 4, 5, 6")
    names = [c["name"] for c in r.get("cpu_ops", [])]
    t.ok("aten::linear" in names or "aten::addmm" in names, "CPU ops of the model are listed",
         detail=names)
    t.ok("profile (steps 4:7" in p.stderr, "the exit summary has a profile line",
         detail=p.stderr[-800:])
    # the warmup step 3, the window's 4-6 and step 7 (the trace written at the window's end
    # lands in its data gap) are flagged and left out of the step statistics
    with open(os.path.join(out, "steps.jsonl")) as f:
        flagged = [x.get("step") for x in map(json.loads, f) if x.get("profiled")]
    t.eq(flagged, [3, 4, 5, 6, 7], "steps 3-7 flagged profiled in the step records")
    t.eq((rep.get("steps"), rep.get("profiled_steps"),
          (rep.get("phases") or {}).get("total_step", {}).get("count")), (10, 5, 5),
         "report: 10 steps, 5 profiled, the step statistics over the other 5")
    a = subprocess.run([BIN, "trace", "analyze", os.path.join(out, "profile")],
                       capture_output=True, text=True, timeout=60)
    t.ok(a.returncode == 0 and "top CPU ops" in a.stdout, "gpuscope trace analyze reads it",
         detail=a.stdout[:300] + a.stderr)

    p, out = run(tmp, "every", "every:4:2", 11)
    files = sorted(os.listdir(os.path.join(out, "profile"))) if os.path.isdir(
        os.path.join(out, "profile")) else []
    t.eq(files, ["rank0-step4.json", "rank0-step8.json"], "every:4:2: windows at 4 and 8")
    prof = json.load(open(os.path.join(out, "metrics_report.json"))).get("profile") or {}
    t.eq((prof.get("windows"), prof.get("window_first_step")), (2, 8),
         "every: the report analyses the last window")
    t.eq([s["step"] for s in (prof.get("ranks") or [{}])[0].get("steps", [])], [8, 9],
         "every: its steps")
    t.ok("profile (steps every:4:2; 2 windows, the last (from step 8) analysed" in p.stderr,
         "every: the summary's label names the window it analyses", detail=p.stderr[-800:])

    p, out = run(tmp, "tight", "every:3:2", 9)
    files = sorted(os.listdir(os.path.join(out, "profile"))) if os.path.isdir(
        os.path.join(out, "profile")) else []
    t.eq(files, ["rank0-step3.json", "rank0-step6.json"],
         "every:3:2: back-to-back windows (the next opens where the last closes); 9 is unfinished")

    p, out = run(tmp, "short", "8:20", 10)
    prof = json.load(open(os.path.join(out, "metrics_report.json"))).get("profile") or {}
    t.ok(p.returncode == 0 and prof.get("windows") == 0 and "no trace" in prof.get("note", ""),
         "a run that ends inside its window: no trace, a note, the run unharmed",
         detail=json.dumps(prof)[:300])

    # NVTX ranges (GPUSCOPE_NVTX=1): torch.cuda.nvtx recorded by a stand-in, since this torch
    # has no CUDA; every range started is ended, with the phase names and "step N".
    nv = os.path.join(tmp, "nvtx.py")
    with open(nv, "w") as f:
        f.write(textwrap.dedent("""
            import json, torch, torch.cuda.nvtx as nvtx
            log, ids = [], iter(range(1, 1000))
            def start(name):
                i = next(ids); log.append(("start", name, i)); return i
            nvtx.range_start = start
            nvtx.range_end = lambda i: log.append(("end", i))
            import gpuscope
            for s in range(2):
                with gpuscope.step():
                    with gpuscope.phase("forward"):
                        pass
                    with gpuscope.phase("backward"):
                        pass
                    with gpuscope.phase("optimizer"):
                        pass
            print("NVTX " + json.dumps(log))
        """))
    for flag, want in (("1", True), ("0", False)):
        p = subprocess.run([PYTHON, nv], env=pyhelp.child_env(GPUSCOPE_NVTX=flag),
                           capture_output=True, text=True, timeout=120)
        log = json.loads(p.stdout.split("NVTX ", 1)[1]) if "NVTX " in p.stdout else None
        if want:
            started = [e for e in log or [] if e[0] == "start"]
            ended = {e[1] for e in log or [] if e[0] == "end"}
            t.eq([e[1] for e in started][:4], ["step 1", "forward", "backward", "optimizer_step"],
                 "GPUSCOPE_NVTX=1: ranges for the step and its phases")
            t.ok(started and all(e[2] in ended for e in started),
                 "GPUSCOPE_NVTX=1: every range is ended", detail=log)
        else:
            t.eq(log, [], "GPUSCOPE_NVTX=0: no ranges")
    t.eq(_profile.nvtx_wanted({"CUDA_INJECTION64_PATH": "/opt/nvidia/nsys/libToolsInjection64.so"}),
         True, "NVTX on by itself under Nsight Systems (its injection library)")
    t.eq(_profile.nvtx_wanted({}), False, "NVTX off by default")

    # gpuscope trace capture: a window asked for from outside while the job runs (no
    # --profile); the next 2 steps after the request, on request only, once.
    slow = os.path.join(tmp, "slow.py")
    with open(slow, "w") as f:
        f.write(TRAIN.replace("opt.zero_grad()", "opt.zero_grad()\n        time.sleep(0.15)")
                .replace("import sys", "import sys, time"))
    out = os.path.join(tmp, "asked")
    job = subprocess.Popen([BIN, "run", "--out", out, "--", PYTHON, slow, "30"],
                           env=pyhelp.child_env(), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    steps_file = os.path.join(out, "steps.jsonl")
    for _ in range(300):
        if os.path.exists(steps_file) and sum(1 for _ in open(steps_file)) >= 4:
            break
        time.sleep(0.05)
    c = subprocess.run([BIN, "trace", "capture", "--dir", out, "--steps", "2"],
                       capture_output=True, text=True, timeout=30)
    t.ok(c.returncode == 0 and "2 step(s)" in c.stdout, "trace capture: the request is written",
         detail=c.stdout + c.stderr)
    jout, jerr = job.communicate(timeout=240)
    t.eq(job.returncode, 0, "trace capture: the job ran to its end under gpuscope run")
    files = sorted(os.listdir(os.path.join(out, "profile"))) if os.path.isdir(
        os.path.join(out, "profile")) else []
    t.eq(len(files), 1, "trace capture: one window, answered once", )
    prof = json.load(open(os.path.join(out, "metrics_report.json"))).get("profile") or {}
    st = [s["step"] for s in (prof.get("ranks") or [{}])[0].get("steps", [])]
    t.ok(prof.get("steps") == "on request" and len(st) == 2 and st[1] == st[0] + 1 and st[0] > 3,
         "trace capture: the report has the 2 steps after the request", detail=(prof.get("steps"), st))
    c = subprocess.run([BIN, "trace", "capture", "--dir", tmp], capture_output=True, text=True)
    t.ok(c.returncode == 6 and "not a gpuscope run directory" in c.stderr,
         "trace capture: a directory that is not a run's", detail=c.stderr)
    c = subprocess.run([BIN, "trace", "capture", "--dir", out, "--steps", "0"],
                       capture_output=True, text=True)
    t.eq(c.returncode, 2, "trace capture --steps 0: usage error")
    rep = json.load(open(os.path.join(tmp, "every", "metrics_report.json")))
    t.eq(rep["profile"]["steps"], "every:4:2", "--profile runs keep their spec")

    p, out = run(tmp, "bad", "every:3:3", 5)
    t.ok(p.returncode == 2 and "--profile" in p.stderr, "a bad --profile value: usage error",
         detail="%d %s" % (p.returncode, p.stderr))

pyhelp.exit_now(t.done())
