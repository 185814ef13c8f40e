"""The visibility policy with two real unix users, end to end on nvml-sim (docs/security.md).

As root, the test creates users gsvis_a and gsvis_b (and group gsvis_adm, B a member) with
useradd; each runs a sleeping process (setpriv, so the pid is the sleeper's) whose command
line carries a marker, and a scenario maps A's pid to GPU 0 and B's to GPU 1 (GPU 2 idle).
The agent runs as root with an HTTP unix socket. Checked, with process_visibility = own:
- as A over the unix socket (curl --unix-socket, run by runuser): /api/v1/processes shows A's
  process in full and none of B's (pid, user, command absent), B's counted with its memory
  summed under hidden_processes; the snapshot document the same per GPU;
- as B the mirror image; as root both in full, on the socket and on TCP;
- as A over loopback TCP (uid from /proc/net/tcp) the same answer as on the socket;
- as A, `gpuscope --json` (once and in watch mode), the text view and `gpuscope query` read
  the socket ($GPUSCOPE_HTTP_SOCKET) and show the same filtered view; `--no-agent` reads NVML (nvml-sim)
  directly, where no policy applies;
- after SIGHUP with gpu_visibility = used: A sees GPU 0 only, in the snapshot, on /metrics
  and in history (?gpu=1 is 404, ?gpu=0 200); root still sees three GPUs;
- after SIGHUP with admin_group = gsvis_adm: B (a member) sees A's process in full;
- with a low http_rate, A's socket requests hit 429 while B's still pass (per-uid buckets);
- runs sent to the agent's step-record socket by both users (B, B, B, A, B, B): A's
  /api/v1/runs counts and pages A's run only (total 1, hidden 5; a page after it is empty),
  B's pages hold B's runs (from = 2, limit = 2: B's 3rd and 2nd), another user's run and its
  steps are 404, root lists all six.
The users, the group and every process are removed at the end, also on failure. Not root:
one TAP skip line.
"""
import json
import os
import signal
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, TempUsers, clean_up_at_exit, free_port, http_get, sim_env, \
    wait_until  # noqa: E402

t = Tap()
USERS = ("gsvis_a", "gsvis_b")
GROUP = "gsvis_adm"
MIB = 1024 * 1024

if os.geteuid() != 0:
    t.skip("two real unix users see what the policy lets them", "not root: useradd needs root")
    sys.exit(t.done())
for tool in ("useradd", "userdel", "groupadd", "groupdel", "runuser", "setpriv", "curl"):
    if not shutil.which(tool):
        t.skip("two real unix users see what the policy lets them", "%s not installed" % tool)
        sys.exit(t.done())

procs = []
tmp = tempfile.mkdtemp(prefix="gs-visibility.")
os.chmod(tmp, 0o755)  # the users must reach the socket below it
SOCK = os.path.join(tmp, "run", "agent.sock")
CONF = os.path.join(tmp, "agent.conf")
STEPS_SOCK = os.path.join(tmp, "run", "steps.sock")


users = TempUsers(USERS, [GROUP])  # left over from a killed run: removed now
clean_up_at_exit(procs, [tmp], users)  # also on meson's timeout

rc = users.add_group(GROUP)
rc |= users.add_user(USERS[0], "-N", "-s", "/bin/sh")
rc |= users.add_user(USERS[1], "-N", "-s", "/bin/sh", "-G", GROUP)
if rc != 0:
    t.skip("two real unix users see what the policy lets them", "useradd/groupadd failed")
    sys.exit(t.done())
UID = {u: int(subprocess.check_output(["id", "-u", u]).decode()) for u in USERS}


def sleeper(user, marker):
    """A process of user whose pid is the sleeper's own (setpriv execs)."""
    p = subprocess.Popen(["setpriv", "--reuid=" + user, "--regid=users", "--init-groups",
                          sys.executable, "-c", "import time; time.sleep(600)", marker],
                         stdin=subprocess.DEVNULL, cwd="/")
    procs.append(p)
    return p


pa = sleeper(USERS[0], "mark-a-visible")
pb = sleeper(USERS[1], "secret-b-hidden")

