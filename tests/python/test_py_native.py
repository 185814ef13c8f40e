"""libgpuscope.so through ctypes: the StepRec layout against the C header (compiled here),
config errors, exact aggregation of known records, the receiver path (a SOCK_SEQPACKET
socket this test listens on gets the hello, every step and the end as the wire format says),
gs_run_step never blocking on a receiver that does not read, and the package working on
without the library."""
import ctypes
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYROOT, PYTHON, SRC, Tap, near  # noqa: E402

from gpuscope import _native  # noqa: E402
from gpuscope._native import NAN, NativeRun, StepRec  # noqa: E402

t = Tap()
lib = _native.load()
t.ok(lib is not None, "libgpuscope.so loads from the package directory",
     detail=_native.load_error())
if lib is None:
    sys.exit(t.done())

# ---- 1. StepRec == struct gs_step_rec ----
FIELDS = [f for f, _ in StepRec._fields_]
cc = shutil.which("cc") or shutil.which("gcc")
if cc:
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "layout.c")
        with open(src, "w") as f:
            f.write("#include <stddef.h>\n#include <stdio.h>\n#include \"gpuscope/gs_run.h\"\n"
                    "int main(void) {\n"
                    "    printf(\"size %zu\\n\", sizeof(struct gs_step_rec));\n")
            for name in FIELDS:
                f.write(f"    printf(\"{name} %zu\\n\", offsetof(struct gs_step_rec, {name}));\n")
            f.write("    printf(\"GS_PH_N %d\\n\", GS_PH_N);\n"
                    "    printf(\"version %d\\n\", GS_STEP_REC_VERSION);\n    return 0;\n}\n")
        exe = os.path.join(tmp, "layout")
        subprocess.run([cc, "-std=c17", "-I", os.path.join(SRC, "include"), src, "-o", exe],
                       check=True)
        lines = subprocess.run([exe], capture_output=True, text=True).stdout.split("\n")
        got = {}
        for ln in lines:
            if ln:
                k, v = ln.rsplit(" ", 1)
                got.setdefault(k, int(v))
        want = {"size": ctypes.sizeof(StepRec), "GS_PH_N": _native.PH_N}
        want.update({n: getattr(StepRec, n).offset for n in FIELDS})
        want["version"] = 0  # offset of the first field (the macro line repeats the key)
        t.eq({k: got.get(k) for k in want}, want,
             f"StepRec size ({ctypes.sizeof(StepRec)}) and every offset equal the C struct's")
else:
    t.skip("StepRec layout against the C header", "no C compiler")
gpn = lib.gs_phase_name
gpn.argtypes, gpn.restype = [ctypes.c_int], ctypes.c_char_p
t.eq([gpn(i).decode() for i in range(_native.PH_N)],
     ["data", "forward", "backward", "optimizer_step", "communication", "total_step"],
     "gs_phase_name(i) names the phases in the package's order")

# ---- 2. config errors ----
err = ctypes.create_string_buffer(512)
for cfg, word in [("{", "config"), ('{"nvml": "maybe"}', "nvml"), ('{"rank": -1}', "rank"),
                  ('{"devices": [0, "1"]}', "devices[1]"), ('{"sample_interval_s": 0}',
                                                            "sample_interval_s"),
                  ('[1]', "object"), ('{"output_dir": 5}', "output_dir")]:
    err.value = b""
    run = lib.gs_run_open(cfg.encode(), err, len(err))
    msg = err.value.decode()
    t.ok(not run and word in msg, f"gs_run_open({cfg}) fails naming {word!r}", detail=msg)
    if run:
        lib.gs_run_close(run)


# ---- 3. exact aggregation of known records (no receiver, no NVML) ----
def rec(step, data, fwd, bwd, opt, total, t0, samples=8):
    r = StepRec()
    r.version, r.flags, r.step = 1, 0, step
    r.t_begin, r.t_end = t0, t0 + total / 1000
    for i, v in enumerate((data, fwd, bwd, opt, NAN, total)):
        r.ms[i] = v
    r.samples, r.rank, r.device = samples, 0, -1
    return r


