"""`gpuscope agent` end to end, on nvml-sim (h100x8-training.json, NVML_SIM_TIME frozen).

Starts the agent on a free loopback port (with a temporary data dir; the history itself is
tests/e2e/test_agent_history.py) and checks: /metrics values equal the quick check's
JSON of the same frozen scenario, /healthz, /api/v1/snapshot, 404 and 405, `promtool check
metrics` in both naming modes, SIGHUP reload, SIGTERM exits 0 quickly, a bad config refused
with file:line, a start without a driver serving gpuscope_up 0 and recovering when the library
appears, and a real Prometheus (Debian `prometheus`) scraping the agent, queried through its
HTTP API. Everything the test starts is stopped at the end.
"""
import gzip
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
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN, SIM, clean_up, free_port, http_get, sim_env, \
    start_agent as gs_start_agent, stop_agent, stop_proc  # noqa: E402

SCENARIO = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")

t = Tap()
procs = []
datadirs = []


def env_for(lib=SIM):
    return sim_env(SCENARIO, "10", GPUSCOPE_NVML_LIBRARY=lib)


get = http_get
HOST = socket.gethostname()  # the agent's hostname label
UP = ("gpuscope_up", frozenset({("hostname", HOST)}))


def start_agent(args, env=None):
    # A data dir of the test's own: the default (/var/lib/gpuscope for root) is not ours.
    data = tempfile.mkdtemp(prefix="gs-agent-test.")
    datadirs.append(data)
    p, base, _ = gs_start_agent(["--data-dir", data] + args, env or env_for(), procs)
    return p, base


def stop(p, sig=signal.SIGTERM):
    t0 = time.monotonic()
    rc, err = stop_agent(p, sig, timeout=5)
    return rc, time.monotonic() - t0, err


