"""A 2-node job across two network namespaces (issue 23, item 9): each namespace is a node with
its own address (a veth pair, addresses inside the namespaces only), its own agent on a fake
GPU (nvml-sim) listening on 0.0.0.0:9400 with TLS and a tokens file as docs/deploy.md says, and
`gpuscope run --job` around one rank of a 2-rank gloo DDP job whose ranks talk over the veth
pair (the script never imports gpuscope; rank 1 computes 1.5x as long as rank 0, by its own
clock). A real Prometheus in node A's namespace scrapes both agents over the network as
deploy/prometheus.yml says (HTTPS, the metrics token, the CA; targets and intervals aside) and
loads the rule files as shipped. Checked: it sees both ranks' per-rank series, the recording
rule gives rank 1 a ratio to the other rank within 10 % of the script's own, the straggler
alert is raised on rank 1 on node-b, the job's throughput is recorded, and `gpuscope compare
--job` on the two nodes' run directories names rank 1 on node-b. The namespaces go at exit,
even on failure.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, SRC, Tap  # noqa: E402
from gsenv import BIN, reap, sim_env, wait_until  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-netns.")
JOB = "netns-job"
tag = "%d" % (os.getpid() % 100000)
NS = {"node-a": "gsna" + tag, "node-b": "gsnb" + tag}
VETH = {"node-a": "gsva" + tag, "node-b": "gsvb" + tag}
net = "10.251.%d" % (os.getpid() % 250)
ADDR = {"node-a": net + ".1", "node-b": net + ".2"}
DEPLOY = os.path.join(SRC, "deploy")
prom = shutil.which("prometheus")
promtool = shutil.which("promtool")

SCRIPT = textwrap.dedent("""
    import json, os, sys, time, torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = int(os.environ["RANK"])
    work = 0.04 * (1.5 if rank == 1 else 1.0)  # s of this rank's own work per step
    torch.set_num_threads(1)
    dist.init_process_group("gloo")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 1)
        def forward(self, x):
            time.sleep(work / 2)
            return self.l2(torch.relu(self.l1(x)))

    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = torch.utils.data.TensorDataset(torch.randn(int(sys.argv[1]) * 8, 16),
                                        torch.randn(int(sys.argv[1]) * 8, 1))
    compute = []
    for x, y in torch.utils.data.DataLoader(ds, batch_size=8):
        t0 = time.perf_counter()
        time.sleep(work / 2)
        out = model(x)
        compute.append(time.perf_counter() - t0)
        torch.nn.functional.mse_loss(out, y).backward()
        opt.step()
        opt.zero_grad()
    compute.sort()
    with open(sys.argv[2], "w") as f:
        json.dump({"compute_p50_ms": 1e3 * compute[len(compute) // 2]}, f)
    dist.barrier()
    del model, opt
    dist.destroy_process_group()
""")


def ip(*args):
    return subprocess.run(["ip"] + list(args), capture_output=True, text=True, timeout=20)


def in_ns(node, cmd):
    return ["ip", "netns", "exec", NS[node]] + cmd


def sh(code, cwd):
    return subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def query(expr):
    """An instant query to the Prometheus in node A's namespace (promtool there)."""
    r = subprocess.run(in_ns("node-a", [promtool, "query", "instant", "-o", "json",
                                        "http://127.0.0.1:9090", expr]),
                       capture_output=True, text=True, timeout=20)
    try:
        return json.loads(r.stdout) if r.returncode == 0 else []
    except ValueError:
        return []


made = []
try:
    if not prom or not promtool or os.geteuid() != 0:
        t.skip("a job across two network namespaces", "needs root, prometheus and promtool")
        raise SystemExit
    # two nodes: namespaces joined by a veth pair
    for node in NS:
        r = ip("netns", "add", NS[node])
        if r.returncode == 0:
            made.append(NS[node])
    r = ip("link", "add", VETH["node-a"], "type", "veth", "peer", "name", VETH["node-b"])
    ok = len(made) == 2 and r.returncode == 0
    for node in NS:
        ok = ok and ip("link", "set", VETH[node], "netns", NS[node]).returncode == 0
        for args in (("addr", "add", ADDR[node] + "/24", "dev", VETH[node]),
                     ("link", "set", VETH[node], "up"), ("link", "set", "lo", "up")):
            ok = ok and ip("netns", "exec", NS[node], "ip", *args).returncode == 0
    ping = subprocess.run(in_ns("node-a", ["ping", "-c", "1", "-W", "2", ADDR["node-b"]]),
                          capture_output=True, text=True) if shutil.which("ping") else None
    t.ok(ok and (ping is None or ping.returncode == 0),
         "two network namespaces joined by a veth pair (%s, %s)" % (ADDR["node-a"],
                                                                   ADDR["node-b"]),
         r.stderr + (ping.stdout + ping.stderr if ping else ""))

    # a CA, a certificate per node (its address), the metrics token: docs/deploy.md's recipe
    # with the nodes named by address
    r = sh(textwrap.dedent("""
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=lab-ca -keyout ca.key \\
            -out ca.pem
        for n in %s %s; do
          openssl req -newkey rsa:2048 -nodes -subj "/CN=$n" -addext "subjectAltName=IP:$n" \\
              -keyout "$n.key" -out "$n.csr"
          openssl x509 -req -in "$n.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \\
              -copy_extensions copy -out "$n.crt"
        done
        %s agent --new-token metrics prometheus > token.txt
    """ % (ADDR["node-a"], ADDR["node-b"], BIN)), tmp)
    token_line = next((ln for ln in open(os.path.join(tmp, "token.txt"))
                       if ln.startswith("sha256:")), "") if r.returncode == 0 else ""
    token = next((ln.split()[1] for ln in open(os.path.join(tmp, "token.txt"))
                  if ln.startswith("token:")), "") if r.returncode == 0 else ""
    t.ok(r.returncode == 0 and token and token_line, "certificates and a metrics token",
         r.stderr[-1500:])

    nodes = {}
    for node, scenario in (("node-a", "h100x8-training.json"), ("node-b", "thermal-powercap.json")):
        d = os.path.join(tmp, node)
        os.makedirs(d)
        for src, dst, mode in ((ADDR[node] + ".key", "agent.key", 0o600),
                               (ADDR[node] + ".crt", "agent.crt", 0o644)):
            shutil.copy(os.path.join(tmp, src), os.path.join(d, dst))
            os.chmod(os.path.join(d, dst), mode)
        with open(os.path.join(d, "tokens"), "w") as f:
            f.write(token_line)
        os.chmod(os.path.join(d, "tokens"), 0o600)
        conf = os.path.join(d, "agent.conf")
        with open(conf, "w") as f:
            f.write("[agent]\nlisten = 0.0.0.0:9400\ntokens_file = %s/tokens\n"
                    "tls_cert_file = %s/agent.crt\ntls_key_file = %s/agent.key\n" % (d, d, d))
        if not os.path.exists(os.path.join(SRC, "sim", "scenarios", scenario)):
            scenario = "h100x8-training.json"
        env = sim_env(scenario, RUNTIME_DIRECTORY=d)
        sock = os.path.join(d, "steps.sock")
        p = subprocess.Popen(in_ns(node, [BIN, "agent", "--config", conf, "--data-dir",
                                          os.path.join(d, "data"), "--socket", sock,
                                          "--interval", "0.5"]),
                             env=env, stdout=open(os.path.join(d, "agent.log"), "w"),
                             stderr=subprocess.STDOUT)
        procs.append(p)
        nodes[node] = {"dir": d, "sock": sock, "env": env, "agent": p}
    up = wait_until(lambda: all(os.path.exists(n["sock"]) for n in nodes.values()) or
                    any(n["agent"].poll() is not None for n in nodes.values()), timeout=20)
    t.ok(up and all(n["agent"].poll() is None for n in nodes.values()),
         "an agent in each namespace on 0.0.0.0:9400 with TLS and tokens",
         "\n".join(open(os.path.join(n["dir"], "agent.log")).read()[-800:]
                   for n in nodes.values()))

    # Prometheus in node A's namespace, deploy/prometheus.yml as shipped beside its rule files
    import yaml
    pd = os.path.join(tmp, "prometheus")
    os.makedirs(pd)
    cfg = yaml.safe_load(open(os.path.join(DEPLOY, "prometheus.yml")))
    cfg["global"].update(scrape_interval="1s", evaluation_interval="1s")
    sc = cfg["scrape_configs"][0]
    sc["scrape_timeout"] = "1s"
    sc["static_configs"][0]["targets"] = [ADDR[n] + ":9400" for n in NS]
    with open(os.path.join(pd, "prometheus.yml"), "w") as f:
        yaml.safe_dump(cfg, f)
    shutil.copy(os.path.join(DEPLOY, "prometheus-rules.yml"), pd)
    shutil.copytree(os.path.join(DEPLOY, "prometheus"), os.path.join(pd, "prometheus"))
    shutil.copy(os.path.join(tmp, "ca.pem"), os.path.join(pd, "gpuscope-ca.pem"))
    with open(os.path.join(pd, "gpuscope.token"), "w") as f:
        f.write(token + "\n")
    pp = subprocess.Popen(in_ns("node-a", [prom, "--config.file=" + os.path.join(
        pd, "prometheus.yml"), "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
        "--web.listen-address=127.0.0.1:9090"]), stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(tmp, "prom.log"), "w"), cwd=tmp)
    procs.append(pp)

    # the job: one rank per node under `gpuscope run --job`, gloo over the veth pair
    script = os.path.join(tmp, "ddp.py")
    with open(script, "w") as f:
        f.write(SCRIPT)
    runs = []
    for rank, node in enumerate(NS):
        env = pyhelp.child_env(NO_COLOR="1", OMP_NUM_THREADS="1", RANK=str(rank),
                               WORLD_SIZE="2", LOCAL_RANK="0", MASTER_ADDR=ADDR["node-a"],
                               MASTER_PORT="29500", GLOO_SOCKET_IFNAME=VETH[node],
                               GPUSCOPE_AGENT_SOCKET=nodes[node]["sock"], GPUSCOPE_NODE=node)
        env.update({k: v for k, v in nodes[node]["env"].items()
                    if k.startswith(("GPUSCOPE_NVML", "NVML_SIM"))})
        out = os.path.join(tmp, "run-" + node)
        p = subprocess.Popen(in_ns(node, [BIN, "run", "--job", JOB, "--out", out, "--", PYTHON,
                                          script, "250", os.path.join(tmp, "truth-%d" % rank)]),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        runs.append((p, out))

    got = {}

    def has(name, expr, pred):
        res = query(expr)
        got[name] = res
        return bool(res) and pred(res)

    live = wait_until(lambda: has("busy", 'gpuscope_run_step_busy_seconds{quantile="0.5"}',
                                  lambda r: {(x["metric"].get("rank"), x["metric"].get("node"))
                                             for x in r} == {("0", "node-a"), ("1", "node-b")})
                      or any(p.poll() is not None for p, _ in runs), timeout=90, interval=1)
    t.ok(live and "busy" in got and len(got["busy"]) == 2,
         "Prometheus scrapes both nodes' agents over the network with the token: both ranks' "
         "series", json.dumps(got.get("busy"))[:1500] +
         open(os.path.join(tmp, "prom.log")).read()[-800:])
    ratio = 'train_job_rank:gpuscope_run_step_busy_seconds:ratio_to_others{rank="1"}'
    wait_until(lambda: has("ratio", ratio, lambda r: float(r[0]["value"][1]) > 1.3) or
               any(p.poll() is not None for p, _ in runs), timeout=30, interval=1)
    has("alert", 'ALERTS{alertname="TrainingStragglerRank"}', lambda r: True)
    # rate() over 1m needs two scrapes of the counter and an evaluation of the rule after them:
    # asked until it has a value (it raced the ratio's wait when that was quick)
    wait_until(lambda: has("sps", 'train_job:gpuscope_run_samples:rate1m{train_job="%s"}' % JOB,
                           lambda r: float(r[0]["value"][1]) > 0), timeout=30, interval=1)
    outs = []
    for p, out in runs:
        try:
            _, e = p.communicate(timeout=150)
        except subprocess.TimeoutExpired:
            p.kill()
            _, e = p.communicate()
        outs.append((p.returncode, e))
    t.ok(all(rc == 0 for rc, _ in outs), "both nodes' gpuscope run exit 0",
         "\n".join(e[-1200:] for _, e in outs))
    truth = []
    for rank in (0, 1):
        try:
            truth.append(json.load(open(os.path.join(tmp, "truth-%d" % rank)))["compute_p50_ms"])
        except (OSError, ValueError, KeyError):
            truth.append(None)
    want = truth[1] / truth[0] if all(truth) else None
    r = got.get("ratio") or []
    val = float(r[0]["value"][1]) if r else None
    t.ok(r and r[0]["metric"].get("node") == "node-b" and pyhelp.near(val, want, 0.10),
         "the recording rule: rank 1 on node-b computes %r x the other rank (the script's own "
         "clocks: %r)" % (val, want), json.dumps(r))
    a = got.get("alert") or []
    t.ok([(x["metric"].get("rank"), x["metric"].get("node")) for x in a] == [("1", "node-b")],
         "TrainingStragglerRank raised on rank 1 on node-b", json.dumps(a))
    s = got.get("sps") or []
    t.ok(s and float(s[0]["value"][1]) > 0, "the job's throughput over both nodes recorded",
         json.dumps(s))
    r = subprocess.run([BIN, "compare", "--job", "--json"] + [o for _, o in runs],
                       capture_output=True, text=True, timeout=30)
    try:
        jd = json.loads(r.stdout)
    except ValueError:
        jd = {}
    st = jd.get("straggler") or {}
    t.ok(jd.get("job") == JOB and st.get("rank") == 1 and st.get("node") == "node-b" and
         pyhelp.near(st.get("ratio_to_others"), want, 0.10) and
         isinstance(jd.get("samples_per_second"), float),
         "compare --job: the straggler is rank 1 on node-b, %r x the other rank (script %r); "
         "the job's samples/s %r" % (st.get("ratio_to_others"), want,
                                     jd.get("samples_per_second")),
         r.stdout[:2000] + r.stderr)
except SystemExit:
    pass
finally:
    reap(procs)
    for ns in made:
        ip("netns", "del", ns)
    shutil.rmtree(tmp, ignore_errors=True)
t.ok(not [ns for ns in NS.values() if ns in ip("netns", "list").stdout],
     "the namespaces are gone")
pyhelp.exit_now(t.done())
