"""`gpuscope agent` on SIGHUP: push sinks, the alert webhook and alert rules take effect
without a restart, and libcurl is loaded only when a push sink or webhook needs it.

nvml-sim thermal-powercap.json (1 GPU) with NVML_SIM_TIME=file:PATH set by the test. A stdlib
http.server on loopback plays both the Pushgateway (PUT /metrics/job/J/instance/I) and the
Alertmanager-style webhook (POST /hook). The test rewrites the agent's config file and sends
SIGHUP: a pushgateway and webhook appear (libcurl is mapped only from then on), the job name
changes the push path, a removed rule and then `alerts = off` resolve what was firing (log
line, /api/v1/alerts entry, a resolved POST with endsAt), a bad push setting is refused and the
running one kept, removing the sink stops the pushes. Then $GPUSCOPE_CURL_LIBRARY pointing
nowhere: without push the agent runs; with a push sink it refuses to start naming libcurl4.
"""
import http.server
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
from tap import Tap  # noqa: E402
from gsenv import BIN, clean_up, free_port, get_text, sim_env, stop_proc as stop, \
    wait_until as until  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-reload-test.")
HOT = "[alert hot]\nmetric = temperature_gpu\nop = >=\nthreshold = 0\nfor = 0s\n"


class Receiver(http.server.BaseHTTPRequestHandler):
    puts = []   # (path, body text)
    posts = []  # alerts (dicts) from every POST

    def _body(self):
        return self.rfile.read(int(self.headers.get("Content-Length", "0")))

    def do_PUT(self):
        Receiver.puts.append((self.path, self._body().decode(errors="replace")))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        try:
            doc = json.loads(self._body())
        except ValueError:
            doc = None
        Receiver.posts.extend(doc if isinstance(doc, list) else [])
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def get(url):
    return get_text(url, os_error=True)


def write(path, text):
    with open(path + ".new", "w") as f:
        f.write(text)
    os.replace(path + ".new", path)


def maps_has(pid, name):
    with open("/proc/%d/maps" % pid) as f:
        return name in f.read()


def log_text():
    with open(os.path.join(tmp, "agent.log"), "rb") as f:
        return f.read().decode(errors="replace")


def alert(base, rule, state):
    code, body = get(base + "/api/v1/alerts")
    if code != 200:
        return None
    hit = [a for a in json.loads(body)["alerts"] if a["rule"] == rule and a["state"] == state]
    return hit[0] if hit else None


def post_for(rule, resolved):
    hit = [a for a in Receiver.posts if a.get("labels", {}).get("alertname") == rule
           and ("endsAt" in a) == resolved]
    return hit[0] if hit else None