def samples(text):
    """{(name, frozenset(labels)): value} of an exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, val = line.rsplit(" ", 1)
        if "{" in head:
            name, rest = head.split("{", 1)
            labels = {}
            for part in rest.rstrip("}").split('",'):
                k, v = part.split("=", 1)
                labels[k] = v.strip('"')
            out[(name, frozenset(labels.items()))] = float(val)
        else:
            out[(head, frozenset())] = float(val)
    return out


def by_gpu(s, name):
    return {dict(k[1])["gpu"]: v for k, v in s.items() if k[0] == name}


def promtool_problems(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(), capture_output=True)
    return p.returncode, (p.stdout + p.stderr).decode()


def main():
    quick = json.loads(subprocess.run([BIN, "--json"], env=env_for(), capture_output=True,
                                      check=True).stdout)
    want_mem = {str(g["index"]): g["memory_used"] for g in quick["gpus"]}
    want_util = {str(g["index"]): g["utilization_gpu"] for g in quick["gpus"]}

    p, base = start_agent([])
    code, hdr, body = get(base + "/metrics")
    t.eq(code, 200, "/metrics answers 200")
    t.ok(hdr.get("Content-Type", "").startswith("text/plain; version=0.0.4"),
         "/metrics content type is text exposition 0.0.4", detail=hdr.get("Content-Type"))
    s = samples(body)
    t.eq(s.get(UP), 1.0, "gpuscope_up 1 on nvml-sim")
    t.ok("Content-Encoding" not in hdr and "Accept-Encoding" in hdr.get("Vary", ""),
         "/metrics without Accept-Encoding: plain, Vary: Accept-Encoding", detail=hdr)
    req = urllib.request.Request(base + "/metrics", headers={"Accept-Encoding": "gzip"})
    with urllib.request.urlopen(req, timeout=10) as r:
        zhdr, zraw = dict(r.headers), r.read()
    try:
        ztext = gzip.decompress(zraw).decode()
    except (OSError, EOFError) as e:
        ztext = "not gzip: %s" % e
    fam = lambda text: sorted({k[0] for k in samples(text)})  # noqa: E731
    t.ok(zhdr.get("Content-Encoding") == "gzip" and len(zraw) < len(body) / 3 and
         fam(ztext) == fam(body), "/metrics with Accept-Encoding: gzip: gzip'ed, the same "
         "families, %d -> %d bytes" % (len(body), len(zraw)), detail=(zhdr, ztext[:300]))
    req = urllib.request.Request(base + "/metrics", headers={"Accept-Encoding": "gzip;q=0"})
    with urllib.request.urlopen(req, timeout=10) as r:
        t.ok("Content-Encoding" not in r.headers, "gzip;q=0: plain")
    t.eq(by_gpu(s, "gpuscope_gpu_memory_used_bytes"), {k: float(v) for k, v in want_mem.items()},
         "memory used of every GPU equals the scenario's (quick check JSON)")
    t.eq(by_gpu(s, "gpuscope_gpu_utilization_ratio"), {k: float(v) for k, v in want_util.items()},
         "utilization of every GPU equals the scenario's")
    info = [dict(k[1]) for k in s if k[0] == "gpuscope_gpu_info"]
    t.eq(sorted(i["uuid"] for i in info), sorted(g["uuid"] for g in quick["gpus"]),
         "gpuscope_gpu_info carries every UUID")
    t.ok(not any("DCGM_" in k[0] for k in s), "no dcgm names without --metrics-compat")
    rc, out = promtool_problems(body)
    if shutil.which("promtool"):
        t.ok(rc == 0, "promtool check metrics: native exposition is clean", detail=out)
    else:
        t.skip("promtool check metrics (native)", "promtool not installed")

    code, hdr, body = get(base + "/api/v1/snapshot")
    snap = json.loads(body) if code == 200 else {}
    t.eq(code, 200, "/api/v1/snapshot answers 200")
    t.eq([g.get("memory_used") for g in snap.get("gpus", [])],
         [g["memory_used"] for g in quick["gpus"]], "snapshot JSON memory equals quick check's")
    t.eq(get(base + "/healthz")[0:3:2], (200, "ok\n"), "/healthz answers ok")
    t.eq(get(base + "/nope")[0], 404, "unknown path: 404")
    t.eq(get(base + "/metrics", "POST")[0], 405, "POST /metrics: 405")
    t.eq(get(base + "/metrics", "HEAD")[0], 200, "HEAD /metrics: 200")

    p.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    t.eq(get(base + "/healthz")[0], 200, "still serving after SIGHUP")
    rc, took, err = stop(p)
    t.eq(rc, 0, "SIGTERM: exit status 0")
    t.ok(took < 2, "SIGTERM: exits within 2 s", detail="%.2fs" % took)
    t.ok("reload:" in err and "<6>info:" in err, "log lines carry <N> priority; SIGHUP reloads",
         detail=err)

    # dcgm-exporter compatibility
    p, base = start_agent(["--metrics-compat=dcgm"])
    body = get(base + "/metrics")[2]
    s = samples(body)
    fb = {dict(k[1])["gpu"]: (v, dict(k[1])) for k, v in s.items() if k[0] == "DCGM_FI_DEV_FB_USED"}
    t.eq({g: v for g, (v, _) in fb.items()},
         {k: float(v // 1048576) for k, v in want_mem.items()}, "DCGM_FI_DEV_FB_USED in whole MiB")
    lbl = fb.get("0", (0, {}))[1]
    t.eq(sorted(lbl), ["DCGM_FI_DRIVER_VERSION", "UUID", "device", "gpu", "hostname",
                       "modelName", "pci_bus_id"], "dcgm-exporter (4.x) label names")
    t.eq(lbl.get("DCGM_FI_DRIVER_VERSION"), "590.48.01", "DCGM_FI_DRIVER_VERSION label")
    fams = {k[0] for k in s}
    for _ in range(50):  # GPM needs two samples, some cycles apart
        if "DCGM_FI_PROF_GR_ENGINE_ACTIVE" in fams:
            break
        time.sleep(0.1)
        fams = {k[0] for k in samples(get(base + "/metrics")[2])}
    want = ["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE", "DCGM_FI_PROF_PCIE_TX_BYTES",
            "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"]
    t.eq([f for f in want if f not in fams], [], "dcgm-exporter default counters: remapped "
         "rows, PCIe bytes, GR engine active (GPM, H100) are served")
    if shutil.which("promtool"):
        rc, out = promtool_problems(body)
        bad = [l for l in out.splitlines() if l.strip() and not (
            "camelCase" in l or '"_total" suffix' in l or "should not include type" in l)]
        t.ok(not bad, "promtool check metrics (dcgm): only the lint of dcgm-exporter's own names",
             detail="\n".join(bad))
    else:
        t.skip("promtool check metrics (dcgm)", "promtool not installed")
    rc, _, _ = stop(p, signal.SIGINT)
    t.eq(rc, 0, "SIGINT: exit status 0")

    # a bad configuration is refused with file:line
    with tempfile.TemporaryDirectory() as d:
        conf = os.path.join(d, "agent.conf")
        open(conf, "w").write("[agent]\ninterval = 0.01\n")
        r = subprocess.run([BIN, "agent", "--config", conf], env=env_for(), capture_output=True,
                           timeout=10)
        t.ok(r.returncode == 2 and (conf + ":2: interval:") in r.stderr.decode(),
             "bad config refused with file:line: key", detail=r.stderr.decode())
        r = subprocess.run([BIN, "agent", "--config",
                            os.path.join(SRC, "deploy", "agent.conf"), "--check-config"],
                           env=env_for(), capture_output=True, timeout=10)
        t.eq(r.returncode, 0, "deploy/agent.conf is a valid configuration")

        # no driver at start: up 0 with the reason, then recovery when the library appears
        lib = os.path.join(d, "libnvidia-ml.so.1")
        p, base = start_agent(["--interval", "0.2"], env=env_for(lib))
        s = samples(get(base + "/metrics")[2])
        down = [k for k in s if k[0] == "gpuscope_up"]
        t.ok(down == [UP] and s[down[0]] == 0,
             "no driver: gpuscope_up 0, the same series as when up (no free-text label)",
             detail=down)
        t.eq(s.get(("gpuscope_down_reason", frozenset({("reason", "no_library"),
                                                        ("hostname", HOST)}))), 1.0,
             "no driver: gpuscope_down_reason{reason=\"no_library\"} 1 (a bounded name)")
        e0 = s.get(("gpuscope_sample_errors_total", frozenset()), 0)
        time.sleep(1.0)
        s = samples(get(base + "/metrics")[2])
        e1 = s.get(("gpuscope_sample_errors_total", frozenset()), 0)
        t.ok(e0 >= 1 and e1 >= e0 + 3, "no driver: gpuscope_sample_errors_total counts the "
             "cycles without a reading (%s -> %s in 1 s at 0.2 s)" % (e0, e1))
        t.eq(get(base + "/api/v1/snapshot")[0], 503, "no driver: /api/v1/snapshot 503")
        os.symlink(SIM, lib)
        up = None
        for _ in range(60):
            up = samples(get(base + "/metrics")[2]).get(UP)
            if up == 1:
                break
            time.sleep(0.1)
        t.eq(up, 1.0, "driver appears: sampling starts (gpuscope_up 1)")
        s = samples(get(base + "/metrics")[2])
        t.ok(not any(k[0] == "gpuscope_down_reason" for k in s),
             "driver up: no gpuscope_down_reason")
        stop(p)

    prometheus_check(want_mem)


def prometheus_check(want_mem):
    prom = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not os.path.exists(prom):
        t.skip("real Prometheus scrapes the agent", "prometheus not installed")
        return
    p, base = start_agent([])
    with tempfile.TemporaryDirectory() as d:
        web = free_port()
        cfg = os.path.join(d, "prometheus.yml")
        open(cfg, "w").write(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpuscope\n"
            "    static_configs:\n      - targets: ['%s']\n" % base.split("//")[1])
        pp = subprocess.Popen([prom, "--config.file=" + cfg, "--storage.tsdb.path=" + d,
                               "--web.listen-address=127.0.0.1:%d" % web],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(pp)
        got = {}
        q = urllib.parse.quote("gpuscope_gpu_memory_used_bytes")
        for _ in range(100):
            try:
                r = json.loads(get("http://127.0.0.1:%d/api/v1/query?query=%s" % (web, q))[2])
                got = {x["metric"]["gpu"]: float(x["value"][1]) for x in r["data"]["result"]}
                if len(got) == len(want_mem):
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.2)
        t.eq(got, {k: float(v) for k, v in want_mem.items()},
             "real Prometheus scraped gpuscope_gpu_memory_used_bytes equal to the scenario's")
        stop_proc(pp)
    stop(p)


try:
    main()
finally:
    clean_up(procs, datadirs)
sys.exit(t.done())
