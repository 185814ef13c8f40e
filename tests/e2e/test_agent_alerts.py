"""`gpuscope agent`'s alert engine end to end, on nvml-sim with NVML_SIM_TIME=file:PATH
advanced by the test.

thermal-powercap.json: at t=60 the power cap throttles the L40S (the throttling rule, its
for-duration cut to 1 s in an [alert throttling] section, fires); at t=500 the GPU is within
5 C of its 90 C slowdown (the temperature rule fires). /metrics counts them in
gpuscope_alerts_firing{severity}. gpu-lost.json: after t=30 GPU 2 is lost (gpu_lost,
critical). `alerts = off` leaves /api/v1/alerts empty. alert_webhook: a stdlib http.server
on a loopback port receives the Alertmanager-style POSTs (firing, then resolved with endsAt);
a webhook on a closed port is counted as failing while the agent keeps serving. Everything
started is stopped.
"""
import http.server
import json
import re
import threading
import os
import socket
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import clean_up, free_port, get_text as get, sim_env, start_agent, \
    stop_agent  # noqa: E402


t = Tap()
procs = []
tmpdirs = []


def start(scenario, conf_text):
    tmp = tempfile.mkdtemp(prefix="gs-alerts-test.")
    tmpdirs.append(tmp)
    clock = os.path.join(tmp, "t")
    with open(clock, "w") as f:
        f.write("0\n")
    conf = os.path.join(tmp, "agent.conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    env = sim_env(scenario, "file:" + clock)
    p, base, _ = start_agent(["--config", conf, "--data-dir", os.path.join(tmp, "data"),
                              "--history", "off", "--interval", "0.2"], env, procs)
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
    return stop_agent(p, timeout=5)


class Receiver(http.server.BaseHTTPRequestHandler):
    posts = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        Receiver.posts.append((self.path, self.headers.get("Content-Type"), doc))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def wait_post(pred, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path, ctype, doc in list(Receiver.posts):
            for a in doc if isinstance(doc, list) else []:
                if pred(a):
                    return path, ctype, a
        time.sleep(0.1)
    return None, None, {"not found in": Receiver.posts}


def metric(base, name):
    _, m = get(base + "/metrics")
    hit = re.search(r"^%s (\d+)$" % re.escape(name), m, re.M)
    return int(hit.group(1)) if hit else None


RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")


def webhook():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        hook = "http://127.0.0.1:%d/" % srv.server_address[1]
        p, base, clock = start("thermal-powercap.json",
                               "alert_webhook = %s\n[alert throttling]\nfor = 1s\n" % hook)
        set_time(clock, 60)
        path, ctype, a = wait_post(lambda a: a.get("labels", {}).get("alertname") == "throttling"
                                   and "endsAt" not in a)
        lb = a.get("labels", {})
        t.ok(path == "/" and ctype == "application/json", "webhook: POST / application/json",
             (path, ctype))
        t.ok(lb.get("gpu") == "0" and lb.get("severity") == "warning" and lb.get("job") ==
             "gpuscope" and lb.get("instance") and lb.get("uuid", "").startswith("GPU-"),
             "webhook: firing throttling with labels gpu, uuid, severity, instance, job", a)
        t.ok(RFC3339.match(a.get("startsAt", "")) and a.get("annotations", {}).get("summary")
             and a["annotations"].get("value") == "1"
             and a.get("generatorURL") == base + "/api/v1/alerts",
             "webhook: startsAt, annotations and generatorURL", a)
        set_time(clock, 0)
        _, _, r = wait_post(lambda a: a.get("labels", {}).get("alertname") == "throttling"
                            and "endsAt" in a)
        t.ok(RFC3339.match(r.get("endsAt", "")) and r.get("startsAt") == a.get("startsAt")
             and r.get("labels") == a.get("labels"),
             "webhook: then resolved, with endsAt", r)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # /metrics is rendered once per cycle
            sent = metric(base, "gpuscope_alert_webhook_sent_total")
            if sent and sent >= 2:
                break
            time.sleep(0.1)
        failed = metric(base, "gpuscope_alert_webhook_failed_total")
        t.ok(sent and sent >= 2 and failed == 0,
             "/metrics: gpuscope_alert_webhook_sent_total counts them", (sent, failed))
        rc, _ = stop(p)
        t.eq(rc, 0, "agent with a webhook exits 0")
    finally:
        srv.shutdown()
        srv.server_close()

    closed = free_port()
    p, base, clock = start("thermal-powercap.json",
                           "alert_webhook = http://127.0.0.1:%d/\n[alert throttling]\nfor = 1s\n"
                           % closed)
    set_time(clock, 60)
    wait_for(base, "throttling", 0)
    deadline = time.monotonic() + 10
    failed = None
    while time.monotonic() < deadline:
        failed = metric(base, "gpuscope_alert_webhook_failed_total")
        if failed:
            break
        time.sleep(0.1)
    t.ok(failed and failed >= 1, "closed port: gpuscope_alert_webhook_failed_total counts",
         failed)
    t.eq(get(base + "/healthz")[0], 200, "closed port: the agent keeps serving")
    rc, err = stop(p)
    t.eq(rc, 0, "closed port: agent exits 0")
    t.eq(err.count("alert_webhook: http://127.0.0.1:%d/ failed" % closed), 1,
         "closed port: the failure is logged once")


def main():
    p, base, clock = start("thermal-powercap.json",
                           "[alert throttling]\nfor = 1s\n[alert temperature]\nfor = 1s\n")
    code, doc = alerts(base)
    t.eq(code, 200, "/api/v1/alerts answers 200")
    t.ok(doc.get("enabled") is True and isinstance(doc.get("alerts"), list),
         "/api/v1/alerts: enabled and a list", doc)
    t.ok(not [a for a in doc["alerts"] if a["state"] == "firing"], "nothing fires at t=0", doc)
    set_time(clock, 60)
    a = wait_for(base, "throttling", 0)
    t.ok(a.get("severity") == "warning" and a.get("value") == 1 and a.get("threshold") == 0.5
         and isinstance(a.get("since"), float) and a["since"] > 1e9,
         "t=60: throttling (power cap) fires on GPU 0 after its 1 s", a)
    set_time(clock, 500)
    a = wait_for(base, "temperature", 0)
    t.ok(a.get("metric") == "temperature_slowdown_margin" and a.get("value", 99) <= 5
         and a.get("op") == "<=", "t=500: temperature within 5 C of slowdown fires", a)
    _, m = get(base + "/metrics")
    t.ok('gpuscope_alerts_firing{hostname="%s",severity="warning"} 2' % socket.gethostname()
         in m,
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
    xid = wait_for(base, "xid", 2)
    t.ok(xid.get("value") == 79, "the lost GPU's Xid 79 fires the xid rule (kept when lost)", xid)
    _, m = get(base + "/metrics")
    lost_xid = [ln for ln in m.splitlines() if ln.startswith("gpuscope_gpu_xid_last{") and
                'gpu="2"' in ln]
    t.ok(lost_xid and lost_xid[0].endswith(" 79"), "/metrics keeps xid_last 79 for the lost GPU",
         lost_xid)
    stop(p)

    p, base, clock = start("gpu-lost.json", "alerts = off\n")
    set_time(clock, 35)
    time.sleep(0.8)
    _, doc = alerts(base)
    t.ok(doc.get("enabled") is False and doc.get("alerts") == [], "alerts = off: none", doc)
    stop(p)

    webhook()


try:
    main()
finally:
    clean_up(procs, tmpdirs)
sys.exit(t.done())
