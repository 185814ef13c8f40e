"""`gpuscope run --stacks` end to end: a real PyTorch loop (CPU, /usr/bin/python3) under
gpuscope run on nvml-sim, its GPU at 0 % utilization (idle all along) or 80 %. Checked: the
report's stacks section (samples at the rate, top functions, phases joined with the step
records, the idle-GPU breakdown), stacks.svg / stacks.txt in the run directory, the
stack-based findings (data loading confirmed, host sync at an .item() line), --stacks off,
the hang watchdog's dump (which function each rank waits in), and a loop that never imports
gpuscope: its samples in the phase the zero-code tracker's marks say (data = inside the
loader's __next__)."""
import json
import os
import subprocess
import sys
import tempfile
import xml.dom.minidom

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import BIN, SIM  # noqa: E402
from tap import Tap  # noqa: E402

PY = "/usr/bin/python3"
TRAIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "stacks_targets", "train_data.py")
t = Tap()
TMP = tempfile.mkdtemp(prefix="gs-run-stacks-")


def scenario(util):
    s = {"scenario_version": 1, "description": "run --stacks",
         "gpus": [{"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-00000000-1111-2222-3333-444444444444",
                   "pci": {"bus": "0x18", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
                   "power": {"default_limit_w": 700}, "architecture": "hopper",
                   "metrics": {"util_gpu_pct": util, "power_w": 100}}],
         "processes": [{"id": "child", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"}, "gpu": 0,
                        "used_memory_mib": 2048}]}
    path = os.path.join(TMP, "scen-%d.json" % util)
    with open(path, "w") as f:
        json.dump(s, f)
    return path


def run(name, args, train_args, util=0, timeout=120):
    out = os.path.join(TMP, name)
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=scenario(util),
               NO_COLOR="1")
    p = subprocess.run([BIN, "run", "--out", out, "--interval", "0.2"] + args +
                       ["--", PY, TRAIN] + train_args, capture_output=True, text=True,
                       env=env, timeout=timeout)
    rep = {}
    try:
        with open(os.path.join(out, "metrics_report.json")) as f:
            rep = json.load(f)
    except OSError:
        pass
    return p, rep, out


def ids(rep):
    return [f.get("id") for f in rep.get("findings", [])]


# ---- data-bound loop, GPU idle ----
p, rep, out = run("data", [], ["6", "data"], util=0)
st = rep.get("stacks") or {}
t.ok(p.returncode == 0 and st, "data-bound run: exit 0, report has stacks", p.stderr[-2000:])
# 20 Hz over the 6 s loop plus torch's import (1-4 s here, longer on a loaded machine)
t.ok(120 <= (st.get("samples") or 0) <= 400, "about 20 samples a second (%s)" % st.get("samples"))
ranks = st.get("ranks") or [{}]
t.ok(len(ranks) == 1 and ranks[0].get("rank") == 0 and ranks[0].get("python", "").startswith("3.11"),
     "the rank that said hello is sampled", ranks)
top = [e["function"] for e in st.get("top", [])]
t.ok(top[:1] == ["SlowDataset.__getitem__"], "top function by own time: SlowDataset.__getitem__", top)
data = (st.get("by_phase") or {}).get("data") or {}
outside = ((st.get("by_phase") or {}).get("outside_steps") or {}).get("samples") or 0
t.ok((data.get("samples") or 0) > 0.8 * ((st.get("kept_samples") or 1) - outside) and
     data["groups"]["data_loading"] >= 0.9,
     "joined with the step records: most samples in the data phase, in the DataLoader",
     json.dumps(st.get("by_phase"))[:1500])
idle = (st.get("gpu_idle") or [{}])[0]
# The GPU is idle all along, so the idle-time samples are (nearly) all samples; the share of
# the DataLoader among them is the run's (the rest is torch's import before the loop, whose
# length depends on the machine's load).
t.ok(idle.get("gpu") == 0 and idle.get("idle_fraction", 0) > 0.9 and
     idle.get("samples", 0) >= 0.9 * (st.get("kept_samples") or 1) and
     abs(idle["groups"]["data_loading"] - st["groups"]["data_loading"]) <= 0.05 and
     idle["groups"]["data_loading"] >= 0.2 and
     idle["top"][0]["function"] == "SlowDataset.__getitem__",
     "while GPU 0 was idle the main thread was in the DataLoader", json.dumps(idle)[:1500])
