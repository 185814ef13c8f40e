"""deploy/ checked by the tools that read it: `promtool check rules` on prometheus-rules.yml,
`promtool check config` on prometheus.yml (which loads the rules too), and `systemd-analyze
verify` on gpuscope-agent.service (its ExecStart pointed at the built binary, since verify
wants the command to exist). Every gpuscope_* name in the rules must be a family the agent
serves on nvml-sim (h100x8-training), and every throttle reason they match one docs/metrics.md
lists. A missing tool is a TAP skip.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN, SIM  # noqa: E402

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
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVML_SIM")}
    env.update(GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_TIME="10",
               NVML_SIM_SCENARIO=os.path.join(SRC, "sim", "scenarios", "h100x8-training.json"))
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:%d" % port], env=env,
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
    return set(re.findall(r"^# TYPE (\S+) ", body, re.M))


promtool = shutil.which("promtool")
if promtool:
    r = run([promtool, "check", "rules", RULES])
    t.ok(r.returncode == 0, "promtool check rules deploy/prometheus-rules.yml",
         detail=r.stdout + r.stderr)
    r = run([promtool, "check", "config", CONFIG])
    t.ok(r.returncode == 0 and "prometheus-rules.yml" in r.stdout,
         "promtool check config deploy/prometheus.yml (with its rule file)",
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
sys.exit(t.done())
