"""The agent's training_hang alert end to end, on nvml-sim (real clock).

Two GPUs: GPU 0 idle (0 % at 60 W, a stuck job waiting on the host), GPU 1 busy for real
(98 % at 600 W, e.g. a long evaluation). Two sender processes (their real pids on GPU 0 and
GPU 1 through the scenario) speak the step protocol: a hello, 8 steps 50 ms apart, then
nothing while their connections stay open. The agent runs with training_hang_after = 2,
training_hang_min = 1s and the rule's for cut to 0 s. Checked: /api/v1/alerts shows
training_hang firing (critical) on GPU 0 only, a busy GPU's stalled rank is no hang; /metrics
counts it in gpuscope_alerts_firing{severity="critical"}; the rank stepping again resolves it;
`training_hang_after = 0.5` is refused with the key's line. A third sender, a CPU job (no
device, on no GPU), stalls the same way: training_hang fires at node level (gpu null) without
any GPU reading of it, and /api/v1/runs shows both stalled runs "stalled" with how long, the
busy GPU's rank too (stalled is the hang rule alone; the alert adds the GPU's state). A
fourth sender that hangs after its second step (before the ring's 5 steps), its process idle,
is "stalled" too after training_hang_min: the watchdog's floor rule, from its hello.

One rule (src/run/hang.h): a job under `gpuscope run --hang-after 2 --hang-min 1` (a Python
loop of 64 steps 10 ms apart through the package, then no step for 4 s, its GPU idle) whose
watchdog calls it hung (hang-N-stacks.txt, the report's hangs) is a stalled rank to an
agent with the same settings: its training_hang fires on the rank's GPU during the stall. The
rank's pid is on GPU 0 of the agent's scenario, so the job waits for the agent before its first
step and then sends its records to it too (GPUSCOPE_RUN_AGENT_SOCKET, as gpuscope run sets it
when an agent is there). Everything started is stopped.
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
from gsenv import BIN, SIM, TEST_RUNTIME_DIR, clean_up, get_json, get_text as get, sim_env, \
    start_agent, wait_until  # noqa: E402

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
                           "world_size": 1,
                           "devices": [device] if device >= 0 else []}).encode())
    for _ in range(int(line.split()[1])):
        n += 1
        now = time.time()
        rec = {"v": 1, "type": "step", "step": n, "t0": now - 0.05, "t1": now,
               "rank": 0, "samples": 8, "ms": {"data": 10.0, "total_step": 40.0}}
        if device >= 0:
            rec["device"] = device
        s.send(json.dumps(rec).encode())
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


# CMD of the gpuscope run check: writes its pid, waits for the go file (the agent is up), then
# 64 steps (two batches of the package's 32) and a 4 s stall with its connections open.
JOB = r'''
import os, sys, time
pidfile, gofile, agent = sys.argv[1:4]
with open(pidfile + ".tmp", "w") as f:
    f.write(str(os.getpid()))
os.rename(pidfile + ".tmp", pidfile)
t0 = time.time()
while not os.path.exists(gofile):
    if time.time() - t0 > 30:
        sys.exit(3)
    time.sleep(0.02)
os.environ["GPUSCOPE_RUN_AGENT_SOCKET"] = agent
import gpuscope
gpuscope.init(rank=0, world_size=1, local_rank=0, run_name="watched-job")
for _ in range(64):
    with gpuscope.step():
        time.sleep(0.01)
time.sleep(4)
gpuscope.finish()
'''


def one_gpu(pid_env):
    """GPU 0 idle (0 % at 60 W) with the process whose pid is in pid_env."""
    return {"scenario_version": 1, "templates": SCENARIO["templates"],
            "gpus": [SCENARIO["gpus"][0]],
            "processes": [{"id": "job", "pid": {"env": pid_env}, "gpu": 0,
                           "used_memory_mib": 20000}]}


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
    stuck, busy, cpu = Sender("stuck-job", 0), Sender("eval-job", 1), Sender("cpu-job", -1)
    scen = os.path.join(tmp, "scenario.json")
    with open(scen, "w") as f:
        json.dump(SCENARIO, f)
    conf = os.path.join(tmp, "agent.conf")
    with open(conf, "w") as f:
        f.write("training_hang_after = 2\ntraining_hang_min = 1s\n"
                "[alert training_hang]\nfor = 0s\n")
    env = sim_env(scen, SIM_STUCK_PID=str(stuck.p.pid), SIM_BUSY_PID=str(busy.p.pid))
    # history on: the runs keep their ids (the one gpuscope run prints below) after they end
    p, base, _ = start_agent(["--config", conf, "--data-dir", os.path.join(tmp, "data"),
                              "--interval", "0.25", "--socket", SOCK], env, procs)
    t.ok(wait_until(lambda: os.path.exists(SOCK), 5), "the step socket is there")
    t.ok(stuck.steps(8) and busy.steps(8) and cpu.steps(8),
         "the three senders sent a hello and 8 steps")
    t.eq(hang_alerts(base), [], "no training_hang while the ranks step")
    t.ok(wait_until(lambda: rank_gpu(base, "stuck-job") == "0" and
                    rank_gpu(base, "eval-job") == "1", 5),
         "the agent samples and puts each rank on its GPU (gpu label 0 and 1)")
    hit = wait_until(lambda: [a for a in hang_alerts(base) if a.get("state") == "firing" and
                              a.get("gpu") is not None], 10)
    t.ok(hit and len(hit) == 1 and hit[0].get("gpu") == 0 and
         hit[0].get("severity") == "critical",
         "training_hang fires on the idle GPU 0 of the stalled rank, critical", hang_alerts(base))
    time.sleep(1.0)
    t.ok(all(a.get("gpu") != 1 for a in hang_alerts(base)),
         "GPU 1's rank stalled too, but its GPU is busy at full power: no hang",
         hang_alerts(base))
    t.ok((firing_critical(base) or 0) >= 1, "gpuscope_alerts_firing counts it (critical)")
    node = wait_until(lambda: [a for a in hang_alerts(base) if a.get("state") == "firing" and
                               a.get("gpu") is None], 5) or []
    t.ok(len(node) == 1 and node[0].get("severity") == "critical",
         "the CPU job's stalled rank (no GPU): training_hang fires at node level", hang_alerts(base))
    code, doc = get_json(base + "/api/v1/runs")
    runs = {r.get("name"): r for r in (doc or {}).get("runs", [])}
    t.ok(all(runs.get(n, {}).get("stalled") is True and
             (runs[n].get("stalled_seconds") or 0) >= 1 for n in ("stuck-job", "cpu-job",
                                                                 "eval-job")),
         "/api/v1/runs: the stalled runs are stalled, with seconds without a step",
         json.dumps(doc)[:1500])
    stuck.steps(2)
    gone = wait_until(lambda: [a for a in hang_alerts(base) if a.get("state") == "resolved"], 5)
    t.ok(gone and gone[0].get("gpu") == 0, "a new step resolves it", hang_alerts(base))
    code, doc = get_json(base + "/api/v1/runs")
    runs = {r.get("name"): r for r in (doc or {}).get("runs", [])}
    t.ok(runs.get("stuck-job", {}).get("stalled") is False and
         runs["stuck-job"].get("stalled_seconds") is None,
         "/api/v1/runs: stepping again, the run is no longer stalled", json.dumps(doc)[:800])

    # a hang at step 2: the rule's floor (no step, no CPU in the rank's process tree)
    early = Sender("early-job", -1)
    t0 = time.monotonic()
    t.ok(early.steps(2), "a fourth sender sent a hello and 2 steps")

    def early_run():
        code, doc = get_json(base + "/api/v1/runs")
        runs = {r.get("name"): r for r in (doc or {}).get("runs", [])}
        return runs.get("early-job", {})
    t1, now_run = time.monotonic(), early_run()
    t.ok(now_run.get("stalled") is False or time.monotonic() - t1 >= 1.0,
         "/api/v1/runs: 2 steps, not stalled yet (under training_hang_min since the last)",
         now_run)
    hit = wait_until(lambda: early_run().get("stalled") is True, 8)
    t.ok(hit and time.monotonic() - t0 >= 1.0 and (early_run().get("stalled_seconds") or 0) >= 1,
         "/api/v1/runs: a rank that hangs at step 2 with its process idle is stalled after "
         "training_hang_min (1 s), before its fifth step", early_run())

    # gpuscope run under this agent prints the id the agent keeps its run as
    idjob = ("import time, gpuscope\n"
             "gpuscope.init(rank=0, world_size=1, local_rank=0, run_name='id-job')\n"
             "for _ in range(3):\n    with gpuscope.step():\n        time.sleep(0.01)\n"
             "time.sleep(3)\ngpuscope.finish()\n")
    r = subprocess.run([BIN, "run", "--out", os.path.join(tmp, "idrun"), "--", sys.executable,
                        "-c", idjob], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, GPUSCOPE_AGENT_SOCKET=SOCK, NO_COLOR="1",
                                GPUSCOPE_HTTP_SOCKET=os.path.join(TEST_RUNTIME_DIR, "agent.sock"),
                                GPUSCOPE_NVML_LIBRARY=os.path.join(tmp, "no-nvml.so")))
    code, doc = get_json(base + "/api/v1/runs")
    ids = [x.get("id") for x in (doc or {}).get("runs", []) if x.get("name") == "id-job"]
    t.ok(r.returncode == 0 and len(ids) == 1 and
         "the node's agent keeps this run as run %d (gpuscope report %d" % (ids[0], ids[0])
         in r.stderr, "gpuscope run prints the agent's run id",
         (ids, [(x.get("id"), x.get("name"), x.get("pid")) for x in (doc or {}).get("runs", [])],
          r.stderr[-1500:]))

    bad = os.path.join(tmp, "bad.conf")
    with open(bad, "w") as f:
        f.write("# hang\ntraining_hang_after = 0.5\n")
    r = subprocess.run([BIN, "agent", "--config", bad,
                        "--check-config"], capture_output=True, text=True, timeout=20,
                       env=dict(os.environ, NO_COLOR="1"))
    t.ok(r.returncode != 0 and "bad.conf:2" in r.stderr and "training_hang_after" in r.stderr,
         "training_hang_after below 1 is refused with file:line", (r.returncode, r.stderr))

    # ---- the watchdog of gpuscope run and the agent: one rule, the same settings ----
    job_scen, agent_scen = os.path.join(tmp, "job.json"), os.path.join(tmp, "agent-job.json")
    with open(job_scen, "w") as f:
        json.dump(one_gpu("GPUSCOPE_RUN_CHILD_PID"), f)
    with open(agent_scen, "w") as f:
        json.dump(one_gpu("SIM_JOB_PID"), f)
    pidfile, gofile = os.path.join(tmp, "job.pid"), os.path.join(tmp, "job.go")
    sock2, out = os.path.join(tmp, "steps2.sock"), os.path.join(tmp, "run")
    run_err = open(os.path.join(tmp, "run.err"), "w+")
    run = subprocess.Popen([BIN, "run", "--no-agent", "--out", out, "--interval", "0.2",
                            "--hang-after", "2", "--hang-min", "1", "--", sys.executable,
                            "-c", JOB, pidfile, gofile, sock2],
                           env=dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM,
                                    NVML_SIM_SCENARIO=job_scen, NO_COLOR="1"),
                           stdout=subprocess.DEVNULL, stderr=run_err)
    procs.append(run)
    t.ok(wait_until(lambda: os.path.exists(pidfile), 20), "gpuscope run started the job")
    with open(pidfile) as f:
        job_pid = f.read().strip()
    p2, base2, _ = start_agent(["--config", conf, "--data-dir", os.path.join(tmp, "data2"),
                                "--history", "off", "--interval", "0.25", "--socket", sock2],
                               sim_env(agent_scen, SIM_JOB_PID=job_pid), procs)
    t.ok(wait_until(lambda: os.path.exists(sock2), 5), "the second agent's step socket is there")
    open(gofile, "w").close()
    hit = wait_until(lambda: [a for a in hang_alerts(base2) if a.get("state") == "firing"], 15)
    t.ok(hit and hit[0].get("gpu") == 0,
         "the stalled job's training_hang fires on its GPU 0 (training_hang_after = 2, "
         "training_hang_min = 1s)", hang_alerts(base2))
    try:
        run.wait(timeout=60)
    except subprocess.TimeoutExpired:
        pass
    run_err.seek(0)
    err = run_err.read()
    run_err.close()
    try:
        with open(os.path.join(out, "metrics_report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = {}
    # Before its first step the job waits for the go file without using CPU: with
    # --hang-min 1 that wait is a hang too when the agent took over a second to start (the
    # rule before the fifth step, docs/run.md); the stall after the 64 steps is the one both
    # call hung.
    hangs = rep.get("hangs") or []
    after = [h for h in hangs if h.get("steps_before") == 64]
    before = [h for h in hangs if h.get("steps_before") == 0 and h.get("ended_at")]
    t.ok(run.returncode == 0 and len(after) == 1 and len(after) + len(before) == len(hangs) and
         (rep.get("stacks") or {}).get("hangs") == len(hangs) and
         os.path.exists(os.path.join(out, "hang-%d-stacks.txt" % after[0]["number"])),
         "gpuscope run's watchdog called the same job hung once after its steps "
         "(--hang-after 2 --hang-min 1)",
         (run.returncode, json.dumps(hangs)[:800], err[-1500:]))
finally:
    clean_up(procs, [tmp])
t.done()
