"""`gpuscope run` end to end, on nvml-sim.

The child is a small stdlib Python script that connects to $GPUSCOPE_RUN_SOCKET
(SOCK_SEQPACKET) and sends hello/step/end records with known timings; a scenario written here
maps the child's pid (GPUSCOPE_RUN_CHILD_PID) to GPU 0 at a constant 80 % utilization and
2048 MiB, while GPU 1 (10 %, nobody of the run on it) must stay out of the run. Checked: the
report's ratios and GPU figures, steps.jsonl with SO_PEERCRED pids, samples.db readable
(PRAGMA integrity_check), exit codes (0, 3, signal -> 128+N, 127 not found, 126 not
executable, 2 usage, 125 out dir already used), SIGINT by kill() forwarded and a terminal
Ctrl-C delivered once, both still writing the report; hostile records (garbage, 100 KB, wrong
version, 10,000 malformed in a burst) rejected while good records after them count; another
process's records attributed to its own pid; no GPU at all; PYTHONPATH injection; sub-second
utilization from the driver's samples (a 0.4 s square wave whose 100 % peak the 1 s snapshot
window averages away), and the snapshot fallback where the GPU keeps no samples.
"""
import json
import os
import pty
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, SIM, send_records  # noqa: E402

PY = "/usr/bin/python3"
MIB = 1048576
t = Tap()
TMP = tempfile.mkdtemp(prefix="gs-run-e2e-")

SCENARIO = {
    "scenario_version": 1,
    "description": "gpuscope run test: the child on GPU 0 at 80 %, GPU 1 busy with others",
    "gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-1111-2222-3333-444444444444",
         "pci": {"bus": "0x18", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
         "power": {"default_limit_w": 700}, "architecture": "hopper",
         "metrics": {"util_gpu_pct": 80, "power_w": 350}},
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000001-1111-2222-3333-444444444444",
         "pci": {"bus": "0x2a", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
         "power": {"default_limit_w": 700}, "architecture": "hopper",
         "metrics": {"util_gpu_pct": 10, "power_w": 100}},
    ],
    "processes": [
        {"id": "child", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"}, "gpu": 0,
         "used_memory_mib": 2048},
        {"id": "other", "pid": 999999, "gpu": 1, "name": "someone-else", "used_memory_mib": 512},
    ],
}
SCEN_PATH = os.path.join(TMP, "scenario.json")
with open(SCEN_PATH, "w") as f:
    json.dump(SCENARIO, f)

