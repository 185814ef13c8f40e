"""deploy/grafana/gpuscope.json against a real Prometheus (Debian `prometheus`) scraping agents.

Three agents on nvml-sim, each given its own node name by the scrape configuration (the
target's `hostname` label wins over the scraped one, as it would for nodes behind one
hostname): node-a runs h100x8-training with one GPU idle while it holds memory and
process_metrics on, node-b runs thermal-powercap at t=100 (power-capped), node-c has no
driver (gpuscope_up 0), node-d runs gpu-lost at t=100 (GPU 2 fell off the bus with Xid 79,
which the agent keeps). Every panel's every expression is queried through Prometheus's HTTP
API with the dashboard's template variables substituted the way Grafana does (`$node` and
`$gpu` as a node / the All value `.*`, `$__rate_interval` as 1m), and must return data with
All and with each node selected where its condition holds (a panel that lists throttled GPUs
has rows on the throttled node); the
node variable's query lists the down node too; "Agents down" counts it. deploy/grafana/
efficiency.json the same way, on the usage series of a real process of Slurm job 4242 that
node-a's idle GPU 7 holds: every expression returns data (All, node-a, the job's user), the
live job's idle GPU shows with its job id (the job_id label).
"""
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, SCENARIOS, clean_up, free_port, http_get, sim_env, start_agent  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-dash-test.")
DASH = os.path.join(SRC, "deploy", "grafana", "gpuscope.json")


def walk(panels):
    for p in panels:
        yield p
        yield from walk(p.get("panels", []))


def query(web, expr):
    code, _, body = http_get("http://127.0.0.1:%d/api/v1/query?query=%s" %
                             (web, urllib.parse.quote(expr)), timeout=10)
    try:
        doc = json.loads(body)
    except ValueError:
        return code, None, body
    return code, doc.get("data", {}).get("result"), doc.get("error", "")


def substitute(expr, node, gpu):
    return (expr.replace("$node", node).replace("${node}", node).replace("$gpu", gpu)
            .replace("${gpu}", gpu).replace("$__rate_interval", "1m"))