f = [x for x in rep.get("findings", []) if x.get("id") == "stacks_data_loading"]
t.ok(f and "GPU 0 was idle" in f[0]["title"] and "DataLoader" in f[0]["title"],
     "finding stacks_data_loading", json.dumps(rep.get("findings"))[:1500])
ok = False
try:
    doc = xml.dom.minidom.parse(os.path.join(out, "stacks.svg"))
    ok = any("SlowDataset.__getitem__" in (n.firstChild.data if n.firstChild else "")
             for n in doc.getElementsByTagName("title"))
except Exception as e:  # noqa: BLE001
    ok = e
t.ok(ok is True and st.get("flamegraph") == "stacks.svg", "stacks.svg in the run directory", ok)
with open(os.path.join(out, "stacks.txt")) as fh:
    coll = fh.read()
t.ok("_next_data" in coll and "SlowDataset.__getitem__" in coll, "stacks.txt collapsed stacks")
t.ok("host_sync" not in ids(rep), "no host_sync finding for a data-bound loop")

# ---- GPU busy: no idle samples ----
p, rep, out = run("busy", ["--stacks", "50"], ["2", "data"], util=80)
st = rep.get("stacks") or {}
idle = (st.get("gpu_idle") or [{}])[0]
t.ok(p.returncode == 0 and idle.get("samples") == 0 and idle.get("idle_fraction") == 0,
     "GPU at 80 %: no samples counted as idle", json.dumps(idle)[:800])
t.ok(st.get("rate_hz") == 50 and (st.get("samples") or 0) > 60, "--stacks 50: the rate", st.get("samples"))
t.ok("stacks_data_loading" in ids(rep) and "GPU" not in
     [x for x in rep["findings"] if x["id"] == "stacks_data_loading"][0]["title"].split("while")[0],
     "data loading confirmed from the data phase when the GPU was not idle", ids(rep))

# ---- host sync ----
p, rep, out = run("sync", [], ["3", "sync"], util=0)
f = [x for x in rep.get("findings", []) if x.get("id") == "host_sync"]
t.ok(p.returncode == 0 and f and ".item()" in f[0]["title"] and "train_data.py" in f[0]["title"],
     "finding host_sync names the .item() line", json.dumps(rep.get("findings"))[:1500])

# ---- off ----
p, rep, out = run("off", ["--stacks", "off"], ["1", "data"], util=0)
t.ok(p.returncode == 0 and "stacks" not in rep and not os.path.exists(os.path.join(out, "stacks.svg")),
     "--stacks off: no stacks section, no flame graph")
p = subprocess.run([BIN, "run", "--stacks", "fast", "--", "true"], capture_output=True, text=True)
t.ok(p.returncode == 2 and "--stacks" in p.stderr, "--stacks fast refused", p.stderr)

# ---- CMD is a shell: its Python child is sampled ----
out = os.path.join(TMP, "shell")
env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=scenario(0), NO_COLOR="1")
brief = os.path.join(os.path.dirname(TRAIN), "brief.py")
p = subprocess.run([BIN, "run", "--no-auto", "--out", out, "--", "bash", "-c",
                    "%s %s; true" % (PY, brief)], capture_output=True, text=True, env=env,
                   timeout=60)
with open(os.path.join(out, "metrics_report.json")) as fh:
    st = json.load(fh).get("stacks") or {}
kids = [k for k in st.get("ranks", []) if k.get("samples")]
t.ok(p.returncode == 0 and kids and kids[0].get("python", "").startswith("3.11") and
     (st.get("top") or [{}])[0].get("file") == brief,
     "CMD is bash: its Python child is sampled instead", json.dumps(st.get("ranks")))

