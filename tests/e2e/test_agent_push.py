"""`gpuscope agent` push sinks end to end, against REAL servers on loopback (nvml-sim,
h100x8-training.json, real clock).

InfluxDB 1.x (influxd, a temp config: meta/data/wal dirs in a temp dir, free ports, reporting
off) gets a database by /query; the agent pushes every second; the points read back by
/query equal what /api/v1/snapshot reported for the same sample time. A Prometheus Pushgateway
(prometheus-pushgateway) then serves the gpuscope series under job/instance. InfluxDB is then
stopped: pushes fail and are counted, the bounded buffer (push_buffer 3) drops the oldest
batches and counts them, the agent's RSS stays bounded; InfluxDB restarted: pushes succeed
again and the buffered batches arrive. A server that cannot start here is a TAP `# SKIP` with
the reason. Everything the test starts is stopped at the end.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, SIM, clean_up, free_port, get_text, start_agent, stop_proc, \
    wait_until  # noqa: E402

SCENARIO = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")
FIELDS = ["utilization_gpu", "memory_used", "power_draw", "temperature_gpu"]

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-agent-push.")


def get(url, data=None, timeout=5):
    return get_text(url, data, timeout, os_error=True)


def wait_for(fn, timeout):
    return wait_until(fn, timeout)


def spawn(argv, log):
    f = open(os.path.join(tmp, log), "wb")
    p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT)
    procs.append(p)
    return p


def stop(p):
    return stop_proc(p)


def tail(log, n=1500):
    try:
        with open(os.path.join(tmp, log), "rb") as f:
            return f.read().decode(errors="replace")[-n:]
    except OSError:
        return ""


class Influx:
    def __init__(self):
        self.dir = os.path.join(tmp, "influx")
        self.port = free_port()
        self.conf = os.path.join(self.dir, "influxdb.conf")
        os.makedirs(self.dir, exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(f"""reporting-disabled = true
bind-address = "127.0.0.1:{free_port()}"
[meta]
  dir = "{self.dir}/meta"
[data]
  dir = "{self.dir}/data"
  wal-dir = "{self.dir}/wal"
  query-log-enabled = false
[http]
  bind-address = "127.0.0.1:{self.port}"
  log-enabled = false
[monitor]
  store-enabled = false
