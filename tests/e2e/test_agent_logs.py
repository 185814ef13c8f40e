"""A run's logged values (loss, learning rate: "log" records) and tags on the agent, end to end
on nvml-sim (schema v3 of history.db, docs/api.md /api/v1/runs/ID/logs).

A sender (SOCK_SEQPACKET, as the Python package speaks) sends a hello with tags, 5 steps, 20
log records (loss, learning_rate, epoch) and an end record. Checked: the run list and the run's
report carry the hello's tags; /api/v1/runs/ID/logs returns the 20 records in order with
their step, time, rank and values as sent (60 points), paged (from/limit, next) like the
steps; a live run's records are there once flushed, before its end; history.db holds them in
run_log with the run's tags in run.tags; another uid (65534, over the agent's HTTP unix
socket) gets 404 for the run's logs exactly as for a run that does not exist, while its own
run's logs are 200; bad paths and arguments are 404/400; a run that sends more than
GS_RUNS_MAX_LOG_POINTS (100,000) values keeps 100,000 and reports the rest as dropped, in the
logs page and in its stored report (run.log_points_dropped); after a kill -9 mid-run and a
restart, the interrupted run keeps its tags (list and rebuilt report) and its logged records.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import get_json, reap, sim_env, start_agent, wait_until  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-agent-logs.")
os.chmod(tmp, 0o755)  # uid 65534 must reach the sockets below it
SOCK = os.path.join(tmp, "run", "steps.sock")
HSOCK = os.path.join(tmp, "run", "agent.sock")
DATA = os.path.join(tmp, "data")
CONF = os.path.join(tmp, "agent.conf")

SCENARIO = {
    "scenario_version": 1,
    "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaaaaaa-0000-0000-0000-00000000000a",
              "pci": {"bus": "0x18", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
              "metrics": {"util_gpu_pct": 80, "power_w": 400}}],
    "processes": [{"id": "me", "pid": os.getpid(), "gpu": 0, "used_memory_mib": 2000}],
}
MS = {"data": 10.0, "forward": 80.0, "backward": 40.0, "optimizer_step": 10.0,
      "total_step": 150.0}

# A sender as another uid: each argv record is sent, then it waits for a line on stdin.
SENDER = r'''
import json, os, socket, sys
if len(sys.argv) > 2:
    os.setgid(65534)
    os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
for line in sys.stdin:
    for r in json.loads(line):
        s.send(r.encode())
    print("done", flush=True)
'''


class Sender:
    def __init__(self, as_nobody=False):
        args = [sys.executable, "-c", SENDER, SOCK] + (["nobody"] if as_nobody else [])
        self.p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        procs.append(self.p)

    def send(self, records):
        self.p.stdin.write(json.dumps([json.dumps(r) for r in records]) + "\n")
        self.p.stdin.flush()
        self.p.stdout.readline()

    def stop(self):
        self.p.stdin.close()
        self.p.wait(timeout=10)


def hello(name, tags=None):
    h = {"v": 1, "type": "hello", "run": name, "pid": 1, "rank": 0, "world_size": 1,
         "framework": "torch", "devices": [0]}
    if tags is not None:
        h["tags"] = tags
    return h


def step(n):
    now = time.time()
    return {"v": 1, "type": "step", "step": n, "t0": now - 0.15, "t1": now, "rank": 0,
            "device": 0, "samples": 8, "ms": MS}


T0 = time.time()


def log(i):
    return {"v": 1, "type": "log", "step": 5 * (i + 1), "t": T0 + i, "rank": 0,
            "values": {"loss": 2.0 - 0.05 * i, "learning_rate": 1e-4 * (i + 1),
                       "epoch": i / 20.0}}


END = {"v": 1, "type": "end", "train_steps": 5}


def run_named(base, name):
    code, doc = get_json(base + "/api/v1/runs")
    return next((r for r in doc.get("runs", []) if r.get("name") == name), None) \
        if code == 200 else None


def curl(path, user=None):
    """(status, parsed body or None) of GET path over the agent's HTTP unix socket."""
    cmd = ["curl", "-s", "-m", "5", "-w", "\n%{http_code}", "--unix-socket", HSOCK,
           "http://localhost" + path]
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/")
    body, _, code = r.stdout.decode(errors="replace").rpartition("\n")
    try:
        doc = json.loads(body)
    except ValueError:
        doc = None
    return (int(code) if code.isdigit() else 0), doc


