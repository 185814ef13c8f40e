"""GPU usage accounting end to end (issue 27): real users, real processes, nvml-sim, the agent.

Three unix users made for the test (useradd; a TAP skip when not root) each run a real
process (sleep) started as that user, whose pid nvml-sim places on a GPU for a window of the
scenario's timeline (start_s, exit_s; NVML_SIM_EPOCH shares the timeline with this script):

  GPU 0 at 90 %, 400 W: gsu_ann (SM 60 %, 20000 MiB, SLURM_JOB_ID=4241) for t in [1, 16),
        gsu_ben (SM 30 %, 10000 MiB, no job) for [1, 11): they share it, then ann alone;
  GPU 1 at 0 %, 60 W:   gsu_cat (0 %, 5000 MiB, SLURM_JOB_ID=4242) for [2, 16): she idles;
  GPU 2 at 50 %:        a training process of this script's user for [1, 16), which sends a
        hello to the agent's step socket (a gpuscope run, no Slurm job): its job is the run id.

The truth, from the windows: ann held 15 s, busy 10 x 0.9 x 2/3 + 5 x 0.9 = 10.5 s, energy
10 x 400 x 2/3 + 5 x 400 = 4666.7 J; ben held 10 s, busy 10 x 0.9 x 1/3 = 3 s, energy
1333.3 J; cat held 14 s, idle 14 s, energy 840 J. Checked, within 2 %: /api/v1/usage by user, by job
(the Slurm job from each process's environment, the run id of the training process) and by
gpu, and `gpuscope usage --csv`; the
live /metrics series while the windows are open (gpuscope_job_gpu_held for both jobs,
gpuscope_job_gpu_idle_seconds of cat's idle job growing, none for ben who has no job); ben,
asking over the unix socket as himself (setpriv), sees his own row only, in the API and in
`gpuscope usage`; after a restart of the agent on the same data directory (SIGTERM: the current
minute is written at shutdown) the answer is the same, and with process_visibility = none
ben sees no row. Everything started is stopped, the
users removed.
"""
import csv
import io
import json
import os
import pwd
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, TempUsers, clean_up_at_exit, get_json, get_text, sim_env, start_agent, \
    stop_agent, wait_until  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-agent-usage.")
os.chmod(tmp, 0o755)  # the users reach the agent's socket in it
SOCK = os.path.join(tmp, "agent.sock")
STEPS = os.path.join(tmp, "steps.sock")
DATA = os.path.join(tmp, "data")
USERS = ["gsu_ann", "gsu_ben", "gsu_cat"]
# The figures' error is at most one cycle at each end of a window (0.1 s here: 1 % of the shortest, 10 s).
# Under ThreadSanitizer (build-tsan sets TSAN_OPTIONS) the agent's cycles run several times
# slower and overrun, so a cycle there spans up to ~0.3 s: 5 %. That build checks for races.
TOL = 0.05 if os.environ.get("TSAN_OPTIONS") else 0.02

if os.geteuid() != 0:
    t.skip("usage accounting with real users", "needs root (useradd, setpriv)")
    t.done()
    sys.exit(0)

users = TempUsers(USERS)
clean_up_at_exit(procs, [tmp], users)
if any(users.add_user(u, "-N", "-s", "/bin/sh") for u in USERS):
    t.skip("usage accounting with real users", "useradd failed")
    t.done()
    sys.exit(0)
uid = {u: pwd.getpwnam(u).pw_uid for u in USERS}
gid = {u: pwd.getpwnam(u).pw_gid for u in USERS}


def as_user(user, args):
    return ["setpriv", "--reuid=%d" % uid[user], "--regid=%d" % gid[user], "--clear-groups",
            "--"] + args


def start_holder(user, job=None):
    env = {"PATH": "/usr/bin:/bin"}
    if job:
        env["SLURM_JOB_ID"] = job
    p = subprocess.Popen(as_user(user, ["sleep", "120"]), env=env)
    procs.append(p)
    return p


ann, ben, cat = start_holder("gsu_ann", "4241"), start_holder("gsu_ben"), \
    start_holder("gsu_cat", "4242")
# The training process: a hello on the agent's step socket once it is there, then it waits.
SENDER = r'''
import json, os, socket, sys, time
t0 = time.time()
while not os.path.exists(sys.argv[1]) and time.time() - t0 < 30:
    time.sleep(0.02)
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
s.send(json.dumps({"v": 1, "type": "hello", "run": "usage-run", "pid": os.getpid(), "rank": 0,
                   "world_size": 1, "devices": []}).encode())
time.sleep(120)
'''
trainer = subprocess.Popen([sys.executable, "-c", SENDER, STEPS])
procs.append(trainer)