SCENARIO = {
    "scenario_version": 1,
    "templates": {"g": {"name": "NVIDIA H100 80GB HBM3", "architecture": "hopper",
                        "memory": {"total_mib": 81559}, "pci": {"device_id": "0x2330"}}},
    "gpus": [
        {"template": "g", "uuid": "GPU-%d0000000-0000-0000-0000-000000000000" % i,
         "pci": {"bus": "0x%02X" % (0x18 + i)}, "metrics": {"util_gpu_pct": 10 + 30 * i}}
        for i in range(3)
    ],
    "processes": [
        {"id": "a", "pid": {"env": "GSVIS_A_PID"}, "gpu": 0, "used_memory_mib": 1000},
        {"id": "b", "pid": {"env": "GSVIS_B_PID"}, "gpu": 1, "used_memory_mib": 3000},
    ],
}
with open(os.path.join(tmp, "scenario.json"), "w") as f:
    json.dump(SCENARIO, f)


def write_conf(**keys):
    base = {"process_visibility": "own", "gpu_visibility": "all", "http_socket": SOCK,
            "socket": STEPS_SOCK, "interval": "0.25", "flush_interval": "1",
            "data_dir": os.path.join(tmp, "data")}
    base.update(keys)
    with open(CONF, "w") as f:
        f.write("".join("%s = %s\n" % kv for kv in base.items()))


def curl(path, user=None, tcp=None):
    """(status, body) of GET path over the unix socket (or TCP base tcp), as user or root."""
    cmd = ["curl", "-s", "-m", "5", "-w", "\n%{http_code}"]
    cmd += ["http://127.0.0.1" + path] if tcp is None else [tcp + path]
    if tcp is None:
        cmd[1:1] = ["--unix-socket", SOCK]
    if user:
        cmd = ["runuser", "-u", user, "--"] + cmd
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/")
    out = r.stdout.decode(errors="replace")
    body, _, code = out.rpartition("\n")
    return (int(code) if code.isdigit() else 0), body


def curl_json(path, user=None, tcp=None):
    code, body = curl(path, user, tcp)
    try:
        return code, json.loads(body), body
    except ValueError:
        return code, None, body


def wait_for(fn, timeout=8.0):
    return wait_until(fn, timeout)


write_conf()
port = free_port()
BASE = "http://127.0.0.1:%d" % port
log = open(os.path.join(tmp, "agent.log"), "w+")
env = sim_env(os.path.join(tmp, "scenario.json"), GSVIS_A_PID=str(pa.pid),
              GSVIS_B_PID=str(pb.pid))
agent = subprocess.Popen([BIN, "agent", "--config", CONF, "--listen", "127.0.0.1:%d" % port],
                         env=env, stdout=log, stderr=subprocess.STDOUT)
procs.append(agent)


def agent_log():
    log.flush()
    log.seek(0)
    return log.read()


def both_seen():
    c, d, _ = curl_json("/api/v1/processes")
    return c == 200 and d and len(d.get("processes", [])) == 2 and \
        all(p.get("user") for p in d["processes"])


up = wait_for(lambda: os.path.exists(SOCK) and both_seen(), 10)
t.ok(up, "the agent serves the unix socket and sees both users' processes", detail=agent_log())
if not up:
    sys.exit(t.done())
mode = os.stat(SOCK).st_mode & 0o777
t.eq(oct(mode), oct(0o666), "the HTTP unix socket is mode 0666")
t.eq(oct(os.stat(os.path.dirname(SOCK)).st_mode & 0o777), oct(0o755),
     "its directory is made 0755")

# ---- process_visibility = own, gpu_visibility = all ----
code, doc, text = curl_json("/api/v1/processes", USERS[0])
t.eq(code, 200, "user A reaches /api/v1/processes on the unix socket")
doc = doc or {}
plist = doc.get("processes", [])
t.eq([(p.get("pid"), p.get("user"), p.get("gpu")) for p in plist],
     [(pa.pid, USERS[0], 0)], "A sees exactly its own process, with its user and GPU")
t.ok(plist and "mark-a-visible" in (plist[0].get("command") or ""),
     "A's own command line is shown in full", detail=text)
t.ok(str(pb.pid) not in text and "secret-b-hidden" not in text and USERS[1] not in text,
     "nothing of B's process (pid, command, user) is in A's answer", detail=text)
hidden = doc.get("hidden_processes", [])
t.eq([(h.get("gpu"), h.get("count"), h.get("gpu_memory")) for h in hidden],
     [(1, 1, 3000 * MIB)], "B's process is counted on GPU 1 with its memory summed")

