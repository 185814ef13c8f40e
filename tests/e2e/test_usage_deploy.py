"""deploy/ for GPU usage accounting (issue 27), checked by promtool with known input series.

deploy/prometheus/usage-rules.yml: `promtool check rules`, then `promtool test rules` on
counters written the way the agent's /metrics grows them (per user and GPU, one node, a minute
apart): alice holds GPU 0 (75 % busy, 300 W) and GPU 1 (idle, 100 W), bob shares GPU 0 (25 %
busy), carol held GPU 2 for 10 minutes long ago. The per-user GPU-hours, busy shares, idle-held
hours and kWh, the per-GPU shares, over 1 h and 1 d, are the figures those rates give (computed
here from the same rates, not copied from a run); carol has no share (no 0/0). The alert
GPUJobHoldsIdleGPUs fires for a job whose GPU has been idle for more than 30 minutes, not at 30,
and ends when the GPU gets work. deploy/prometheus.yml loads the file. deploy/grafana/
efficiency.json: structure, and every panel expression parsed by promtool; every family the
rules and the dashboard name is documented. A missing promtool is a TAP skip.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC  # noqa: E402

DEPLOY = os.path.join(SRC, "deploy")
RULES = os.path.join(DEPLOY, "prometheus", "usage-rules.yml")
DASH = os.path.join(DEPLOY, "grafana", "efficiency.json")

t = Tap()
promtool = shutil.which("promtool")


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


# (user, gpu) -> per-minute increments of each counter: held s, busy s, idle-held s, GiB*s, J
RATES = {
    ("alice", "0"): (60, 45, 0, 600, 18000),
    ("alice", "1"): (60, 0, 60, 60, 6000),
    ("bob", "0"): (60, 15, 0, 300, 6000),
}
COUNTERS = ("held_seconds", "busy_seconds", "idle_held_seconds", "memory_gib_seconds",
            "energy_joules")
# as Prometheus stores the agent's series: its target labels; the host name is gpuscope_info's
LABELS = 'instance="a:9400",job="gpuscope"'


def series(step=1, minutes=120):
    """The input series, one sample every step minutes (increments scaled), over minutes."""
    n = minutes // step
    out = []
    for (user, gpu), rates in RATES.items():
        for name, per_min in zip(COUNTERS, rates):
            out.append({"series": 'gpuscope_usage_%s_total{%s,gpu="%s",uuid="GPU-%s",user="%s"}'
                                  % (name, LABELS, gpu, gpu, user),
                        "values": "0+%dx%d" % (per_min * step, n)})
    # carol held GPU 2 for the first 10 minutes (busy half of it), nothing since
    for name, per_min in zip(COUNTERS, (60, 30, 0, 60, 6000)):
        out.append({"series": 'gpuscope_usage_%s_total{%s,gpu="2",uuid="GPU-2",user="carol"}'
                              % (name, LABELS),
                    "values": "0+%dx%d %dx%d" % (per_min * step, 10 // step, per_min * 10,
                                                 n - 10 // step)})
    out.append({"series": 'gpuscope_info{%s,hostname="node-a",simulated="0"}' % LABELS,
                "values": "1x%d" % n})
    # live jobs: alice's job 4242 holds GPU 0 (busy) and GPU 1 (idle from the start; busy
    # again at minute 40); bob's job 7 holds GPU 0
    job = 'gpuscope_job_gpu_%s{' + LABELS + ',job_id="%s",user="%s",gpu="%s",uuid="GPU-%s"}'
    for jid, user, gpu, idle in (("4242", "alice", "0", "0x60"), ("4242", "alice", "1",
                                                                    "0+60x40 0x20"),
                                 ("7", "bob", "0", "0x60")):
        out.append({"series": job % ("held", jid, user, gpu, gpu), "values": "1x60"})
        out.append({"series": job % ("idle_seconds", jid, user, gpu, gpu), "values": idle})
    return out


def per_user(col, scale):
    got = {}
    for (user, _), rates in RATES.items():
        got[user] = got.get(user, 0) + rates[col] * scale
    return got


def samples(rule, values, key):
    return {"expr": rule, "eval_time": EVAL, "exp_samples": [
        {"labels": "%s{%s}" % (rule, key(k)), "value": v} for k, v in sorted(values.items())]}


if promtool:
    # wired into deploy/prometheus.yml like the other rule files: promtool loads it from there
    ctmp = tempfile.mkdtemp(prefix="gs-usage-promcfg.")
    try:
        shutil.copy(os.path.join(DEPLOY, "prometheus.yml"), ctmp)
        shutil.copy(os.path.join(DEPLOY, "prometheus-rules.yml"), ctmp)
        shutil.copytree(os.path.join(DEPLOY, "prometheus"), os.path.join(ctmp, "prometheus"))
        for name in ("gpuscope.token", "gpuscope-ca.pem"):
            with open(os.path.join(ctmp, name), "w") as f:
                f.write("x\n")
        r = run([promtool, "check", "config", os.path.join(ctmp, "prometheus.yml")])
    finally:
        shutil.rmtree(ctmp, ignore_errors=True)
    t.ok(r.returncode == 0 and re.search(r"prometheus/usage-rules.yml\n\s+SUCCESS: \d+ rules",
                                         r.stdout),
         "deploy/prometheus.yml loads prometheus/usage-rules.yml", detail=r.stdout + r.stderr)
    r = run([promtool, "check", "rules", RULES])
    n_rules = len(re.findall(r"^\s+- (?:record|alert):", open(RULES).read(), re.M))
    t.ok(r.returncode == 0 and ("SUCCESS: %d rules found" % n_rules) in r.stdout,
         "promtool check rules deploy/prometheus/usage-rules.yml (%d rules)" % n_rules,
         detail=r.stdout + r.stderr)
    tests = []
    # 1 h windows on 1-minute samples; 1 d windows on 5-minute ones (the counters are linear,
    # so the figures are the same; fewer points keep promtool fast)
    for window, minutes, EVAL, step in (("1h", 60, "2h", 1), ("1d", 1440, "25h", 5)):
        held = per_user(0, minutes / 3600.0)  # GPU-hours: seconds per minute x minutes / 3600
        busy = per_user(1, minutes / 3600.0)
        idle = per_user(2, minutes / 3600.0)
        kwh = per_user(4, minutes / 3.6e6)
        share = {u: busy[u] / held[u] for u in held}
        gpu_share = {}
        for gpu in ("0", "1"):
            b = sum(rt[1] for (u, g), rt in RATES.items() if g == gpu)
            h = sum(rt[0] for (u, g), rt in RATES.items() if g == gpu)
            gpu_share[gpu] = b / h
        ukey = lambda u: 'user="%s"' % u  # noqa: E731
        held["carol"] = idle["carol"] = kwh["carol"] = 0.0  # held nothing in the window
        busy["carol"] = 0.0
        cases = [
            samples("user:gpuscope_usage_held_gpu_hours:increase" + window, held, ukey),
            samples("user:gpuscope_usage_busy_gpu_hours:increase" + window, busy, ukey),
            samples("user:gpuscope_usage_busy_share:ratio" + window, share, ukey),
            samples("user:gpuscope_usage_idle_held_gpu_hours:increase" + window, idle, ukey),
            samples("user:gpuscope_usage_energy_kwh:increase" + window, kwh, ukey),
            samples("instance_gpu:gpuscope_usage_busy_share:ratio" + window, gpu_share,
                    lambda g: 'instance="a:9400",hostname="node-a",gpu="%s",uuid="GPU-%s"'
                    % (g, g)),
        ]
        tests.append({"interval": "%dm" % step, "input_series": series(step, minutes + 70),
                      "promql_expr_test": cases})
    # the live-job rules and the alert: GPU 1 idle for 60 s x minute index
    summary = ("Job 4242 (alice) on node-a holds 1 GPU(s) idle for more than 30 min")
    desc = re.search(r'alert: GPUJobHoldsIdleGPUs.*?description: "(.*?)"\n',
                     open(RULES).read(), re.S).group(1).replace(
        "{{ $labels.job_id }}", "4242")
    alert_labels = {"severity": "warning", "job_id": "4242", "user": "alice",
                    "instance": "a:9400", "hostname": "node-a"}
    EVAL = "35m"
    tests.append({"interval": "1m", "input_series": series(), "promql_expr_test": [
        samples("job_id:gpuscope_job_gpu_held:sum", {("4242", "alice"): 2, ("7", "bob"): 1},
                lambda k: 'job_id="%s",user="%s"' % k),
        samples("job_id:gpuscope_job_gpu_idle_30m:count", {("4242", "alice"): 1},
                lambda k: 'job_id="%s",user="%s"' % k)],
        "alert_rule_test": [
            {"eval_time": "30m", "alertname": "GPUJobHoldsIdleGPUs", "exp_alerts": []},
            {"eval_time": "31m", "alertname": "GPUJobHoldsIdleGPUs", "exp_alerts": [
                {"exp_labels": alert_labels,
                 "exp_annotations": {"summary": summary, "description": desc}}]},
            {"eval_time": "45m", "alertname": "GPUJobHoldsIdleGPUs", "exp_alerts": []}]})
    tmp = tempfile.mkdtemp(prefix="gs-usage-rules.")
    try:
        path = os.path.join(tmp, "test.yml")
        with open(path, "w") as f:
            json.dump({"rule_files": [RULES], "evaluation_interval": "1m", "tests": tests}, f)
        r = run([promtool, "test", "rules", path])
        t.ok(r.returncode == 0 and "SUCCESS" in r.stdout,
             "promtool test rules: GPU-hours held and busy, busy share (per user, per GPU), "
             "idle-held hours, kWh over 1 h and 1 d; no share without holding; live jobs' GPUs",
             detail=r.stdout + r.stderr)
        t.ok(r.returncode == 0, "GPUJobHoldsIdleGPUs: not at 30 min idle, fires past 30 min, "
             "ends when the GPU gets work", detail=r.stdout + r.stderr)
        # The test can fail: a wrong expected figure is reported.
        tests[0]["promql_expr_test"][0]["exp_samples"][0]["value"] += 0.5
        with open(path, "w") as f:
            json.dump({"rule_files": [RULES], "evaluation_interval": "1m", "tests": tests}, f)
        r = run([promtool, "test", "rules", path])
        t.ok(r.returncode != 0, "promtool test rules rejects a wrong figure",
             detail=r.stdout + r.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
else:
    t.skip("deploy/prometheus.yml loads prometheus/usage-rules.yml", "promtool not installed")
    t.skip("promtool check rules deploy/prometheus/usage-rules.yml", "promtool not installed")
    t.skip("promtool test rules usage-rules.yml", "promtool not installed")

# deploy/grafana/efficiency.json: a dashboard Grafana imports; every expression filtered by the
# node and user variables and parsed by promtool (as recording rules, variables substituted).
dash = json.load(open(DASH))
tvars = {v["name"]: v for v in dash["templating"]["list"]}
t.ok(dash.get("uid") == "gpuscope-efficiency" and dash.get("title") and
     isinstance(dash.get("schemaVersion"), int) and
     tvars.get("datasource", {}).get("query") == "prometheus" and
     "hostname" in str(tvars.get("node", {}).get("query")) and
     "gpuscope_usage_held_seconds_total" in str(tvars.get("user", {}).get("query")),
     "efficiency dashboard: uid, title, datasource, node and user variables",
     detail=list(tvars))
grid = [p["title"] for p in dash["panels"]
        if not all(k in p.get("gridPos", {}) for k in "hwxy") or
        p["gridPos"]["x"] + p["gridPos"]["w"] > 24]
t.eq(grid, [], "efficiency dashboard: every panel has a gridPos within 24 columns")
t.eq(len({p["id"] for p in dash["panels"]}), len(dash["panels"]),
     "efficiency dashboard: panel ids are unique")
titles = " | ".join(p["title"] for p in dash["panels"]).lower()
for want in ("held and busy by user", "busy share by user", "idle-held gpu-hours", "energy",
             "live jobs", "idle gpus", "per gpu"):
    t.ok(want in titles, "efficiency dashboard: a panel for " + want, detail=titles)
dexprs = [tg["expr"] for p in dash["panels"] for tg in p.get("targets", [])]
t.ok(len(dexprs) >= 10 and all('hostname=~"$node"' in e and 'user=~"$user"' in e
                               for e in dexprs),
     "efficiency dashboard: %d expressions, each filtered by $node and $user" % len(dexprs),
     detail=dexprs)
# every gpuscope_* family the rules and the dashboard name is one docs/metrics.md documents
# (recording rules' own names, level:metric:operation, aside)
mdoc = open(os.path.join(SRC, "docs", "metrics.md")).read()
utext = open(RULES).read() + " ".join(dexprs)
unames = set(re.findall(r"(?<![:\w])(gpuscope_[a-z_]*[a-z])(?![\w:*])", utext))
t.ok(len(unames) >= 7 and all(re.search(r"`%s[`{]" % n, mdoc) for n in unames),
     "every gpuscope_* name of usage-rules.yml and efficiency.json is in docs/metrics.md",
     detail=sorted(n for n in unames if not re.search(r"`%s[`{]" % n, mdoc)))
SUBST = {"$__rate_interval": "1m", "$__range_s": "86400", "$__range": "1d", "$node": "a|b",
         "$user": "alice|bob"}


def substitute(e, subst=SUBST):
    for k, v in subst.items():
        e = e.replace(k, v)
    return e


if promtool:
    tmp = tempfile.mkdtemp(prefix="gs-grafana-eff.")
    try:
        path = os.path.join(tmp, "panels.yml")
        with open(path, "w") as f:
            f.write("groups:\n  - name: efficiency_panels\n    rules:\n")
            for i, e in enumerate(dexprs):
                f.write("      - record: gs_eff_panel_%d\n        expr: %s\n"
                        % (i, json.dumps(substitute(e))))
        r = run([promtool, "check", "rules", path])
        t.ok(r.returncode == 0 and ("SUCCESS: %d rules found" % len(dexprs)) in r.stdout,
             "efficiency dashboard: promtool parses all %d panel expressions" % len(dexprs),
             detail=r.stdout + r.stderr)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
else:
    t.skip("efficiency dashboard: promtool parses the panel expressions", "promtool not installed")

sys.exit(t.done())