G = {"name": "NVIDIA H100 80GB HBM3", "architecture": "hopper", "memory": {"total_mib": 81559},
     "pci": {"device_id": "0x2330"},
     "power": {"default_limit_w": 700, "limit_w": 700, "enforced_limit_w": 700}}
SCENARIO = {
    "scenario_version": 1,
    "templates": {"g": G},
    "gpus": [
        {"template": "g", "uuid": "GPU-aaaaaaaa-0000-0000-0000-0000000000a0",
         "pci": {"bus": "0x18"}, "metrics": {"util_gpu_pct": 90, "power_w": 400}},
        {"template": "g", "uuid": "GPU-aaaaaaaa-0000-0000-0000-0000000000a1",
         "pci": {"bus": "0x2A"}, "metrics": {"util_gpu_pct": 0, "power_w": 60}},
        {"template": "g", "uuid": "GPU-aaaaaaaa-0000-0000-0000-0000000000a2",
         "pci": {"bus": "0x3A"}, "metrics": {"util_gpu_pct": 50, "power_w": 300}},
    ],
    "processes": [
        {"id": "ann", "pid": {"env": "P_ANN"}, "gpu": 0, "used_memory_mib": 20000,
         "sm_util_pct": 60, "start_s": 1, "exit_s": 16},
        {"id": "ben", "pid": {"env": "P_BEN"}, "gpu": 0, "used_memory_mib": 10000,
         "sm_util_pct": 30, "start_s": 1, "exit_s": 11},
        {"id": "cat", "pid": {"env": "P_CAT"}, "gpu": 1, "used_memory_mib": 5000,
         "sm_util_pct": 0, "start_s": 2, "exit_s": 16},
        {"id": "run", "pid": {"env": "P_RUN"}, "gpu": 2, "used_memory_mib": 3000,
         "sm_util_pct": 50, "start_s": 1, "exit_s": 16},
    ],
}
TRUTH = {  # user: held s, busy s, idle s, energy J, GiB-s, peak bytes
    "gsu_ann": (15, 10 * 0.9 * 2 / 3 + 5 * 0.9, 0, 10 * 400 * 2 / 3 + 5 * 400,
                15 * 20000 / 1024, 20000 * 2**20),
    "gsu_ben": (10, 10 * 0.9 / 3, 0, 10 * 400 / 3, 10 * 10000 / 1024, 10000 * 2**20),
    "gsu_cat": (14, 0, 14, 14 * 60, 14 * 5000 / 1024, 5000 * 2**20),
}
scen = os.path.join(tmp, "scenario.json")
with open(scen, "w") as f:
    json.dump(SCENARIO, f)
epoch = time.time() + 1.0  # t = 0 a second from now: the agent is up before any window opens
env = sim_env(scen, P_ANN=str(ann.pid), P_BEN=str(ben.pid), P_CAT=str(cat.pid),
              P_RUN=str(trainer.pid),
              NVML_SIM_EPOCH="%.3f" % epoch)
AGENT_ARGS = ["--data-dir", DATA, "--interval", "0.1", "--socket", STEPS, "--http-socket", SOCK,
              "--flush-interval", "1"]


def sim_t():
    return time.time() - epoch


def close(got, want, abs_tol=0.0):
    return got is not None and abs(got - want) <= max(abs(want) * TOL, abs_tol)


def usage(base, **q):
    qs = "&".join("%s=%s" % kv for kv in sorted(q.items()))
    code, doc = get_json(base + "/api/v1/usage?from=0" + ("&" + qs if qs else ""))
    return code, doc or {}


def by_key(doc):
    return {r.get("key"): r for r in doc.get("rows", [])}


def check_truth(rows, what):
    bad = []
    for u, (held, busy, idle, joules, gibs, peak) in TRUTH.items():
        r = rows.get(u) or {}
        got = (r.get("held_gpu_hours", 0) * 3600, r.get("busy_gpu_hours", 0) * 3600,
               r.get("idle_held_hours", 0) * 3600, r.get("energy_kwh", 0) * 3.6e6,
               r.get("memory_gib_hours", 0) * 3600, r.get("peak_memory_bytes"))
        want = (held, busy, idle, joules, gibs, peak)
        print("# %s: held %.3f/%g s, busy %.3f/%g s, idle %.3f/%g s, energy %.1f/%.1f J"
              % (u, got[0], held, got[1], busy, got[2], idle, got[3], joules), flush=True)
        if not all(close(g, w, 0.05) for g, w in zip(got, want)):
            bad.append((u, [round(x, 3) for x in got], [round(x, 3) for x in want]))
    t.ok(not bad, what, bad)


def metric_lines(base, prefix):
    _, body = get_text(base + "/metrics")
    return [ln for ln in body.splitlines() if ln.startswith(prefix)]


