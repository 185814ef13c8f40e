"""`gpuscope jobstats` (src/cli/jobstats.c, docs/jobstats.md) and the Slurm epilog
(deploy/slurm/epilog.sh) on agents on nvml-sim, with real processes of a Slurm job.

Two `sleep` processes carry SLURM_JOB_ID=4242 (what the agent's accounting reads from
/proc/PID/environ) and nvml-sim places them (scenario pids from the environment) on node A's
GPU 0 (90 % busy, 300 W, 6000 MiB) and GPU 1 (idle, 500 MiB); a third, of job 77, on GPU 2.
Node B is a second agent in its own UTS namespace (host name node-b) where job 4242 holds
GPU 0 at 40 %. Checked against the script's own clock and the scenario's figures: the table
(two GPUs of job 4242, not job 77's), the notes (GPU 1 idle: ask for fewer GPUs; peak memory
7 % of the GPU: a MIG slice), the JSON (held time within a cycle of the time the processes ran,
utilization 90 % and its quartiles, idle-held time, energy within 5 % of 300 W x the held time,
the GPU's capacity), --from over HTTP combining both nodes (three GPUs, the nodes named, an
unreachable agent reported and left out; node B's rate limit met and waited out), an unknown
job (exit 6), bad usage (exit 2); a job on a MIG instance of h100-mig (its own line, the
instance's name and memory, no MIG advice); another user (nobody) not shown root's job. The
epilog, run as root for a finished job with `scontrol` standing in for Slurm's: the summary
appended to the job's output file as the job's user (nobody), not written where that user
cannot write, exit 0 when jobstats fails; with GPUSCOPE_JOBSTATS_AGENTS one summary of both
nodes written by the job's first node only.
"""
import json
import os
import pwd
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import (BIN, SRC, clean_up_at_exit, free_port, get_json, sim_env,  # noqa: E402
                   start_agent, wait_healthy)

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-jobstats.")
os.chmod(tmp, 0o755)
clean_up_at_exit(procs, [tmp])
EPILOG = os.path.join(SRC, "deploy", "slurm", "epilog.sh")
GIB = 1024.0 ** 3
MEM_TOTAL_MIB = 81559


def scenario(gpus, processes):
    return {"scenario_version": 1,
            "templates": {"g": {"name": "NVIDIA H100 80GB HBM3", "architecture": "hopper",
                                "memory": {"total_mib": MEM_TOTAL_MIB},
                                "pci": {"device_id": "0x2330"}}},
            "gpus": [{"template": "g", "uuid": "GPU-%s-0000-0000-0000-000000000000" % u,
                      "pci": {"bus": "0x%02X" % (0x18 + 0x10 * i)},
                      "metrics": {"util_gpu_pct": util, "power_w": watts}}
                     for i, (u, util, watts) in enumerate(gpus)],
            "processes": processes}


def sleeper(job):
    env = dict(os.environ, SLURM_JOB_ID=job)
    p = subprocess.Popen(["sleep", "300"], env=env)
    procs.append(p)
    return p


