"""Training runs on the agent's step-record socket, end to end on nvml-sim (real clock).

A scenario of two GPUs puts the sender process (its real pid, through SIM_TRAIN_PID) on GPU 0
at 70 % utilization and a stranger on GPU 1 at 10 %. Sender processes speak SOCK_SEQPACKET
like the Python package: hello, steps with known phase times, end. Checked: the socket's mode
(0666) and its new directory's (0755); /api/v1/runs lists the running run with the sender's
SO_PEERCRED uid/pid (not what the hello claims) and a live report; after the end record the
stored report's ratios equal what was sent and its GPUs are the sender's only (GPU 0, 70 %);
the steps pages; 404/400 answers; the history.db run and step rows (Python's sqlite3); a
client sending garbage, an oversized message and a wrong version is closed without disturbing
a good client sending at the same time; a connection closed without an end record ends its
run; a sender of another uid (when root) is accepted and attributed to that uid; `kill -9` and
a restart keep the ended runs and show the interrupted one with a report rebuilt from its
stored steps (ratios and findings as sent, train_tokens and tokens/s against the steps the
script sent: history schema v6 keeps each step's tokens; `gpuscope report ID --data` has them
in its step series); two ranks of one DDP job (two sender processes,
same name, world_size 2) make one run with 2 ranks that ends with its last rank, while a
same-named world_size 1 sender gets a run of its own; a sender on no GPU whose hello announces
CUDA device 0 under CUDA_VISIBLE_DEVICES=<GPU 2's UUID prefix> gets GPU 2's figures; the gpuscope_runs_* self metrics on
/metrics count runs, records and rejections; a run made 40 days old is pruned with its steps
by the next agent (retention_runs 30 d); `--socket off` opens nothing. A third GPU runs a
0.4 s square wave (100 % for 0.1 s, else 20 %) under a second sender: its run's report reads
the driver's 100 ms samples (utilization_source "nvml_samples", max 100 %, which the 1 s
utilization mean of the snapshots never shows); run.records_dropped is 0 (none lost). The steps
carry tokens and the hello the facts MFU needs: /metrics has the live rank's
gpuscope_run_tokens_per_second and gpuscope_run_mfu (exact: the window's tokens over its wall
time, against the H100 SXM's bf16 peak), the report and the run list its mfu.
"""
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, TEST_RUNTIME_DIR, get_json, get_text as get, reap, sim_env, \
    start_agent as gs_start_agent, wait_until  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-agent-runs.")
os.chmod(tmp, 0o755)  # a sender of another uid must reach the socket below it
SOCK = os.path.join(tmp, "rundir", "sub", "agent.sock")
DATA = os.path.join(tmp, "data")

SCENARIO = {
    "scenario_version": 1,
    "templates": {"g": {
        "name": "NVIDIA H100 80GB HBM3", "architecture": "hopper",
        "memory": {"total_mib": 81559}, "pci": {"device_id": "0x2330"},
    }},
    "gpus": [
        {"template": "g", "uuid": "GPU-aaaaaaaa-0000-0000-0000-000000000000",
         "pci": {"bus": "0x18"}, "metrics": {"util_gpu_pct": 70, "power_w": 400}},
        {"template": "g", "uuid": "GPU-bbbbbbbb-0000-0000-0000-000000000000",
         "pci": {"bus": "0x2A"}, "metrics": {"util_gpu_pct": 10, "power_w": 100}},
        {"template": "g", "uuid": "GPU-cccccccc-0000-0000-0000-000000000000",
         "pci": {"bus": "0x3B"}, "sample_interval_ms": 100,
         "metrics": {"util_gpu_pct": {"square": {"period_s": 0.4, "duty": 0.25, "high": 100,
                                                 "low": 20}}, "power_w": 300}},
    ],
    "processes": [
        {"id": "trainer", "pid": {"env": "SIM_TRAIN_PID"}, "gpu": 0, "used_memory_mib": 20000},
        {"id": "other", "pid": 48212, "gpu": 1, "used_memory_mib": 1000},
        {"id": "square", "pid": {"env": "SIM_SQUARE_PID"}, "gpu": 2, "used_memory_mib": 5000},
    ],
}