def value_of(lines, *needles):
    for ln in lines:
        if all(n in ln for n in needles):
            return float(ln.rsplit(" ", 1)[1])
    return None


p, base, up = start_agent(AGENT_ARGS, env, procs)
try:
    t.ok(up, "the agent answers /healthz")
    # ---- while the windows are open: live jobs on /metrics ----
    wait_until(lambda: sim_t() > 6.0, 15, 0.05)
    held = metric_lines(base, "gpuscope_job_gpu_held{")
    t.ok(value_of(held, 'job_id="4241"', 'user="gsu_ann"', 'gpu="0"') == 1 and
         value_of(held, 'job_id="4242"', 'user="gsu_cat"', 'gpu="1"') == 1 and
         not [ln for ln in held if "gsu_ben" in ln],
         "/metrics: gpuscope_job_gpu_held for ann's and cat's Slurm jobs (from SLURM_JOB_ID), "
         "none for ben (no job)", held)
    idle_s = value_of(metric_lines(base, "gpuscope_job_gpu_idle_seconds{"), 'job_id="4242"')
    busy_idle = value_of(metric_lines(base, "gpuscope_job_gpu_idle_seconds{"), 'job_id="4241"')
    t.ok(idle_s is not None and abs(idle_s - (sim_t() - 2)) < 0.6 and busy_idle == 0,
         "gpuscope_job_gpu_idle_seconds: cat's idle job counts its held time (%.2f s, "
         "expected %.2f s), ann's busy job 0" % (idle_s or -1, sim_t() - 2))
    t.ok(value_of(metric_lines(base, "gpuscope_usage_held_seconds_total{"), 'user="gsu_ben"',
                  'gpu="0"') is not None,
         "gpuscope_usage_held_seconds_total{gpu,uuid,user} for ben")

    # ---- after the windows: the figures against the truth ----
    wait_until(lambda: sim_t() > 16.6, 25, 0.05)
    code, doc = usage(base)
    rows = by_key(doc)
    t.eq(code, 200, "/api/v1/usage answers 200")
    check_truth(rows, "/api/v1/usage by user: held, busy, idle-held, energy, memory and peak "
                      "of ann, ben (sharing GPU 0) and cat (idle on GPU 1) within 2 % of the "
                      "scenario's truth")
    t.ok(rows.get("gsu_ann", {}).get("uid") == uid["gsu_ann"] and
         close(rows.get("gsu_ann", {}).get("busy_share", 0), TRUTH["gsu_ann"][1] / 15),
         "ann's row: her uid and busy share", rows.get("gsu_ann"))
    code, doc = usage(base, by="job")
    jobs = {(r.get("job"), r.get("user")): r for r in doc.get("rows", [])}
    t.ok(close(jobs.get(("4241", "gsu_ann"), {}).get("held_gpu_hours", 0) * 3600, 15) and
         close(jobs.get(("4242", "gsu_cat"), {}).get("idle_held_hours", 0) * 3600, 14) and
         close(jobs.get((None, "gsu_ben"), {}).get("held_gpu_hours", 0) * 3600, 10),
         "by=job: Slurm jobs 4241 (ann) and 4242 (cat) from the processes' SLURM_JOB_ID; ben's "
         "row has no job", sorted(map(str, jobs)))
    _, runs = get_json(base + "/api/v1/runs")
    rid = [str(r.get("id")) for r in (runs or {}).get("runs", []) if r.get("name") == "usage-run"]
    me = pwd.getpwuid(os.geteuid()).pw_name
    t.ok(rid and close(jobs.get((rid[0], me), {}).get("held_gpu_hours", 0) * 3600, 15) and
         close(jobs.get((rid[0], me), {}).get("busy_gpu_hours", 0) * 3600, 7.5),
         "by=job: the training process's job is its gpuscope run id (%s), 15 s held, 7.5 s busy"
         % (rid[0] if rid else "?"), sorted(map(str, jobs)))
    code, doc = usage(base, by="gpu")
    gpus = by_key(doc)
    t.ok(close(gpus.get("0", {}).get("held_gpu_hours", 0) * 3600, 25) and
         close(gpus.get("0", {}).get("busy_gpu_hours", 0) * 3600, 0.9 * 15) and
         gpus.get("0", {}).get("uuid") == "GPU-aaaaaaaa-0000-0000-0000-0000000000a0" and
         close(gpus.get("1", {}).get("idle_held_hours", 0) * 3600, 14),
         "by=gpu: GPU 0 held 25 s by two users, busy 0.9 x 15 s; GPU 1 idle-held 14 s",
         {k: (v.get("held_gpu_hours"), v.get("busy_gpu_hours")) for k, v in gpus.items()})
    code, doc = usage(base, job="4242")
    t.ok([r.get("key") for r in doc.get("rows", [])] == ["gsu_cat"], "&job=4242: cat's row only")
    code, doc = usage(base, by="team")
    t.ok(code == 400 and doc.get("error", "").startswith("by: 'team'"), "by=team is a 400", doc)

    # ---- the CLI ----
    envc = dict(os.environ, GPUSCOPE_HTTP_SOCKET=SOCK, NO_COLOR="1")
    r = subprocess.run([BIN, "usage", "--csv", "--since", "1h"], env=envc, capture_output=True,
                       text=True, timeout=20)
    crow = {x["key"]: x for x in csv.DictReader(io.StringIO(r.stdout))}
    t.ok(r.returncode == 0 and all(close(float(crow.get(u, {}).get("held_gpu_hours") or 0) * 3600,
                                         TRUTH[u][0]) for u in TRUTH) and
         close(float(crow.get("gsu_cat", {}).get("idle_held_hours") or 0) * 3600, 14),
         "gpuscope usage --csv: each user's held hours within 2 % of the truth, cat's idle-held",
         r.stdout + r.stderr)
    r = subprocess.run([BIN, "usage", "--since", "1h"], env=envc, capture_output=True, text=True,
                       timeout=20)
    lines = r.stdout.splitlines()
    t.ok(r.returncode == 0 and lines and lines[0].startswith("USER") and "GPU-H" in lines[0] and
         "kWh" in lines[0] and any(ln.startswith("gsu_ann ") for ln in lines) and
         "\033[" not in r.stdout and lines[-1].startswith("total: "),
         "gpuscope usage: a table with units (GPU-H, kWh), a row per user, the totals; no colour "
         "with NO_COLOR", r.stdout + r.stderr)

    # ---- another user sees only their own rows ----
    envb = {"PATH": "/usr/bin:/bin", "GPUSCOPE_HTTP_SOCKET": SOCK, "NO_COLOR": "1",
            "HOME": "/"}
    r = subprocess.run(as_user("gsu_ben", [BIN, "usage", "--json", "--since", "1h"]), env=envb,
                       capture_output=True, text=True, timeout=20)
    try:
        bdoc = json.loads(r.stdout)
    except ValueError:
        bdoc = {}
    t.ok(r.returncode == 0 and [x.get("key") for x in bdoc.get("rows", [])] == ["gsu_ben"] and
         close(bdoc["rows"][0]["held_gpu_hours"] * 3600, 10),
         "ben, as himself over the unix socket (SO_PEERCRED): only his own row, 10 s held",
         r.stdout[:600] + r.stderr)
    r = subprocess.run(as_user("gsu_ben", [BIN, "usage", "--by", "gpu", "--since", "1h"]),
                       env=envb, capture_output=True, text=True, timeout=20)
    t.ok(r.returncode == 0 and "gsu_ann" not in r.stdout and
         [ln.split()[0] for ln in r.stdout.splitlines()
          if ln[:1].isdigit() and "row" not in ln] == ["0"],
         "ben's --by gpu: one GPU (his), nothing of ann's", r.stdout + r.stderr)

    # ---- a restart keeps every figure ----
    before = by_key(usage(base)[1])
    stop_agent(p)
    # (restarted with process_visibility = none: the admin's answer is unchanged, see below)
    p, base, up = start_agent(AGENT_ARGS + ["--process-visibility", "none"], env, procs)
    after = by_key(usage(base)[1])
    t.ok(up and all(close(after.get(u, {}).get("held_gpu_hours", -1),
                          before[u]["held_gpu_hours"]) and
                    close(after.get(u, {}).get("energy_kwh", -1), before[u]["energy_kwh"])
                    for u in TRUTH),
         "after an agent restart the stored rows give the same figures (held, energy)",
         {u: (before.get(u, {}).get("held_gpu_hours"), after.get(u, {}).get("held_gpu_hours"))
          for u in TRUTH})
    r = subprocess.run(as_user("gsu_ben", [BIN, "usage", "--json", "--since", "1h"]), env=envb,
                       capture_output=True, text=True, timeout=20)
    t.ok(r.returncode == 0 and json.loads(r.stdout or "{}").get("rows") == [],
         "process_visibility = none: ben sees no row at all (not the rows of unknown holders)",
         r.stdout[:400] + r.stderr)
    import sqlite3
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(DATA, "history.db"), uri=True)
    n = db.execute("SELECT count(*), count(DISTINCT uid) FROM usage WHERE res = 60").fetchone()
    db.close()
    t.ok(n[0] >= 4 and n[1] == 4,
         "history.db's usage table has the minute rows of the 4 holders (3 users and ours)",
         n)
finally:
    if p.poll() is None:
        stop_agent(p)
t.done()
