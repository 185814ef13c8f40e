"""`gpuscope demo` end to end: the agent on a bundled nvml-sim scenario with a temporary data dir.

Runs the built binary (which finds build/sim/libnvidia-ml.so.1 next to itself and
sim/scenarios/ next to its build dir) with TMPDIR set to a directory of the test's own, and
checks: the URL line, /metrics with 8 GPUs up, "/" answering, a scenario given by path, the
data dir made, holding history.db, and removed after SIGINT (exit 0), and the errors for an
unknown scenario and a missing sim library. Everything the test starts is stopped at the end.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN, clean_up, free_port, stop_proc  # noqa: E402


t = Tap()
tmp = tempfile.mkdtemp(prefix="gs-demo-test.")
procs = []


def env_for():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NVML_SIM") and k != "GPUSCOPE_NVML_LIBRARY"}
    env.update(TMPDIR=tmp, NVML_SIM_TIME="10")
    return env


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.status, r.read().decode()


def start(args):
    port = free_port()
    p = subprocess.Popen([BIN, "demo", "--listen", "127.0.0.1:%d" % port] + args,
                         env=env_for(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    procs.append(p)
    line = p.stdout.readline()  # printed once the port is open
    return p, port, line


def stop(p):
    return stop_proc(p, signal.SIGINT)


try:
    p, port, line = start([])
    t.eq(line.strip(), "gpuscope demo: http://127.0.0.1:%d/ (scenario h100x8-training, "
         "Ctrl-C to stop)" % port, "URL line once the port is open")
    dirs = [d for d in os.listdir(tmp) if d.startswith("gpuscope-demo.")]
    t.eq(len(dirs), 1, "a temporary data dir under TMPDIR")
    t.ok(dirs and os.path.exists(os.path.join(tmp, dirs[0], "history.db")),
         "the agent keeps its history.db in the demo's data dir", detail=dirs)
    try:
        code, body = get("http://127.0.0.1:%d/metrics" % port)
        ups = [ln for ln in body.splitlines() if ln.startswith("gpuscope_gpu_up{")]
        t.ok(code == 200 and "\ngpuscope_up 1\n" in "\n" + body and len(ups) == 8
             and all(ln.endswith(" 1") for ln in ups),
             "/metrics: gpuscope_up 1 and 8 GPUs up", detail=body[:2000])
        code, body = get("http://127.0.0.1:%d/" % port)
        t.ok(code == 200 and "/metrics" in body, "/ links the endpoints", detail=body)
    except OSError as e:
        t.ok(False, "/metrics answers", detail=str(e))
        t.ok(False, "/ answers", detail=str(e))
    t.eq(stop(p), 0, "SIGINT: exit 0")
    t.eq(os.listdir(tmp), [], "the data dir is removed at exit")
    err = p.stderr.read()
    t.ok("data dir " + os.path.join(tmp, dirs[0] if dirs else "?") in err,
         "the data dir is logged", detail=err)

    path = os.path.join(SRC, "sim", "scenarios", "gpu-lost.json")
    p, port, line = start(["--scenario", path])
    t.ok("(scenario gpu-lost.json, " in line, "--scenario PATH", detail=line)
    stop(p)

    r = subprocess.run([BIN, "demo", "--scenario", "no-such-scenario"], env=env_for(),
                       capture_output=True, text=True, timeout=30)
    t.ok(r.returncode == 2 and "no scenario 'no-such-scenario'" in r.stderr,
         "unknown scenario: exit 2, named", detail="rc %d: %s" % (r.returncode, r.stderr))

    # A copy of the binaries (gpuscope and the gpuscope-full it starts for demo) in a
    # directory without sim/ next to them.
    lone = os.path.join(tmp, "lone")
    os.mkdir(lone)
    shutil.copy(BIN, lone)
    if os.path.exists(os.path.join(os.path.dirname(BIN), "gpuscope-full")):
        shutil.copy(os.path.join(os.path.dirname(BIN), "gpuscope-full"), lone)
    r = subprocess.run([os.path.join(lone, "gpuscope"), "demo"], env=env_for(),
                       capture_output=True, text=True, timeout=30)
    t.ok(r.returncode != 0 and "nvml-sim not found" in r.stderr,
         "no sim library: a clear error", detail="rc %d: %s" % (r.returncode, r.stderr))
    shutil.rmtree(lone)
    t.eq(os.listdir(tmp), [], "nothing left in TMPDIR")

    r = subprocess.run([BIN, "demo", "--help"], capture_output=True, text=True, timeout=30)
    t.ok(r.returncode == 0 and "--scenario NAME|PATH" in r.stdout, "--help", detail=r.stdout)
finally:
    clean_up(procs, [tmp])
sys.exit(t.done())
