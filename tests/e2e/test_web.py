"""The agent's dashboard (docs/dashboard.md) in a real browser.

Starts two agents on nvml-sim: the bundled 8-GPU scenario (h100x8-training, history on with a
1 s flush so the charts have history within seconds) and thermal-powercap frozen at t=600 s (the
L40S power- and thermally-capped; the throttling rule's for-duration cut to 1 s), one
whose NVML library does not exist (the driver-missing banner), and h100-mig (the MIG cards).
A training run ("web-e2e", 10 steps whose data phase is a quarter of each step, so the report
finds data_loading; 20 log records of loss and learning rate, two tags) is sent to the main
agent's step-record socket the way the Python package does, and one whose sender goes away
without an end (interrupted, waiting for its sender). Then runs
tests/e2e/web_e2e.mjs, which drives Debian's chromium with playwright-core and prints TAP; its
results are passed on here. When the script asks ("# RESTART main") the main agent is stopped,
and once the page has noticed ("# STOPPED-SEEN"), started again on the same port and data dir.
Before the browser: the assets over plain HTTP (gzip or not, 304 on a matching ETag, the page's
CSP). Screenshots land in tests/e2e/artifacts/. Missing chromium, node or web/node_modules is
a TAP skip (scripts/deps.sh installs them).
"""
import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, clean_up, free_port, http_get, send_records, sim_env, \
    start_agent, stop_proc  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
CHROMIUM = os.environ.get("GS_CHROMIUM", "/usr/bin/chromium")
NODE = shutil.which("node")
PLAYWRIGHT = os.path.join(SRC, "web", "node_modules", "playwright-core")

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-web-test.")