# A sender: each stdin line is a JSON list of actions; "done" is printed after each line.
SENDER = r'''
import json, socket, sys, time
path = sys.argv[1]
s = None
for line in sys.stdin:
    for a in json.loads(line):
        try:
            if a == "connect":
                s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
                s.connect(path)
            elif a == "close":
                s.close()
                s = None
            elif isinstance(a, (int, float)):
                time.sleep(a)
            elif a.startswith("raw:"):
                s.send(bytes.fromhex(a[4:]))
            else:
                s.send(a.encode())
        except OSError as e:
            print("error %s" % e, flush=True)
    print("done", flush=True)
'''

MS = {"data": 50.0, "forward": 80.0, "backward": 40.0, "optimizer_step": 10.0,
      "communication": 20.0, "total_step": 150.0}
# data / (data + total_step) and communication / (data + total_step), docs/report.md
WANT_DATA_RATIO = 50.0 / 200.0
WANT_COMM_RATIO = 20.0 / 200.0


# What MFU needs (docs/report.md, TOKENS AND MFU): 1e9 parameters in bfloat16, 4096 tokens a
# step; on the scenario's H100 SXM (989.5 TFLOP/s bf16) at 4096 tokens per 200 ms of step wall
# time, gpuscope_run_mfu = 6e9 x 20480 / 989.5e12.
FACTS = {"param_count": 1000000000, "param_dtype": "bfloat16"}
TOKENS = 4096
WANT_RANK_TPS = TOKENS / 0.2
WANT_RANK_MFU = 6e9 * WANT_RANK_TPS / 989.5e12


def hello(name, claimed_pid=1, rank=0, world_size=1, devices=(0,), facts=None):
    """A hello announcing its CUDA devices (the agent attributes them: run/attrib.h)."""
    h = {"v": 1, "type": "hello", "run": name, "pid": claimed_pid, "rank": rank,
         "world_size": world_size, "framework": "torch", "devices": list(devices)}
    if facts:
        h["facts"] = facts
    return json.dumps(h)


def step(n, rank=0):
    now = time.time()
    return json.dumps({"v": 1, "type": "step", "step": n, "t0": now - 0.2, "t1": now, "rank": rank,
                       "device": 0, "samples": 8, "tokens": TOKENS, "cuda_events": True, "ms": MS,
                       "mem": {"allocated": 1 << 30, "reserved": 2 << 30}})


END = json.dumps({"v": 1, "type": "end", "train_runtime": 2.0, "train_samples": 80,
                  "train_steps": 10})


class Sender:
    def __init__(self, preexec=None, env=None):
        self.p = subprocess.Popen([sys.executable, "-c", SENDER, SOCK], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, preexec_fn=preexec, env=env)
        procs.append(self.p)
        self.pid = self.p.pid
        self.errors = []

    def do(self, *actions):
        self.p.stdin.write(json.dumps(list(actions)) + "\n")
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line or line.strip() == "done":
                return
            self.errors.append(line.strip())

    def stop(self):
        self.p.stdin.close()
        self.p.wait(timeout=5)


def start_agent(train_pid, extra=()):
    log = open(os.path.join(tmp, "agent-%d.log" % len(procs)), "w+")
    env = sim_env(os.path.join(tmp, "scenario.json"), SIM_TRAIN_PID=str(train_pid),
                  SIM_SQUARE_PID=str(square.pid))
    p, base, _ = gs_start_agent(["--data-dir", DATA, "--flush-interval", "1", "--interval",
                                 "0.25", "--socket", SOCK] + list(extra), env, procs,
                                stdout=log, stderr=subprocess.STDOUT)
    p.log = log
    return p, base


def wait_for(fn, timeout=8.0):
    return wait_until(fn, timeout)


def runs(base):
    code, doc = get_json(base + "/api/v1/runs")
    return doc.get("runs", []) if code == 200 else []


def run_named(base, name):
    return next((r for r in runs(base) if r.get("name") == name), None)


def runs_metrics(base):
    code, body = get(base + "/metrics")
    return {ln.split()[0]: float(ln.split()[1]) for ln in body.splitlines()
            if ln.startswith("gpuscope_runs_")} if code == 200 else {}