# The child: argv = mode, then optional exit code. Steps: data 10 ms, forward 50, backward 30,
# optimizer 10, total 90 (so data / (data + total) = 0.1), 8 samples each.
CHILD = r'''
import json, os, signal, socket, sys, time
mode = sys.argv[1]
out = os.environ.get("GPUSCOPE_RUN_DIR", ".")
marker = os.environ["TEST_MARKER_DIR"]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(os.environ["GPUSCOPE_RUN_SOCKET"])
    return s
def send(s, o):
    s.send(json.dumps(o).encode() if not isinstance(o, bytes) else o)
def steps(s, first, n):
    base = time.time()  # steps before the run (less 60 s) are refused
    for i in range(first, first + n):
        t0 = base + i * 0.1
        send(s, {"v": 1, "type": "step", "step": i, "t0": t0, "t1": t0 + 0.09, "rank": 0,
                 "device": 0, "samples": 8,
                 "ms": {"data": 10.0, "forward": 50.0, "backward": 30.0,
                        "optimizer_step": 10.0, "total_step": 90.0}})
with open(os.path.join(marker, "env.json"), "w") as f:
    d = {k: v for k, v in os.environ.items() if k.startswith("GPUSCOPE") or k == "PYTHONPATH"}
    d["_pid"] = os.getpid()
    json.dump(d, f)
ints = []
signal.signal(signal.SIGINT, lambda n, fr: ints.append(n))
s = conn()
send(s, {"v": 1, "type": "hello", "run": "t", "pid": 1, "rank": 0, "world_size": 1,
         "framework": "torch", "devices": [0]})
if mode == "hostile":
    send(s, b"\x00\xffgarbage{{")
    send(s, json.dumps({"v": 1, "type": "step", "step": 1, "pad": "x" * 100000}).encode())
    send(s, {"v": 2, "type": "step", "step": 1})
    steps(s, 1, 10)
    b = conn()
    sent = 0
    try:
        for i in range(10000):
            b.send(b"{malformed")
            sent += 1
    except OSError:
        pass
    with open(os.path.join(marker, "burst"), "w") as f:
        f.write(str(sent))
    s2 = conn()
    steps(s2, 11, 10)
    s2.close()
elif mode == "noend":
    steps(s, 1, 5)
elif mode == "many":
    steps(s, 1, 25000)
else:
    steps(s, 1, 20)
if mode != "noend":
    send(s, {"v": 1, "type": "end", "train_runtime": 2.0, "train_samples": 160,
             "train_steps": 20})
open(os.path.join(marker, "ready"), "w").close()
if mode in ("waitint", "ctrlc"):
    deadline = time.time() + 10
    while not ints and time.time() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)  # a second (forwarded) SIGINT would arrive by now
    with open(os.path.join(marker, "ints"), "w") as f:
        f.write(str(len(ints)))
    sys.exit(42)
if mode == "other":
    deadline = time.time() + 10
    while not os.path.exists(os.path.join(marker, "other-done")) and time.time() < deadline:
        time.sleep(0.02)
time.sleep(float(os.environ.get("CHILD_HOLD", "1.2")))  # let the sampler see the pid
if mode == "selfkill":
    os.kill(os.getpid(), signal.SIGTERM)
sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
'''
CHILD_PATH = os.path.join(TMP, "child.py")
with open(CHILD_PATH, "w") as f:
    f.write(CHILD)

_n = [0]


def env(**extra):
    e = {k: v for k, v in os.environ.items()
         if not k.startswith("NVML_SIM") and k not in ("GPUSCOPE_PYTHON_DIR", "PYTHONPATH",
                                                        "CUDA_VISIBLE_DEVICES")}
    e.update(GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=SCEN_PATH, TZ="UTC", NO_COLOR="1")
    for k, v in extra.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return e


def fresh():
    """A new output dir path (not created) and marker dir (created)."""
    _n[0] += 1
    out = os.path.join(TMP, f"out{_n[0]}")
    marker = os.path.join(TMP, f"mark{_n[0]}")
    os.mkdir(marker)
    return out, marker


def run(args, marker=None, timeout=60, **extra):
    e = env(TEST_MARKER_DIR=marker or TMP, **extra)
    return subprocess.run([BIN, "run"] + args, env=e, capture_output=True, text=True,
                          timeout=timeout)


def load_report(out):
    with open(os.path.join(out, "metrics_report.json")) as f:
        return json.load(f)


def load_steps(out):
    with open(os.path.join(out, "steps.jsonl")) as f:
        return [json.loads(line) for line in f]


def wait_file(path, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path):
            return True
        time.sleep(0.02)
    return False


def gpu_entry(rep, idx):
    for g in rep.get("gpus", []):
        if g.get("index") == idx:
            return g
    return None


# ---- 1. a normal run ----
out, mk = fresh()
p = run(["--no-auto", "--interval", "0.2", "--out", out, "--", PY, CHILD_PATH, "normal"], mk)
t.eq(p.returncode, 0, "normal run: exit 0")
t.ok(os.path.isfile(os.path.join(out, "metrics_report.json")), "report written",
     detail=p.stderr)
rep = load_report(out) if os.path.isfile(os.path.join(out, "metrics_report.json")) else {}
print("# report keys:", sorted(rep.keys()))
t.eq(rep.get("train_steps_per_second") is not None, True, "report has train_steps_per_second")
dr = rep.get("data_loading_time_ratio")
t.ok(isinstance(dr, (int, float)) and abs(dr - 0.1) < 0.005,
     "data_loading_time_ratio = 10 / (10 + 90)", detail=f"got {dr}")