def main():
    prom = shutil.which("prometheus") or "/usr/bin/prometheus"
    if not os.path.exists(prom):
        t.skip("the dashboard against Prometheus", "prometheus not installed")
        return
    # node-a: GPU 7 idle while a process holds 20 GiB on it (the "Top idle GPUs" panel)
    sc = json.load(open(os.path.join(SCENARIOS, "h100x8-training.json")))
    sc["gpus"][7]["metrics"] = {"util_gpu_pct": 0}
    sc["processes"] = [p for p in sc["processes"] if p.get("gpu") != 7] + [
        {"pid": 60007, "gpu": 7, "name": "python3", "used_memory_mib": 20480},
        {"pid": {"env": "SIM_JOB_PID"}, "gpu": 7, "name": "python3", "used_memory_mib": 1024}]
    # a real process of Slurm job 4242 on that idle GPU: the usage counters and the live job's
    # gauges of the efficiency dashboard
    job = subprocess.Popen(["sleep", "120"], env=dict(os.environ, SLURM_JOB_ID="4242"))
    procs.append(job)
    idle = os.path.join(tmp, "idle.json")
    json.dump(sc, open(idle, "w"))
    agents = {}
    clock = os.path.join(tmp, "clock")  # node-d's: before the loss at t=30, then after
    with open(clock, "w") as f:
        f.write("10\n")
    for node, env, extra in (
            ("node-a", sim_env(idle, 100, SIM_JOB_PID=str(job.pid)), ["--process-metrics", "on"]),
            ("node-b", sim_env("thermal-powercap.json", 100), []),
            ("node-c", dict(sim_env("h100x8-training.json", 100),
                            GPUSCOPE_NVML_LIBRARY=os.path.join(tmp, "none", "libnvidia-ml.so.1")),
             []),
            ("node-d", sim_env("gpu-lost.json", "file:" + clock), [])):
        p, base, _ = start_agent(["--interval", "0.5", "--history", "off"] + extra, env, procs)
        agents[node] = base.split("//")[1]
    time.sleep(1.0)  # node-d registered for events at t=10
    with open(clock, "w") as f:
        f.write("100\n")
    web = free_port()
    cfg = os.path.join(tmp, "prometheus.yml")
    with open(cfg, "w") as f:
        f.write("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: gpuscope\n"
                "    static_configs:\n")
        for node, target in agents.items():
            f.write("      - targets: ['%s']\n        labels: {hostname: '%s'}\n" % (target, node))
    pp = subprocess.Popen([prom, "--config.file=" + cfg, "--storage.tsdb.path=" +
                           os.path.join(tmp, "tsdb"), "--web.listen-address=127.0.0.1:%d" % web],
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(pp)
    up = []
    for _ in range(150):
        try:
            _, up, _ = query(web, "gpuscope_up")
            # two scrapes of each (increase() needs two samples)
            _, cyc, _ = query(web, "count_over_time(gpuscope_cycles_total[1m]) >= 3")
            if up and len(up) == 4 and cyc and len(cyc) == 4:
                break
        except OSError:
            pass
        time.sleep(0.2)
    t.eq(sorted((x["metric"].get("hostname"), x["value"][1]) for x in up or []),
         [("node-a", "1"), ("node-b", "1"), ("node-c", "0"), ("node-d", "1")],
         "Prometheus scrapes the four agents; gpuscope_up carries hostname")

    dash = json.load(open(DASH))
    var = {v["name"]: v for v in dash["templating"]["list"]}
    node_q = var["node"]["query"]["query"] if isinstance(var["node"]["query"], dict) \
        else var["node"]["query"]
    metric = node_q[len("label_values("):].split(",")[0].strip()
    code, _, body = http_get("http://127.0.0.1:%d/api/v1/label/hostname/values?match[]=%s" %
                             (web, urllib.parse.quote(metric)), timeout=10)
    nodes = json.loads(body).get("data", []) if code == 200 else []
    t.eq(sorted(nodes), ["node-a", "node-b", "node-c", "node-d"],
         "the node variable (%s) lists every node, the one whose driver is down too" % node_q)

    exprs = [(p.get("title", "?"), tg["expr"]) for p in walk(dash["panels"])
             for tg in p.get("targets", []) if tg.get("expr")]
    t.ok(len(exprs) >= 15, "the dashboard has its panels' expressions", detail=len(exprs))
    def where(expr):
        """The nodes on which expr must have data: its condition's nodes, else every node up."""
        if "gpuscope_gpu_throttle" in expr:
            return ["node-b"]
        if "xid_last" in expr:
            return ["node-d"]
        if "process" in expr or "sm_active" in expr or "1073741824" in expr:
            return ["node-a"]  # processes on, GPM (Hopper), the idle GPU holding memory
        return ["node-a", "node-b", "node-d"]
    for scope in (".*", "node-a", "node-b", "node-d"):
        empty = []
        for title, expr in exprs:
            if scope != ".*" and scope not in where(expr):
                continue
            code, res, err = query(web, substitute(expr, scope, ".*"))
            if code != 200 or not res:
                empty.append((title, expr, code, err))
        t.eq(empty, [], "%s: every panel's expression returns data" %
             ("All" if scope == ".*" else scope))
    _, res, _ = query(web, 'gpuscope_gpu_xid_last{hostname="node-d", gpu="2"}')
    t.eq([r["value"][1] for r in res or []], ["79"], "node-d: the lost GPU 2 shows Xid 79")
    _, res, _ = query(web, substitute(
        next(e for title, e in exprs if title == "Agents down"), ".*", ".*"))
    t.eq([r["value"][1] for r in res or []], ["1"], "Agents down (All): node-c")
    _, res, _ = query(web, substitute(
        next(e for title, e in exprs if title == "Agents down"), "node-c", ".*"))
    t.eq([r["value"][1] for r in res or []], ["1"], "Agents down with node-c selected: 1")
    _, res, _ = query(web, substitute(
        next(e for title, e in exprs if title == "Alerts firing"), "node-a", ".*"))
    t.ok(res and len(res) == 1, "Alerts firing with node-a selected: a value", detail=res)
    efficiency(web)


def efficiency(web):
    """deploy/grafana/efficiency.json: every expression returns data from the agents' usage
    series (node-a's job 4242 holding its idle GPU 7), with All, with node-a, with the job's
    user; and none with node-b selected for the live-job panels (no job there). The job's id
    is the job_id label."""
    edash = json.load(open(os.path.join(SRC, "deploy", "grafana", "efficiency.json")))
    eexprs = [(p["title"], tg["expr"]) for p in edash["panels"] for tg in p.get("targets", [])]
    user = pwd.getpwuid(os.getuid()).pw_name

    def esub(e, node, u):
        return (e.replace("$node", node).replace("$user", u).replace("$__rate_interval", "1m")
                .replace("$__range_s", "60").replace("$__range", "1m"))
    for node, u in ((".*", ".*"), ("node-a", ".*"), ("node-a", user)):
        empty = []
        for title, e in eexprs:
            code, res, err = query(web, esub(e, node, u))
            if code != 200 or not res:
                empty.append((title, e, code, err))
        t.eq(empty, [], "efficiency dashboard, node %s, user %s: every expression returns data"
             % ("All" if node == ".*" else node, "All" if u == ".*" else u))
    _, res, _ = query(web, esub(next(e for title, e in eexprs if title.startswith(
        "Live jobs' idle GPUs")), ".*", user))
    t.ok(res and [(r["metric"].get("job_id"), r["metric"].get("hostname"),
                   r["metric"].get("gpu")) for r in res] == [("4242", "node-a", "7")] and
         float(res[0]["value"][1]) > 0,
         "efficiency dashboard: job 4242 (job_id) holds node-a's idle GPU 7, idle seconds "
         "counting", detail=res)
    _, res, _ = query(web, esub(next(e for title, e in eexprs if title.startswith(
        "Live jobs' idle GPUs")), "node-b", ".*"))
    t.eq(res, [], "efficiency dashboard: node-b selected: no live job")


try:
    main()
finally:
    clean_up(procs, [tmp])
sys.exit(t.done())