os.environ.pop("GPUSCOPE_RUN_SOCKET", None)
os.environ["GPUSCOPE_AGENT_SOCKET"] = "/nonexistent/agent.sock"
with tempfile.TemporaryDirectory() as out:
    nr = NativeRun({"output_dir": out, "nvml": "off", "run_name": "exact", "framework": "torch"})
    t.ok(nr.active, "gs_run_open with a valid config")
    T0 = 1_700_000_000.0
    for k, (d, f) in enumerate([(5, 10), (5, 20), (5, 30), (5, 40)]):
        t.eq(nr.step(rec(k + 1, d, f, 50.0, 10.0, 100.0, T0 + k * 0.105)), 0,
             f"gs_run_step record {k + 1}")
    rep = nr.finish({"train_runtime": 2.0, "train_samples": 32, "train_steps": 4,
                     "train_loss": 0.5})
    nr.close()
    t.ok(rep is not None, "gs_run_finish returns the report")
    rep = rep or {}
    t.ok(near(rep.get("data_loading_time_ratio"), 20 / 420, 1e-9),
         "data_loading_time_ratio = sum(data) / sum(data + total_step) = 20/420")
    t.ok(near(rep["phases"]["forward"]["mean_ms"], 25.0, 1e-6) and
         rep["phases"]["forward"]["count"] == 4, "forward mean of 10, 20, 30, 40 ms is 25 ms")
    t.eq([rep.get("train_runtime"), rep.get("train_samples_per_second"),
          rep.get("train_steps_per_second")], [2.0, 16.0, 2.0],
         "train_runtime and speeds from the end record")
    t.ok(near(rep.get("step_busy_estimate_percent"), 100 * (4 * 60 + 100) / 420, 1e-9),
         "step_busy_estimate_percent = (forward + backward + optimizer) / (data + step)")
    t.eq(rep["run"].get("name"), "exact", "run.name from the config")
    on_disk = json.load(open(os.path.join(out, "metrics_report.json")))
    t.eq(on_disk.get("steps"), 4, "metrics_report.json written to output_dir")


# ---- 4. the receiver path ----
def listener(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.bind(path)
    s.listen(4)
    return s


def drain(conn):
    msgs = []
    conn.settimeout(3)
    while True:
        try:
            m = conn.recv(65536)
        except socket.timeout:
            break
        if not m:
            break
        msgs.append(json.loads(m))
    return msgs


with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "run.sock")
    srv = listener(path)
    os.environ["GPUSCOPE_RUN_SOCKET"] = path  # the variable `gpuscope run` sets
    nr = NativeRun({"run_name": "sock", "framework": "hf", "logging_steps": 7, "rank": 0,
                    "world_size": 1, "devices": [3], "nvml": "auto"})
    conn, _ = srv.accept()
    sent = [rec(k, 1.5, 2.25, 3.5, 0.75, 10.0, 1_700_000_000.0 + k) for k in range(1, 6)]
    for r in sent:
        nr.step(r)
    rep = nr.finish({"train_runtime": 5.5})
    nr.close()
    msgs = drain(conn)
    os.environ.pop("GPUSCOPE_RUN_SOCKET")
    types = [m.get("type") for m in msgs]
    t.eq(types, ["hello"] + ["step"] * 5 + ["end"], "receiver gets hello, 5 steps, end in order")
    hello = msgs[0] if msgs else {}
    t.eq([hello.get(k) for k in ("v", "run", "pid", "framework", "logging_steps", "devices")],
         [1, "sock", os.getpid(), "hf", 7, [3]], "hello carries the config and our pid")
    st = [m for m in msgs if m.get("type") == "step"]
    t.eq([m.get("step") for m in st], [1, 2, 3, 4, 5], "step numbers in order")
    t.eq(st[0].get("ms") if st else None,
         {"data": 1.5, "forward": 2.25, "backward": 3.5, "optimizer_step": 0.75,
          "total_step": 10.0}, "step ms exact; the unmeasured communication is absent")
    t.eq(st[0].get("samples") if st else None, 8, "step samples")
    t.eq(msgs[-1].get("train_runtime") if msgs else None, 5.5, "end carries train_runtime")
    t.eq((rep or {}).get("steps"), 5, "with a receiver the in-process report still exists")
    t.eq((rep or {}).get("gpus"), [], "with a receiver no in-process NVML sampling")
    conn.close()

    # a receiver that never reads: gs_run_step must not wait on it
    path2 = os.path.join(tmp, "stuck.sock")
    srv2 = listener(path2)
    nr = NativeRun({"socket": path2, "nvml": "off"})
    worst = 0.0
    t0 = time.perf_counter()
    r = rec(1, 1.0, 1.0, 1.0, 1.0, 5.0, 1_700_000_000.0)
    for k in range(1, 20001):
        r.step = k
        a = time.perf_counter()
        nr.step(r)
        worst = max(worst, time.perf_counter() - a)
    loop = time.perf_counter() - t0
    # blocking would mean >= 1 s (the send timeout) or forever; allow for a busy machine
    t.ok(worst < 0.25, f"gs_run_step never blocks on a stuck receiver (worst call "
         f"{worst * 1e6:.0f} us over 20000)")
    a = time.perf_counter()
    rep = nr.finish({})
    fin = time.perf_counter() - a
    nr.close()
    t.eq((rep or {}).get("steps"), 20000, "every step is in the local report")
    t.ok(fin < 3.5, f"finish with a stuck receiver returns after the send timeout ({fin:.2f} s)")
    t.ok(loop < 2.0, f"20000 steps took {loop:.2f} s")
    srv2.close()

    # a named socket nobody listens on: the run goes on in-process
    nr = NativeRun({"socket": os.path.join(tmp, "nobody.sock"), "nvml": "off"})
    t.ok(nr.active, "an unreachable receiver is not an error")
    nr.step(rec(1, 1.0, 1.0, 1.0, 1.0, 5.0, 1_700_000_000.0))
    t.eq((nr.finish({}) or {}).get("steps"), 1, "and the report is made in-process")
    nr.close()
    srv.close()

