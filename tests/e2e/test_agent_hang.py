"""The agent's training_hang alert end to end, on nvml-sim (real clock).

Two GPUs: GPU 0 idle (0 % at 60 W, a stuck job waiting on the host), GPU 1 busy for real
(98 % at 600 W, e.g. a long evaluation). Two sender processes (their real pids on GPU 0 and
GPU 1 through the scenario) speak the step protocol: a hello, 8 steps 50 ms apart, then
nothing while their connections stay open. The agent runs with training_hang_after = 2,
training_hang_min = 1s and the rule's for cut to 0 s. Checked: /api/v1/alerts shows
training_hang firing (critical) on GPU 0 only, a busy GPU's stalled rank is no hang; /metrics
counts it in gpuscope_alerts_firing{severity="critical"}; the rank stepping again resolves it;
`training_hang_after = 0.5` is refused with the key's line. Everything started is stopped.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, clean_up, get_json, get_text as get, sim_env, start_agent, \
    wait_until  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-agent-hang.")
SOCK = os.path.join(tmp, "steps.sock")

SCENARIO = {
    "scenario_version": 1,
    "templates": {"g": {
        "name": "NVIDIA H100 80GB HBM3", "architecture": "hopper",
        "memory": {"total_mib": 81559}, "pci": {"device_id": "0x2330"},
        "power": {"default_limit_w": 700, "limit_w": 700, "enforced_limit_w": 700},
    }},
    "gpus": [
        {"template": "g", "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000001",
         "pci": {"bus": "0x18"}, "metrics": {"util_gpu_pct": 0, "power_w": 60}},
        {"template": "g", "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000001",
         "pci": {"bus": "0x2A"}, "metrics": {"util_gpu_pct": 98, "power_w": 600}},
    ],
    "processes": [
        {"id": "stuck", "pid": {"env": "SIM_STUCK_PID"}, "gpu": 0, "used_memory_mib": 20000},
        {"id": "busy", "pid": {"env": "SIM_BUSY_PID"}, "gpu": 1, "used_memory_mib": 20000},
    ],
}

# Each stdin line: "steps N" sends N steps 50 ms apart (after a hello the first time).
SENDER = r'''
import json, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
name, device = sys.argv[2], int(sys.argv[3])
n = 0
for line in sys.stdin:
    if n == 0:
        s.connect(sys.argv[1])
        s.send(json.dumps({"v": 1, "type": "hello", "run": name, "pid": 1, "rank": 0,
                           "world_size": 1, "devices": [device]}).encode())
    for _ in range(int(line.split()[1])):
        n += 1
        now = time.time()
        s.send(json.dumps({"v": 1, "type": "step", "step": n, "t0": now - 0.05, "t1": now,
                           "rank": 0, "device": device, "samples": 8,
                           "ms": {"data": 10.0, "total_step": 40.0}}).encode())
        time.sleep(0.05)
    print("done", flush=True)
'''


class Sender:
    def __init__(self, name, device):
        self.p = subprocess.Popen([sys.executable, "-c", SENDER, SOCK, name, str(device)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(self.p)

    def steps(self, n):
        self.p.stdin.write("steps %d\n" % n)
        self.p.stdin.flush()
        return self.p.stdout.readline().strip() == "done"


def hang_alerts(base):
    code, doc = get_json(base + "/api/v1/alerts")
    return [a for a in (doc or {}).get("alerts", []) if a.get("rule") == "training_hang"]


def rank_gpu(base, job):
    """The gpu label of the job's gpuscope_run_last_step_seconds series."""
    for ln in get(base + "/metrics")[1].splitlines():
        if ln.startswith("gpuscope_run_last_step_seconds{") and 'train_job="%s"' % job in ln:
            return ln.split('gpu="')[1].split('"')[0] if 'gpu="' in ln else None
    return None


def firing_critical(base):
    _, body = get(base + "/metrics")
    for ln in body.splitlines():
        if ln.startswith("gpuscope_alerts_firing{") and 'severity="critical"' in ln:
            return float(ln.split()[-1])
    return None


try:
    stuck, busy = Sender("stuck-job", 0), Sender("eval-job", 1)
    scen = os.path.join(tmp, "scenario.json")
    with open(scen, "w") as f:
        json.dump(SCENARIO, f)
    conf = os.path.join(tmp, "agent.conf")
    with open(conf, "w") as f:
        f.write("training_hang_after = 2\ntraining_hang_min = 1s\n"
                "[alert training_hang]\nfor = 0s\n")
    env = sim_env(scen, SIM_STUCK_PID=str(stuck.p.pid), SIM_BUSY_PID=str(busy.p.pid))
    p, base, _ = start_agent(["--config", conf, "--data-dir", os.path.join(tmp, "data"),
                              "--history", "off", "--interval", "0.25", "--socket", SOCK],
                             env, procs)
    t.ok(wait_until(lambda: os.path.exists(SOCK), 5), "the step socket is there")
    t.ok(stuck.steps(8) and busy.steps(8), "both senders sent a hello and 8 steps")
    t.eq(hang_alerts(base), [], "no training_hang while the ranks step")
    t.ok(wait_until(lambda: rank_gpu(base, "stuck-job") == "0" and
                    rank_gpu(base, "eval-job") == "1", 5),
         "the agent samples and puts each rank on its GPU (gpu label 0 and 1)")
    hit = wait_until(lambda: [a for a in hang_alerts(base) if a.get("state") == "firing"], 10)
    t.ok(hit and len(hit) == 1 and hit[0].get("gpu") == 0 and
         hit[0].get("severity") == "critical",
         "training_hang fires on the idle GPU 0 of the stalled rank, critical", hang_alerts(base))
    time.sleep(1.0)
    t.ok(all(a.get("gpu") != 1 for a in hang_alerts(base)),
         "GPU 1's rank stalled too, but its GPU is busy at full power: no hang",
         hang_alerts(base))
    t.ok((firing_critical(base) or 0) >= 1, "gpuscope_alerts_firing counts it (critical)")
    stuck.steps(2)
    gone = wait_until(lambda: [a for a in hang_alerts(base) if a.get("state") == "resolved"], 5)
    t.ok(gone and gone[0].get("gpu") == 0, "a new step resolves it", hang_alerts(base))

    bad = os.path.join(tmp, "bad.conf")
    with open(bad, "w") as f:
        f.write("# hang\ntraining_hang_after = 0.5\n")
    r = subprocess.run([BIN, "agent", "--config", bad,
                        "--check-config"], capture_output=True, text=True, timeout=20,
                       env=dict(os.environ, NO_COLOR="1"))
    t.ok(r.returncode != 0 and "bad.conf:2" in r.stderr and "training_hang_after" in r.stderr,
         "training_hang_after below 1 is refused with file:line", (r.returncode, r.stderr))
finally:
    clean_up(procs, [tmp])
t.done()