try:
    with open(os.path.join(tmp, "scenario.json"), "w") as f:
        json.dump(SCENARIO, f)
    with open(CONF, "w") as f:
        f.write("socket = %s\nhttp_socket = %s\ndata_dir = %s\ninterval = 0.25\n"
                "flush_interval = 1\nprocess_visibility = own\n" % (SOCK, HSOCK, DATA))
    agent, base, up = start_agent(["--config", CONF], sim_env(os.path.join(tmp, "scenario.json")),
                                  procs, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t.ok(up and wait_until(lambda: os.path.exists(SOCK), 5), "the agent is up with its sockets")

    # ---- a live run: its logged records are there before its end ----
    tags = {"team": "nlp", "ablation": "no-warmup"}
    a = Sender()
    a.send([hello("curves", tags)] + [step(n) for n in range(1, 6)] +
           [log(i) for i in range(20)])
    live = wait_until(lambda: run_named(base, "curves"), 5) or {}
    t.eq((live.get("state"), live.get("tags")), ("running", tags),
         "the running run is listed with its hello's tags")
    rid = live.get("id")
    doc = wait_until(lambda: (lambda c, d: d if c == 200 and d.get("total") == 20 else None)(
        *get_json("%s/api/v1/runs/%s/logs" % (base, rid))), 5) or {}
    t.eq((doc.get("total"), doc.get("points")), (20, 60),
         "a live run's 20 log records (60 values) once flushed")
    a.send([END])
    ended = wait_until(lambda: (lambda r: r if r and r.get("state") == "ended" else None)(
        run_named(base, "curves")), 5) or {}
    t.eq((ended.get("id"), ended.get("tags")), (rid, tags), "the ended run keeps its tags")
    code, rep = get_json("%s/api/v1/runs/%s" % (base, rid))
    t.eq((code, rep.get("run", {}).get("tags")), (200, tags), "the report's run.tags")
    t.ok("log_points_dropped" not in rep.get("run", {}),
         "nothing dropped: no run.log_points_dropped in the report")

    # ---- the logs page ----
    code, doc = get_json("%s/api/v1/runs/%s/logs" % (base, rid))
    logs = doc.get("logs", []) if code == 200 else []
    t.eq((code, doc.get("id"), doc.get("total"), doc.get("points"), doc.get("dropped"),
          doc.get("from"), doc.get("limit"), doc.get("next"), len(logs)),
         (200, rid, 20, 60, 0, 0, 100, None, 20), "logs page: counts, default page, no next")
    want = [log(i) for i in range(20)]
    t.ok(all(g.get("step") == w["step"] and abs(g.get("t", 0) - w["t"]) < 1e-4 and
             g.get("rank") == 0 and set(g.get("values", {})) == set(w["values"]) and
             all(abs(g["values"][k] - v) <= 1e-12 * max(1.0, abs(v))
                 for k, v in w["values"].items())
             for g, w in zip(logs, want)) and len(logs) == 20,
         "the 20 records in order with step, t (15 digits), rank and values as sent",
         detail=logs[:2])
    code, p1 = get_json("%s/api/v1/runs/%s/logs?from=0&limit=8" % (base, rid))
    code2, p2 = get_json("%s/api/v1/runs/%s/logs?from=16&limit=8" % (base, rid))
    t.eq((code, len(p1.get("logs", [])), p1.get("next"), p1["logs"][0]["step"] if code == 200
          else None, code2, [x["step"] for x in p2.get("logs", [])], p2.get("next")),
         (200, 8, 8, 5, 200, [85, 90, 95, 100], None), "paged: from, limit, next")
    code, _ = get_json("%s/api/v1/runs/%s/logsx" % (base, rid))
    t.eq(code, 404, "/api/v1/runs/ID/logsx is 404")
    code, _ = get_json("%s/api/v1/runs/%s/logs?limit=0" % (base, rid))
    t.eq(code, 400, "limit=0 is 400")
    code, miss = get_json("%s/api/v1/runs/999999/logs" % base)
    t.eq((code, miss.get("error")), (404, "no run 999999"), "an unknown run's logs are 404")

    # ---- history.db ----
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(DATA, "history.db"), uri=True)
    rows = db.execute("SELECT count(*), count(DISTINCT seq), min(step), max(step) FROM run_log"
                      " WHERE run = ?", (rid,)).fetchone()
    ver = db.execute("PRAGMA user_version").fetchone()[0]
    rtags = db.execute("SELECT tags FROM run WHERE id = ?", (rid,)).fetchone()[0]
    db.close()
    t.eq((ver, rows, json.loads(rtags or "null")), (6, (60, 20, 5.0, 100.0), tags),
         "history.db (v6; run_log and tags since v3): 60 run_log rows of 20 records, the tags")

    # ---- another uid: its own run is visible, ours is 404 like a missing one ----
    if os.geteuid() == 0 and shutil.which("runuser") and shutil.which("curl"):
        b = Sender(as_nobody=True)
        b.send([hello("nobody-run")] + [log(i) for i in range(3)] + [END])
        bid = (wait_until(lambda: (lambda r: r if r and r.get("state") == "ended" else None)(
            run_named(base, "nobody-run")), 5) or {}).get("id")
        time.sleep(1.5)  # the next flush
        c_own, d_own = curl("/api/v1/runs/%s/logs" % bid, "nobody")
        c_other, d_other = curl("/api/v1/runs/%s/logs" % rid, "nobody")
        c_miss, d_miss = curl("/api/v1/runs/999999/logs", "nobody")
        c_root, d_root = curl("/api/v1/runs/%s/logs" % rid)
        t.eq((c_own, (d_own or {}).get("total")), (200, 3), "uid 65534 reads its own run's logs")
        t.eq((c_other, (d_other or {}).get("error")), (404, "no run %s" % rid),
             "another uid's run's logs are 404 ...")
        t.eq((c_miss, (d_miss or {}).get("error")), (404, "no run 999999"),
             "... exactly as a run that does not exist")
        t.eq((c_root, (d_root or {}).get("total")), (200, 20),
             "root (over the unix socket) sees them")
        b.stop()
    else:
        for what in ("own", "other", "missing", "root"):
            t.skip("another uid's view of the logs (%s)" % what, "not root or no runuser/curl")

    # ---- the bound: 100,000 values a run, the rest dropped and counted ----
    c = Sender()
    keys = ["k%02d" % k for k in range(32)]
    c.send([hello("many")])
    sent = 0
    for chunk in range(32):  # 3200 records of 32 values, paced under the flush buffer
        batch = []
        for j in range(100):
            i = chunk * 100 + j
            batch.append({"v": 1, "type": "log", "step": i, "t": T0 + i,
                          "values": {k: float(i) for k in keys}})
        c.send(batch)
        sent += 100 * 32
        time.sleep(0.3)
    c.send([END])
    cid = (wait_until(lambda: (lambda r: r if r and r.get("state") == "ended" else None)(
        run_named(base, "many")), 10) or {}).get("id")
    time.sleep(1.5)
    code, d = get_json("%s/api/v1/runs/%s/logs?from=3120&limit=1000" % (base, cid))
    t.eq((code, d.get("points"), d.get("total"), d.get("dropped"), len(d.get("logs", [])),
          (d.get("logs") or [{}])[-1].get("step")),
         (200, 100000, 3125, sent - 100000, 5, 3124),
         "a run keeps 100,000 values; the other 2,400 are counted as dropped")
    code, rep = get_json("%s/api/v1/runs/%s" % (base, cid))
    t.eq(rep.get("run", {}).get("log_points_dropped"), sent - 100000,
         "the stored report says how many were dropped")
    a.stop()
    c.stop()

    # ---- kill -9 during a run: after the restart its logs and tags are still there ----
    d = Sender()
    d.send([hello("killed", {"k": "v"})] + [step(n) for n in range(1, 3)] +
           [log(i) for i in range(5)])
    kid = (wait_until(lambda: run_named(base, "killed"), 5) or {}).get("id")
    wait_until(lambda: get_json("%s/api/v1/runs/%s/logs" % (base, kid))[1].get("total") == 5, 5)
    agent.kill()
    agent.wait(timeout=10)
    d.p.kill()
    agent, base, up = start_agent(["--config", CONF],
                                  sim_env(os.path.join(tmp, "scenario.json")), procs,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    k = wait_until(lambda: run_named(base, "killed"), 5) or {}
    code, rep = get_json("%s/api/v1/runs/%s" % (base, kid))
    code2, d2 = get_json("%s/api/v1/runs/%s/logs" % (base, kid))
    t.eq((k.get("state"), k.get("tags"), code, rep.get("run", {}).get("tags"), code2,
          d2.get("total")), ("interrupted", {"k": "v"}, 200, {"k": "v"}, 200, 5),
         "kill -9 mid-run: the interrupted run keeps its tags (list, rebuilt report) and logs")
finally:
    reap(procs)
    shutil.rmtree(tmp, ignore_errors=True)
t.done()