g0, g1 = gpu_entry(rep, 0), gpu_entry(rep, 1)
t.ok(g0 is not None, "GPU 0 (the child's) is in the report", detail=json.dumps(rep.get("gpus")))
t.ok(g1 is None, "GPU 1 (someone else's) is not", detail=json.dumps(rep.get("gpus")))
if g0:
    t.ok(abs((g0.get("utilization_avg_percent") or -1) - 80) < 0.5, "GPU 0 average utilization 80 %",
         detail=json.dumps(g0))
    t.ok(abs((g0.get("utilization_max_percent") or -1) - 80) < 0.5, "GPU 0 max utilization 80 %",
         detail=json.dumps(g0))
    t.ok(g0.get("memory_peak_bytes") == 2048 * MIB, "GPU 0 peak memory 2048 MiB",
         detail=json.dumps(g0))
else:
    for d in ("avg utilization", "max utilization", "peak memory"):
        t.ok(False, "GPU 0 " + d)
t.ok(abs((rep.get("gpu_avg_utilization_percent") or -1) - 80) < 0.5,
     "gpu_avg_utilization_percent 80 (GPU 1's 10 % not mixed in)",
     detail=rep.get("gpu_avg_utilization_percent"))
run_obj = rep.get("run", {})
t.eq(run_obj.get("exit_code"), 0, "report run.exit_code")
t.eq(run_obj.get("source"), "gpuscope-run", "report run.source")
t.ok(CHILD_PATH in (run_obj.get("command") or ""), "report run.command names the child",
     detail=run_obj.get("command"))
lines = load_steps(out)
t.eq(len(lines), 22, "steps.jsonl: hello + 20 steps + end")
t.eq([ln.get("type") for ln in lines[:2]] + [lines[-1].get("type")], ["hello", "step", "end"],
     "steps.jsonl record types in order")
cenv = json.load(open(os.path.join(mk, "env.json")))
child_pid = cenv.get("_pid")
t.ok(child_pid and all(ln.get("peer_pid") == child_pid for ln in lines),
     "peer_pid is the child's (SO_PEERCRED), not the claimed 1")
t.eq(lines[1].get("peer_uid"), os.getuid(), "peer_uid is ours")
t.eq(lines[1].get("ms", {}).get("forward"), 50.0, "step line keeps phase times")
t.eq(cenv.get("GPUSCOPE_RUN_DIR"), os.path.realpath(out), "child sees GPUSCOPE_RUN_DIR")
t.ok(cenv.get("GPUSCOPE_RUN_SOCKET", "").startswith("/"), "child sees GPUSCOPE_RUN_SOCKET")
t.ok("GPUSCOPE_RUN_CHILD_PID" not in cenv, "the child pid variable is not leaked to the child")
t.ok(not os.path.exists(cenv.get("GPUSCOPE_RUN_SOCKET", "/nonexistent")),
     "socket removed after the run")
try:
    db = sqlite3.connect(os.path.join(out, "samples.db"))
    ic = db.execute("PRAGMA integrity_check").fetchone()[0]
    rows = db.execute("SELECT utilization_gpu FROM samples WHERE gpu = 0").fetchall()
    runs = db.execute("SELECT source, exit_code, json_extract(report, '$.steps') FROM run"
                      ).fetchall()
    srows = db.execute("SELECT step, peer_pid, forward_ms, total_step_ms FROM step"
                       " ORDER BY step").fetchall()
    db.close()
except sqlite3.Error as e:
    ic, rows, runs, srows = str(e), [], [], []
t.eq(ic, "ok", "samples.db integrity_check")
t.ok(len(rows) >= 3 and all(abs(r[0] - 0.8) < 1e-6 for r in rows),
     "samples.db: GPU 0 samples at 0.8 utilization", detail=rows)
t.eq(runs, [("gpuscope-run", 0, 20)], "samples.db: the run row with its exit code and report")
t.eq(srows, [(i, child_pid, 50.0, 90.0) for i in range(1, 21)],
     "samples.db: 20 step rows with the child's pid and phase times")
