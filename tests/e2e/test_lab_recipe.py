"""docs/deploy.md's lab recipe, run as written (issue 23): its shell blocks (a CA, a node
certificate, a `metrics` token, the node's files, the Prometheus host's files) with the paths
moved into a temporary directory and the node named localhost; the agent started with the
recipe's agent.conf lines (`listen = 0.0.0.0:PORT`, the tokens file and TLS pair where
systemd's LoadCredential= would put them); a real Prometheus on deploy/prometheus.yml as
shipped (HTTPS, the token file, the CA; its targets and intervals aside) loading the rule
files as shipped. Two ranks of one job send steps to the agent, rank 1 computing 1.5x as long
as rank 0. Checked: the agent answers 401 without the token; Prometheus scrapes it (up 1),
sees both ranks' gpuscope_run_* series, records rank 1's leave-one-out ratio 1.5, puts
TrainingStragglerRank on rank 1, and records the job's throughput.
"""
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, SRC, free_port, reap, sim_env, wait_until  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-lab.")
DOC = os.path.join(SRC, "docs", "deploy.md")
DEPLOY = os.path.join(SRC, "deploy")
JOB = "lab-job"
prom = shutil.which("prometheus")
if not prom or not shutil.which("openssl"):
    t.skip("the lab recipe", "prometheus or openssl not installed")
    sys.exit(t.done())

text = open(DOC).read()
lab = text[text.index("## A lab"):]
lab = lab[:lab.index("\n## ", 10)]
blocks = re.findall(r"```(\w+)\n(.*?)```", lab, re.S)
node_etc, prom_etc = os.path.join(tmp, "etc-gpuscope"), os.path.join(tmp, "etc-prometheus")
os.makedirs(node_etc)
os.makedirs(prom_etc)
port = free_port()


def moved(code):
    """A block of the recipe with its paths in tmp, the node named localhost."""
    for a, b in (("sudo ", ""), ("/etc/gpuscope", node_etc), ("/etc/prometheus", prom_etc),
                 ("/run/credentials/gpuscope-agent.service", node_etc),
                 ("gpu-node-01 gpu-node-02", "localhost"), ("gpu-node-01", "localhost"),
                 ("gpuscope agent --new-token", BIN + " agent --new-token"),
                 ("0.0.0.0:9400", "0.0.0.0:%d" % port)):
        code = code.replace(a, b)
    return code