code, snap, text = curl_json("/api/v1/snapshot", USERS[0])
gpus = (snap or {}).get("gpus", [])
t.eq([g.get("index") for g in gpus], [0, 1, 2], "gpu_visibility = all: A sees the three GPUs")
t.eq([[p.get("pid") for p in g.get("processes", [])] for g in gpus], [[pa.pid], [], []],
     "the snapshot lists only A's process")
t.eq([g.get("hidden_processes", {}).get("count") for g in gpus], [0, 1, 0],
     "the snapshot counts B's hidden process on GPU 1")
t.ok("secret-b-hidden" not in text and str(pb.pid) not in text,
     "B's pid and command are absent from A's snapshot")

code, doc, text = curl_json("/api/v1/processes", USERS[1])
t.eq(sorted((p.get("pid"), p.get("user")) for p in (doc or {}).get("processes", [])),
     [(pb.pid, USERS[1])], "B sees its own process only")
t.ok("mark-a-visible" not in text and str(pa.pid) not in text, "and nothing of A's")

code, doc, _ = curl_json("/api/v1/processes")
t.eq(sorted((p.get("pid"), p.get("user")) for p in (doc or {}).get("processes", [])),
     sorted([(pa.pid, USERS[0]), (pb.pid, USERS[1])]), "root sees both on the unix socket")
t.eq((doc or {}).get("hidden_processes", "absent"), "absent",
     "root's answer is the unfiltered document")
code, _, body = http_get(BASE + "/api/v1/processes")
t.ok(code == 200 and str(pa.pid) in body and "secret-b-hidden" in body,
     "root sees both over TCP")

# Both answers from one sampling cycle (the same query_time): two requests can straddle a cycle
# on a loaded machine, and a process's cpu_ratio is null at its first sighting.
for _ in range(20):
    code, doc_tcp, text = curl_json("/api/v1/processes", USERS[0], tcp=BASE)
    code_u, doc_unix, _ = curl_json("/api/v1/processes", USERS[0])
    if (doc_tcp or {}).get("query_time_unix") == (doc_unix or {}).get("query_time_unix"):
        break
strip = (lambda d: (d or {}).get("processes"), lambda d: (d or {}).get("hidden_processes"))
t.ok(code == 200 and all(f(doc_tcp) == f(doc_unix) for f in strip),
     "A over loopback TCP gets what A gets on the unix socket",
     detail="tcp: %s\nunix: %s" % (doc_tcp, doc_unix))

# ---- the clients: `gpuscope` reads the agent's socket, --no-agent reads NVML ----
def gpuscope(user, *args, **env):
    cmd = ["runuser", "-u", user, "--", "env"] + ["%s=%s" % kv for kv in env.items()] + \
        [BIN] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/", timeout=30)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


rc, out, errtext = gpuscope(USERS[0], "--json", GPUSCOPE_HTTP_SOCKET=SOCK)
try:
    qdoc = json.loads(out)
except ValueError:
    qdoc = {}
t.eq([[p.get("pid") for p in g.get("processes", [])] for g in qdoc.get("gpus", [])],
     [[pa.pid], [], []], "A's `gpuscope --json` through the agent lists only A's process",
     )
t.eq([g.get("hidden_processes", {}).get("gpu_memory") for g in qdoc.get("gpus", [])],
     [0, 3000 * MIB, 0], "and carries the agent's hidden_processes summary")
t.ok("secret-b-hidden" not in out and str(pb.pid) not in out, "B's details are absent",
     detail=out[:300] + errtext)
rc, out, errtext = gpuscope(USERS[0], "--no-color", "-a", GPUSCOPE_HTTP_SOCKET=SOCK)
t.ok(rc == 0 and "[1 process of other users, " in out and str(pa.pid) in out and
     str(pb.pid) not in out and "hidden/0" not in out,
     "A's text view through the agent: its process, B's as \"1 process of other users, X\"",
     detail=out + errtext)
rc, out, errtext = gpuscope(USERS[0], "--no-color", "-a", "-f", GPUSCOPE_HTTP_SOCKET=SOCK)
t.ok(rc == 0 and not any(ln.split("(")[0].strip().endswith(" 0") for ln in out.splitlines()
                         if "\u2500" in ln),
     "-f through the agent: no made-up pid-0 line for the hidden process", detail=out)
