"""`gpuscope agent`'s alert engine end to end, on nvml-sim with NVML_SIM_TIME=file:PATH
advanced by the test.

thermal-powercap.json: at t=60 the power cap throttles the L40S (the throttling rule, its
for-duration cut to 1 s in an [alert throttling] section, fires); at t=500 the GPU is within
5 C of its 90 C slowdown (the temperature rule fires). /metrics counts them in
gpuscope_alerts_firing{severity}. gpu-lost.json: after t=30 GPU 2 is lost (gpu_lost,
critical). `alerts = off` leaves /api/v1/alerts empty. Everything started is stopped.
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

SRC = os.environ.get("GPUSCOPE_SOURCE_ROOT",
                     os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("GPUSCOPE_BUILD_ROOT", os.path.join(SRC, "build"))
BIN = os.environ.get("GPUSCOPE_BIN", os.path.join(BUILD, "gpuscope"))
SIM = os.environ.get("GPUSCOPE_SIM_LIB", os.path.join(BUILD, "sim", "libnvidia-ml.so.1"))

t = Tap()
procs = []
tmpdirs = []


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def start(scenario, conf_text):
    tmp = tempfile.mkdtemp(prefix="gs-alerts-test.")
    tmpdirs.append(tmp)
    clock = os.path.join(tmp, "t")
    with open(clock, "w") as f:
        f.write("0\n")
    conf = os.path.join(tmp, "agent.conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVML_SIM")}
    env.update(GPUSCOPE_NVML_LIBRARY=SIM, TZ="UTC", NVML_SIM_TIME="file:" + clock,
               NVML_SIM_SCENARIO=os.path.join(SRC, "sim", "scenarios", scenario))
    port = free_port()
    p = subprocess.Popen([BIN, "agent", "--config", conf, "--listen", "127.0.0.1:%d" % port,
                          "--data-dir", os.path.join(tmp, "data"), "--history", "off",
                          "--interval", "0.2"],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    procs.append(p)
    base = "http://127.0.0.1:%d" % port
    for _ in range(100):
        try:
            if get(base + "/healthz")[0] == 200:
                break
        except OSError:
            pass
        if p.poll() is not None:
            break
        time.sleep(0.05)
    return p, base, clock


def set_time(clock, v):
    tmp = clock + ".new"
    with open(tmp, "w") as f:
        f.write("%g\n" % v)
    os.replace(tmp, clock)


def alerts(base):
    code, body = get(base + "/api/v1/alerts")
    return code, json.loads(body)


def wait_for(base, rule, gpu, state="firing", timeout=10):
    deadline = time.monotonic() + timeout
    doc = None
    while time.monotonic() < deadline:
        _, doc = alerts(base)
        for a in doc["alerts"]:
            if a["rule"] == rule and a["gpu"] == gpu and a["state"] == state:
                return a
        time.sleep(0.1)
    return {"not found in": doc}


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        rc = p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = p.wait()
    _, err = p.communicate()
    return rc, err.decode()


def main():
    p, base, clock = start("thermal-powercap.json", "[alert throttling]\nfor = 1s\n")
    code, doc = alerts(base)
    t.eq(code, 200, "/api/v1/alerts answers 200")
    t.ok(doc.get("enabled") is True and isinstance(doc.get("alerts"), list),
         "/api/v1/alerts: enabled and a list", doc)
    t.ok(not [a for a in doc["alerts"] if a["state"] == "firing"], "nothing fires at t=0", doc)
    set_time(clock, 60)
    a = wait_for(base, "throttling", 0)
    t.ok(a.get("severity") == "warning" and a.get("value") == 1 and a.get("threshold") == 0
         and isinstance(a.get("since"), float) and a["since"] > 1e9,
         "t=60: throttling (power cap) fires on GPU 0 after its 1 s", a)
    set_time(clock, 500)
    a = wait_for(base, "temperature", 0)
    t.ok(a.get("metric") == "temperature_slowdown_margin" and a.get("value", 99) <= 5
         and a.get("op") == "<=", "t=500: temperature within 5 C of slowdown fires", a)
    _, m = get(base + "/metrics")
    t.ok('gpuscope_alerts_firing{severity="warning"} 2' in m,
         "/metrics: gpuscope_alerts_firing{severity=\"warning\"} 2",
         [l for l in m.splitlines() if "alerts_firing" in l])
    set_time(clock, 0)
    a = wait_for(base, "temperature", 0, state="resolved")
    t.ok("resolved_at" in a, "back at t=0: the temperature alert is resolved", a)
    rc, err = stop(p)
    t.eq(rc, 0, "agent exits 0")
    t.ok("alerts: temperature on gpu 0 firing" in err and "resolved" in err,
         "transitions are logged", err[-2000:])

    p, base, clock = start("gpu-lost.json", "")
    set_time(clock, 10)
    time.sleep(0.6)
    _, doc = alerts(base)
    t.ok(not [a for a in doc["alerts"] if a["rule"] == "gpu_lost"], "t=10: no GPU lost", doc)
    set_time(clock, 35)
    a = wait_for(base, "gpu_lost", 2)
    t.ok(a.get("severity") == "critical", "t=35: gpu_lost fires on GPU 2 (critical)", a)
    _, doc = alerts(base)
    t.ok(not [x for x in doc["alerts"] if x["rule"] == "gpu_lost" and x["gpu"] != 2],
         "only GPU 2 is lost", doc)
    stop(p)

    p, base, clock = start("gpu-lost.json", "alerts = off\n")
    set_time(clock, 35)
    time.sleep(0.8)
    _, doc = alerts(base)
    t.ok(doc.get("enabled") is False and doc.get("alerts") == [], "alerts = off: none", doc)
    stop(p)


try:
    main()
finally:
    for pr in procs:
        if pr.poll() is None:
            pr.kill()
            pr.wait()
    for d in tmpdirs:
        shutil.rmtree(d, ignore_errors=True)
sys.exit(t.done())