t.ok("data_loading_time_ratio" in p.stderr or "data" in p.stderr, "summary printed on stderr",
     detail=p.stderr[-2000:])
t.ok("\x1b[" not in p.stderr, "no colour into a pipe / with NO_COLOR")

# ---- 2. exit codes ----
out, mk = fresh()
p = run(["--no-auto", "--out", out, "--", PY, CHILD_PATH, "normal", "3"], mk, CHILD_HOLD="0")
t.eq(p.returncode, 3, "exit code 3 forwarded")
t.eq(load_report(out).get("run", {}).get("exit_code") if os.path.exists(
    os.path.join(out, "metrics_report.json")) else None, 3, "report run.exit_code 3")
out, mk = fresh()
p = run(["--no-auto", "--out", out, "--", PY, CHILD_PATH, "selfkill"], mk, CHILD_HOLD="0")
t.eq(p.returncode, 128 + signal.SIGTERM, "killed by SIGTERM -> 143")
out, mk = fresh()
p = run(["--no-auto", "--out", out, "--", "gpuscope-no-such-command-xyz"], mk)
t.eq(p.returncode, 127, "command not found -> 127")
t.ok("command not found" in p.stderr, "says command not found", detail=p.stderr)
t.ok(not os.path.exists(out), "no output dir left for a command that never ran")
out, mk = fresh()
p = run(["--no-auto", "--out", out, "--", "/nonexistent/dir/cmd"], mk)
t.eq(p.returncode, 127, "missing path -> 127")
noexec = os.path.join(TMP, "noexec.sh")
with open(noexec, "w") as f:
    f.write("#!/bin/sh\nexit 0\n")
os.chmod(noexec, 0o644)
out, mk = fresh()
p = run(["--no-auto", "--out", out, "--", noexec], mk)
t.eq(p.returncode, 126, "not executable -> 126")
t.ok(not os.path.exists(out), "no output dir left after 126")
p = run([], None)
t.eq(p.returncode, 2, "no command -> usage 2")
p = run(["--interval", "0.01", "--", "true"], None)
t.eq(p.returncode, 2, "--interval below 0.1 -> 2")
p = run(["--bogus", "--", "true"], None)
t.eq(p.returncode, 2, "unknown option -> 2")
p = run(["--help"], None)
t.ok(p.returncode == 0 and "--interval" in p.stdout and "--no-auto" in p.stdout, "--help")
hp = subprocess.run([BIN, "help"], capture_output=True, text=True)
t.ok(" run " in hp.stdout, "gpuscope help lists run", detail=hp.stdout)
used = os.path.join(TMP, "used")
os.mkdir(used)
open(os.path.join(used, "metrics_report.json"), "w").close()
p = run(["--no-auto", "--out", used, "--", "true"], None)
t.eq(p.returncode, 125, "out dir already holding a run -> 125")
t.eq(os.path.getsize(os.path.join(used, "metrics_report.json")), 0, "its report untouched")