def close(a, b, eps=1e-9):
    return isinstance(a, (int, float)) and abs(a - b) <= eps


try:
    with open(os.path.join(tmp, "scenario.json"), "w") as f:
        json.dump(SCENARIO, f)
    good = Sender()
    square = Sender()  # on GPU 2, the square wave
    agent, base = start_agent(good.pid)
    ok_sock = wait_for(lambda: os.path.exists(SOCK), 5)
    t.ok(ok_sock and stat.S_ISSOCK(os.stat(SOCK).st_mode), "the agent binds its step-record socket")
    t.eq(oct(stat.S_IMODE(os.stat(SOCK).st_mode)), "0o666", "socket mode 0666")
    t.eq(oct(stat.S_IMODE(os.stat(os.path.dirname(SOCK)).st_mode)), "0o755",
         "socket directory made 0755")

    # The good client starts; a garbage client interleaves; the good one goes on.
    good.do("connect", hello("exp-a", facts=FACTS),
            *[x for n in range(1, 6) for x in (step(n), 0.15)])
    r = wait_for(lambda: (lambda x: x if x and x.get("steps") == 5 else None)(
        run_named(base, "exp-a")))
    t.ok(r is not None, "a running run is listed with its steps", detail=runs(base))
    r = r or {}
    t.eq(r.get("state"), "running", "state running before the end record")
    t.eq(r.get("pid"), good.pid, "pid is the sender's (SO_PEERCRED), not the hello's claim")
    t.eq(r.get("uid"), os.getuid(), "uid is the sender's")
    run_id = r.get("id")
    code, live = get_json("%s/api/v1/runs/%s" % (base, run_id))
    t.eq(code, 200, "a running run's report is computed live")
    t.ok(close(live.get("data_loading_time_ratio"), WANT_DATA_RATIO, 1e-6) and
         live.get("run", {}).get("state") == "running",
         "live report: data ratio as sent, run.state running",
         detail=json.dumps(live)[:600])

    # tokens/s and MFU of the live rank on /metrics (the window's tokens over its wall time)
    def run_series():
        code, body = get(base + "/metrics")
        got = {}
        for ln in body.splitlines() if code == 200 else ():
            for name in ("gpuscope_run_tokens_per_second", "gpuscope_run_mfu"):
                if ln.startswith(name + "{") and 'train_job="exp-a"' in ln:
                    got[name] = (float(ln.split()[-1]), 'gpu="0"' in ln)
        return got if len(got) == 2 else None
    ser = wait_for(run_series) or {}
    t.ok(close(ser.get("gpuscope_run_tokens_per_second", (0,))[0], WANT_RANK_TPS, 1e-3) and
         close(ser.get("gpuscope_run_mfu", (0,))[0], WANT_RANK_MFU, 1e-9) and
         ser.get("gpuscope_run_mfu", (0, False))[1],
         "/metrics: gpuscope_run_tokens_per_second 20480 and gpuscope_run_mfu = 6N x that / "
         "the H100 SXM bf16 peak, on GPU 0", detail=ser)

    bad = Sender()
    bad.do("connect", "not json", "raw:" + ("7b" * 10000),
           json.dumps({"v": 9, "type": "hello"}), json.dumps({"v": 1, "type": "step", "step": -1}),
           *(["{"] * 16), 0.3, "{")
    good.do(*[x for n in range(6, 11) for x in (step(n), 0.15)], END, 0.2, "close")
    t.ok(not good.errors, "the good client was never refused", detail=good.errors)
    t.ok(any("pipe" in e.lower() or "reset" in e.lower() for e in bad.errors),
         "the garbage client is closed by the agent (its next send fails)", detail=bad.errors)
    ended = wait_for(lambda: (lambda x: x if x and x.get("state") == "ended" else None)(
        run_named(base, "exp-a")))
    t.ok(ended is not None, "the end record ends the run", detail=runs(base))
    ended = ended or {}
    t.eq(ended.get("steps"), 10, "all 10 steps of the good client kept despite the garbage")
    t.ok(close(ended.get("data_loading_time_ratio"), WANT_DATA_RATIO, 1e-6) and
         close(ended.get("communication_time_ratio"), WANT_COMM_RATIO, 1e-6),
         "list: headline ratios equal what was sent", detail=ended)
    t.eq(len([x for x in runs(base)]), 1, "garbage created no run")
    code, mtx = get("%s/metrics" % base)
    t.ok(code == 200, "agent still serving after the garbage client")
    # good: hello + 10 steps + end = 12 valid records; bad: at least 4 refused before its close
    # (/metrics is rendered once a sampling cycle: wait for the cycle after the end)
    mv = wait_for(lambda: (lambda m: m if m.get("gpuscope_runs_active") == 0 else None)(
        runs_metrics(base)), 3) or runs_metrics(base)
    t.ok(mv.get("gpuscope_runs_started_total") == 1 and mv.get("gpuscope_runs_active") == 0 and
         mv.get("gpuscope_runs_records_received_total") == 12 and
         mv.get("gpuscope_runs_records_rejected_total", 0) >= 4 and
         mv.get("gpuscope_runs_steps_dropped_total") == 0,
         "/metrics: runs started 1, active 0, 12 records, >= 4 rejected, 0 steps dropped",
         detail=mv)

    code, rep = get_json("%s/api/v1/runs/%s" % (base, run_id))
    t.eq(code, 200, "ended run report: 200")
    t.ok(close(rep.get("data_loading_time_ratio"), WANT_DATA_RATIO, 1e-6) and
         close(rep.get("communication_time_ratio"), WANT_COMM_RATIO, 1e-6),
         "report: data and communication ratios equal what was sent",
         detail={k: rep.get(k) for k in ("data_loading_time_ratio", "communication_time_ratio")})
    ph = rep.get("phases", {}).get("forward", {})
    t.ok(close(ph.get("mean_ms", ph.get("mean")), 80.0, 1e-3), "report: forward mean 80 ms",
         detail=ph)
    t.eq((rep.get("run", {}).get("pid"), rep.get("run", {}).get("uid"),
          rep.get("run", {}).get("state"), rep.get("run", {}).get("source"),
          rep.get("run", {}).get("name")),
         (good.pid, os.getuid(), "ended", "agent", "exp-a"), "report.run: pid, uid, state, source, name")
    gpus = rep.get("gpus") or []
    t.eq([g.get("index") for g in gpus], [0], "report: only the sender's GPU (from the process list)")
    t.ok(gpus and close(gpus[0].get("utilization_avg_percent"), 70.0, 0.5) and
         gpus[0].get("utilization_source") == "nvml_samples",
         "report: GPU 0 utilization 70 % from the driver's samples", detail=gpus)
    t.eq(rep.get("run", {}).get("records_dropped"), 0, "report: run.records_dropped 0")
    t.ok(rep.get("train_tokens") == 10 * TOKENS and rep.get("peak_flops_gpu") == "H100 SXM" and
         close(rep.get("mfu"), 6e9 * (rep.get("train_tokens_per_second") or 0) / 989.5e12,
               1e-12) and close(ended.get("mfu"), rep.get("mfu"), 1e-12),
         "report and list: tokens as sent, MFU on the sender's H100 SXM",
         detail={k: rep.get(k) for k in ("train_tokens", "train_tokens_per_second", "mfu",
                                         "mfu_null_reason", "peak_flops_gpu")})

    # Sub-second utilization: the square wave's 100 % peak comes from the driver's samples.
    square.do("connect", hello("exp-square", devices=(2,)),
              *[x for n in range(1, 9) for x in (step(n), 0.2)], END, 0.2, "close")
    sq = wait_for(lambda: (lambda x: x if x and x.get("state") == "ended" else None)(
        run_named(base, "exp-square")))
    code, sqrep = get_json("%s/api/v1/runs/%s" % (base, (sq or {}).get("id")))
    sg = sqrep.get("gpus") or [{}]
    t.ok((code, [g.get("index") for g in sqrep.get("gpus") or []],
          sg[0].get("utilization_source")) == (200, [2], "nvml_samples"),
         "square wave: the run's GPU 2 figures come from the driver's samples",
         detail=json.dumps(sqrep)[:800])
    t.ok(sg[0].get("utilization_max_percent") == 100,
         "square wave: max = the pattern's 100 % peak (snapshots alone: ~40 %)", detail=sg)
    t.ok(close(sg[0].get("utilization_avg_percent"), 40.0, 8.0) and
         close(sg[0].get("utilization_sample_period_ms"), 100.0, 1.0),
         "square wave: average near 40 %, sample period the driver's 100 ms", detail=sg)
    square.stop()
    t.ok(isinstance(rep.get("findings"), list) and
         any(f.get("id", "").startswith("data") for f in rep.get("findings", [])),
         "report: findings include the data loading rule (ratio 0.25 > 0.15)",
         detail=[f.get("id") for f in rep.get("findings", [])])

    # Steps, paged (committed by the next flush: 1 s).
    time.sleep(1.5)
    code, pg = get_json("%s/api/v1/runs/%s/steps?from=3&limit=4" % (base, run_id))
    t.eq(code, 200, "steps page: 200")
    t.eq(([s.get("step") for s in pg.get("steps", [])], pg.get("total"), pg.get("next")),
         ([4, 5, 6, 7], 10, 7), "steps page from=3 limit=4: steps 4..7, total 10, next 7")
    t.ok(all(s.get("forward_ms") == 80.0 and s.get("peer_pid") == good.pid and
             s.get("data_ms") == 50.0 and s.get("tokens") == TOKENS
             for s in pg.get("steps", [])),
         "steps carry the phase times and tokens sent and the sender's pid",
         detail=pg.get("steps", [])[:1])
    code, last = get_json("%s/api/v1/runs/%s/steps?from=8" % (base, run_id))
    t.eq(([s.get("step") for s in last.get("steps", [])], last.get("next")), ([9, 10], None),
         "last steps page: next null")

    for path, want in (("/api/v1/runs/999999", 404), ("/api/v1/runs/abc", 404),
                       ("/api/v1/runs/%s/nope" % run_id, 404), ("/api/v1/runs/0", 404),
                       ("/api/v1/runs/999999/steps", 404), ("/api/v1/runs?limit=0", 400),
                       ("/api/v1/runs?limit=abc", 400), ("/api/v1/runs?from=-1", 400),
                       ("/api/v1/runs/%s/steps?limit=5000" % run_id, 400),
                       ("/api/v1/runs?x=1", 400)):
        code, doc = get_json(base + path)
        t.ok(code == want and isinstance(doc.get("error"), str),
             "%s: %d with a JSON error" % (path, want), detail=(code, doc))

    # history.db, read directly.
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(DATA, "history.db"), uri=True)
    row = db.execute("SELECT source, name, end_time IS NOT NULL,"
                     " json_extract(report, '$.data_loading_time_ratio') FROM run WHERE id = ?",
                     (run_id,)).fetchone()
    t.ok(row and row[:3] == ("agent", "exp-a", 1) and close(row[3], WANT_DATA_RATIO, 1e-6),
         "history.db run row: source agent, name, end, report ratio", detail=row)
    srow = db.execute("SELECT count(*), min(peer_pid), max(peer_pid), min(peer_uid),"
                      " sum(forward_ms) FROM step WHERE run = ?", (run_id,)).fetchone()
    t.eq(srow, (10, good.pid, good.pid, os.getuid(), 800.0),
         "history.db step rows: 10, sender pid/uid, forward times")
    db.close()

    # A connection closed without an end record ends its run too.
    c2 = Sender()
    c2.do("connect", hello("exp-closed"), step(1), step(2), 0.2, "close")
    r2 = wait_for(lambda: (lambda x: x if x and x.get("state") == "ended" else None)(
        run_named(base, "exp-closed")))
    t.ok(r2 is not None and r2.get("steps") == 2 and r2.get("pid") == c2.pid,
         "closing the connection ends the run (2 steps, its own pid)", detail=r2)

    # No hello at all: the run still belongs to the sender (SO_PEERCRED) in its report.
    c6 = Sender()
    c6.do("connect", step(1), 0.2, "close")
    r6 = wait_for(lambda: next((x for x in runs(base) if x.get("pid") == c6.pid and
                                x.get("state") == "ended"), None))
    code, rep6 = get_json("%s/api/v1/runs/%s" % (base, (r6 or {}).get("id")))
    t.eq((code, rep6.get("run", {}).get("uid"), rep6.get("run", {}).get("pid"),
          rep6.get("run", {}).get("steps_received")), (200, os.getuid(), c6.pid, 1),
         "a run without a hello: report names the sender's uid and pid")

    # DDP: two ranks of one job (same uid, name, world_size 2) are one run with 2 ranks; it
    # goes on after rank 0's end record and ends when rank 1's connection closes. A sender of
    # the same name with world_size 1 is a run of its own.
    r0, r1, solo = Sender(), Sender(), Sender()
    r0.do("connect", hello("exp-ddp", rank=0, world_size=2))
    wait_for(lambda: run_named(base, "exp-ddp"))  # rank 0's hello first: its pid names the run
    r1.do("connect", hello("exp-ddp", rank=1, world_size=2))
    solo.do("connect", hello("exp-ddp"), step(1), step(2))
    r0.do(*[step(n, 0) for n in range(1, 5)])
    r1.do(*[step(n, 1) for n in range(1, 4)])
    # rank 1's records reach the run before rank 0's end record is sent (on a loaded machine
    # the receiver may otherwise read rank 0's connection first and end the run alone)
    wait_for(lambda: any(x.get("name") == "exp-ddp" and x.get("steps") == 7
                         for x in runs(base)))
    r0.do(END, 0.3)

    def ddp_runs():
        return [x for x in runs(base) if x.get("name") == "exp-ddp"]
    dr = wait_for(lambda: (lambda xs: xs if len(xs) == 2 and
                           sorted(x.get("steps") for x in xs) == [2, 7] else None)(ddp_runs()))
    t.ok(dr is not None, "DDP: 2 ranks + a world_size 1 sender of the same name: 2 runs, "
         "7 steps (4 + 3) and 2", detail=ddp_runs())
    ddp = next((x for x in dr or [] if x.get("steps") == 7), {})
    mv = wait_for(lambda: (lambda m: m if m.get("gpuscope_runs_active") == 2 else None)(
        runs_metrics(base)), 3) or runs_metrics(base)
    t.eq(mv.get("gpuscope_runs_active"), 2.0, "/metrics: 2 runs active (DDP job + solo)")
    t.eq((ddp.get("state"), ddp.get("pid")), ("running", r0.pid),
         "DDP: still running after rank 0's end record; pid is the first rank's")
    code, drep = get_json("%s/api/v1/runs/%s" % (base, ddp.get("id")))
    t.eq((code, drep.get("ranks"), drep.get("run", {}).get("steps_received")), (200, 2, 7),
         "DDP: the live report has 2 ranks and 7 step records")
    r1.do(step(4, 1), 0.1, "close")
    solo.do(END, 0.1, "close")
    de = wait_for(lambda: (lambda xs: xs if xs and all(x.get("state") == "ended" for x in xs)
                           else None)(ddp_runs()))
    ddp = next((x for x in de or [] if x.get("id") == ddp.get("id")), {})
    t.eq((ddp.get("state"), ddp.get("steps")), ("ended", 8),
         "DDP: the run ends when its last rank's connection closes, 8 steps")
    code, drep = get_json("%s/api/v1/runs/%s" % (base, ddp.get("id")))
    t.eq((code, drep.get("ranks"), drep.get("steps")), (200, 2, 4),
         "DDP: the stored report has 2 ranks, 4 steps (the most of one rank)")
    time.sleep(1.3)  # one flush commits the steps
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(DATA, "history.db"), uri=True)
    pids = db.execute("SELECT rank, count(*), min(peer_pid), max(peer_pid) FROM step"
                      " WHERE run = ? GROUP BY rank ORDER BY rank", (ddp.get("id"),)).fetchall()
    db.close()
    t.eq(pids, [(0, 4, r0.pid, r0.pid), (1, 4, r1.pid, r1.pid)],
         "DDP: history.db steps of both ranks under one run, each with its sender's pid")
    for x in (r0, r1, solo):
        x.stop()

    # Another uid (root only): accepted and attributed to that uid.
    if os.geteuid() == 0:
        def nobody():
            os.setgid(65534)
            os.setuid(65534)
        c3 = Sender(preexec=nobody)
        c3.do("connect", hello("exp-nobody"), step(1), END, 0.2, "close")
        r3 = wait_for(lambda: (lambda x: x if x and x.get("state") == "ended" else None)(
            run_named(base, "exp-nobody")))
        t.ok(r3 is not None and r3.get("uid") == 65534 and r3.get("pid") == c3.pid,
             "a sender of another uid is accepted, attributed to uid 65534", detail=(r3, c3.errors))
    else:
        t.skip("a sender of another uid is accepted", "not root")

    # Attribution (run/attrib.h): a sender on no GPU whose hello announces CUDA device 0,
    # with CUDA_VISIBLE_DEVICES naming GPU 2 by a UUID prefix (read from its environment).
    cv = Sender(env=dict(os.environ, CUDA_VISIBLE_DEVICES="GPU-cccccccc"))
    cv.do("connect", hello("exp-cvd", devices=(0,)), step(1), 1.0, END, 0.2, "close")
    rcv = wait_for(lambda: (lambda x: x if x and x.get("state") == "ended" else None)(
        run_named(base, "exp-cvd")))
    code, crep = get_json("%s/api/v1/runs/%s" % (base, (rcv or {}).get("id")))
    t.ok((code, [g.get("index") for g in crep.get("gpus") or []]) == (200, [2]),
         "a hello's CUDA device 0 under CUDA_VISIBLE_DEVICES=GPU-cccccccc is GPU 2",
         detail=json.dumps(crep)[:600])
    cv.stop()

    # kill -9 during a run; a restart keeps the ended runs and shows the interrupted one.
    c4 = Sender()
    ksteps = [step(1), step(2), step(3)]
    c4.do("connect", hello("exp-killed"), *ksteps, 0.1)
    time.sleep(1.6)  # one flush commits the steps
    before = {x["id"]: x for x in runs(base)}
    agent.send_signal(signal.SIGKILL)
    agent.wait(timeout=5)
    c4.do("close")
    agent, base = start_agent(good.pid)
    after = {x["id"]: x for x in runs(base)}
    ea = after.get(run_id, {})
    t.ok(ea.get("state") == "ended" and ea.get("steps") == 10 and
         close(ea.get("data_loading_time_ratio"), WANT_DATA_RATIO, 1e-6),
         "after kill -9 and restart: the ended run is kept with its figures", detail=ea)
    kid = next((i for i, x in after.items() if x.get("name") == "exp-killed"), None)
    t.ok(kid is not None and after[kid].get("state") == "interrupted" and
         after[kid].get("steps") == 3,
         "the run going on at kill -9 is listed as interrupted with its 3 flushed steps",
         detail=(after, before))
    code, page = get_json(base + "/api/v1/runs?from=1&limit=2")
    ids = sorted(after, reverse=True)
    t.eq((code, page.get("total"), [x.get("id") for x in page.get("runs", [])]),
         (200, len(after), ids[1:3]), "list paging: from=1 limit=2, newest first, total")
    code, doc = get_json("%s/api/v1/runs/%s" % (base, kid))
    dro = doc.get("run", {})
    t.eq((code, dro.get("state"), dro.get("interrupted"), dro.get("steps_received"),
          dro.get("name"), doc.get("steps")),
         (200, "interrupted", True, 3, "exp-killed", 3),
         "an interrupted run's report is rebuilt at restart from its 3 stored steps")
    t.ok(close(doc.get("data_loading_time_ratio"), WANT_DATA_RATIO, 1e-6) and
         close(doc.get("communication_time_ratio"), WANT_COMM_RATIO, 1e-6) and
         close(doc.get("phases", {}).get("forward", {}).get("mean_ms"), 80.0, 1e-3) and
         any(f.get("id", "").startswith("data") for f in doc.get("findings", [])),
         "rebuilt report: ratios, forward mean as sent, and the data loading finding",
         detail=json.dumps(doc)[:800])
    # Tokens survive the restart (history schema v6, step.tokens): the script's own count over
    # the span of the steps it sent (their own t0 .. t1, as the report measures it).
    kt = [json.loads(x) for x in ksteps]
    kspan = max(x["t1"] for x in kt) - min(x["t0"] for x in kt)
    want_tokens = sum(x["tokens"] for x in kt)
    t.ok(doc.get("train_tokens") == want_tokens and
         close(doc.get("train_tokens_per_second"), want_tokens / kspan, 1e-6 * want_tokens / kspan),
         "rebuilt report: train_tokens = the %d tokens sent, tokens/s over the steps' own span"
         % want_tokens, detail=(doc.get("train_tokens"), doc.get("train_tokens_per_second"),
                                want_tokens / kspan))
    code, kpg = get_json("%s/api/v1/runs/%s/steps" % (base, kid))
    t.eq((code, [x.get("tokens") for x in kpg.get("steps", [])]), (200, [TOKENS] * 3),
         "after the restart the stored steps still carry their tokens")
    # gpuscope report ID reads the run from the agent: its step series carries the tokens
    gr = subprocess.run([BIN, "report", str(kid), "--data", "-o", "-"], capture_output=True,
                        text=True, timeout=30,
                        env=dict(os.environ, GPUSCOPE_HTTP_SOCKET=os.path.join(
                            TEST_RUNTIME_DIR, "agent.sock")))
    try:
        gsteps = json.loads(gr.stdout).get("steps") or {}
    except ValueError:
        gsteps = {}
    t.ok((gr.returncode, gsteps.get("tokens"), gsteps.get("samples")) ==
         (0, [TOKENS] * 3, [8] * 3),
         "gpuscope report ID --data: the step series has each step's tokens",
         detail=(gr.returncode, gr.stderr[-400:], gsteps))
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(DATA, "history.db"), uri=True)
    krow = db.execute("SELECT end_time IS NOT NULL, json_extract(report, '$.run.interrupted')"
                      " FROM run WHERE id = ?", (kid,)).fetchone()
    db.close()
    t.eq(krow, (1, 1), "history.db: the interrupted run now has an end time and its report")
    c5 = Sender()
    c5.do("connect", hello("exp-after"), step(1), END, 0.2, "close")
    r5 = wait_for(lambda: run_named(base, "exp-after"))
    t.ok(r5 is not None and r5.get("id", 0) > max(after), "the restarted agent takes new runs",
         detail=r5)

    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=10)
    t.eq(agent.returncode, 0, "SIGTERM: exit 0")
    t.ok(not os.path.exists(SOCK), "the socket is removed at exit")

    # Retention: exp-a made 40 days old while the agent is stopped is pruned (row and steps)
    # after the next start's first flush; the others stay (default retention_runs 30 d).
    hdb = os.path.join(DATA, "history.db")
    db = sqlite3.connect(hdb)
    db.execute("UPDATE run SET end_time = ? WHERE id = ?", (time.time() - 40 * 86400, run_id))
    db.commit()
    n_runs = db.execute("SELECT count(*) FROM run").fetchone()[0]
    db.close()

    def pruned():
        d = sqlite3.connect("file:%s?mode=ro" % hdb, uri=True)
        v = d.execute("SELECT (SELECT count(*) FROM run WHERE id = ?1),"
                      " (SELECT count(*) FROM step WHERE run = ?1), (SELECT count(*) FROM run)",
                      (run_id,)).fetchone()
        d.close()
        return v if v[:2] == (0, 0) else None
    agent, base = start_agent(good.pid, ["--socket", "off"])
    pr = wait_for(pruned, 6)
    t.eq(pr, (0, 0, n_runs - 1),
         "retention_runs: a run ended 40 d ago is pruned with its steps, the others kept")
    code, doc = get_json(base + "/api/v1/runs")
    t.ok(code == 404 and not os.path.exists(SOCK), "--socket off: no socket, /api/v1/runs 404",
         detail=(code, doc))
    agent.send_signal(signal.SIGTERM)
    agent.wait(timeout=10)
finally:
    reap(procs)
    for p in procs:
        if getattr(p, "log", None) and t.failed:
            p.log.seek(0)
            for line in p.log.read().splitlines()[-30:]:
                print("# agent: " + line)
    shutil.rmtree(tmp, ignore_errors=True)

sys.exit(t.done())