def sh(code, cwd):
    return subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def https_get(path, token=None):
    ctx = ssl.create_default_context(cafile=os.path.join(tmp, "lab-ca", "ca.pem"))
    rq = urllib.request.Request("https://localhost:%d%s" % (port, path))
    if token:
        rq.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(rq, context=ctx, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""
    except OSError as e:
        return None, str(e)


stop = threading.Event()
try:
    sh_blocks = [c for lang, c in blocks if lang == "sh"]
    ini = [c for lang, c in blocks if lang == "ini"]
    admin = next(c for c in sh_blocks if "openssl req -x509" in c)
    node = next(c for c in sh_blocks if "/etc/gpuscope/agent.key" in c)
    promhost = next(c for c in sh_blocks if "gpuscope.token" in c and "awk" in c)
    # the Prometheus host's block, up to the reload (Prometheus is started below)
    promhost = promhost[:promhost.index("promtool")]
    r = sh(moved(admin), tmp)
    t.ok(r.returncode == 0 and os.path.exists(os.path.join(tmp, "lab-ca", "localhost.crt")),
         "the recipe's CA, node certificate and metrics token", r.stdout + r.stderr)
    ca_dir = os.path.join(tmp, "lab-ca")
    r2 = sh(moved(node), ca_dir)
    r3 = sh(moved(promhost).replace("-g prometheus ", ""), ca_dir)  # no such group here maybe
    t.ok(r2.returncode == 0 and r3.returncode == 0 and
         sorted(os.listdir(node_etc)) == ["agent.crt", "agent.key", "tokens"] and
         sorted(os.listdir(prom_etc)) == ["gpuscope-ca.pem", "gpuscope.token"],
         "the node's and the Prometheus host's files", r2.stderr + r3.stderr)
    token = open(os.path.join(prom_etc, "gpuscope.token")).read().strip()
    conf = os.path.join(node_etc, "agent.conf")
    agent_lines = moved(next(c for c in ini if "tokens_file" in c))
    with open(conf, "w") as f:
        f.write("[agent]\n" + agent_lines)
    sock = os.path.join(tmp, "steps.sock")
    env = sim_env("h100x8-training.json", RUNTIME_DIRECTORY=tmp)
    log = open(os.path.join(tmp, "agent.log"), "w")
    agent = subprocess.Popen([BIN, "agent", "--config", conf, "--data-dir",
                              os.path.join(tmp, "data"), "--socket", sock, "--interval", "0.5"],
                             env=env, stdout=log, stderr=subprocess.STDOUT)
    procs.append(agent)
    up = wait_until(lambda: https_get("/healthz", token)[0] == 200 or agent.poll() is not None,
                    timeout=20)
    t.ok(up and agent.poll() is None, "the agent starts on 0.0.0.0 with the recipe's TLS pair "
         "and tokens file", open(os.path.join(tmp, "agent.log")).read()[-2000:])
    t.eq(https_get("/metrics")[0], 401, "without the token: 401")

    # two ranks of one job: rank 1 computes 1.5x as long; rank 0 waits for it
    def ranks():
        conns = []
        for rank in (0, 1):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            s.connect(sock)
            s.send(json.dumps({"v": 1, "type": "hello", "run": "lab", "job": JOB,
                               "node": "localhost", "rank": rank, "world_size": 2,
                               "local_rank": rank, "framework": "torch",
                               "pid": os.getpid()}).encode())
            conns.append(s)
        n = 0
        while not stop.is_set() and agent.poll() is None:
            n += 1
            now = time.time()
            for rank, s in enumerate(conns):
                comm = 5.0 if rank == 1 else 55.0  # both steps last 155 ms
                s.send(json.dumps({"v": 1, "type": "step", "step": n, "t0": now - 0.155,
                                   "t1": now, "rank": rank, "samples": 8,
                                   "ms": {"data": 0.0, "forward": 100.0 if rank else 60.0,
                                          "backward": 40.0, "optimizer_step": 10.0 if rank else 40.0,
                                          "communication": comm, "total_step": 155.0}}).encode())
            stop.wait(0.1)
        for s in conns:
            s.close()
    def ranks_quiet():
        try:
            ranks()
        except OSError:  # the agent stopped (the test's end)
            pass
    th = threading.Thread(target=ranks_quiet, daemon=True)
    th.start()
    seen = wait_until(lambda: len(re.findall(r'^gpuscope_run_step_busy_seconds\{[^}]*'
                                             r'quantile="0.5"', https_get("/metrics", token)[1],
                                             re.M)) == 2, timeout=15)
    t.ok(seen, "the metrics token sees both ranks' gpuscope_run_* series",
         https_get("/metrics", token)[1][-1500:])

    # Prometheus on deploy/prometheus.yml as shipped, beside its rule files
    import yaml
    cfg = yaml.safe_load(open(os.path.join(DEPLOY, "prometheus.yml")))
    cfg["global"].update(scrape_interval="1s", evaluation_interval="1s")
    cfg["scrape_configs"][0]["static_configs"][0]["targets"] = ["localhost:%d" % port]
    cfg["scrape_configs"][0]["scrape_timeout"] = "1s"  # not above the interval
    with open(os.path.join(prom_etc, "prometheus.yml"), "w") as f:
        yaml.safe_dump(cfg, f)
    shutil.copy(os.path.join(DEPLOY, "prometheus-rules.yml"), prom_etc)
    shutil.copytree(os.path.join(DEPLOY, "prometheus"), os.path.join(prom_etc, "prometheus"))
    web = free_port()
    pp = subprocess.Popen([prom, "--config.file=" + os.path.join(prom_etc, "prometheus.yml"),
                           "--storage.tsdb.path=" + os.path.join(tmp, "tsdb"),
                           "--web.listen-address=127.0.0.1:%d" % web],
                          stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "prom.log"), "w"),
                          cwd=tmp)
    procs.append(pp)

    def prom_log():
        return open(os.path.join(tmp, "prom.log")).read()[-2500:]

    def query(q):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d/api/v1/query?query=%s"
                                        % (web, urllib.parse.quote(q)), timeout=5) as r:
                return json.loads(r.read())["data"]["result"]
        except (OSError, ValueError, KeyError):
            return []

    got = {}

    def has(name, q, pred):
        res = query(q)
        got[name] = res
        return bool(res) and pred(res)

    t.ok(wait_until(lambda: has("up", 'up{job="gpuscope"}',
                                lambda r: r[0]["value"][1] == "1") or pp.poll() is not None,
                    timeout=30) and pp.poll() is None,
         "Prometheus scrapes the agent over HTTPS with the token (up 1)",
         json.dumps(got) + "\n" + prom_log())
    t.ok(wait_until(lambda: has("busy", 'gpuscope_run_step_busy_seconds{quantile="0.5"}',
                                lambda r: {x["metric"].get("rank") for x in r} == {"0", "1"}),
                    timeout=20),
         "Prometheus has both ranks' busy series", json.dumps(got.get("busy")))
    ratio = 'train_job_rank:gpuscope_run_step_busy_seconds:ratio_to_others{rank="1"}'
    t.ok(wait_until(lambda: has("ratio", ratio,
                                lambda r: abs(float(r[0]["value"][1]) - 1.5) < 0.01),
                    timeout=20),
         "the recording rule: rank 1 computes 1.5x the other rank (leave-one-out)",
         json.dumps(got.get("ratio")))
    t.ok(wait_until(lambda: has("alert", 'ALERTS{alertname="TrainingStragglerRank"}',
                                lambda r: [x["metric"].get("rank") for x in r] == ["1"]),
                    timeout=20),
         "TrainingStragglerRank on rank 1 (pending or firing)", json.dumps(got.get("alert")))
    t.ok(wait_until(lambda: has("sps", 'train_job:gpuscope_run_samples:rate1m{train_job="%s"}'
                                % JOB, lambda r: float(r[0]["value"][1]) > 0), timeout=20),
         "the job's throughput recorded (samples/s over its ranks)", json.dumps(got.get("sps")))
finally:
    stop.set()
    reap(procs)
    shutil.rmtree(tmp, ignore_errors=True)
sys.exit(t.done())