def agent(name, sc, env_pids):
    """An agent on scenario sc in its own directory (its agent.sock there), sampling every
    0.25 s: (process, base URL, answered, socket path)."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    os.chmod(d, 0o755)
    path = os.path.join(d, "scenario.json")
    with open(path, "w") as f:
        json.dump(sc, f)
    env = sim_env(path, RUNTIME_DIRECTORY=d, **env_pids)
    p, base, ok = start_agent(["--data-dir", os.path.join(d, "data"), "--interval", "0.25"],
                              env, procs, stdout=open(os.path.join(d, "log"), "w"),
                              stderr=subprocess.STDOUT)
    return p, base, ok, os.path.join(d, "agent.sock")


def jobstats(*args, sock=None, env=None):
    e = dict(os.environ, NO_COLOR="1")
    e.pop("GPUSCOPE_TOKEN", None)
    if sock:
        e["GPUSCOPE_HTTP_SOCKET"] = sock
    e.update(env or {})
    return subprocess.run([BIN, "jobstats"] + list(args), capture_output=True, text=True,
                          env=e, timeout=60)


# ---- node A: job 4242 on GPUs 0 (busy) and 1 (idle), job 77 on GPU 2
a0, a1, other = sleeper("4242"), sleeper("4242"), sleeper("77")
SC_A = scenario([("aaaaaaaa", 90, 300), ("bbbbbbbb", 0, 60), ("cccccccc", 50, 200)],
                [{"pid": {"env": "SIM_A0"}, "gpu": 0, "name": "python3", "used_memory_mib": 6000},
                 {"pid": {"env": "SIM_A1"}, "gpu": 1, "name": "python3", "used_memory_mib": 500},
                 {"pid": {"env": "SIM_O"}, "gpu": 2, "name": "python3",
                  "used_memory_mib": 30000}])
t_start = time.time()
pa, base_a, ok_a, sock_a = agent("node-a", SC_A, {"SIM_A0": str(a0.pid), "SIM_A1": str(a1.pid),
                                                  "SIM_O": str(other.pid)})
t.ok(ok_a, "node A's agent answers")
# node B: job 4242 on GPU 0 at 40 %, in a UTS namespace named node-b
b0 = sleeper("4242")
SC_B = scenario([("dddddddd", 40, 200)],
                [{"pid": {"env": "SIM_B0"}, "gpu": 0, "name": "python3", "used_memory_mib": 20000}])
d_b = os.path.join(tmp, "node-b")
os.makedirs(d_b)
with open(os.path.join(d_b, "scenario.json"), "w") as f:
    json.dump(SC_B, f)
have_unshare = shutil.which("unshare") and os.geteuid() == 0
env_b = sim_env(os.path.join(d_b, "scenario.json"), RUNTIME_DIRECTORY=d_b, SIM_B0=str(b0.pid))
port_b = free_port()
cmd_b = [BIN, "agent", "--listen", "127.0.0.1:%d" % port_b, "--data-dir",
         os.path.join(d_b, "data"), "--interval", "0.25", "--http-rate", "2",
         "--http-burst", "3"]
if have_unshare:
    cmd_b = ["unshare", "--uts", "sh", "-c", 'hostname node-b && exec "$@"', "sh"] + cmd_b
pb = subprocess.Popen(cmd_b, env=env_b, stdout=open(os.path.join(d_b, "log"), "w"),
                      stderr=subprocess.STDOUT)
procs.append(pb)
base_b = "http://127.0.0.1:%d" % port_b
t.ok(wait_healthy(base_b, pb), "node B's agent answers")

# The job runs a few seconds (the agent samples every 0.25 s), then its processes end.
time.sleep(5)


def json_summary(*args, **kw):
    r = jobstats("4242", "--json", *args, **kw)
    try:
        return r, json.loads(r.stdout)
    except ValueError:
        return r, None


r, doc = json_summary(sock=sock_a)
t_query = time.time()
t.ok(r.returncode == 0 and doc is not None, "jobstats 4242 --json over node A's socket",
     detail=r.stdout + r.stderr)
doc = doc or {}
nodes = doc.get("nodes", [])
gpus = {g["gpu"]: g for n in nodes for g in n.get("gpus", [])}
t.eq(sorted(gpus), [0, 1], "the job's GPUs: 0 and 1 (not job 77's GPU 2)")
host = os.uname().nodename
t.eq([n.get("node") for n in nodes], [host], "one node, named by its agent's host name")
g0, g1 = gpus.get(0, {}), gpus.get(1, {})
ran = t_query - t_start
held0 = g0.get("held_s") or 0
t.ok(ran - 2.0 <= held0 <= ran + 0.5,
     "GPU 0 held %.2f s: the time the processes ran under the agent (%.2f s by this script's "
     "clock, less its start-up)" % (held0, ran), detail=g0)
span = (g0.get("last_seen") or 0) - (g0.get("first_seen") or 0)
t.ok(abs(held0 - span) <= 0.5, "held time = last_seen - first_seen within two cycles "
     "(%.2f vs %.2f s)" % (held0, span))
u0, u1 = g0.get("utilization") or {}, g1.get("utilization") or {}
t.ok(abs((u0.get("mean") or 0) - 0.90) < 0.02 and abs((u0.get("p25") or 0) - 0.90) < 0.02 and
     abs((u0.get("p75") or 0) - 0.90) < 0.02 and u0.get("points", 0) >= 5,
     "GPU 0 utilization: mean and quartiles 90 % (the scenario's)", detail=u0)
t.ok(u1.get("mean") == 0 and u1.get("first_busy") is None,
     "GPU 1 utilization 0, never busy", detail=u1)
t.ok(abs((g0.get("busy_share") or 0) - 0.90) < 0.02, "GPU 0 busy share 90 %", detail=g0)
t.ok(abs((g1.get("idle_held_s") or -1) - (g1.get("held_s") or 0)) < 0.01 and
     (g0.get("idle_held_s") or 0) < 0.01, "idle-held: all of GPU 1's time, none of GPU 0's",
     detail=(g0, g1))
kwh0 = g0.get("energy_kwh") or 0
t.ok(abs(kwh0 - 300 * held0 / 3.6e6) <= 0.05 * 300 * held0 / 3.6e6,
     "GPU 0 energy %.3g kWh: 300 W x held time within 5 %%" % kwh0, detail=g0)
m0 = g0.get("memory") or {}
t.ok(m0.get("peak_bytes") == 6000 * 1024 * 1024 and
     m0.get("total_bytes") == MEM_TOTAL_MIB * 1024 * 1024 and
     abs((m0.get("mean_bytes") or 0) - 6000 * 1024 * 1024) < 0.02 * 6000 * 1024 * 1024,
     "GPU 0 memory: peak and mean 6000 MiB of %d MiB" % MEM_TOTAL_MIB, detail=m0)
t.eq(doc.get("users"), [pwd.getpwuid(os.getuid()).pw_name], "users: the processes' owner")
ids = sorted(n.get("id") for n in doc.get("notes", []))
t.eq(ids, ["idle_gpus", "small_memory"], "notes: idle_gpus, small_memory")

r = jobstats("4242", sock=sock_a)
out = r.stdout
t.ok(r.returncode == 0 and re.search(r"^Job 4242: 2 GPUs on 1 node, ", out, re.M),
     "table: the header line", detail=out + r.stderr)
rows = [ln for ln in out.splitlines() if ln.startswith(host[:12])]
t.ok(len(rows) == 2 and re.search(r"\b0\s+NVIDIA H100 80GB HBM3\s+\S+\s+90\s+90\s+90\s+90\s+90",
                                  rows[0]) and " 100 %" in rows[1],
     "table: GPU 0 at 90 % (mean, quartiles, busy), GPU 1 idle-held 100 %", detail=out)
t.ok("  * GPU 1 was idle 100 % of the job: ask for fewer GPUs\n" in out and
     "  * Peak memory at most 7 % of the GPU (5.9 GiB of 80 GiB): a MIG slice or a smaller GPU "
     "would do"
     in out, "table: the notes in plain words", detail=out)
t.ok("\033[" not in out, "NO_COLOR and a pipe: no colour")
hdr = next((ln for ln in out.splitlines() if ln.startswith("NODE")), "")
t.ok(rows and all(len(x) == len(hdr) for x in rows) and
     all(re.search(r" [0-9.]+ k?Wh$", x) and x.index(" NVIDIA") == hdr.index(" NAME")
         for x in rows),
     "table: columns aligned under the header, energy in Wh or kWh", detail=out)

# --from: both nodes over HTTP, combined; an unreachable agent left out and reported
r, doc2 = json_summary("--from", "%s,%s,127.0.0.1:1" % (base_a, base_b.split("//")[1]))
doc2 = doc2 or {}
names = [n.get("node") for n in doc2.get("nodes", [])]
t.ok(r.returncode == 0 and len(names) == 2 and doc2.get("totals", {}).get("gpus") == 3,
     "--from node A,node B: one summary of 3 GPUs on 2 nodes", detail=r.stdout + r.stderr)
if have_unshare:
    t.eq(names, [host, "node-b"], "--from: the nodes named by their agents")
else:
    t.skip("--from: the nodes named by their agents", "needs root and unshare(1)")
t.ok([u["source"] for u in doc2.get("unreachable", [])] == ["127.0.0.1:1"] and
     "127.0.0.1:1" in r.stderr, "--from: the unreachable agent reported, the others summed",
     detail=doc2.get("unreachable"))
idle = next((n for n in doc2.get("notes", []) if n["id"] == "idle_gpus"), {})
t.ok(idle.get("title", "").startswith("%s GPU 1 was idle" % names[0] if names else "?") and
     not any(n["id"] == "small_memory" for n in doc2.get("notes", [])),
     "--from: the idle GPU named with its node; node B's 20 GB peak: no small-memory note",
     detail=doc2.get("notes"))
tot = doc2.get("totals", {})
held_sum = sum(g["held_s"] for n in doc2.get("nodes", []) for g in n["gpus"])
t.ok(abs(tot.get("held_gpu_hours", 0) * 3600 - held_sum) < 1e-6,
     "--from: the total GPU-hours are the GPUs' sum", detail=tot)

# node B allows 2 requests/s after a burst of 3 (the 3 of one summary of its one GPU): asked
# again at once, it answers 429 until its bucket refills, and jobstats asks again a second later
t0 = time.monotonic()
r, doc3 = json_summary("--from", base_b)
took = time.monotonic() - t0
t.ok(r.returncode == 0 and (doc3 or {}).get("totals", {}).get("gpus") == 1 and took >= 0.9,
     "an agent's rate limit (429): asked again after a second, the summary complete "
     "(%.1f s)" % took, detail=r.stdout + r.stderr)

# a MIG instance: a line of its own (its MIG- uuid, the instance's name and memory), no
# small-memory advice on what is already a slice
mig_proc = sleeper("555")
SC_M = json.load(open(os.path.join(SRC, "sim", "scenarios", "h100-mig.json")))
for p in SC_M["processes"]:
    if p.get("id") == "lora":
        p["pid"] = {"env": "SIM_MIG"}
        p["used_memory_mib"] = 700
pm, base_m, ok_m, sock_m = agent("node-mig", SC_M, {"SIM_MIG": str(mig_proc.pid)})
time.sleep(1.5)
snap_m = get_json(base_m + "/api/v1/snapshot")[1]
r = jobstats("555", "--json", sock=sock_m)
try:
    docm = json.loads(r.stdout)
except ValueError:
    docm = {}
gm = [g for n in (docm or {}).get("nodes", []) for g in n["gpus"]]
inst = next((m for g in snap_m.get("gpus", []) for m in g.get("mig_devices", [])
             if gm and m.get("uuid") == gm[0].get("uuid")), None)
t.ok(r.returncode == 0 and len(gm) == 1 and gm[0].get("mig") is True and
     str(gm[0].get("uuid")).startswith("MIG-") and inst is not None and
     gm[0].get("name") == inst.get("name") and
     gm[0]["memory"].get("total_bytes") == inst.get("memory_total") and
     gm[0].get("energy_kwh") is None and
     not any(n["id"] == "small_memory" for n in docm.get("notes", [])),
     "a job on a MIG instance: its own line, the instance's name and memory, no energy (the "
     "counter is the GPU's), no MIG advice",
     detail=(r.stdout + r.stderr, inst))

# another user asks over the same socket: the agent's visibility policy shows them their own
# usage only, so root's job is unknown to them (exit 6), not summarised
if os.geteuid() == 0 and shutil.which("setpriv"):
    nb = pwd.getpwnam("nobody")
    r = subprocess.run(["setpriv", "--reuid=%d" % nb.pw_uid, "--regid=%d" % nb.pw_gid,
                        "--clear-groups", BIN, "jobstats", "4242"],
                       env=dict(os.environ, GPUSCOPE_HTTP_SOCKET=sock_a, NO_COLOR="1"),
                       capture_output=True, text=True, timeout=60)
    t.ok(r.returncode == 6 and "no agent saw job '4242'" in r.stderr and "GPU" not in r.stdout,
         "another user (nobody) is not shown root's job", detail=r.stdout + r.stderr)
else:
    t.skip("another user is not shown root's job", "needs root and setpriv(1)")

# no such job; bad usage
r = jobstats("999999", sock=sock_a)
t.ok(r.returncode == 6 and "no agent saw job '999999'" in r.stderr and r.stdout == "",
     "an unknown job: exit 6 and why", detail=r.stdout + r.stderr)
r = jobstats(sock=sock_a)
t.ok(r.returncode == 2 and "usage: gpuscope jobstats ID" in r.stderr, "no ID: exit 2")
r = jobstats("1", "--since", "yesterday", sock=sock_a)
t.ok(r.returncode == 2 and "--since yesterday" in r.stderr, "a bad --since: exit 2 and why",
     detail=r.stderr)
r = jobstats("--help")
t.ok(r.returncode == 0 and "--from" in r.stdout and "docs/jobstats.md" in r.stdout, "--help")

# ---- the Slurm epilog for the finished job, as slurmd runs it (root, the job's variables)
for p in (a0, a1):
    p.kill()
    p.wait()
time.sleep(0.6)  # the agent sees the job's processes gone
bindir = os.path.join(tmp, "bin")
os.makedirs(bindir)
with open(os.path.join(bindir, "scontrol"), "w") as f:  # Slurm's: show job, show hostnames
    f.write('#!/bin/sh\ncase "$1 $2 $3" in\n'
            '"show job 4242")\n'
            '    echo "JobId=4242 JobName=train.sh"\n'
            '    echo "   UserId=nobody(65534) GroupId=nogroup"\n'
            '    echo "   StdErr=%s/job/slurm-4242.out"\n'
            '    echo "   StdOut=%s/job/slurm-4242.out"\n'
            '    echo "   Power=" ;;\n'
            '"show hostnames nodes[a,b]") printf "%%s\\n%%s\\n" %d %d ;;\n'
            '*) exit 1 ;;\nesac\n' % (tmp, tmp, pa.port, port_b))
os.chmod(os.path.join(bindir, "scontrol"), 0o755)
os.makedirs(os.path.join(tmp, "job"))
os.chmod(os.path.join(tmp, "job"), 0o755)
outfile = os.path.join(tmp, "job", "slurm-4242.out")


def epilog(env_extra):
    env = {"PATH": bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
           "SLURM_JOB_ID": "4242", "GPUSCOPE": BIN, "GPUSCOPE_HTTP_SOCKET": sock_a,
           "GPUSCOPE_JOBSTATS_SETTLE": "0", "SLURM_JOB_NODELIST": host}
    env.update(env_extra)
    return subprocess.run(["sh", EPILOG], env=env, capture_output=True, text=True, timeout=60)


if os.geteuid() == 0:
    nobody = pwd.getpwnam("nobody")
    with open(outfile, "w") as f:
        f.write("epoch 3 loss 1.234\ntraining done\n")
    os.chown(outfile, nobody.pw_uid, nobody.pw_gid)
    os.chmod(outfile, 0o600)
    r = epilog({"SLURM_JOB_UID": str(nobody.pw_uid), "SLURM_JOB_GID": str(nobody.pw_gid)})
    text = open(outfile).read()
    st = os.stat(outfile)
    t.ok(r.returncode == 0 and text.startswith("epoch 3 loss 1.234\ntraining done\n\n"
                                               "==== gpuscope jobstats 4242 ====\nJob 4242: ") and
         "GPU 1 was idle 100 % of the job: ask for fewer GPUs" in text and
         st.st_uid == nobody.pw_uid and stat.S_IMODE(st.st_mode) == 0o600,
         "epilog: the summary appended to the job's StdOut (from scontrol) as the job's user",
         detail=text + r.stdout + r.stderr)
    # a file the job's user cannot write: left as it was, exit 0 (root did not write it)
    os.chown(outfile, 0, 0)
    os.chmod(outfile, 0o644)
    before = open(outfile).read()
    r = epilog({"SLURM_JOB_UID": str(nobody.pw_uid), "SLURM_JOB_GID": str(nobody.pw_gid)})
    t.ok(r.returncode == 0 and open(outfile).read() == before,
         "epilog: writes as the job's user only (a root-owned file stays as it was), exit 0",
         detail=r.stdout + r.stderr)
    # the combined summary: nodes named by their agents' ports, GPUSCOPE_JOBSTATS_AGENTS their URL
    # pattern; only the job's first node writes it
    os.chown(outfile, nobody.pw_uid, nobody.pw_gid)
    with open(outfile, "w") as f:
        f.write("done\n")
    multi = {"SLURM_JOB_UID": str(nobody.pw_uid), "SLURM_JOB_GID": str(nobody.pw_gid),
             "SLURM_JOB_NODELIST": "nodes[a,b]",
             "GPUSCOPE_JOBSTATS_AGENTS": "http://127.0.0.1:%s"}
    r = epilog(dict(multi, SLURMD_NODENAME=str(port_b)))
    t.ok(r.returncode == 0 and open(outfile).read() == "done\n",
         "epilog, GPUSCOPE_JOBSTATS_AGENTS: the job's second node writes nothing",
         detail=r.stdout + r.stderr)
    r = epilog(dict(multi, SLURMD_NODENAME=str(pa.port)))
    text = open(outfile).read()
    t.ok(r.returncode == 0 and text.startswith("done\n\n==== gpuscope jobstats 4242 ====\n"
                                               "Job 4242: 3 GPUs on 2 nodes, ") and
         ("node-b" in text or not have_unshare),
         "epilog, GPUSCOPE_JOBSTATS_AGENTS: the first node appends one summary of both nodes",
         detail=text + r.stdout + r.stderr)
else:
    t.skip("epilog: appended as the job's user", "not root")
    t.skip("epilog: writes as the job's user only", "not root")
    t.skip("epilog, GPUSCOPE_JOBSTATS_AGENTS: the second node writes nothing", "not root")
    t.skip("epilog, GPUSCOPE_JOBSTATS_AGENTS: one summary of both nodes", "not root")
# jobstats failing (an unknown job): the file unchanged, exit 0 (a failing epilog drains a node)
with open(outfile, "w") as f:
    f.write("done\n")
r = epilog({"SLURM_JOB_ID": "5555", "SLURM_JOB_UID": str(os.getuid()),
            "GPUSCOPE_JOBSTATS_OUT": outfile})
t.ok(r.returncode == 0 and open(outfile).read() == "done\n",
     "epilog: jobstats failing leaves the output as it was, exit 0", detail=r.stdout + r.stderr)
if shutil.which("shellcheck"):
    r = subprocess.run(["shellcheck", EPILOG], capture_output=True, text=True)
    t.ok(r.returncode == 0, "shellcheck deploy/slurm/epilog.sh", detail=r.stdout)
else:
    t.skip("shellcheck deploy/slurm/epilog.sh", "shellcheck not installed")

sys.exit(t.done())
