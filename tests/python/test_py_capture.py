"""`gpuscope trace capture --run ID`: a profiler window asked of a running job through the
node's agent (docs/trace.md), with real PyTorch (Debian's 1.13, CPU) and a real agent.

A plain loop with `gpuscope.step()` (no `gpuscope run`) sends its records to the agent's step
socket (GPUSCOPE_AGENT_SOCKET). While it runs: `gpuscope trace capture --run ID --steps 3`
over the agent's HTTP unix socket reaches its rank (202, 1 of 1), the package opens a
torch.profiler window and writes rank0-stepN.json into $GPUSCOPE_PROFILE_DIR with three
ProfilerStep annotations, which `gpuscope trace analyze` reads. Refused: a POST without
X-Requested-By (403, a browser page's request), a run that does not exist and an ended run
(404, exit 6), steps 0 (400), and, as root, a run of another user asked by uid 65534 (404 as
for a missing one). The control message parser's answers (gs_control_parse through the
fuzz corpus' shapes) are in the unit tests of fuzz/fuzz_control.c's seeds.
"""
import glob
import json
import os
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, Tap  # noqa: E402
from gsenv import BIN, clean_up, get_json, sim_env, start_agent, wait_until  # noqa: E402

t = Tap()
tmp = tempfile.mkdtemp(prefix="gs-capture.")
os.chmod(tmp, 0o755)
procs = []
SOCK = os.path.join(tmp, "steps.sock")
HSOCK = os.path.join(tmp, "agent.sock")
PROF = os.path.join(tmp, "prof")

TRAIN = textwrap.dedent("""
    import sys, time
    import torch
    import gpuscope
    torch.set_num_threads(1)
    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    for i in range(int(sys.argv[1])):
        with gpuscope.step(samples=16):
            loss = m(torch.randn(16, 64)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            time.sleep(0.02)
    gpuscope.finish()
""")


def http_unix(method, path, headers=()):
    """(status, body) of one HTTP/1.0 request over the agent's unix socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(HSOCK)
    s.sendall(("%s %s HTTP/1.0\r\nHost: localhost\r\nContent-Length: 0\r\n%s\r\n" % (
        method, path, "".join("%s: %s\r\n" % h for h in headers))).encode())
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


def capture(run_id, steps=3, user=None):
    cmd = [BIN, "trace", "capture", "--run", str(run_id), "--steps", str(steps)]
    env = dict(os.environ, GPUSCOPE_HTTP_SOCKET=HSOCK, NO_COLOR="1")
    pre = None
    if user is not None:
        def pre():
            os.setgroups([])
            os.setgid(user)
            os.setuid(user)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30,
                          preexec_fn=pre)


def live_run(base, name):
    code, doc = get_json(base + "/api/v1/runs")
    for r in (doc or {}).get("runs", []) if code == 200 else []:
        if r.get("name") == name and r.get("state") == "running" and (r.get("steps") or 0) >= 5:
            return r
    return None


try:
    scen = os.path.join(tmp, "scenario.json")
    with open(scen, "w") as f:
        json.dump({"scenario_version": 1, "gpus": [
            {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-c0000000-0000-0000-0000-000000000001",
             "pci": {"bus": "0x18", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
             "power": {"default_limit_w": 700}, "architecture": "hopper",
             "metrics": {"util_gpu_pct": 50, "power_w": 300}}]}, f)
    ap, base, up = start_agent(["--data-dir", os.path.join(tmp, "data"), "--socket", SOCK,
                                "--http-socket", HSOCK, "--interval", "0.5"], sim_env(scen),
                               procs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t.ok(up, "the agent serves")
    script = os.path.join(tmp, "train.py")
    with open(script, "w") as f:
        f.write(TRAIN)
    env = pyhelp.child_env(GPUSCOPE_AGENT_SOCKET=SOCK, GPUSCOPE_PROFILE_DIR=PROF,
                           GPUSCOPE_RUN_NAME="capture-me")
    job = subprocess.Popen([PYTHON, script, "400"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    procs.append(job)
    run = wait_until(lambda: live_run(base, "capture-me"), 30)
    t.ok(run is not None, "the plain loop's run is live on the agent", detail=run)
    rid = (run or {}).get("id", 0)

    code, body = http_unix("POST", "/api/v1/runs/%d/capture?steps=3" % rid)
    t.ok(code == 403 and "X-Requested-By" in body,
         "a POST without X-Requested-By is refused (403): no cross-site request", (code, body))
    code, body = http_unix("GET", "/api/v1/runs/%d/capture" % rid)
    t.ok(code == 404, "GET .../capture is no capture", (code, body))
    code, body = http_unix("DELETE", "/api/v1/runs/%d" % rid, [("X-Requested-By", "t")])
    t.ok(code == 405, "another method: 405", (code, body))
    p = capture(rid, steps=0)
    t.ok(p.returncode != 0 and "1..1000" in p.stderr, "--steps 0 is refused", p.stderr)
    code, body = http_unix("POST", "/api/v1/runs/%d/capture?steps=0" % rid,
                           [("X-Requested-By", "t")])
    t.ok(code == 400 and "1..1000" in body, "the agent refuses steps=0 too (400)", (code, body))
    p = capture(999999)
    t.ok(p.returncode == 6 and "no live run 999999" in p.stderr,
         "a run that does not exist: exit 6, 'no live run'", (p.returncode, p.stderr))
    if os.geteuid() == 0:
        p = capture(rid, user=65534)
        t.ok(p.returncode == 6 and "no live run %d" % rid in p.stderr,
             "another user asking: the same answer as for a missing run", (p.returncode, p.stderr))
    else:
        t.skip("another user asking", "needs root to become uid 65534")

    p = capture(rid, steps=3)
    t.ok(p.returncode == 0 and "1 of 1 rank(s) reached" in p.stdout,
         "gpuscope trace capture --run ID reaches the run's rank", (p.stdout, p.stderr))
    files = wait_until(lambda: glob.glob(os.path.join(PROF, "rank0-step*.json")), 20)
    t.ok(files, "the rank writes its trace into GPUSCOPE_PROFILE_DIR", detail=os.listdir(tmp))
    doc = []
    if files:
        time.sleep(0.5)
        with open(files[0]) as f:
            doc = json.load(f)
    events = doc.get("traceEvents", []) if isinstance(doc, dict) else doc
    steps = sorted({e.get("name") for e in events if isinstance(e, dict) and
                    str(e.get("name", "")).startswith("ProfilerStep#")})
    t.eq(len(steps), 3, "the window has the 3 steps asked for (%s)" % steps)
    if files:
        a = subprocess.run([BIN, "trace", "analyze", "--json", files[0]], capture_output=True,
                           text=True, timeout=60)
        t.ok(a.returncode == 0 and json.loads(a.stdout or "{}"),
             "gpuscope trace analyze reads it", a.stderr[-400:])
    else:
        t.ok(False, "gpuscope trace analyze reads it")
    out, err = job.communicate(timeout=60)
    t.ok(job.returncode == 0, "the training finished normally", err[-300:])
    p = capture(rid)
    t.ok(p.returncode == 6 and "no live run" in p.stderr, "an ended run: 404, exit 6", p.stderr)
finally:
    clean_up(procs, [tmp])
pyhelp.exit_now(t.done())