r = subprocess.run(["runuser", "-u", USERS[0], "--", "env", "GPUSCOPE_HTTP_SOCKET=" + SOCK,
                    "timeout", "-s", "INT", "1.6", BIN, "--json", "-i", "0.3"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/", timeout=30)
frames = []
for line in r.stdout.decode(errors="replace").splitlines():
    try:
        frames.append([p.get("pid") for g in json.loads(line).get("gpus", [])
                       for p in g.get("processes", [])])
    except ValueError:
        frames.append(None)
t.ok(len(frames) >= 3 and all(f == [pa.pid] for f in frames),
     "watch mode through the agent: every frame shows A's process only",
     detail="%r\n%s" % (frames, r.stderr.decode(errors="replace")))
rc, out, errtext = gpuscope(USERS[0], "query", "--query-compute-apps=pid,used_memory",
                            "--format=csv,noheader,nounits", GPUSCOPE_HTTP_SOCKET=SOCK)
t.eq((rc, out.strip()), (0, "%d, 1000" % pa.pid),
     "A's `gpuscope query --query-compute-apps` through the agent: A's process only")
direct = dict(sim_env(os.path.join(tmp, "scenario.json"), GSVIS_A_PID=str(pa.pid),
                      GSVIS_B_PID=str(pb.pid)))
direct = {k: direct[k] for k in direct if k.startswith(("NVML_SIM", "GPUSCOPE_NVML", "GSVIS"))}
rc, out, errtext = gpuscope(USERS[0], "--json", "--no-agent", GPUSCOPE_HTTP_SOCKET=SOCK,
                            **direct)
t.ok(rc == 0 and str(pb.pid) in out,
     "--no-agent reads NVML directly, where no policy applies (B's pid is listed)",
     detail=out[:300] + errtext)

# ---- runs: a user's own, counted and paged after the filter ----
SEND_RUN = r"""
import json, socket, sys, time
ms = {"data": 50.0, "forward": 80.0, "backward": 40.0, "optimizer_step": 10.0,
      "communication": 20.0, "total_step": 150.0}
now = time.time()
recs = [{"v": 1, "type": "hello", "run": sys.argv[2], "pid": 1, "rank": 0, "world_size": 1,
         "framework": "torch", "devices": [0]},
        {"v": 1, "type": "step", "step": 1, "t0": now - 0.2, "t1": now, "rank": 0, "device": 0,
         "samples": 8, "cuda_events": True, "ms": ms},
        {"v": 1, "type": "end", "train_runtime": 0.2, "train_samples": 8, "train_steps": 1}]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(sys.argv[1])
for r in recs:
    s.send(json.dumps(r).encode())
s.close()
"""


def send_run(user, name):
    subprocess.run(["setpriv", "--reuid=" + user, "--regid=users", "--init-groups",
                    sys.executable, "-c", SEND_RUN, STEPS_SOCK, name],
                   stdin=subprocess.DEVNULL, cwd="/", timeout=20)


RUN_ORDER = [(USERS[1], "b-1"), (USERS[1], "b-2"), (USERS[1], "b-3"), (USERS[0], "a-1"),
             (USERS[1], "b-4"), (USERS[1], "b-5")]
for i, (user, name) in enumerate(RUN_ORDER):
    send_run(user, name)
    # one after the other, so that the run ids follow this order
    wait_for(lambda: len([r for r in (curl_json("/api/v1/runs")[1] or {}).get("runs", [])
                          if r.get("state") == "ended"]) == i + 1, 5)


def run_page(user, query):
    code, doc, _ = curl_json("/api/v1/runs" + query, user)
    doc = doc or {}
    return (code, doc.get("total"), [r.get("name") for r in doc.get("runs", [])],
            doc.get("hidden"))


code, doc, _ = curl_json("/api/v1/runs")
all_runs = {r.get("name"): r for r in (doc or {}).get("runs", [])}
t.eq(([r.get("name") for r in (doc or {}).get("runs", [])], (doc or {}).get("total")),
     (["b-5", "b-4", "a-1", "b-3", "b-2", "b-1"], 6), "root lists the six runs, newest first")
t.eq((all_runs.get("a-1", {}).get("uid"), all_runs.get("b-1", {}).get("uid")),
     (UID[USERS[0]], UID[USERS[1]]), "each run is its sender's (SO_PEERCRED uid)")
t.eq(run_page(USERS[0], "?limit=2"), (200, 1, ["a-1"], 5),
     "A's first page holds A's run: total and paging count A's runs only, hidden 5")
t.eq(run_page(USERS[0], "?from=1&limit=2"), (200, 1, [], 5), "A's second page is empty")
t.eq(run_page(USERS[1], "?limit=2"), (200, 5, ["b-5", "b-4"], 1),
     "B's first page: B's two newest runs, total 5, hidden 1")
t.eq(run_page(USERS[1], "?from=2&limit=2"), (200, 5, ["b-3", "b-2"], 1),
     "B's page from 2: B's 3rd and 2nd runs (A's run takes no place in B's pages)")
a_id, b_id = all_runs.get("a-1", {}).get("id"), all_runs.get("b-1", {}).get("id")
t.eq([curl("/api/v1/runs/%s%s" % (i, sfx), USERS[0])[0] for i in (a_id, b_id)
      for sfx in ("", "/steps")], [200, 200, 404, 404],
     "A reads its run and its steps; B's run and steps are 404 to A")

# ---- gpu_visibility = used (SIGHUP) ----
write_conf(gpu_visibility="used")
agent.send_signal(signal.SIGHUP)
reloaded = wait_for(lambda: [g.get("index") for g in
                             (curl_json("/api/v1/snapshot", USERS[0])[1] or {}).get("gpus", [])]
                    == [0], 5)
t.ok(reloaded, "after SIGHUP, gpu_visibility = used: A sees only GPU 0 in the snapshot",
     detail=curl("/api/v1/snapshot", USERS[0])[1][:400])
code, doc, _ = curl_json("/api/v1/snapshot", USERS[1])
t.eq([g.get("index") for g in (doc or {}).get("gpus", [])], [1], "B sees only GPU 1")
code, doc, _ = curl_json("/api/v1/snapshot")
t.eq([g.get("index") for g in (doc or {}).get("gpus", [])], [0, 1, 2], "root still sees all")
code, metrics = curl("/metrics", USERS[0])
t.ok(code == 200 and 'gpu="0"' in metrics and 'gpu="1"' not in metrics and
     'gpu="2"' not in metrics, "A's /metrics has GPU 0's series and none of GPUs 1 and 2",
     detail=metrics[:600])
code, metrics = curl("/metrics")
t.ok('gpu="1"' in metrics and 'gpu="2"' in metrics, "root's /metrics has every GPU")
code, doc, _ = curl_json("/api/v1/processes", USERS[0], tcp=BASE)
t.eq(([p.get("pid") for p in (doc or {}).get("processes", [])],
      (doc or {}).get("hidden_processes")), ([pa.pid], []),
     "A over TCP under used: its process, nothing hidden on its GPU")
hist_ok = wait_for(lambda: curl("/api/v1/history?gpu=0&metric=utilization_gpu",
                                USERS[0])[0] == 200, 5)
t.ok(hist_ok, "A reads the history of GPU 0",
     detail=curl("/api/v1/history?gpu=0&metric=utilization_gpu", USERS[0]))
code, body = curl("/api/v1/history?gpu=1&metric=utilization_gpu", USERS[0])
t.eq(code, 404, "A's history request for GPU 1 is 404")
code, body = curl("/api/v1/history?gpu=1&metric=utilization_gpu")
t.ok(code != 404, "root's is not", detail=body)

# ---- admin_group (SIGHUP) ----
write_conf(gpu_visibility="used", admin_group=GROUP)
agent.send_signal(signal.SIGHUP)
admin = wait_for(lambda: "mark-a-visible" in curl("/api/v1/processes", USERS[1])[1], 5)
t.ok(admin, "admin_group = %s: B, a member, sees A's process in full" % GROUP)
code, doc, text = curl_json("/api/v1/processes", USERS[0])
t.ok("secret-b-hidden" not in text, "A, not a member, still does not see B's")

# ---- the rate limit keys unix-socket clients by uid ----
write_conf(gpu_visibility="used", admin_group=GROUP, http_rate="0.2", http_burst="2")
agent.send_signal(signal.SIGHUP)
limited = wait_for(lambda: curl("/healthz", USERS[0])[0] == 429, 5)
t.ok(limited, "http_rate: A's requests on the socket are limited (429)")
t.eq(curl("/healthz", USERS[1])[0], 200, "B has a bucket of its own on the same socket")

agent.send_signal(signal.SIGTERM)
try:
    agent.wait(timeout=10)
except subprocess.TimeoutExpired:
    agent.kill()
t.eq(agent.returncode, 0, "the agent stops cleanly")
t.ok(not os.path.exists(SOCK), "and removes its unix socket")
sys.exit(t.done())
