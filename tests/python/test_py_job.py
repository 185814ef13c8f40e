"""A real 2-node x 2-rank gloo job under `gpuscope run`, seen whole through two agents and a
real Prometheus (issue 16).

Two agents stand for two nodes (own ports, data dirs, step sockets; node B on
sim/scenarios/thermal-powercap.json at scenario time 500 s, its GPU power and thermally
capped, with the node's training command placed on it). On each "node" `gpuscope run --job`
starts a script that spawns two ranks (global ranks 0,1 and 2,3 of one world of 4, gloo, DDP,
torch on CPU); rank 3 sleeps in its forward pass, so the other ranks wait for it in the
all-reduce. The Python package finds the node's agent (GPUSCOPE_AGENT_SOCKET) and names its
node (GPUSCOPE_NODE). A real Prometheus scrapes both agents every second and evaluates
deploy/prometheus/training-job-rules.yml (a copy with the straggler's `for:` shortened to 2 s). Checked: the
PromQL of the dashboard's "ranks side by side" panel names rank 3 on node-b the slowest; the
straggler alert fires for rank 3 on node-b; the series count per agent stays within its
bound; each node's report carries run.job; `gpuscope compare --job` on the two run
directories names rank 3 on node-b as the straggler and its throttled GPU.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, SRC, Tap  # noqa: E402
from gsenv import BIN, free_port, get_text as get, reap, sim_env, start_agent, \
    wait_until  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-py-job.")
JOB = "gloo-job-1"
SERIES_PER_RANK = 28  # GS_RUNM_SERIES_PER_RANK
RULES = os.path.join(SRC, "deploy", "prometheus", "training-job-rules.yml")
DASHBOARD = os.path.join(SRC, "deploy", "grafana", "training-job.json")

NODE = textwrap.dedent("""
    import datetime, gc, os, sys, time, torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Net(torch.nn.Module):
        def __init__(self, slow):
            super().__init__()
            self.l1, self.l2, self.slow = torch.nn.Linear(32, 64), torch.nn.Linear(64, 1), slow
        def forward(self, x):
            if self.slow:
                time.sleep(self.slow)  # a slow rank: compute that the others wait for
            return self.l2(torch.relu(self.l1(x)))

    def worker(local, node, port, steps):
        rank = node * 2 + local
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE="4", LOCAL_RANK=str(local))
        torch.set_num_threads(1)
        # a rank that never joins fails the others in 2 min, not gloo's default 30
        dist.init_process_group("gloo", rank=rank, world_size=4,
                                timeout=datetime.timedelta(seconds=120))
        model = DDP(Net(0.06 if rank == 3 else 0.0))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        ds = torch.utils.data.TensorDataset(torch.randn(steps * 4, 32), torch.randn(steps * 4, 1))
        for x, y in torch.utils.data.DataLoader(ds, batch_size=4):
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step(); opt.zero_grad()
        dist.barrier()
        del model, opt  # torch 1.13: no DDP object left when the group goes
        gc.collect()
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(worker, args=(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])), nprocs=2)
""")


def prom_query(web, q):
    st, body = get("http://127.0.0.1:%d/api/v1/query?query=%s" % (web, urllib.parse.quote(q)),
                   os_error=True)
    try:
        return json.loads(body)["data"]["result"] if st == 200 else []
    except (ValueError, KeyError):
        return []


try:
    prom = shutil.which("prometheus") or "/usr/bin/prometheus"
    # node B: the thermal-powercap GPU, with the node's command (gpuscope run's child) on it
    with open(os.path.join(SRC, "sim", "scenarios", "thermal-powercap.json")) as f:
        scen = json.load(f)
    scen["processes"] = [{"id": "train", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"}, "gpu": 0,
                          "used_memory_mib": 8000}]
    scen_b = os.path.join(tmp, "node-b.json")
    with open(scen_b, "w") as f:
        json.dump(scen, f)
    clock = os.path.join(tmp, "clock")
    with open(clock, "w") as f:
        f.write("500")
    nodes = {}
    for name, scenario, at in (("node-a", "h100x8-training.json", None),
                               ("node-b", scen_b, "file:" + clock)):
        d = os.path.join(tmp, name)
        os.makedirs(d)
        sock = os.path.join(d, "steps.sock")
        env = sim_env(scenario, time=at, RUNTIME_DIRECTORY=d)  # its own agent.sock
        log = open(os.path.join(d, "agent.log"), "w")
        p, base, _ = start_agent(["--data-dir", os.path.join(d, "data"), "--interval", "0.5",
                                  "--socket", sock], env, procs, stdout=log,
                                 stderr=subprocess.STDOUT)
        nodes[name] = {"base": base, "sock": sock, "env": env, "dir": d}
    t.ok(all(n["base"] for n in nodes.values()), "two agents (nodes) on loopback")

    web = None
    if os.path.exists(prom):
        rules = open(RULES).read().replace("for: 30s", "for: 2s")
        with open(os.path.join(tmp, "rules.yml"), "w") as f:
            f.write(rules)
        web = free_port()
        cfg = os.path.join(tmp, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files: [rules.yml]\nscrape_configs:\n  - job_name: gpuscope\n"
                    "    static_configs:\n      - targets: [%s]\n"
                    % ", ".join("'%s'" % n["base"].split("//")[1] for n in nodes.values()))
        pp = subprocess.Popen([prom, "--config.file=" + cfg, "--storage.tsdb.path=" +
                               os.path.join(tmp, "tsdb"), "--web.listen-address=127.0.0.1:%d" % web],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp)
        procs.append(pp)

    script = os.path.join(tmp, "node.py")
    with open(script, "w") as f:
        f.write(NODE)
    port = str(free_port())
    runs = []
    for i, name in enumerate(("node-a", "node-b")):
        n = nodes[name]
        env = pyhelp.child_env(NO_COLOR="1")
        env.update({k: v for k, v in n["env"].items() if k.startswith(("GPUSCOPE_NVML", "NVML_SIM"))})
        env.update(GPUSCOPE_AGENT_SOCKET=n["sock"], GPUSCOPE_NODE=name, OMP_NUM_THREADS="1")
        out = os.path.join(tmp, "run-" + name)
        runs.append((subprocess.Popen([BIN, "run", "--job", JOB, "--out", out, "--", PYTHON,
                                       script, str(i), port, "150"], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
                     out))
        procs.append(runs[-1][0])

    def live_ranks():
        got = {}
        for name, n in nodes.items():
            st, body = get(n["base"] + "/metrics", os_error=True)
            got[name] = body if st == 200 else ""
        return got

    seen = wait_until(lambda: all(re.search(r'^gpuscope_run_step_busy_seconds\{train_job="%s".*'
                                            r'quantile="0.5"' % JOB, b, re.M)
                                  for b in live_ranks().values()), timeout=120, interval=0.5)
    bodies = live_ranks()
    t.ok(seen, "both agents serve the live ranks' series with train_job=%s" % JOB,
         "\n".join(ln for b in bodies.values() for ln in b.splitlines()
                   if ln.startswith("gpuscope_run_rank_info")))
    for name, body in bodies.items():
        n = len([ln for ln in body.splitlines() if ln.startswith("gpuscope_run_") and
                 not ln.startswith("gpuscope_run_ranks")])
        t.ok(0 < n <= 2 * SERIES_PER_RANK, "%s: %d gpuscope_run_* series for its 2 ranks "
             "(bound %d)" % (name, n, 2 * SERIES_PER_RANK))
    if web:
        with open(DASHBOARD) as f:
            panel = next(p for p in json.load(f)["panels"]
                         if p["title"].startswith("Ranks side by side"))
        expr = "topk(1, %s)" % panel["targets"][0]["expr"].replace("$job", JOB)
        top = []
        ok = wait_until(lambda: (lambda r: top.__setitem__(slice(None), r) or
                                 (len(r) == 1 and r[0]["metric"].get("rank") == "3"))(
                                     prom_query(web, expr)), timeout=60, interval=1)
        t.ok(ok and top[0]["metric"].get("node") == "node-b",
             "Prometheus: the dashboard's ranks-side-by-side PromQL puts rank 3 on node-b on top",
             json.dumps(top))
        alerts = []
        fired = wait_until(lambda: (lambda r: alerts.__setitem__(slice(None), r) or bool(r))(
            prom_query(web, 'ALERTS{alertname="TrainingStragglerRank",alertstate="firing"}')),
            timeout=60, interval=1)
        t.ok(fired and {(a["metric"].get("rank"), a["metric"].get("node")) for a in alerts} ==
             {("3", "node-b")}, "Prometheus: TrainingStragglerRank fires for rank 3 on node-b",
             json.dumps(alerts))
    else:
        t.skip("Prometheus: the dashboard's PromQL names rank 3", "prometheus not installed")
        t.skip("Prometheus: the straggler alert fires", "prometheus not installed")
    with open(clock + ".tmp", "w") as f:
        f.write("520")  # the GPU's throttle counters move on during the run
    os.rename(clock + ".tmp", clock)
    outs = []
    for p, out in runs:
        o, e = p.communicate(timeout=240)
        outs.append((p.returncode, e))
    t.ok(all(rc == 0 for rc, _ in outs), "both nodes' gpuscope run exit 0",
         "\n".join(e[-1500:] for _, e in outs))
    reps = []
    for _, out in runs:
        try:
            reps.append(json.load(open(os.path.join(out, "metrics_report.json"))))
        except (OSError, ValueError):
            reps.append({})
    t.eq([(r.get("run") or {}).get("job") for r in reps], [JOB, JOB],
         "each node's metrics_report.json: run.job = --job")
    r = subprocess.run([BIN, "compare", "--job", "--json"] + [o for _, o in runs],
                       capture_output=True, text=True)
    try:
        jd = json.loads(r.stdout)
    except ValueError:
        jd = {}
    st = jd.get("straggler") or {}
    gpu = st.get("gpu") or {}
    t.ok(jd.get("job") == JOB and st.get("rank") == 3 and st.get("node") == "node-b" and
         sorted(x["rank"] for x in jd.get("ranks", [])) == [0, 1, 2, 3],
         "compare --job: the straggler is rank 3 on node-b", r.stdout[:3000] + r.stderr)
    t.ok(gpu.get("name") == "NVIDIA L40S" and (gpu.get("throttled_seconds_total") or 0) > 0,
         "compare --job: its GPU (node-b's L40S) was throttled", json.dumps(gpu))
finally:
    reap(procs)
    shutil.rmtree(tmp, ignore_errors=True)
pyhelp.exit_now(t.done())
