"""`gpuscope demo` end to end: the agent on a bundled nvml-sim scenario with a temporary data dir.

Runs the built binary (which finds build/sim/libnvidia-ml.so.1 next to itself and
sim/scenarios/ next to its build dir) with TMPDIR set to a directory of the test's own, and
checks: the URL line, /metrics with 8 GPUs up, "/" answering, a scenario given by path, the
data dir made, holding history.db, and removed after SIGINT (exit 0), and the errors for an
unknown scenario and a missing sim library. Everything the test starts is stopped at the end.

A demo is a demo (issue 17): its sockets live in its private dir, never in /run/gpuscope, so a
plain `gpuscope query` on a machine whose driver is not loaded still says so (exit 9) while a
demo runs, with a hint naming the demo; the snapshot, /metrics, the page and the CLI reading the
demo's socket on purpose all say the GPUs are simulated. For the user who runs it (issue 29) it
publishes links in $XDG_RUNTIME_DIR/gpuscope: steps.sock, so that an unmodified `gpuscope run`
next to it reaches its dashboard (checked against the run's own step count), and
demo-agent.sock, which the hint names; both are gone after the demo stops.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN, clean_up, free_port, stop_proc  # noqa: E402


t = Tap()
tmp = tempfile.mkdtemp(prefix="gs-demo-test.")
procs = []


xdg = os.path.join(tmp, "xdg")  # the user's runtime dir: the demo must leave it alone


def env_for():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NVML_SIM") and k not in ("GPUSCOPE_NVML_LIBRARY",
                                                        "GPUSCOPE_HTTP_SOCKET")}
    env.update(TMPDIR=tmp, NVML_SIM_TIME="10", XDG_RUNTIME_DIR=xdg)
    return env


def unix_paths(pid):
    """The unix socket paths process pid holds (its fds' inodes in /proc/net/unix)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    paths = set()
    for line in open("/proc/net/unix").read().splitlines()[1:]:
        f = line.split()
        if len(f) >= 8 and f[6] in inodes:
            paths.add(f[7])
    return paths


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
    os.mkdir(xdg, 0o700)
    p, port, line = start([])
    t.eq(line.strip(), "gpuscope demo: http://127.0.0.1:%d/ (scenario h100x8-training, "
         "SIMULATED GPUs, Ctrl-C to stop)" % port, "URL line once the port is open")
    dirs = [d for d in os.listdir(tmp) if d.startswith("gpuscope-demo.")]
    t.eq(len(dirs), 1, "a temporary data dir under TMPDIR")
    ddir = os.path.join(tmp, dirs[0] if dirs else "?")
    l2, l3 = p.stdout.readline().strip(), p.stdout.readline().strip()
    t.eq(l2, "gpuscope demo: private data dir %s (removed at exit)" % ddir,
         "the private data dir is printed")
    sock = os.path.join(ddir, "agent.sock")
    t.eq(l3, "gpuscope demo: to read it from the CLI: GPUSCOPE_HTTP_SOCKET=%s gpuscope" % sock,
         "how to point the CLI at the demo is printed")
    t.ok(os.path.exists(sock) and os.path.exists(os.path.join(ddir, "steps.sock")),
         "agent.sock and steps.sock are in the private dir", detail=os.listdir(ddir)
         if os.path.isdir(ddir) else ddir)
    l4 = p.stdout.readline().strip()
    pub = os.path.join(xdg, "gpuscope")
    t.eq(l4, "gpuscope demo: your training runs (gpuscope run, the Python package) send their "
         "steps to it: %s/steps.sock" % pub, "where this user's training runs reach it is printed")
    links = {n: os.readlink(os.path.join(pub, n)) for n in sorted(os.listdir(pub))} \
        if os.path.isdir(pub) else {}
    t.eq(links, {"demo-agent.sock": sock, "steps.sock": os.path.join(ddir, "steps.sock")},
         "$XDG_RUNTIME_DIR/gpuscope: links to the demo's steps.sock and (as demo-agent.sock, "
         "which no client reads by default) its agent.sock")
    held = unix_paths(p.pid)
    t.eq(sorted(held), sorted([sock, os.path.join(ddir, "steps.sock")]),
         "the demo holds its two private sockets and no other (no /run/gpuscope, no XDG)")
    # A machine with the library but no driver loaded (nvml-sim without a scenario, on
    # LD_LIBRARY_PATH as libnvidia-ml.so.1): plain `gpuscope query` and `gpuscope` say so.
    env = env_for()
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.environ.get("GPUSCOPE_SIM_LIB", ""))
    if os.path.exists("/run/gpuscope/agent.sock"):
        # another agent on this machine (not ours: see above) would answer a plain client;
        # ask for the path a demo run by this user used to take instead
        env["GPUSCOPE_HTTP_SOCKET"] = os.path.join(xdg, "gpuscope", "agent.sock")
    r = subprocess.run([BIN, "query", "--query-gpu=name", "--format=csv"], env=env,
                       capture_output=True, text=True, timeout=30)
    t.ok(r.returncode == 9 and "H100" not in r.stdout,
         "with a demo running, plain `gpuscope query` without a driver: exit 9, not the demo's "
         "GPUs", detail="rc %d: %s %s" % (r.returncode, r.stdout, r.stderr))
    hint = ("hint: no NVIDIA driver here, but your gpuscope demo is running; its simulated GPUs: "
            "GPUSCOPE_HTTP_SOCKET=%s/demo-agent.sock gpuscope" % pub)
    t.ok(hint in r.stderr, "... and a hint naming the running demo's socket", detail=r.stderr)
    r = subprocess.run([BIN, "query", "-L"], env=env, capture_output=True, text=True, timeout=30)
    t.ok(r.returncode == 9 and "couldn't communicate with the NVIDIA driver" in r.stdout and
         "via agent" not in r.stdout + r.stderr and
         hint + " (the nvidia-smi modes read the driver only)" in r.stderr,
         "`gpuscope query -L`: nvidia-smi's message, the hint, nothing read from an agent",
         detail="rc %d: %s %s" % (r.returncode, r.stdout, r.stderr))
    r = subprocess.run([BIN, "--json"], env=env, capture_output=True, text=True, timeout=30)
    t.ok(r.returncode == 9 and "H100" not in r.stdout and hint in r.stderr,
         "with a demo running, plain `gpuscope --json` without a driver: exit 9 and the hint",
         detail="rc %d: %s %s" % (r.returncode, r.stdout, r.stderr))
    # An unmodified torch loop under `gpuscope run`, nothing pointing it anywhere: its steps
    # reach the demo (unless the node's own agent listens on /run/gpuscope/steps.sock, which
    # the lookup rightly prefers).
    if os.path.exists("/run/gpuscope/steps.sock"):
        t.skip("gpuscope run next to the demo reaches it", "/run/gpuscope/steps.sock exists")
    else:
        loop = os.path.join(tmp, "loop.py")
        open(loop, "w").write("import json, torch\nm = torch.nn.Linear(4, 1)\n"
                              "o = torch.optim.SGD(m.parameters(), lr=0.1)\nn = 0\n"
                              "for x in torch.utils.data.DataLoader(torch.randn(40, 4), "
                              "batch_size=4):\n    m(x).sum().backward(); o.step(); "
                              "o.zero_grad(); n += 1\nprint(json.dumps({'steps': n}))\n")
        renv = {k: v for k, v in env_for().items()
                if not k.startswith("GPUSCOPE_") and k != "PYTHONPATH"}
        rr = subprocess.run([BIN, "run", "--out", os.path.join(tmp, "run"), "--",
                             "/usr/bin/python3", loop], env=dict(renv, OMP_NUM_THREADS="1"),
                            capture_output=True, text=True, timeout=120)
        try:
            own = json.loads(rr.stdout.strip().splitlines()[-1])["steps"]
        except (ValueError, IndexError, KeyError):
            own = None
        try:
            runs = json.loads(get("http://127.0.0.1:%d/api/v1/runs" % port)[1])["runs"]
        except (OSError, ValueError, KeyError):
            runs = []
        t.ok(rr.returncode == 0 and own == 10 and len(runs) == 1 and runs[0].get("steps") == own,
             "gpuscope run next to the demo: the run and its 10 steps reach the demo's agent",
             detail="rc %d own %r runs %r\n%s" % (rr.returncode, own, runs, rr.stderr[-1500:]))
        shutil.rmtree(os.path.join(tmp, "run"), ignore_errors=True)
        os.unlink(loop)
    # Pointed at the demo on purpose: every view says simulated, and which agent it read.
    env["GPUSCOPE_HTTP_SOCKET"] = sock
    r = subprocess.run([BIN, "--json"], env=env, capture_output=True, text=True, timeout=30)
    try:
        doc = json.loads(r.stdout)
    except ValueError:
        doc = {}
    t.ok(r.returncode == 0 and doc.get("simulated") is True and
         doc.get("simulator") == "nvml-sim" and doc.get("source") == "agent:" + sock,
         "gpuscope --json via the demo: simulated true, source names the agent",
         detail=r.stdout[:400] + r.stderr)
    r = subprocess.run([BIN], env=dict(env, NO_COLOR="1"), capture_output=True, text=True,
                       timeout=30)
    head = r.stdout.splitlines()[0] if r.stdout else ""
    t.ok(r.returncode == 0 and "SIMULATED (nvml-sim): not real GPUs" in head and
         ("via agent:" + sock) in head, "gpuscope's header: SIMULATED and via which agent",
         detail=head + r.stderr)
    r = subprocess.run([BIN, "query", "--query-gpu=name", "--format=csv,noheader"], env=env,
                       capture_output=True, text=True, timeout=30)
    t.ok(r.returncode == 0 and r.stdout.count("H100") == 8 and
         "note: simulated GPUs (nvml-sim, via agent:%s), not real hardware" % sock in r.stderr,
         "gpuscope query via the demo: nvidia-smi's stdout, a note on stderr",
         detail="rc %d: %s %s" % (r.returncode, r.stdout, r.stderr))
    t.ok(dirs and os.path.exists(os.path.join(tmp, dirs[0], "history.db")),
         "the agent keeps its history.db in the demo's data dir", detail=dirs)
    try:
        code, body = get("http://127.0.0.1:%d/metrics" % port)
        ups = [ln for ln in body.splitlines() if ln.startswith("gpuscope_gpu_up{")]
        up_line = '\ngpuscope_up{hostname="%s"} 1\n' % socket.gethostname()
        t.ok(code == 200 and up_line in "\n" + body and len(ups) == 8
             and all(ln.endswith(" 1") for ln in ups),
             "/metrics: gpuscope_up 1 and 8 GPUs up", detail=body[:2000])
        code, body = get("http://127.0.0.1:%d/" % port)
        t.ok(code == 200 and "/metrics" in body, "/ links the endpoints", detail=body)
        code, body = get("http://127.0.0.1:%d/metrics" % port)
        t.ok('\ngpuscope_info{hostname="%s",simulated="1"} 1\n' % socket.gethostname() in body,
             '/metrics: gpuscope_info{simulated="1"}',
             detail=body[:1500])
        code, body = get("http://127.0.0.1:%d/api/v1/snapshot" % port)
        snap = json.loads(body)
        t.ok(snap.get("simulated") is True and snap.get("source") == "nvml",
             "the snapshot says simulated", detail=body[:300])
        code, body = get("http://127.0.0.1:%d/" % port)
        t.ok('id="simulated"' in body and "SIMULATED" in body,
             "the page carries the SIMULATED banner (shown when the snapshot says so)")
    except OSError as e:
        t.ok(False, "/metrics answers", detail=str(e))
        t.ok(False, "/ answers", detail=str(e))
    t.eq(stop(p), 0, "SIGINT: exit 0")
    t.eq(os.listdir(tmp), ["xdg"], "the data dir is removed at exit")
    t.eq(os.listdir(pub) if os.path.isdir(pub) else [], [],
         "the published links are removed at exit")
    err = p.stderr.read()
    t.ok("data dir " + os.path.join(tmp, dirs[0] if dirs else "?") in err,
         "the data dir is logged", detail=err)

    # A step-record socket that cannot be opened: /api/v1/runs says so, not "socket = off".
    blocker = os.path.join(tmp, "a-file")  # a file where the socket's directory would be
    open(blocker, "w").close()
    p, port, line = start(["--socket", os.path.join(blocker, "steps.sock")])
    try:
        get("http://127.0.0.1:%d/api/v1/runs" % port)
        code, body = 200, ""
    except urllib.error.HTTPError as e:
        code, body = e.code, e.read().decode()
    t.ok(code == 404 and "could not be opened" in body and "socket = off" not in body,
         "runs unavailable: the 404 names the failure, not 'socket = off'", detail=body)
    stop(p)
    os.unlink(blocker)

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
    t.eq(os.listdir(tmp), ["xdg"], "nothing left in TMPDIR")

    # nvml-sim opened directly (no agent): nvidia-smi's modes note it on stderr too
    env = dict(env_for(), GPUSCOPE_NVML_LIBRARY=os.environ.get("GPUSCOPE_SIM_LIB", ""),
               NVML_SIM_SCENARIO=os.path.join(SRC, "sim", "scenarios", "h100x8-training.json"),
               GPUSCOPE_HTTP_SOCKET="off")
    for args in (["query", "-L"], ["query"], ["query", "--query-gpu=name", "--format=csv"]):
        r = subprocess.run([BIN] + args, env=env, capture_output=True, text=True, timeout=30)
        t.ok(r.returncode == 0 and "H100" in r.stdout and
             "note: simulated GPUs (nvml-sim), not real hardware" in r.stderr,
             "gpuscope %s on nvml-sim: a stderr note, nvidia-smi's stdout" % " ".join(args),
             detail="rc %d: %s" % (r.returncode, r.stderr))

    r = subprocess.run([BIN, "demo", "--help"], capture_output=True, text=True, timeout=30)
    t.ok(r.returncode == 0 and "--scenario NAME|PATH" in r.stdout, "--help", detail=r.stdout)
finally:
    clean_up(procs, [tmp])
sys.exit(t.done())