# ---- hang watchdog ----
p, rep, out = run("hang", ["--hang-after", "3", "--hang-min", "1"], ["2", "hang", "5"], util=0)
dump = os.path.join(out, "hang-1-stacks.txt")
text = open(dump).read() if os.path.exists(dump) else ""
t.ok(p.returncode == 0 and "stuck_collective" in text and "futex" in text,
     "hang: every rank's threads dumped with their state", p.stderr[-1500:])
t.ok("waits in Event.wait" in p.stderr or "waits in Condition.wait" in p.stderr,
     "hang: stderr says where rank 0 waits", p.stderr[-1500:])
t.eq((rep.get("stacks") or {}).get("hangs"), 1, "hang: counted once in the report")
# The package answers the watchdog with its NCCL flight recorder (python/gpuscope/_flight.py);
# Debian's torch 1.13 has none, so the rank says why in a .unavailable file.
fr = os.path.join(out, "hang-1-nccl")
names = sorted(os.listdir(fr)) if os.path.isdir(fr) else []
why = open(os.path.join(fr, names[0])).read() if names else ""
t.ok(len(names) == 1 and names[0].startswith("nccl_trace_rank_0") and
     (names[0] == "nccl_trace_rank_0" or "flight recorder" in why),
     "hang: rank 0 answered the flight recorder request in hang-1-nccl/", (names, why))
# No dump (torch 1.13): no pointer to one, the rank's reason instead (docs/run.md).
t.ok("no NCCL flight recorder dump: torch" in p.stderr and
     "flight recorder of each rank" not in p.stderr,
     "hang: stderr says why there is no flight recorder dump, and points to none", p.stderr[-800:])


def child_env(extra):
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=scenario(0))
    env.pop("TORCH_NCCL_TRACE_BUFFER_SIZE", None)
    env.update(extra)
    q = subprocess.run([BIN, "run", "--out", os.path.join(TMP, "env%d" % len(extra)), "--",
                        "/bin/sh", "-c", "echo NCCL=${TORCH_NCCL_TRACE_BUFFER_SIZE-unset}"],
                       capture_output=True, text=True, env=env, timeout=60)
    return q.stdout.strip()


t.eq(child_env({}), "NCCL=2000", "the watchdog turns the flight recorder on (2000 entries)")
t.eq(child_env({"TORCH_NCCL_TRACE_BUFFER_SIZE": "0"}), "NCCL=0",
     "a user's TORCH_NCCL_TRACE_BUFFER_SIZE is kept")

# ---- stacks by phase from the zero-code tracker's marks (a script that never imports
# gpuscope): each sample in the phase it was taken in ----
PLAIN = os.path.join(os.path.dirname(TRAIN), "train_plain.py")
out = os.path.join(TMP, "plain")
env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=scenario(0), NO_COLOR="1")
p = subprocess.run([BIN, "run", "--out", out, "--interval", "0.2", "--", PY, PLAIN, "5"],
                   capture_output=True, text=True, env=env, timeout=120)
try:
    with open(os.path.join(out, "metrics_report.json")) as f:
        rep = json.load(f)
except OSError:
    rep = {}
bp = (rep.get("stacks") or {}).get("by_phase") or {}


def share(phase):
    ph = bp.get(phase) or {}
    return ph.get("samples") or 0, (ph.get("groups") or {}).get("data_loading")


n_data, dl_data = share("data")
n_fwd, dl_fwd = share("forward")
n_bwd, dl_bwd = share("backward")
t.ok(p.returncode == 0 and n_data >= 10 and n_bwd >= 3, "zero-code loop: samples in data and "
     "backward (%d, %d)" % (n_data, n_bwd), p.stderr[-1500:] + json.dumps(bp)[:1500])
t.ok(dl_data is not None and dl_data >= 0.8,
     "zero-code loop: the data phase's samples are in the DataLoader (%s)" % dl_data,
     json.dumps(bp.get("data"))[:1500])
t.ok(dl_bwd is not None and dl_bwd <= 0.2 and (dl_fwd is None or dl_fwd <= 0.2),
     "zero-code loop: forward / backward samples are not the DataLoader's (%s, %s)"
     % (dl_fwd, dl_bwd), json.dumps(bp)[:2000])

subprocess.run(["rm", "-rf", TMP])
sys.exit(t.done())
