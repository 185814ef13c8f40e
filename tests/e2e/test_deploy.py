"""deploy/ checked by the tools that read it: `promtool check rules` on prometheus-rules.yml,
`promtool check config` on prometheus.yml (which loads the rules too), and `systemd-analyze
verify` on gpuscope-agent.service (its ExecStart pointed at the built binary, since verify
wants the command to exist). Every gpuscope_* name in the rules must be a family the agent
serves on nvml-sim (h100x8-training), and every throttle reason they match one docs/metrics.md
lists. deploy/grafana/gpuscope.json: its structure, and every panel expression parsed by
promtool (as recording rules, template variables substituted). deploy/kubernetes: the DaemonSet
(hostPID, port, probe) and its agent.conf through --check-config. A missing tool is a TAP skip.
"""
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN, SIM, free_port, reap, sim_env, wait_until  # noqa: E402

DEPLOY = os.path.join(SRC, "deploy")
RULES = os.path.join(DEPLOY, "prometheus-rules.yml")
CONFIG = os.path.join(DEPLOY, "prometheus.yml")
UNIT = os.path.join(DEPLOY, "gpuscope-agent.service")

t = Tap()


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60)


def served_families():
    """The metric families of one /metrics page of the agent on nvml-sim."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    # Its own data directory and sockets: as root the defaults are the machine's
    # /var/lib/gpuscope and /run/gpuscope, which another gpuscope may hold.
    own = tempfile.mkdtemp(prefix="gs-deploy-agent.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVML_SIM")}
    env.update(GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_TIME="10", RUNTIME_DIRECTORY=own,
               NVML_SIM_SCENARIO=os.path.join(SRC, "sim", "scenarios", "h100x8-training.json"))
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:%d" % port, "--data-dir",
                          os.path.join(own, "data")], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    body = ""
    try:
        for _ in range(100):
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as r:
                    body = r.read().decode()
                break
            except OSError:
                if p.poll() is not None:
                    break
                time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(own, ignore_errors=True)
    return set(re.findall(r"^# TYPE (\S+) ", body, re.M))


promtool = shutil.which("promtool")
if promtool:
    r = run([promtool, "check", "rules", RULES])
    t.ok(r.returncode == 0, "promtool check rules deploy/prometheus-rules.yml",
         detail=r.stdout + r.stderr)
    # as installed: beside its rule files, the token and the CA file it names (docs/deploy.md)
    ctmp = tempfile.mkdtemp(prefix="gs-promcfg.")
    try:
        shutil.copy(CONFIG, ctmp)
        shutil.copy(RULES, ctmp)
        shutil.copytree(os.path.join(DEPLOY, "prometheus"), os.path.join(ctmp, "prometheus"))
        for name in ("gpuscope.token", "gpuscope-ca.pem"):
            with open(os.path.join(ctmp, name), "w") as f:
                f.write("x\n")
        r = run([promtool, "check", "config", os.path.join(ctmp, "prometheus.yml")])
    finally:
        shutil.rmtree(ctmp, ignore_errors=True)
    t.ok(r.returncode == 0 and "prometheus-rules.yml" in r.stdout,
         "promtool check config deploy/prometheus.yml (with its rule files, token and CA file)",
         detail=r.stdout + r.stderr)
else:
    t.skip("promtool check rules deploy/prometheus-rules.yml", "promtool not installed")
    t.skip("promtool check config deploy/prometheus.yml", "promtool not installed")

rules = open(RULES).read()
used = set(re.findall(r"\b(gpuscope_[a-z_]+)", rules))
families = served_families()
t.ok(len(families) > 20, "the agent on nvml-sim serves /metrics", detail=sorted(families))
missing = sorted(n for n in used if n not in families)
t.eq(missing, [], "every gpuscope_* name in the rules is a family the agent serves")
doc = open(os.path.join(SRC, "docs", "metrics.md")).read()
reason_row = next(ln for ln in doc.splitlines() if ln.startswith("| `gpuscope_gpu_throttle`"))
reasons = set(re.findall(r'reason=~"([^"]+)"', rules)[0].split("|"))
t.eq(sorted(r for r in reasons if r not in reason_row), [],
     "every throttle reason in the rules is one docs/metrics.md lists")

# deploy/grafana/gpuscope.json: a dashboard Grafana can import, whose every expression parses
# (each written as a recording rule, template variables substituted, for `promtool check rules`)
# and names only families the agent serves (GPM and process ones: documented, not always served).
dash = json.load(open(os.path.join(DEPLOY, "grafana", "gpuscope.json")))
t.ok(dash.get("uid") and dash.get("title") and isinstance(dash.get("schemaVersion"), int) and
     isinstance(dash.get("panels"), list), "grafana: uid, title, schemaVersion, panels")
tvars = {v["name"]: v for v in dash["templating"]["list"]}
t.ok(tvars.get("datasource", {}).get("query") == "prometheus" and
     "hostname" in str(tvars.get("node", {}).get("query")) and
     "gpu" in str(tvars.get("gpu", {}).get("query")) and "$node" in str(tvars["gpu"]["query"]),
     "grafana: datasource, node and gpu variables (gpu filtered by node)", detail=tvars.keys())
ids = [p["id"] for p in dash["panels"]]
t.eq(len(ids), len(set(ids)), "grafana: panel ids are unique")
exprs = []
for p in dash["panels"]:
    box = p.get("gridPos", {})
    if not (all(k in box for k in "hwxy") and box["x"] + box["w"] <= 24):
        exprs.append(("bad gridPos", p["title"]))
    for tg in p.get("targets", []):
        exprs.append((p["title"], tg["refId"], tg["expr"]))
bad_grid = [e for e in exprs if e[0] == "bad gridPos"]
exprs = [e for e in exprs if e[0] != "bad gridPos"]
t.eq(bad_grid, [], "grafana: every panel has a gridPos within 24 columns")
titles = " | ".join(p["title"] for p in dash["panels"])
for want in ("utilization", "Memory used", "Temperature", "Power", "SM clock", "PCIe",
             "heatmap", "idle GPUs holding memory", "Throttled GPUs", "processes"):
    t.ok(want.lower() in titles.lower(), "grafana: a panel for " + want, detail=titles)
t.ok(len(exprs) >= 15 and all("$node" in e[2] for e in exprs),
     "grafana: %d expressions, each filtered by $node" % len(exprs), detail=exprs)
names = set(re.findall(r"\b(gpuscope_[a-z_]+)", " ".join(e[2] for e in exprs)))
unserved = sorted(n for n in names if n not in families and "`%s`" % n not in doc)
t.eq(unserved, [], "grafana: every gpuscope_* name is served, or documented (GPM, opt-in)")
if promtool:
    subst = {"$__rate_interval": "1m", "$__interval": "15s", "$__range": "6h",
             "$node": "node1|node2", "$gpu": "0|1", "${datasource}": "x"}
    tmp = tempfile.mkdtemp(prefix="gs-grafana-test.")
    try:
        rules_path = os.path.join(tmp, "panels.yml")
        with open(rules_path, "w") as f:
            f.write("groups:\n  - name: grafana_panels\n    rules:\n")
            for i, (_, _, e) in enumerate(exprs):
                for k, v in subst.items():
                    e = e.replace(k, v)
                f.write("      - record: gs_panel_%d\n        expr: %s\n" % (i, json.dumps(e)))
        r = run([promtool, "check", "rules", rules_path])
        t.ok(r.returncode == 0 and ("SUCCESS: %d rules found" % len(exprs)) in r.stdout,
             "grafana: promtool parses all %d panel expressions" % len(exprs),
             detail=r.stdout + r.stderr)
        # The check can fail: a broken expression is reported.
        with open(rules_path, "w") as f:
            f.write("groups:\n  - name: g\n    rules:\n      - record: x\n"
                    "        expr: \"sum(gpuscope_gpu_up{hostname=~\\\"a\\\"}\"\n")
        r = run([promtool, "check", "rules", rules_path])
        t.ok(r.returncode != 0, "grafana: promtool rejects an unbalanced expression")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
else:
    t.skip("grafana: promtool parses the panel expressions", "promtool not installed")

# deploy/kubernetes/gpuscope-agent.yaml: a DaemonSet with hostPID on GPU nodes, probing port
# 9400, mounting the Secret gpuscope-agent-tls, and a ConfigMap whose agent.conf the agent
# starts with as written: docs/deploy.md's Kubernetes commands make the certificate and token
# (kubectl aside), the Secret's files lie where the DaemonSet mounts them (moved into a
# temporary directory, as the kubelet lays a Secret out: links into a ..data directory), and
# the agent listens on 0.0.0.0 (a free port): /metrics over HTTPS with the token, 401 without,
# 421 to a Host it does not know. The scrape config and ServiceMonitor read the same Secret.
try:
    import yaml
except ImportError:
    yaml = None
KDIR = os.path.join(DEPLOY, "kubernetes")
SVC_NAME = "gpuscope-agent.gpuscope.svc"


def tls_get(port, ca, host, token=None):
    """(status, body) of GET /metrics on 127.0.0.1:port over TLS, the certificate checked
    against ca for the name SVC_NAME, with Host: host."""
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=SVC_NAME) as s:
            req = "GET /metrics HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n" % host
            if token:
                req += "Authorization: Bearer %s\r\n" % token
            s.sendall((req + "\r\n").encode())
            resp = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                resp += chunk
    head, _, body = resp.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode(errors="replace")


if yaml:
    kdocs = list(yaml.safe_load_all(open(os.path.join(KDIR, "gpuscope-agent.yaml"))))
    kinds = {d["kind"]: d for d in kdocs}
    ds = kinds.get("DaemonSet", {}).get("spec", {}).get("template", {}).get("spec", {})
    ctr = (ds.get("containers") or [{}])[0]
    mounts = {m["name"]: m["mountPath"] for m in ctr.get("volumeMounts", [])}
    vols = {v["name"]: v for v in ds.get("volumes", [])}
    secret_dir = mounts.get("tls", "")
    t.ok(ds.get("hostPID") is True and ctr.get("ports", [{}])[0].get("containerPort") == 9400
         and ctr.get("livenessProbe", {}).get("tcpSocket", {}).get("port") == "https"
         and ctr.get("readinessProbe", {}).get("tcpSocket", {}).get("port") == "https"
         and "--config" in ctr.get("args", []),
         "kubernetes: DaemonSet with hostPID, port 9400, TCP probes", detail=ds)
    t.ok(vols.get("tls", {}).get("secret", {}).get("secretName") == "gpuscope-agent-tls"
         and secret_dir.startswith("/"),
         "kubernetes: the Secret gpuscope-agent-tls mounted", detail=vols)
    # a read-only root: the sockets' directory (root's default, docs/agent.md) is a volume
    t.ok(ctr.get("securityContext", {}).get("readOnlyRootFilesystem") is True and
         mounts.get("run") == "/run/gpuscope" and "emptyDir" in vols.get("run", {}),
         "kubernetes: read-only root, /run/gpuscope (the agent's sockets) an emptyDir",
         detail=mounts)
    conf_text = kinds.get("ConfigMap", {}).get("data", {}).get("agent.conf", "")
    t.ok("listen = 0.0.0.0:9400" in conf_text and "allowed_hosts = " + SVC_NAME in conf_text,
         "kubernetes: agent.conf listens on 0.0.0.0:9400, allows the Service's name",
         detail=conf_text)
    kdoc = open(os.path.join(SRC, "docs", "deploy.md")).read()
    kdoc = kdoc[kdoc.index("## Kubernetes"):]
    kblock = next(c for lang, c in re.findall(r"```(\w+)\n(.*?)```", kdoc, re.S)
                  if lang == "sh" and "openssl req -x509" in c)
    kblock = "\n".join(ln for ln in kblock.replace("\\\n", " ").splitlines()
                       if not ln.lstrip().startswith(("kubectl", "mkdir", "cd ")))
    kblock = kblock.replace("gpuscope agent --new-token", BIN + " agent --new-token")
    tmp = tempfile.mkdtemp(prefix="gs-k8s-test.")
    agent = None
    try:
        r = subprocess.run(["bash", "-euo", "pipefail", "-c", kblock], cwd=tmp,
                           capture_output=True, text=True, timeout=60)
        t.ok(r.returncode == 0 and all(os.path.exists(os.path.join(tmp, n)) for n in
                                       ("ca.pem", "tls.crt", "tls.key", "tokens", "token")),
             "kubernetes: docs/deploy.md's commands make the CA, the pair and the token",
             detail=r.stdout + r.stderr)
        token = open(os.path.join(tmp, "token")).read().strip()
        # the Secret as the kubelet lays it out: NAME -> ..data/NAME, mode 0400
        sdir = os.path.join(tmp, "secret")
        os.makedirs(os.path.join(sdir, "..2026_01_01"))
        os.symlink("..2026_01_01", os.path.join(sdir, "..data"))
        for n in ("tls.crt", "tls.key", "tokens"):
            shutil.copy(os.path.join(tmp, n), os.path.join(sdir, "..2026_01_01", n))
            os.chmod(os.path.join(sdir, "..2026_01_01", n), 0o400)
            os.symlink(os.path.join("..data", n), os.path.join(sdir, n))
        kport = free_port()
        conf = os.path.join(tmp, "agent.conf")
        with open(conf, "w") as f:
            f.write(conf_text.replace(secret_dir, sdir)
                    .replace("0.0.0.0:9400", "0.0.0.0:%d" % kport))
        r = run([BIN, "agent", "--config", conf, "--check-config"])
        t.ok(r.returncode == 0 and "listen = 0.0.0.0:%d" % kport in r.stdout,
             "kubernetes: the ConfigMap's agent.conf passes --check-config",
             detail=r.stdout + r.stderr)
        log = open(os.path.join(tmp, "agent.log"), "w")
        agent = subprocess.Popen([BIN, "agent", "--config", conf, "--data-dir",
                                  os.path.join(tmp, "data")],
                                 env=sim_env("h100x8-training.json", RUNTIME_DIRECTORY=tmp),
                                 stdout=log, stderr=subprocess.STDOUT)
        ca = os.path.join(tmp, "ca.pem")

        def get(host, tok=None):
            try:
                return tls_get(kport, ca, host, tok)
            except (OSError, ValueError, IndexError) as e:
                return None, str(e)
        up = wait_until(lambda: get("127.0.0.1", token)[0] == 200 or agent.poll() is not None,
                        timeout=20)
        st, body = get("127.0.0.1:%d" % kport, token)
        t.ok(up and agent.poll() is None and st == 200 and "gpuscope_gpu_up" in body,
             "kubernetes: the agent starts with the ConfigMap's agent.conf and the Secret's "
             "files; /metrics over HTTPS with the token, certificate checked for " + SVC_NAME,
             detail=open(os.path.join(tmp, "agent.log")).read()[-2000:])
        t.eq(get("127.0.0.1:%d" % kport)[0], 401, "kubernetes: without the token: 401")
        t.eq(get(SVC_NAME + ":9400", token)[0], 200,
             "kubernetes: Host " + SVC_NAME + " (allowed_hosts) answered")
        t.eq(get("evil.example:9400", token)[0], 421, "kubernetes: an unknown Host: 421")
    finally:
        if agent is not None:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=10)
            except subprocess.TimeoutExpired:
                reap([agent])
        shutil.rmtree(tmp, ignore_errors=True)
    sm = yaml.safe_load(open(os.path.join(KDIR, "servicemonitor.yaml")))
    ep = (sm.get("spec", {}).get("endpoints") or [{}])[0]
    svc = kinds.get("Service", {})
    t.ok(sm.get("kind") == "ServiceMonitor" and
         sm["metadata"].get("namespace") == svc.get("metadata", {}).get("namespace") and
         sm["spec"]["selector"]["matchLabels"] == svc["metadata"]["labels"] and
         ep.get("port") in [p["name"] for p in svc["spec"]["ports"]] and
         ep.get("scheme") == "https" and ep.get("honorLabels") is True and
         ep["authorization"]["credentials"] == {"name": "gpuscope-prometheus", "key": "token"} and
         ep["tlsConfig"]["ca"]["secret"] == {"name": "gpuscope-prometheus", "key": "ca.pem"} and
         ep["tlsConfig"]["serverName"] == SVC_NAME,
         "kubernetes: the ServiceMonitor selects the Service's port, HTTPS, the token and CA of "
         "the Secret gpuscope-prometheus", detail=sm)
    if promtool:
        r = run([promtool, "check", "config", "--syntax-only",
                 os.path.join(KDIR, "prometheus-scrape.yml")])
        t.ok(r.returncode == 0, "kubernetes: promtool check config prometheus-scrape.yml",
             detail=r.stdout + r.stderr)
    else:
        t.skip("kubernetes: promtool check config prometheus-scrape.yml", "promtool not installed")
    scrape = yaml.safe_load(open(os.path.join(KDIR, "prometheus-scrape.yml")))
    job = scrape["scrape_configs"][0]
    t.ok(job.get("scheme") == "https" and job["tls_config"].get("server_name") == SVC_NAME and
         job["authorization"].get("credentials_file") and
         job["dns_sd_configs"][0]["names"][0].startswith(
             kinds["Service"]["metadata"]["name"] + "." + kinds["Service"]["metadata"]["namespace"]
             + ".svc.") and kinds["Service"]["spec"].get("clusterIP") == "None",
         "kubernetes: prometheus-scrape.yml: HTTPS, the token, the headless Service's DNS name",
         detail=job)
else:
    t.skip("kubernetes: the DaemonSet manifest", "python3-yaml not installed")
    t.skip("kubernetes: the ConfigMap's agent.conf", "python3-yaml not installed")

analyze = shutil.which("systemd-analyze")
if analyze:
    tmp = tempfile.mkdtemp(prefix="gs-deploy-test.")
    try:
        text = open(UNIT).read()
        t.ok("\nExecStart=/usr/local/bin/gpuscope agent " in text, "unit: ExecStart runs the agent")
        for key in ("DynamicUser=yes", "StateDirectory=gpuscope", "ProtectSystem=strict",
                    "ProtectHome=yes", "NoNewPrivileges=yes", "PrivateTmp=yes",
                    "ReadWritePaths=", "DeviceAllow=char-nvidia-frontend",
                    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6"):
            t.ok("\n" + key in text, "unit: " + key)
        unit = os.path.join(tmp, "gpuscope-agent.service")
        with open(unit, "w") as f:
            f.write(text.replace("/usr/local/bin/gpuscope", os.path.abspath(BIN)))
        r = run([analyze, "verify", unit])
        # verify also reports problems of unrelated units on the host; only ours count.
        ours = [ln for ln in (r.stdout + r.stderr).splitlines() if "gpuscope-agent" in ln]
        t.ok(r.returncode == 0 or not ours, "systemd-analyze verify gpuscope-agent.service",
             detail=r.stdout + r.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
else:
    t.skip("systemd-analyze verify gpuscope-agent.service", "systemd-analyze not installed")
# deploy/prometheus/training-job-rules.yml and deploy/grafana/training-job.json (issue 16): the
# rules pass promtool, every panel expression parses, and every gpuscope_* name they use is a
# family the agent serves (gpuscope_gpu_*) or a per-rank family docs/metrics.md documents
# (gpuscope_run_*: served while a run goes on; tests/e2e/test_job.py evaluates them on agents).
JOB_RULES = os.path.join(DEPLOY, "prometheus", "training-job-rules.yml")
jdash = json.load(open(os.path.join(DEPLOY, "grafana", "training-job.json")))
jexprs = [tg["expr"] for p in jdash["panels"] for tg in p.get("targets", [])]
jtext = open(JOB_RULES).read() + " ".join(jexprs)
# (names of recording rules, level:metric:operation, and "gpuscope_run_*" in comments aside)
jnames = set(re.findall(r"(?<![:\w])(gpuscope_[a-z_]*[a-z])(?![\w:*])", jtext))
t.eq(sorted(n for n in jnames if n not in families and "`%s`" % n not in doc), [],
     "training job: every gpuscope_* name in its rules and dashboard is served or documented")
t.ok(jdash.get("uid") == "gpuscope-training-job" and len(jexprs) >= 12 and
     all("$job" in e for e in jexprs) and
     len({p["id"] for p in jdash["panels"]}) == len(jdash["panels"]) and
     all(p["gridPos"]["x"] + p["gridPos"]["w"] <= 24 for p in jdash["panels"]),
     "training job dashboard: uid, %d expressions each filtered by $job, unique ids, grid"
     % len(jexprs))
jtitles = " | ".join(p["title"] for p in jdash["panels"]).lower()
for want in ("ranks side by side", "step time per rank", "phase split per node", "throttle",
             "sm clock", "power", "pcie", "throughput"):
    t.ok(want in jtitles, "training job dashboard: a panel for " + want, detail=jtitles)
if promtool:
    r = run([promtool, "check", "rules", JOB_RULES])
    t.ok(r.returncode == 0 and "SUCCESS: 8 rules found" in r.stdout,
         "promtool check rules deploy/prometheus/training-job-rules.yml", detail=r.stdout + r.stderr)
    # The straggler rule in PromQL (docs/report.md, STRAGGLER): leave-one-out, so with two ranks
    # a rank 1.2x its peer is named (a median over both would read 1.09x); 1.1x is not; 1.5x of
    # a 1 ms step is under the 1 ms floor; one rank alone is never a straggler.
    def busy(job, rank, v):
        return {"series": 'gpuscope_run_step_busy_seconds{train_job="%s",rank="%d",node="n%d",'
                          'gpu="0",quantile="0.5",instance="n%d:9400",job="gpuscope"}'
                          % (job, rank, rank, rank), "values": "%rx10" % v}
    series = [busy("two", 0, 0.100), busy("two", 1, 0.120), busy("near", 0, 0.100),
              busy("near", 1, 0.110), busy("tiny", 0, 0.001), busy("tiny", 1, 0.0015),
              busy("one", 0, 0.5), busy("four", 0, 0.25), busy("four", 1, 0.25),
              busy("four", 2, 0.25), busy("four", 3, 0.375)]
    desc = re.search(r'alert: TrainingStragglerRank.*?description: "(.*?)"\n',
                     open(JOB_RULES).read(), re.S).group(1)
    ltmp = tempfile.mkdtemp(prefix="gs-rules-loo.")
    try:
        lpath = os.path.join(ltmp, "test.yml")
        with open(lpath, "w") as f:
            json.dump({"rule_files": [JOB_RULES], "evaluation_interval": "15s", "tests": [{
                "interval": "15s", "input_series": series,
                "promql_expr_test": [{
                    "expr": "sum by (train_job, rank) (train_job_rank:gpuscope_run_step_busy_"
                            "seconds:ratio_to_others{rank=~\"1|3\"} > 1.15)",
                    "eval_time": "1m",
                    "exp_samples": [{"labels": '{train_job="%s",rank="%s"}' % (j, r), "value": v}
                                    for j, r, v in (("two", "1", 1.2), ("tiny", "1", 1.5),
                                                    ("four", "3", 1.5))]}],
                "alert_rule_test": [
                    {"eval_time": "15s", "alertname": "TrainingStragglerRank", "exp_alerts": []},
                    {"eval_time": "1m", "alertname": "TrainingStragglerRank", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "train_job": j, "rank": r,
                                        "node": "n" + r, "gpu": "0", "quantile": "0.5",
                                        "instance": "n%s:9400" % r, "job": "gpuscope"},
                         "exp_annotations": {
                             "summary": "Job %s: rank %s on n%s (GPU 0) computes %s as long per "
                                        "step as the job's other ranks" % (j, r, r, x),
                             "description": desc.replace("{{ $labels.node }}", "n" + r)}}
                        for j, r, x in (("two", "1", "1.20x"), ("four", "3", "1.50x"))]}]}]},
                      f)
        r = run([promtool, "test", "rules", lpath])
    finally:
        shutil.rmtree(ltmp, ignore_errors=True)
    t.ok(r.returncode == 0, "training-job rules: leave-one-out; 2 ranks at 1.2x named after 30 s, "
         "1.1x not, 1.5x of a 1 ms step not (1 ms floor), one rank never; 4 ranks at 1.5x named",
         detail=r.stdout + r.stderr)
    tmp = tempfile.mkdtemp(prefix="gs-grafana-job.")
    try:
        rules_path = os.path.join(tmp, "panels.yml")
        with open(rules_path, "w") as f:
            f.write("groups:\n  - name: job_panels\n    rules:\n")
            for i, e in enumerate(jexprs):
                e = e.replace("$__rate_interval", "1m").replace("$job", "a|b")
                f.write("      - record: gs_job_panel_%d\n        expr: %s\n" % (i, json.dumps(e)))
        r = run([promtool, "check", "rules", rules_path])
        t.ok(r.returncode == 0 and ("SUCCESS: %d rules found" % len(jexprs)) in r.stdout,
             "training job dashboard: promtool parses all %d panel expressions" % len(jexprs),
             detail=r.stdout + r.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
else:
    t.skip("promtool check rules deploy/prometheus/training-job-rules.yml", "promtool not installed")
    t.skip("training job dashboard: promtool parses the panel expressions", "promtool not installed")
sys.exit(t.done())