""")
        self.url = "http://127.0.0.1:%d" % self.port
        self.p = None

    def start(self):
        self.p = spawn(["influxd", "-config", self.conf], "influxd.log")
        return wait_for(lambda: self.p.poll() is None and get(self.url + "/ping")[0] == 204, 20)

    def stop(self):
        stop(self.p)

    def query(self, q, db=None):
        params = {"q": q, "epoch": "ns"}
        if db:
            params["db"] = db
        code, body = get(self.url + "/query?" + urllib.parse.urlencode(params),
                         data=b"" if q.startswith("CREATE") else None)
        return code, (json.loads(body) if code == 200 else body)


def agent_start(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVML_SIM")}
    env.update(GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=SCENARIO, TZ="UTC")
    f = open(os.path.join(tmp, "agent.log"), "wb")
    p, base, _ = start_agent(["--data-dir", os.path.join(tmp, "data"), "--history", "off",
                              "--push-interval", "1"] + extra, env, procs, tries=0,
                             stdout=f, stderr=subprocess.STDOUT)
    wait_for(lambda: p.poll() is not None or get(base + "/healthz")[0] == 200, 10)
    return p, base


def self_metric(base, name, sink):
    _, body = get(base + "/metrics")
    key = '%s{sink="%s"} ' % (name, sink)
    for line in body.splitlines():
        if line.startswith(key):
            return int(float(line[len(key):]))
    return None


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def influx_points(ifx, gpu):
    code, r = ifx.query("SELECT %s FROM gpuscope_gpu WHERE gpu='%d'" % (",".join(FIELDS), gpu),
                        db="gs")
    if code != 200:
        return {}
    series = (r.get("results") or [{}])[0].get("series") or []
    out = {}
    for s in series:
        cols = s["columns"]
        for v in s["values"]:
            out[v[0]] = dict(zip(cols, v))
    return out


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def main():
    have_influx = shutil.which("influxd")
    pgw_bin = shutil.which("prometheus-pushgateway") or shutil.which("pushgateway")
    ifx = pgw = None
    why_influx = why_pgw = None
    if not have_influx:
        why_influx = "influxd not installed (Debian package influxdb; scripts/deps.sh)"
    else:
        ifx = Influx()
        if not ifx.start():
            why_influx = "influxd did not start: " + tail("influxd.log", 300).replace("\n", " ")
            ifx.stop()
            ifx = None
        elif ifx.query("CREATE DATABASE gs")[0] != 200:
            why_influx = "influxd: CREATE DATABASE failed"
    pgw_port = free_port()
    pgw_url = "http://127.0.0.1:%d" % pgw_port
    if not pgw_bin:
        why_pgw = "prometheus-pushgateway not installed (scripts/deps.sh)"
    else:
        pgw = spawn([pgw_bin, "--web.listen-address=127.0.0.1:%d" % pgw_port], "pushgateway.log")
        if not wait_for(lambda: get(pgw_url + "/-/ready")[0] == 200, 20):
            why_pgw = "pushgateway did not start: " + tail("pushgateway.log", 300)
    if why_influx and why_pgw:
        t.skip("push end to end", why_influx + "; " + why_pgw)
        return
    extra = ["--push-buffer", "3"]
    if not why_influx:
        extra += ["--influx-url", ifx.url, "--influx-db", "gs", "--influx-gzip", "on"]
    if not why_pgw:
        extra += ["--pushgateway-url", pgw_url, "--pushgateway-job", "gs-e2e"]
    agent, base = agent_start(extra)
    if not t.ok(agent.poll() is None, "agent starts with push sinks", detail=tail("agent.log")):
        return

    # ---- InfluxDB: the pushed points equal the snapshot ----
    if why_influx:
        t.skip("influxdb push", why_influx)
    else:
        time.sleep(1.5)
        code, snap = get(base + "/api/v1/snapshot")
        snap = json.loads(snap)
        g0 = snap["gpus"][0]
        t_ns = round(snap["query_time_unix"] * 1e9)

        def point():
            pts = influx_points(ifx, 0)
            for ts, v in pts.items():
                if abs(ts - t_ns) < 50000:  # the same sample (JSON keeps 15 digits: ~10 us)
                    return v
            return None
        p = wait_for(point, 8)
        if t.ok(p is not None, "influxdb holds the snapshot's sample of gpu 0",
                detail=tail("agent.log")):
            for f in FIELDS:
                if g0.get(f) is not None:
                    t.ok(close(p.get(f), float(g0[f])), "influxdb %s equals the snapshot" % f,
                         detail="influx %r snapshot %r" % (p.get(f), g0[f]))
        code, r = ifx.query("SHOW TAG VALUES FROM gpuscope_gpu WITH KEY = \"uuid\"", db="gs")
        uuids = {v[1] for s in r["results"][0].get("series", []) for v in s["values"]} \
            if code == 200 else set()
        t.eq(uuids, {g["uuid"] for g in snap["gpus"]}, "one uuid tag per GPU")
        code, r = ifx.query("SHOW TAG VALUES FROM gpuscope_gpu WITH KEY = \"hostname\"", db="gs")
        t.ok(code == 200 and snap["hostname"] in json.dumps(r), "hostname tag")
        t.ok(self_metric(base, "gpuscope_push_total", "influxdb") >= 1,
             "gpuscope_push_total{sink=influxdb} counts pushes")

    # ---- Pushgateway ----
    if why_pgw:
        t.skip("pushgateway push", why_pgw)
    else:
        def pgw_has():
            code, body = get(pgw_url + "/metrics")
            return body if code == 200 and "gpuscope_gpu_power_watts{" in body else None
        body = wait_for(pgw_has, 8)
        t.ok(body is not None, "pushgateway serves gpuscope_gpu_* series",
             detail=tail("agent.log"))
        body = body or ""
        lines = [ln for ln in body.splitlines()
                 if ln.startswith("gpuscope_gpu_power_watts{") and 'job="gs-e2e"' in ln]
        t.ok(len(lines) == 8 and all('instance="' in ln for ln in lines),
             "grouping key job/instance on the series", detail="\n".join(lines[:3]))
        t.ok(self_metric(base, "gpuscope_push_total", "pushgateway") >= 1,
             "gpuscope_push_total{sink=pushgateway} counts pushes")

    # ---- InfluxDB down: failures, bounded buffer, recovery ----
    if not why_influx:
        failed0 = self_metric(base, "gpuscope_push_failed_total", "influxdb")
        rss0 = rss_kib(agent.pid)
        ifx.stop()
        down_at = time.time()
        time.sleep(9)  # backoff 1, 2, 4 s; 9 one-second batches against a buffer of 3
        failed = self_metric(base, "gpuscope_push_failed_total", "influxdb")
        dropped = self_metric(base, "gpuscope_push_dropped_total", "influxdb")
        t.ok(failed is not None and failed > failed0, "pushes fail while influxdb is down",
             detail="failed %r -> %r" % (failed0, failed))
        t.ok(dropped is not None and dropped >= 3,
             "the bounded buffer drops the oldest batches and counts them",
             detail="dropped %r" % dropped)
        rss1 = rss_kib(agent.pid)
        t.ok(rss1 - rss0 < 16 * 1024, "agent RSS stays bounded while the target is down",
             detail="%d KiB -> %d KiB" % (rss0, rss1))
        t.ok(agent.poll() is None and get(base + "/healthz")[0] == 200,
             "the agent keeps serving while influxdb is down")
        if not ifx.start():
            t.ok(False, "influxd restarts", detail=tail("influxd.log"))
        else:
            pushes0 = self_metric(base, "gpuscope_push_total", "influxdb")
            ok = wait_for(lambda: self_metric(base, "gpuscope_push_total", "influxdb") > pushes0,
                          20)
            t.ok(ok, "pushes recover after influxdb restarts", detail=tail("agent.log"))
            back = wait_for(lambda: [ts for ts in influx_points(ifx, 0)
                                     if down_at * 1e9 + 3e9 < ts < time.time() * 1e9], 10)
            t.ok(back, "buffered batches from the outage arrive after recovery")
    rc = stop(agent)
    t.eq(rc, 0, "agent stops cleanly")


try:
    main()
finally:
    clean_up(procs, [tmp], stop=stop)
sys.exit(t.done())