def reload_run(srv_port):
    hook = "http://127.0.0.1:%d/hook" % srv_port
    pgw = "http://127.0.0.1:%d" % srv_port
    clock = os.path.join(tmp, "t")
    write(clock, "0\n")
    conf = os.path.join(tmp, "agent.conf")
    write(conf, HOT)
    port = free_port()
    base = "http://127.0.0.1:%d" % port
    log = open(os.path.join(tmp, "agent.log"), "wb")
    p = subprocess.Popen([BIN, "agent", "--config", conf, "--listen", "127.0.0.1:%d" % port,
                          "--history", "off", "--interval", "0.2",
                          "--data-dir", os.path.join(tmp, "data")],
                         env=sim_env("thermal-powercap.json", "file:" + clock),
                         stdout=log, stderr=subprocess.STDOUT)
    procs.append(p)
    t.ok(until(lambda: get(base + "/healthz")[0] == 200), "agent up")
    t.ok(until(lambda: alert(base, "hot", "firing")), "rule hot fires (no webhook yet)")
    t.ok(not maps_has(p.pid, "libcurl"), "no push, no webhook: libcurl is not mapped")

    write(conf, "alert_webhook = %s\npushgateway_url = %s\npush_interval = 1\n" % (hook, pgw)
          + HOT)
    p.send_signal(signal.SIGHUP)
    put = until(lambda: [x for x in Receiver.puts if x[0].startswith("/metrics/job/gpuscope/")])
    t.ok(put and "gpuscope_gpu_temperature_celsius" in put[0][1],
         "SIGHUP adds a pushgateway: PUT /metrics/job/gpuscope/... with our series",
         [x[0] for x in Receiver.puts])
    t.ok(maps_has(p.pid, "libcurl"), "libcurl is mapped once a push sink is configured")

    write(conf, "alert_webhook = %s\npushgateway_url = %s\npushgateway_job = other\n"
          "push_interval = 1\n" % (hook, pgw))
    p.send_signal(signal.SIGHUP)
    t.ok(until(lambda: [x for x in Receiver.puts if x[0].startswith("/metrics/job/other/")]),
         "SIGHUP changes pushgateway_job: pushes go to /metrics/job/other/...",
         [x[0] for x in Receiver.puts][-3:])
    r = until(lambda: alert(base, "hot", "resolved"))
    t.ok(r and r.get("metric") == "temperature_gpu" and "resolved_at" in r
         and not alert(base, "hot", "firing"),
         "rule hot removed by SIGHUP: listed as resolved, no longer firing", r)
    r = until(lambda: post_for("hot", True))
    t.ok(r and r["labels"].get("gpu") == "0" and r["labels"].get("uuid", "").startswith("GPU-"),
         "the new webhook gets hot's resolved notification (endsAt)", r)
    t.ok(until(lambda: "alerts: hot on gpu 0 resolved (rule removed)" in log_text()),
         "log: hot resolved (rule removed)")

    write(clock, "60\n")  # the power cap throttles: the throttling rule fires
    write(conf, "alert_webhook = %s\n[alert throttling]\nfor = 1s\n" % hook)
    p.send_signal(signal.SIGHUP)
    f = until(lambda: post_for("throttling", False))
    t.ok(f, "throttling fires and is posted", Receiver.posts)
    n_puts = len(Receiver.puts)
    time.sleep(2.5)
    t.ok(len(Receiver.puts) <= n_puts + 1, "pushgateway removed by SIGHUP: pushes stop",
         (n_puts, len(Receiver.puts)))

    write(conf, "alert_webhook = %s\nalerts = off\n[alert throttling]\nfor = 1s\n" % hook)
    p.send_signal(signal.SIGHUP)
    r = until(lambda: post_for("throttling", True))
    t.ok(r and f and r.get("labels") == f.get("labels") and r.get("startsAt") == f.get("startsAt"),
         "alerts = off by SIGHUP: the firing throttling alert is posted resolved", r)
    t.ok(until(lambda: alert(base, "throttling", "resolved"))
         and not alert(base, "throttling", "firing"),
         "alerts = off: /api/v1/alerts lists it resolved, nothing firing")
    t.ok(until(lambda: "alerts: throttling on gpu 0 resolved (alerts off)" in log_text()),
         "log: throttling resolved (alerts off)")

    write(conf, "influx_url = %s\ninflux_version = 2\n" % pgw)  # no org/bucket/token: refused
    p.send_signal(signal.SIGHUP)
    t.ok(until(lambda: "keeping the running push settings" in log_text()),
         "a bad push setting on SIGHUP is refused with an error; the agent keeps running")
    t.eq(get(base + "/healthz")[0], 200, "still serving after the refused reload")
    t.eq(stop(p), 0, "agent exits 0 after the reloads")


def no_curl_run():
    env = sim_env("thermal-powercap.json", GPUSCOPE_CURL_LIBRARY="/nonexistent/libcurl.so.4")
    port = free_port()
    argv = [BIN, "agent", "--listen", "127.0.0.1:%d" % port, "--history", "off",
            "--data-dir", os.path.join(tmp, "data2")]
    p = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    procs.append(p)
    up = until(lambda: get("http://127.0.0.1:%d/healthz" % port)[0] == 200)
    t.ok(up, "libcurl missing, no push configured: the agent runs")
    t.eq(stop(p), 0, "and exits 0")
    p.communicate()
    p = subprocess.run(argv + ["--pushgateway-url", "http://127.0.0.1:9/"], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=20)
    err = p.stderr.decode(errors="replace")
    t.ok(p.returncode != 0 and "/nonexistent/libcurl.so.4" in err and "libcurl4" in err,
         "libcurl missing with a pushgateway: refuses to start, naming the library and the "
         "Debian package", (p.returncode, err[-400:]))


def main():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        reload_run(srv.server_address[1])
    finally:
        srv.shutdown()
        srv.server_close()
    no_curl_run()


try:
    main()
finally:
    clean_up(procs, [tmp])
sys.exit(t.done())