# ---- 3. SIGINT sent with kill() is forwarded; the report is still written ----
out, mk = fresh()
pr = subprocess.Popen([BIN, "run", "--no-auto", "--interval", "0.1", "--out", out, "--", PY,
                       CHILD_PATH, "waitint"], env=env(TEST_MARKER_DIR=mk),
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
ready = wait_file(os.path.join(mk, "ready"))
time.sleep(0.3)
pr.send_signal(signal.SIGINT)
so, se = pr.communicate(timeout=30)
t.ok(ready, "waitint child started")
t.eq(pr.returncode, 42, "child's exit code after SIGINT forwarded")
t.eq(open(os.path.join(mk, "ints")).read() if os.path.exists(os.path.join(mk, "ints")) else None,
     "1", "child got exactly one SIGINT")
t.ok(os.path.isfile(os.path.join(out, "metrics_report.json")), "report written after SIGINT",
     detail=se)
t.ok("interrupted" in se, "says it was interrupted", detail=se)

# ---- 4. a terminal Ctrl-C reaches the child once (not forwarded a second time) ----
out, mk = fresh()
master, slave = pty.openpty()


def _ctty():
    import fcntl
    import termios
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


pr = subprocess.Popen([BIN, "run", "--no-auto", "--interval", "0.1", "--out", out, "--", PY,
                       CHILD_PATH, "ctrlc"], env=env(TEST_MARKER_DIR=mk), stdin=slave,
                      stdout=slave, stderr=slave, start_new_session=True, preexec_fn=_ctty)
os.close(slave)
ready = wait_file(os.path.join(mk, "ready"))
time.sleep(0.3)
os.write(master, b"\x03")
buf = b""
end = time.time() + 30
while pr.poll() is None and time.time() < end:
    try:
        import select
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            buf += os.read(master, 65536)
    except OSError:
        break
pr.wait(timeout=5)
os.close(master)
t.eq(pr.returncode, 42, "Ctrl-C: child's exit code")
t.eq(open(os.path.join(mk, "ints")).read() if os.path.exists(os.path.join(mk, "ints")) else None,
     "1", "Ctrl-C: child got exactly one SIGINT")
t.ok(os.path.isfile(os.path.join(out, "metrics_report.json")), "Ctrl-C: report written",
     detail=buf.decode(errors="replace")[-2000:])

# ---- 5. hostile records ----
out, mk = fresh()
p = run(["--no-auto", "--interval", "0.2", "--out", out, "--", PY, CHILD_PATH, "hostile"], mk,
        CHILD_HOLD="0.3")
t.eq(p.returncode, 0, "hostile: gpuscope run survives, child's exit 0", )
lines = load_steps(out) if os.path.exists(os.path.join(out, "steps.jsonl")) else []
t.eq(sum(1 for ln in lines if ln.get("type") == "step"), 20,
     "hostile: the 20 good steps counted (before and after the bad ones)")
t.eq(sorted(ln["step"] for ln in lines if ln.get("type") == "step"), list(range(1, 21)),
     "hostile: exactly steps 1..20")
burst = open(os.path.join(mk, "burst")).read() if os.path.exists(os.path.join(mk, "burst")) else ""
t.ok("rejected" in p.stderr and "closed for bad records" in p.stderr,
     "hostile: rejections reported", detail=p.stderr[-1500:])
print(f"# burst sender got {burst} messages out before the receiver closed it")
rep = load_report(out) if os.path.exists(os.path.join(out, "metrics_report.json")) else {}
t.ok(rep.get("train_steps_per_second") is not None, "hostile: report written")

# ---- 6. another process's records are attributed to it ----
out, mk = fresh()
pr = subprocess.Popen([BIN, "run", "--no-auto", "--out", out, "--", PY, CHILD_PATH, "other"],
                      env=env(TEST_MARKER_DIR=mk, CHILD_HOLD="0.2"), stdout=subprocess.PIPE,
                      stderr=subprocess.PIPE, text=True)
wait_file(os.path.join(mk, "ready"))
sockpath = json.load(open(os.path.join(mk, "env.json")))["GPUSCOPE_RUN_SOCKET"]
now = time.time()
send_records(sockpath, [{"v": 1, "type": "step", "step": 999, "t0": now, "t1": now + 0.5,
                         "pid": 1, "ms": {"total_step": 500.0}},
                        # dated 1970, and before the run began: refused (run/record.h's rule)
                        {"v": 1, "type": "step", "step": 998, "t0": 1.0, "t1": 1.5, "pid": 1},
                        {"v": 1, "type": "step", "step": 997, "t0": now - 3600,
                         "t1": now - 3599, "pid": 1}])
time.sleep(0.2)
open(os.path.join(mk, "other-done"), "w").close()
_, other_err = pr.communicate(timeout=30)
lines = load_steps(out) if os.path.exists(os.path.join(out, "steps.jsonl")) else []
mine = [ln for ln in lines if ln.get("step") == 999]
t.eq(len(mine), 1, "other process: its record arrived")
t.eq(mine[0].get("peer_pid") if mine else None, os.getpid(), "other process: attributed to its pid")
t.ok(all(ln.get("peer_pid") != os.getpid() for ln in lines if ln.get("step") != 999),
     "other process: the child's records keep the child's pid")
t.eq([ln.get("step") for ln in lines if ln.get("step") in (997, 998)], [],
     "steps dated 1970 or an hour before the run: not kept")
t.ok("2 step record(s) refused for their time (first: pid %d: step 998: t0 1.000 is before "
     "2000-01-01)" % os.getpid() in other_err, "and said with the reason", detail=other_err[-600:])
rep = load_report(out) if os.path.exists(os.path.join(out, "metrics_report.json")) else {}
t.eq(rep.get("steps"), 21, "the report counts the child's 20 and step 999, not them")

# ---- 7. no GPU: the child still runs, step data reported ----
out, mk = fresh()
p = run(["--no-auto", "--out", out, "--", PY, CHILD_PATH, "normal"], mk, CHILD_HOLD="0",
        GPUSCOPE_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
t.eq(p.returncode, 0, "no GPU: exit 0")
t.eq(p.stderr.count("no GPU figures"), 1, "no GPU: said once", )
rep = load_report(out) if os.path.exists(os.path.join(out, "metrics_report.json")) else {}
dr = rep.get("data_loading_time_ratio")
t.ok(isinstance(dr, (int, float)) and abs(dr - 0.1) < 0.005, "no GPU: step ratios still reported",
     detail=dr)
# More steps than samples.db's store buffers (20,000), and no sampler thread to flush them.
out, mk = fresh()
p = run(["--no-auto", "--out", out, "--", PY, CHILD_PATH, "many"], mk, CHILD_HOLD="0",
        GPUSCOPE_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
try:
    db = sqlite3.connect(os.path.join(out, "samples.db"))
    nsteps = db.execute("SELECT count(DISTINCT step) FROM step").fetchone()[0]
    db.close()
except sqlite3.Error as e:
    nsteps = str(e)
t.eq(nsteps, 25000, "no GPU, 25,000 steps: all in samples.db")
t.eq(load_report(out).get("steps") if os.path.exists(os.path.join(out, "metrics_report.json"))
     else None, 25000, "no GPU, 25,000 steps: all in the report")

# ---- 8. PYTHONPATH injection ----
pyd = os.path.join(TMP, "pyd")
os.makedirs(os.path.join(pyd, "gpuscope", "_auto"))
open(os.path.join(pyd, "gpuscope", "__init__.py"), "w").close()
out, mk = fresh()
p = run(["--out", out, "--", PY, CHILD_PATH, "noend"], mk, CHILD_HOLD="0",
        GPUSCOPE_PYTHON_DIR=pyd, PYTHONPATH="/keep/me")
cenv = json.load(open(os.path.join(mk, "env.json"))) if os.path.exists(
    os.path.join(mk, "env.json")) else {}
t.eq(cenv.get("PYTHONPATH"), f"{pyd}/gpuscope/_auto:{pyd}:/keep/me", "auto: PYTHONPATH prepended")
out, mk = fresh()
p = run(["--no-auto", "--out", out, "--", PY, CHILD_PATH, "noend"], mk, CHILD_HOLD="0",
        GPUSCOPE_PYTHON_DIR=pyd)
cenv = json.load(open(os.path.join(mk, "env.json"))) if os.path.exists(
    os.path.join(mk, "env.json")) else {}
t.eq(cenv.get("PYTHONPATH"), pyd, "--no-auto: only the package dir")
out, mk = fresh()
p = run(["--out", out, "--", PY, CHILD_PATH, "noend"], mk, CHILD_HOLD="0",
        GPUSCOPE_PYTHON_DIR=os.path.join(TMP, "nowhere"))
t.eq(p.returncode, 0, "package missing: still runs")
t.ok("Python package was not found" in p.stderr, "package missing: said so", detail=p.stderr)

# ---- 9. GPUs named by hello records: CUDA index -> GPU through CUDA_VISIBLE_DEVICES ----
for cvd, what in (("1", "an index"), ("GPU-00000001-1111-2222-3333-444444444444", "a UUID")):
    out, mk = fresh()
    p = run(["--no-auto", "--interval", "0.2", "--out", out, "--", PY, CHILD_PATH, "normal"], mk,
            CHILD_HOLD="0.6", CUDA_VISIBLE_DEVICES=cvd)
    rep = load_report(out) if os.path.exists(os.path.join(out, "metrics_report.json")) else {}
    g1 = gpu_entry(rep, 1)
    t.ok(gpu_entry(rep, 0) is not None and g1 is not None,
         f"hello devices [0] with CUDA_VISIBLE_DEVICES={what}: GPU 1 joins GPU 0",
         detail=json.dumps(rep.get("gpus")))
    t.ok(g1 is not None and abs((g1.get("utilization_avg_percent") or -1) - 10) < 0.5,
         f"CUDA_VISIBLE_DEVICES={what}: GPU 1's own figures (10 %)")

# ---- 10. sub-second utilization from nvmlDeviceGetSamples ----
# GPU 0 alternates within a second: 100 % for 0.1 s of every 0.4 s, else 20 % (mean 40 %).
# GetUtilizationRates is a 1 s mean (36..44 %), so 0.5 s snapshots alone never see the peak;
# the driver's 100 ms samples do.
SQUARE = json.loads(json.dumps(SCENARIO))
SQUARE["gpus"][0]["sample_interval_ms"] = 100
SQUARE["gpus"][0]["metrics"]["util_gpu_pct"] = {
    "square": {"period_s": 0.4, "duty": 0.25, "high": 100, "low": 20}}
NOSAMP = json.loads(json.dumps(SQUARE))
NOSAMP["gpus"][0]["not_supported"] = ["samples:gpu_utilization"]
fig = {}
for name, scen in (("samples", SQUARE), ("nosamples", NOSAMP)):
    path = os.path.join(TMP, f"scenario-{name}.json")
    with open(path, "w") as f:
        json.dump(scen, f)
    out, mk = fresh()
    p = run(["--no-auto", "--out", out, "--", PY, CHILD_PATH, "normal"], mk, CHILD_HOLD="2.0",
            NVML_SIM_SCENARIO=path)
    rep = load_report(out) if os.path.exists(os.path.join(out, "metrics_report.json")) else {}
    fig[name] = (gpu_entry(rep, 0) or {}, rep, p)
g, rep, p = fig["samples"]
t.ok(p.returncode == 0, "square wave: exit 0", detail=p.stderr[-1000:])
t.ok(g.get("utilization_source") == "nvml_samples", "square wave: per-GPU figures from samples",
     detail=json.dumps(g))
t.ok(g.get("utilization_max_percent") == 100, "square wave: max = the pattern's 100 % peak",
     detail=json.dumps(g))
t.ok(rep.get("gpu_max_utilization_percent") == 100, "square wave: run max 100 %",
     detail=rep.get("gpu_max_utilization_percent"))
t.ok(abs((g.get("utilization_avg_percent") or -1) - 40) < 8,
     "square wave: time-weighted average near the pattern's 40 %", detail=json.dumps(g))
t.ok(abs((g.get("utilization_sample_period_ms") or -1) - 100) < 1,
     "square wave: utilization_sample_period_ms = the driver's 100 ms", detail=json.dumps(g))
t.ok((g.get("samples") or 0) >= 3, "square wave: snapshots still taken (memory, power)",
     detail=json.dumps(g))
g, rep, p = fig["nosamples"]
t.ok(g.get("utilization_source") == "snapshots", "no samples: falls back to snapshots",
     detail=json.dumps(g) + p.stderr[-500:])
t.ok(0 < (g.get("utilization_max_percent") or -1) < 60,
     "no samples: snapshots alone miss the peak (1 s window)", detail=json.dumps(g))
t.ok(abs((g.get("utilization_sample_period_ms") or -1) - 500) < 100,
     "no samples: resolution = the 0.5 s interval", detail=json.dumps(g))

subprocess.run(["rm", "-rf", TMP])
sys.exit(t.done())