# ---- 5. without the library: a warning, the log lines, no report ----
with tempfile.TemporaryDirectory() as tmp:
    pkg = os.path.join(tmp, "gpuscope")
    shutil.copytree(os.path.join(PYROOT, "gpuscope"), pkg,
                    ignore=shutil.ignore_patterns("*.so", "*.so.p", "__pycache__"))
    code = textwrap.dedent("""
        import sys, torch, gpuscope
        m = torch.nn.Linear(4, 1)
        gpuscope.init(logging_steps=2, output_dir=sys.argv[1])
        for i in range(4):
            with gpuscope.step():
                with gpuscope.phase("forward"):
                    y = m(torch.ones(2, 4)).sum()
        print("REPORT", gpuscope.finish())
    """)
    p = subprocess.run([PYTHON, "-c", code, os.path.join(tmp, "out")],
                       env=pyhelp.child_env(PYTHONPATH=tmp, GPUSCOPE_LIBRARY="/nonexistent.so"),
                       capture_output=True, text=True, timeout=120)
    t.eq(p.returncode, 0, "no library: the training runs")
    t.eq(p.stderr.count("native core unavailable"), 1, "no library: warned once")
    t.eq(len([x for x in p.stderr.splitlines() if x.startswith("Step ")]), 6,
         "no library: the log lines are still printed (steps 2 and 4)")
    t.ok("REPORT None" in p.stdout and not os.path.exists(os.path.join(tmp, "out")),
         "no library: finish() returns None, no report", detail=p.stdout + p.stderr)

# The ranks of one distributed launch share a run name (the agent merges them into one run).
from gpuscope import _core  # noqa: E402
t.eq(_core._job_id({"TORCHELASTIC_RUN_ID": "j42", "SLURM_JOB_ID": "7"}), "torchelastic-j42",
     "run name of a distributed job: torchrun's rendezvous id first")
t.eq(_core._job_id({"TORCHELASTIC_RUN_ID": "none", "SLURM_JOB_ID": "7"}), "slurm-7",
     "run name: torchrun's default id 'none' is skipped, Slurm's job id used")
t.eq(_core._job_id({}), None, "run name: none without a launcher")
os.environ["TORCHELASTIC_RUN_ID"] = "t9"
prof = _core.Profiler(world_size=2, rank=1, local_rank=1, native=False, log=lambda s: None)
t.eq(prof._config.get("run_name"), "torchelastic-t9",
     "a world_size 2 profiler carries the job's run name")
prof = _core.Profiler(world_size=1, rank=0, local_rank=0, native=False, log=lambda s: None)
t.eq(prof._config.get("run_name"), None, "a single-process profiler gets no invented name")
del os.environ["TORCHELASTIC_RUN_ID"]

# Tags: Profiler(tags=...) / gpuscope.init(tags=...) reach the hello; $GPUSCOPE_RUN_TAGS wins.
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "tags.sock")
    srv = listener(path)
    os.environ["GPUSCOPE_RUN_SOCKET"] = path
    hellos = []
    for env in (None, '{"try":"3"}'):
        if env:
            os.environ["GPUSCOPE_RUN_TAGS"] = env
        prof = _core.Profiler(tags={"team": "nlp", "n": 2}, nvml="off", log=lambda s: None)
        prof.start()
        conn, _ = srv.accept()
        prof.native.finish({})
        prof.native.close()
        msgs = drain(conn)
        conn.close()
        hellos.append(msgs[0].get("tags") if msgs else None)
    os.environ.pop("GPUSCOPE_RUN_TAGS", None)
    os.environ.pop("GPUSCOPE_RUN_SOCKET")
    t.eq(hellos, [{"team": "nlp", "n": "2"}, {"try": "3"}],
         "Profiler(tags=...) reaches the hello as strings; $GPUSCOPE_RUN_TAGS wins over it")

pyhelp.exit_now(t.done())
