"""A 2-node x 2-rank training job seen whole (issue 16), on nvml-sim and loopback.

Two agents stand for two nodes (their own ports, data dirs and step sockets; node A on
sim/scenarios/h100x8-training.json, node B on sim/scenarios/thermal-powercap.json). Four sender processes speak
the step-record protocol as the Python package does (SOCK_SEQPACKET, hello then steps): one
job id, global ranks 0..3, world size 4, two ranks per node with GPUSCOPE_NODE-style node
names, rank 3 (on node B) computing twice as long while the
others wait for it in communication (synchronous training: every step lasts as long). Checked on each agent's /metrics: the
gpuscope_run_* families carry train_job, rank, node and gpu; the slow rank's median step and busy times
are the ones sent; the series count stays within GS_RUNM_SERIES_PER_RANK per rank; `promtool
check metrics` is clean; the rules of deploy/prometheus/training-job-rules.yml, evaluated by
`promtool test rules` on the two scrapes (held 8 min, past the 5 min `for:`), name rank 3 on node B as
the straggler and fire no stall (and fire TrainingJobStalled on the same series with no step
for 5 min); once the ranks close their connections the series are gone
(the runs ended, nothing left at its last value).
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, get_text as get, reap, sim_env, start_agent, wait_until  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RULES = os.path.join(ROOT, "deploy", "prometheus", "training-job-rules.yml")
DASHBOARD = os.path.join(ROOT, "deploy", "grafana", "training-job.json")
SERIES_PER_RANK = 28  # GS_RUNM_SERIES_PER_RANK (src/agent/runs_metrics.h)

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-job.")
JOB = "torchelastic-3f2a"



def agent(name, scenario, at=None):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    sock = os.path.join(d, "steps.sock")
    env = sim_env(scenario, time=at, RUNTIME_DIRECTORY=d)  # its own agent.sock
    log = open(os.path.join(d, "agent.log"), "w")
    p, base, _ = start_agent(["--data-dir", os.path.join(d, "data"), "--interval", "0.25",
                              "--socket", sock], env, procs, stdout=log, stderr=subprocess.STDOUT)
    return p, base, sock


B_UUID = "GPU-7d3e9a15-b260-4c8f-e91a-05f4c27b83d6"  # thermal-powercap.json's L40S
HOST = socket.gethostname()


def panel_expr(title):
    """The first expression of the dashboard panel whose title starts so, for one job."""
    with open(DASHBOARD) as f:
        dash = json.load(f)
    p = next(p for p in dash["panels"] if p["title"].startswith(title))
    return p["targets"][0]["expr"].replace("$job", JOB)


def send(s, obj):
    s.send(json.dumps(obj).encode())


def metric_lines(body):
    return [ln for ln in body.splitlines() if ln.startswith("gpuscope_run_")]


def value(body, name, **labels):
    for ln in body.splitlines():
        m = re.match(r'^%s\{([^}]*)\} (\S+)$' % re.escape(name), ln)
        if not m:
            continue
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(2))
    return None


try:
    pa, base_a, sock_a = agent("node-a", "h100x8-training.json")
    # node B's clock: scenario time 500 s (HW thermal slowdown 480-545 s, power capped), moved
    # on by the test so that the throttle counters advance during the run
    clock = os.path.join(tmp, "clock")
    with open(clock, "w") as f:
        f.write("500")
    pb, base_b, sock_b = agent("node-b", "thermal-powercap.json", "file:" + clock)
    t.ok(pa.poll() is None and pb.poll() is None, "two agents on loopback, separate sockets")

    # Ranks 0, 1 on node A (GPUs 0 and 1), ranks 2, 3 on node B (its one GPU); rank 3 slow.
    ranks = []
    for rank, (sock, node, dev) in enumerate([(sock_a, "node-a", 0), (sock_a, "node-a", 1),
                                               (sock_b, "node-b", 0), (sock_b, "node-b", 0)]):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(sock)
        send(s, {"v": 1, "type": "hello", "run": "llama-pretrain", "job": JOB, "node": node,
                 "rank": rank, "world_size": 4, "local_rank": rank % 2, "framework": "torch",
                 "pid": os.getpid(), "devices": [dev]})
        ranks.append(s)
    now = time.time()
    devs = [0, 1, 0, 0]
    for n in range(1, 41):
        for rank, s in enumerate(ranks):
            # synchronous training: every rank's step lasts as long; the fast ranks wait for
            # rank 3 in the all-reduce (communication), rank 3 computes twice as long
            total = 450.0
            comm = 20.0 if rank == 3 else 260.0
            send(s, {"v": 1, "type": "step", "step": n, "t0": now - 0.2, "t1": now, "rank": rank,
                     "device": devs[rank], "samples": 8,
                     "ms": {"data": 50.0, "forward": 80.0, "backward": 40.0,
                            "optimizer_step": 10.0, "communication": comm,
                            "total_step": total}})

    for at in ("503", "506", "510"):
        time.sleep(0.6)  # a few sampling cycles (0.25 s) at each time
        with open(clock + ".tmp", "w") as f:
            f.write(at)
        os.rename(clock + ".tmp", clock)
    time.sleep(0.6)

    def scraped():
        _, ba = get(base_a + "/metrics")
        _, bb = get(base_b + "/metrics")
        return ba, bb

    ok = wait_until(lambda: (lambda ab: value(ab[0], "gpuscope_run_steps_completed", rank="1")
                             == 40 and value(ab[1], "gpuscope_run_steps_completed", rank="3")
                             == 40)(scraped()), timeout=20)
    ba, bb = scraped()
    t.ok(ok, "both agents show the steps of their two ranks")
    t.eq(value(bb, "gpuscope_run_step_seconds", train_job=JOB, rank="3", node="node-b",
                quantile="0.5"), 0.5, "rank 3's median step time on node B (data + total_step)")
    t.eq(value(ba, "gpuscope_run_step_seconds", train_job=JOB, rank="0", node="node-a",
                quantile="0.95"), 0.5, "rank 0's p95 on node A")
    t.eq([value(bb, "gpuscope_run_step_busy_seconds", rank="3", quantile="0.5"),
          value(ba, "gpuscope_run_step_busy_seconds", rank="0", quantile="0.5")], [0.48, 0.24],
         "busy time (step less communication waited for): rank 3 480 ms, rank 0 240 ms")
    t.eq(value(bb, "gpuscope_run_step_seconds_count", rank="2"), 40.0, "summary _count")
    t.eq(value(ba, "gpuscope_run_phase_seconds_total", rank="1", phase="forward"), 3.2,
          "phase seconds: 40 x 80 ms forward")
    t.eq(value(ba, "gpuscope_run_data_ratio", rank="0"), 0.1, "data ratio 50/500")
    t.eq(round(value(bb, "gpuscope_run_communication_ratio", rank="3"), 6), round(20 / 500, 6),
          "communication ratio 20/500")
    t.ok(value(bb, "gpuscope_run_last_step_timestamp_seconds", rank="3") == round(now, 6) or
         abs(value(bb, "gpuscope_run_last_step_timestamp_seconds", rank="3") - now) < 1e-3,
         "last step timestamp")
    # the gpu label: the GPU the agent attributed to the rank (hello devices, run/attrib.h)
    gpu1 = wait_until(lambda: value(get(base_a + "/metrics")[1], "gpuscope_run_rank_info",
                                    rank="1", gpu="1") == 1 and
                      value(get(base_b + "/metrics")[1], "gpuscope_run_rank_info",
                            rank="3", gpu="0") == 1, timeout=10)
    t.ok(gpu1, "rank 1's series carry gpu=\"1\" (its CUDA device 1 on node A), rank 3's gpu=\"0\"",
         "\n".join(ln for ln in get(base_a + "/metrics")[1].splitlines()
                   if ln.startswith("gpuscope_run_rank_info")))
    ba, bb = scraped()
    t.ok(value(ba, "gpuscope_run_rank_info", train_job=JOB, rank="0", node="node-a",
               world_size="4") == 1, "rank_info names job, rank, node and world size")
    for name, body in (("A", ba), ("B", bb)):
        n = len([ln for ln in metric_lines(body)
                 if not ln.startswith(("gpuscope_run_ranks ", "gpuscope_run_ranks_dropped"))])
        t.ok(0 < n <= 2 * SERIES_PER_RANK, "node %s: %d gpuscope_run_* series for 2 ranks "
             "(bound %d)" % (name, n, 2 * SERIES_PER_RANK))
        t.eq(float(re.search(r"^gpuscope_run_ranks_dropped_total (\S+)$", body, re.M).group(1)),
             0.0, "node %s: no rank dropped" % name)

    promtool = shutil.which("promtool")
    if promtool:
        for name, body in (("A", ba), ("B", bb)):
            r = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True,
                               text=True)
            t.ok(r.returncode == 0, "promtool check metrics: node %s" % name, r.stdout + r.stderr)
        # The rules on the two scrapes: series as Prometheus would store them (instance added),
        # held for 10 minutes, the alerts checked after the straggler's `for:` passed.
        series = []
        for inst, body in (("node-a:9400", ba), ("node-b:9400", bb)):
            for ln in body.splitlines():
                m = re.match(r'^(gpuscope_run_(?:step_seconds|step_busy_seconds|'
                             r'last_step_timestamp_seconds|'
                             r'rank_info)|gpuscope_gpu_throttle|gpuscope_gpu_clock_hertz)'
                             r'\{([^}]*)\} (\S+)$', ln)
                if not m:
                    continue
                labels = m.group(2) + ',instance="%s",job="gpuscope"' % inst
                v = float(m.group(3))
                if m.group(1).endswith("timestamp_seconds"):  # steps keep coming: "now"
                    series.append({"series": "%s{%s}" % (m.group(1), labels),
                                   "values": "0+60x10"})
                else:
                    series.append({"series": "%s{%s}" % (m.group(1), labels),
                                   "values": "%rx10" % v})
        test = {"rule_files": [RULES], "evaluation_interval": "1m", "tests": [{
            "interval": "1m", "input_series": series,
            "alert_rule_test": [
                {"eval_time": "8m", "alertname": "TrainingStragglerRank", "exp_alerts": [{
                    "exp_labels": {"severity": "warning", "train_job": JOB, "rank": "3",
                                   "node": "node-b", "gpu": "0", "quantile": "0.5",
                                   "instance": "node-b:9400", "job": "gpuscope"},
                    "exp_annotations": {
                        "summary": "Job %s: rank 3 on node-b (GPU 0) computes 2.00x as long per "
                                   "step as the job's other ranks" % JOB,
                        "description": None}}]},
                {"eval_time": "8m", "alertname": "TrainingJobStalled", "exp_alerts": []},
            ],
            "promql_expr_test": [{
                # the dashboard's panels: the job's ranks side by side (rank 3 twice the
                # median), and the throttled GPU of the slow rank with its reasons
                "expr": "topk(1, %s)" % panel_expr("Ranks side by side"),
                "eval_time": "1m",
                "exp_samples": [{"labels": '{train_job="%s",rank="3",node="node-b",gpu="0",'
                                           'quantile="0.5",instance="node-b:9400",'
                                           'job="gpuscope"}' % JOB, "value": 2}]}, {
                "expr": panel_expr("Throttled GPUs of the job's ranks"),
                "eval_time": "1m",
                "exp_samples": [{"labels": 'gpuscope_gpu_throttle{gpu="0",uuid="%s",hostname="%s",'
                                           'reason="%s",instance="node-b:9400",job="gpuscope"}'
                                           % (B_UUID, HOST, why), "value": 1}
                                for why in ("sw_power_cap", "hw_slowdown", "sw_thermal_slowdown",
                                            "hw_thermal_slowdown")]}, {
                "expr": panel_expr("Throttle reasons active on each rank"),
                "eval_time": "1m",
                # node A's GPUs are not held down: 0 for ranks 0 and 1
                "exp_samples": [{"labels": '{train_job="%s",rank="%d",node="%s",gpu="%d",'
                                           'run="1",world_size="4",instance="%s:9400",'
                                           'job="gpuscope"}' % (JOB, r, node, gpu, node),
                                 "value": v}
                                for r, node, gpu, v in ((0, "node-a", 0, 0), (1, "node-a", 1, 0),
                                                        (2, "node-b", 0, 4), (3, "node-b", 0, 4))
                                ]}, {
                "expr": "topk(1, train_job_rank:gpuscope_run_step_busy_seconds:ratio_to_others)",
                "eval_time": "1m",
                "exp_samples": [{"labels": 'train_job_rank:gpuscope_run_step_busy_seconds:'
                                           'ratio_to_others{train_job="%s",rank="3",'
                                           'node="node-b",gpu="0",quantile="0.5",'
                                           'instance="node-b:9400",job="gpuscope"}' % JOB,
                                 "value": 2}]}],
        }]}
        # the description is long; promtool compares annotations whole, so take it from the file
        with open(RULES) as f:
            text = f.read()
        desc = re.search(r'alert: TrainingStragglerRank.*?description: "(.*?)"\n', text,
                         re.S).group(1).replace("{{ $labels.node }}", "node-b")
        test["tests"][0]["alert_rule_test"][0]["exp_alerts"][0]["exp_annotations"][
            "description"] = desc
        # The same job stalled: no rank's last-step time moves (all at t = 0). 10 x the
        # slowest p95 (0.5 s) is 5 s, the floor 120 s: past 2 min and held 1 min, it fires.
        stalled = [dict(x, values="0x20") if "timestamp" in x["series"] else x for x in series]
        sdesc = re.search(r'alert: TrainingJobStalled.*?description: "(.*?)"\n', text,
                          re.S).group(1)
        test["tests"].append({
            "interval": "1m", "input_series": stalled,
            "alert_rule_test": [
                {"eval_time": "2m", "alertname": "TrainingJobStalled", "exp_alerts": []},
                {"eval_time": "5m", "alertname": "TrainingJobStalled", "exp_alerts": [{
                    "exp_labels": {"severity": "critical", "train_job": JOB},
                    "exp_annotations": {
                        "summary": "Job %s: no rank has finished a step for 5m 0s" % JOB,
                        "description": sdesc}}]}]})
        tpath = os.path.join(tmp, "rules-test.yml")
        with open(tpath, "w") as f:
            json.dump(test, f)  # JSON is YAML
        r = subprocess.run([promtool, "test", "rules", tpath], capture_output=True, text=True)
        t.ok(r.returncode == 0, "promtool test rules: rank 3 on node-b is the straggler (2x "
             "the other ranks' median), no stall; the dashboard's PromQL shows rank 3 at 2x and its GPU's "
             "four slowdown reasons; the same job with no step for 5 min: TrainingJobStalled",
             r.stdout + r.stderr)
    else:
        for _ in range(3):
            t.skip("promtool checks", "promtool not installed")

    for s in ranks:
        s.close()
    gone = wait_until(lambda: not [ln for ln in metric_lines(get(base_a + "/metrics")[1] +
                                                              get(base_b + "/metrics")[1])
                                   if not ln.startswith("gpuscope_run_ranks")], timeout=10)
    t.ok(gone, "the ranks' series are gone once their connections closed")
    ba, _ = scraped()
    t.ok(re.search(r"^gpuscope_run_ranks 0$", ba, re.M) is not None, "gpuscope_run_ranks 0")

    # The job report across nodes: each agent's stored report of its run, as a run directory
    # (what `gpuscope run --out DIR` writes on each node), then `gpuscope compare --job`.
    dirs = []
    for name, base in (("node-a", base_a), ("node-b", base_b)):
        ok = wait_until(lambda: get(base + "/api/v1/runs/1")[0] == 200 and
                        json.loads(get(base + "/api/v1/runs/1")[1]).get("run", {}).get("end_time")
                        is not None, timeout=10)
        d = os.path.join(tmp, "report-" + name)
        os.makedirs(d)
        with open(os.path.join(d, "metrics_report.json"), "w") as f:
            f.write(get(base + "/api/v1/runs/1")[1])
        dirs.append(d)
    rep_b = json.load(open(os.path.join(dirs[1], "metrics_report.json")))
    t.eq([rep_b["run"].get("job"), rep_b["run"].get("node"), rep_b.get("ranks")],
         [JOB, "node-b", 2], "node B's report: run.job, run.node, its 2 ranks")
    r = subprocess.run([BIN, "compare", "--job", "--json"] + dirs, capture_output=True, text=True)
    try:
        jd = json.loads(r.stdout)
    except ValueError:
        jd = {}
    st = jd.get("straggler") or {}
    gpu = st.get("gpu") or {}
    t.ok(r.returncode == 0 and jd.get("job") == JOB and
         [n["node"] for n in jd.get("nodes", [])] == ["node-a", "node-b"] and
         [(x["rank"], x["node"], x["gpu"]) for x in jd.get("ranks", [])] ==
         [(0, "node-a", 0), (1, "node-a", 1), (2, "node-b", 0), (3, "node-b", 0)],
         "compare --job --json: one job, 2 nodes, ranks 0..3 in order with their node and GPU",
         r.stderr + r.stdout[:2000])
    t.eq([st.get("rank"), st.get("node"), st.get("step_p50_ms"), st.get("busy_ms"),
          st.get("others_busy_ms"), st.get("ratio_to_others")],
         [3, "node-b", 500.0, 480.0, 240.0, 2.0],
         "the straggler: rank 3 on node-b, busy 480 of 500 ms = 2x the other ranks' 240")
    sps = [n.get("samples_per_second") for n in jd.get("nodes", [])]
    t.ok(len(sps) == 2 and all(isinstance(x, (int, float)) and x > 0 for x in sps) and
         abs(jd.get("samples_per_second", 0) - sum(sps)) < 1e-6,
         "compare --job: the job's samples/s is the sum of its nodes' %r" % sps,
         json.dumps(jd.get("samples_per_second")))
    reasons = sorted((gpu.get("throttle_reasons") or {}).keys())
    t.ok(gpu.get("gpu") == 0 and gpu.get("name") == "NVIDIA L40S" and
         (gpu.get("throttled_seconds_total") or 0) > 0 and "hw_thermal" in " ".join(reasons) and
         st.get("cause") == "gpu_throttled",
         "its evidence: GPU 0 (L40S) throttled, thermal reasons, cause gpu_throttled",
         json.dumps(gpu))
    node_a = (jd.get("nodes") or [{}])[0]
    t.ok(all(not g.get("throttle_reasons") for g in node_a.get("gpus", [])),
         "node A's GPUs: no throttle reason", json.dumps(node_a.get("gpus"))[:1500])
    r = subprocess.run([BIN, "compare", "--job"] + dirs, capture_output=True, text=True,
                       env=dict(os.environ, NO_COLOR="1"))
    t.ok(r.returncode == 0 and "job %s: 4 rank(s) on 2 node(s)" % JOB in r.stdout and
         re.search(r"straggler: rank 3 on node-b \(GPU 0, NVIDIA L40S\): computes 100 % longer "
                   r"per step than the other ranks \(busy 480\.0 ms of its median step 500\.0 ms, "
                   r"the others' median 240\.0 ms\)", r.stdout) and "hw_thermal" in r.stdout and
         "its GPU is held down" in r.stdout, "compare --job: the text names the straggler, its "
         "GPU and its throttle reasons", r.stdout + r.stderr)
    r = subprocess.run([BIN, "compare", "--job", "--html"] + dirs, capture_output=True, text=True)
    t.ok(r.returncode == 2 and "not --html" in r.stderr, "compare --job --html: a clear refusal")
finally:
    reap(procs)
    shutil.rmtree(tmp, ignore_errors=True)
t.done()