def start(name, scenario, conf_text, port, extra_env=None, args=()):
    conf = os.path.join(tmp, name + ".conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    env = sim_env(scenario, **(extra_env or {}))
    p, base, up = start_agent(["--config", conf, "--data-dir", os.path.join(tmp, name + "-data")]
                              + list(args), env, procs, port=port, tries=200,
                              stdout=subprocess.DEVNULL)
    return p, (base if up else None)


def stop(p):
    return stop_proc(p)


def send_run(path, name, n_steps=10):
    """A finished run on the agent's step-record socket: hello, steps, end (src/run/record.h)."""
    ms = {"data": 50.0, "forward": 80.0, "backward": 40.0, "optimizer_step": 10.0,
          "total_step": 150.0}

    def records():
        yield {"v": 1, "type": "hello", "run": name, "pid": os.getpid(), "rank": 0,
               "world_size": 1, "framework": "torch", "devices": [0],
               "tags": {"team": "web", "try": "2"}}
        for n in range(1, n_steps + 1):
            now = time.time()
            yield {"v": 1, "type": "step", "step": n, "t0": now - 0.15, "t1": now, "rank": 0,
                   "device": 0, "samples": 8, "cuda_events": True, "ms": ms}
            for k in range(2):  # 20 log records (the run detail's training curves)
                i = 2 * (n - 1) + k
                yield {"v": 1, "type": "log", "step": 5 * (i + 1), "t": now, "rank": 0,
                       "values": {"loss": 2.5 - 0.1 * i, "learning_rate": 1e-4 * (i + 1),
                                  "epoch": i / 20.0}}
        yield {"v": 1, "type": "end", "train_runtime": 2.0, "train_samples": 80,
               "train_steps": n_steps}
    send_records(path, records(), gap_s=0.05)


def send_ddp(path, name, job, n_steps=10):
    """A 2-rank run of job `job` (two connections at once, one run: docs/agent.md, RUNS): rank 1
    steps 60 % slower (the straggler), data only 10 ms, a setting (fact) the first run lacks."""
    socks = []
    for rank in (0, 1):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(path)
        s.send(json.dumps({"v": 1, "type": "hello", "run": name, "pid": os.getpid(),
                           "rank": rank, "world_size": 2, "framework": "torch",
                           "devices": [rank], "job": job,
                           "facts": {"dataloader_num_workers": 8}}).encode())
        socks.append(s)
    for n in range(1, n_steps + 1):
        for rank, s in enumerate(socks):
            fwd = 80.0 * (1.6 if rank else 1.0)
            now = time.time()
            s.send(json.dumps({"v": 1, "type": "step", "step": n, "t0": now - 0.15, "t1": now,
                               "rank": rank, "device": rank, "samples": 8, "cuda_events": True,
                               "ms": {"data": 10.0, "forward": fwd, "backward": 40.0,
                                      "optimizer_step": 10.0,
                                      "total_step": fwd + 70.0}}).encode())
        time.sleep(0.05)
    for s in socks:
        s.send(json.dumps({"v": 1, "type": "end", "train_runtime": 2.0}).encode())
        s.close()


def send_interrupted(path, name, n_steps=3):
    """A run whose sender goes away without an end: a resume token in its hello, so the agent
    keeps it `interrupted` waiting for its sender (docs/agent.md, RESUMING A RUN)."""
    def records():
        yield {"v": 1, "type": "hello", "run": name, "pid": os.getpid(), "rank": 0,
               "world_size": 1, "framework": "torch", "devices": [0], "token": "ab" * 16}
        for n in range(1, n_steps + 1):
            now = time.time()
            yield {"v": 1, "type": "step", "step": n, "t0": now - 0.15, "t1": now, "rank": 0,
                   "device": 0, "samples": 8, "ms": {"total_step": 150.0}}
    send_records(path, records(), gap_s=0.05)


def wait_run_ended(base, name, timeout=10.0, state="ended"):
    end = time.time() + timeout
    while time.time() < end:
        code, _, body = http_get(base + "/api/v1/runs")
        if code == 200:
            doc = json.loads(body)
            for r in doc.get("runs", []):
                if r.get("name") == name and r.get("state") == state:
                    return r
        time.sleep(0.2)
    return None


def raw_get(url, headers):
    req = urllib.request.Request(url, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def check_http(base):
    """The assets without a browser: types, gzip, ETag, CSP."""
    code, hdr, body = raw_get(base + "/", {})
    t.ok(code == 200 and hdr.get("Content-Type", "").startswith("text/html") and
         b'<script type="module" src="/assets/app.js">' in body and
         hdr.get("Content-Encoding") is None,
         "GET / without Accept-Encoding: the page, uncompressed", detail=(code, dict(hdr)))
    csp = hdr.get("Content-Security-Policy", "")
    t.ok("default-src 'none'" in csp and "script-src 'self'" in csp and
         "unsafe" not in csp and hdr.get("X-Frame-Options") == "DENY",
         "the page's CSP: same-origin script and style only, no inline", detail=csp)
    t.ok(not re.search(rb"<script(?![^>]*\bsrc=)", body) and b"<style" not in body and
         b" style=" not in body, "no inline script or style in the page")
    code, hdr, zbody = raw_get(base + "/assets/uPlot.iife.min.js",
                               {"Accept-Encoding": "br, gzip;q=0.8"})
    plain = raw_get(base + "/assets/uPlot.iife.min.js", {"Accept-Encoding": "gzip;q=0"})[2]
    t.ok(code == 200 and hdr.get("Content-Encoding") == "gzip" and
         gzip.decompress(zbody) == plain and len(zbody) < len(plain) / 2 and
         hdr.get("Vary") == "Accept-Encoding" and
         hdr.get("Content-Type", "").startswith("text/javascript"),
         "uPlot served gzip when accepted (%d -> %d bytes), identity when q=0"
         % (len(plain), len(zbody)), detail=dict(hdr))
    etag = hdr.get("ETag")
    code, hdr, body = raw_get(base + "/assets/app.js", {})
    etag = hdr.get("ETag")
    code2, _, body2 = raw_get(base + "/assets/app.js", {"If-None-Match": etag or "x"})
    t.ok(code == 200 and etag and code2 == 304 and body2 == b"",
         "a revalidation with the ETag answers 304", detail=(code, etag, code2))
    code, hdr, _ = raw_get(base + "/assets/nope.js", {})
    t.eq(code, 404, "an unknown asset is 404")
    total = 0
    for path in ("/", "/assets/app.js", "/assets/format.js", "/assets/style.css",
                 "/assets/uPlot.iife.min.js", "/assets/uPlot.min.css", "/assets/favicon.svg"):
        c, h, b = raw_get(base + path, {"Accept-Encoding": "gzip"})
        total += len(b) if c == 200 else 10 ** 9
    print("# page weight over HTTP: %d bytes gzip-compressed, 7 files" % total, flush=True)
    t.ok(total < 200 * 1024, "all assets < 200 KB compressed (%d bytes)" % total)


def browser(main_port, thermal_base, main_base, nodriver_base):
    env = dict(os.environ, GS_URL=main_base, GS_THERMAL_URL=thermal_base,
               GS_NODRIVER_URL=nodriver_base,
               GS_ARTIFACTS=os.path.join(HERE, "artifacts"), GS_CHROMIUM=CHROMIUM,
               GS_WEB_DIR=os.path.join(SRC, "web"))
    nd = subprocess.Popen([NODE, os.path.join(HERE, "web_e2e.mjs")], env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1)
    saw_tap = False
    try:
        for line in nd.stdout:
            line = line.rstrip("\n")
            m = re.match(r"^(not )?ok \d+ - (.*)$", line)
            if m:
                saw_tap = True
                t.ok(m.group(1) is None, m.group(2))
            elif line.startswith("1.."):
                continue
            elif line == "# RESTART main":
                print(line, flush=True)
                rc = stop(procs[0])
                t.eq(rc, 0, "main agent stopped for the restart")
            elif line == "# STOPPED-SEEN":
                p, base = start("main", "h100x8-training.json", MAIN_CONF, main_port,
                                args=MAIN_ARGS)
                procs[0] = p
                t.ok(base is not None, "main agent started again on port %d" % main_port)
                nd.stdin.write("go\n")
                nd.stdin.flush()
            else:
                print(line if line.startswith("#") else "# " + line, flush=True)
        rc = nd.wait(timeout=120)
    finally:
        if nd.poll() is None:
            nd.kill()
            nd.wait()
    t.ok(saw_tap and rc == 0, "the browser script exits 0", detail=rc)


MAIN_CONF = "flush_interval = 1\ngrafana_url = https://grafana.test:3000/\n"
SOCK_MAIN = os.path.join(tmp, "steps-main.sock")
MAIN_ARGS = ["--interval", "0.5", "--socket", SOCK_MAIN]
try:
    main_port = free_port()
    p_main, main_base = start("main", "h100x8-training.json", MAIN_CONF, main_port,
                              args=MAIN_ARGS)
    t.ok(main_base is not None, "agent on h100x8-training serves")
    p_th, th_base = start("thermal", "thermal-powercap.json",
                          "history = off\n[alert throttling]\nfor = 1s\n", free_port(),
                          extra_env={"NVML_SIM_TIME": "600"},
                          args=["--interval", "0.5", "--socket",
                                os.path.join(tmp, "steps-thermal.sock")])
    t.ok(th_base is not None, "agent on thermal-powercap (t = 600 s) serves")
    p_nd, nd_base = start("nodriver", "h100x8-training.json", "history = off\n", free_port(),
                          extra_env={"GPUSCOPE_NVML_LIBRARY": "/nonexistent/libnvidia-ml.so.1"},
                          args=["--socket", "off"])
    t.ok(nd_base is not None, "agent without a driver serves")
    p_mig, mig_base = start("mig", "h100-mig.json", "history = off\n", free_port(),
                            args=["--interval", "0.5", "--socket",
                                  os.path.join(tmp, "steps-mig.sock")])
    t.ok(mig_base is not None, "agent on h100-mig (MIG cards) serves")
    if mig_base:
        os.environ["GS_MIG_URL"] = mig_base  # web_e2e.mjs's MIG section
    if main_base and th_base and nd_base:
        check_http(main_base)
        missing = [what for what, ok in (("node", NODE), ("chromium", os.access(CHROMIUM, os.X_OK)),
                                        ("web/node_modules/playwright-core",
                                         os.path.isdir(PLAYWRIGHT))) if not ok]
        if missing:
            t.skip("dashboard in headless chromium", "missing: %s (make deps installs them)"
                   % ", ".join(missing))
        else:
            send_run(SOCK_MAIN, "web-e2e")
            r = wait_run_ended(main_base, "web-e2e")
            t.ok(r is not None and r.get("steps") == 10 and
                 "data_loading" in r.get("findings", []),
                 "a 10-step run sent to the step socket is listed, ended, with data_loading",
                 detail=r)
            send_ddp(SOCK_MAIN, "web-e2e-ddp", "llm-job")
            r = wait_run_ended(main_base, "web-e2e-ddp")
            t.ok(r is not None and r.get("steps") == 20,
                 "a 2-rank run of job llm-job is listed, ended, 20 steps", detail=r)
            send_interrupted(SOCK_MAIN, "web-e2e-intr")
            r = wait_run_ended(main_base, "web-e2e-intr", state="interrupted")
            t.ok(r is not None and r.get("end") is None and r.get("steps") == 3,
                 "a run whose sender left without an end: interrupted, end null", detail=r)
            time.sleep(4)  # several flushed seconds of history before the page asks for it
            browser(main_port, th_base, main_base, nd_base)
finally:
    clean_up(procs, [tmp], stop=stop)
sys.exit(t.done())
