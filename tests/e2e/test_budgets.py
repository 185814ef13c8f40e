"""Performance budgets of the one-shot commands that hold without timing (issue 25): NVML calls
and system calls, counted, so a regression fails on a loaded machine as on an idle one.

- NVML calls per command: nvml-sim counts every entry point it serves (NVML_SIM_COUNT=FILE,
  sim/core.c: all but nvmlInit*/nvmlShutdown, handles and identity included), for the quick
  check (`gpuscope`), a 7-field `--query-gpu` and each nvidia-smi mode (the table, -L,
  --version, -q, -q -d, dmon, pmon, topo -m, nvlink -s, nvlink -c).
- System calls per quick check: `strace -f -c` (Debian's strace 6.1, `-U` needs 5.18; the test
  says "skip" without strace, and the Makefile's deps target installs it).

The scenario is the bundled 8-GPU training one with its clock frozen and every process's pid
replaced by "self" (the command's own): procfs then answers the same on every machine (a
synthetic pid might be a live process somewhere, and the command reads more for a pid that
is not there). No agent is reachable, so the commands read NVML themselves.

Each budget is today's figure plus a small margin, with the reason next to it; when a change
lowers a figure for good, lower its budget with it. The agent's cycle has its own budgets
in tests/unit/test_budget.c.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, SCENARIOS, sim_env  # noqa: E402

t = Tap()
tmp = tempfile.mkdtemp(prefix="gs-budgets.")

with open(os.path.join(SCENARIOS, "h100x8-training.json")) as f:
    doc = json.load(f)
for p in doc["processes"]:
    p["pid"] = "self"
SCENARIO = os.path.join(tmp, "scenario.json")
with open(SCENARIO, "w") as f:
    json.dump(doc, f)

ENV = sim_env(SCENARIO, time=100, NO_COLOR="1", LC_ALL="C.UTF-8",
              GPUSCOPE_HTTP_SOCKET="/nonexistent/agent.sock", XDG_RUNTIME_DIR="/nonexistent")
# meson's LD_LIBRARY_PATH (the sim's folder) makes the loader probe it for every library
# (+24 system calls, their number depending on the CPU's hwcaps): a user's shell has none, and
# the sim is loaded by GPUSCOPE_NVML_LIBRARY's path anyway.
ENV.pop("LD_LIBRARY_PATH", None)
FIELDS = "index,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw"
COMMANDS = {
    "quick check": [],
    "query": ["query"],
    "query --query-gpu (7 fields)": ["query", "--query-gpu=" + FIELDS, "--format=csv"],
    "query -L": ["query", "-L"],
    "query --version": ["query", "--version"],
    "query -q": ["query", "-q"],
    "query -q -d MEMORY": ["query", "-q", "-d", "MEMORY"],
    "query dmon -c 1": ["query", "dmon", "-c", "1"],
    "query dmon -s pucvmet -c 1": ["query", "dmon", "-s", "pucvmet", "-c", "1"],
    "query pmon -c 1": ["query", "pmon", "-c", "1"],
    "query topo -m": ["query", "topo", "-m"],
    "query nvlink -s": ["query", "nvlink", "-s"],
    "query nvlink -c": ["query", "nvlink", "-c"],
}

# NVML calls of one run, all 8 GPUs together. Exact figures today; the margin of 2 lets a
# single whole-system call come in without re-budgeting, while one more call per GPU (8) is
# over every budget.
# The nvidia-smi modes ask NVML only for what they print (need masks per mode, src/cli/smi); the
# figure before that is in each comment.
NVML_TODAY = {
    "quick check": 101,  # 109 before the text view stopped asking each GPU's serial (not shown)
    "query": 192,  # the table: 2000 before (every health reading, NVLink errors and states)
    "query --query-gpu (7 fields)": 68,
    "query -L": 44,  # 1060
    "query --version": 12,  # 1060
    # 2328 before the masks (-q prints nearly everything; the ECC locations are half of it);
    # then 944, + 64 for the detail readings -q gained (GS_WANT_DETAIL: 8 calls per GPU), + 56
    # for the whole GPU's other rows (PDI, module id, GOM, vGPU heterogeneous mode, PCIe atomics,
    # protected memory, unrepairable memory: 7 calls per GPU)
    "query -q": 1064,
    # 2000, then 128; + 8 since MEMORY's protected memory is a detail reading (one call per GPU:
    # the detail readings are need-masked, the other 14 stay unread)
    "query -q -d MEMORY": 136,
    "query dmon -c 1": 108,  # 1060
    "query dmon -s pucvmet -c 1": 191,  # 2303
    "query pmon -c 1": 61,  # 1101
    # 4516, then 3476 (3,384 of them the topology's own NVLink reads: every peer's links again
    # for each GPU); each GPU's links read once per answer since: 1252, of them 864 the links'
    # capabilities, which the matrix does not print and no longer asks (GS_TOPO_MATRIX)
    "query topo -m": 388,
    "query nvlink -s": 212,  # 1060
    # 4524, then 3676 (the topology's NVLink reads per pair, as topo -m), then 1452; the links'
    # states and capabilities only since (GS_TOPO_LINK_CAPS: no ancestors, affinity, far ends)
    "query nvlink -c": 1228,
}
NVML_MARGIN = 2

# System calls of one quick check (strace -f -c, every call, failed ones included). Most are
# the dynamic loader's (its probes follow the machine's library paths and CPU level) and
# procfs reads; the margin of 10 % covers another machine's loader, not a new loop per GPU or
# per process.
SYSCALLS_TODAY = 135
SYSCALLS_BUDGET = SYSCALLS_TODAY * 110 // 100


def run(args, env):
    return subprocess.run([BIN] + args, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=60)


def nvml_calls(args):
    """(NVML calls of one run of gpuscope ARGS, its completed process)."""
    count = os.path.join(tmp, "count")
    if os.path.exists(count):
        os.unlink(count)
    r = run(args, dict(ENV, NVML_SIM_COUNT=count))
    total = None
    if os.path.exists(count):
        for line in open(count):
            w = line.split()
            if w[:2] == ["nvml_calls", "total"]:
                total = int(w[2])
    return total, r


try:
    for name, args in COMMANDS.items():
        n, r = nvml_calls(args)
        budget = NVML_TODAY[name] + NVML_MARGIN
        t.ok(r.returncode == 0 and n is not None and n <= budget,
             "%s: %s NVML calls, budget %d (today %d)" % (name, n, budget, NVML_TODAY[name]),
             detail="rc %d, stderr %s" % (r.returncode, r.stderr[-300:]))

    # The topology answer reads each GPU's NVLinks once (issue 25): its link reads per GPU are
    # the same for 2, 4 and 8 GPUs (the links' states up to the first the driver refuses, and each
    # active link's far-end type), where reading every peer's links again for each GPU grew them
    # with the GPU count (2, 4, 8 GPUs: 93, 167, 315 per GPU with 18 links).
    links = doc["templates"][doc["gpus"][0]["template"]]["nvlink"]["links"]
    per_gpu = {}
    caps_asked = 0
    for ngpu in (2, 4, 8):
        sub = dict(doc, gpus=doc["gpus"][:ngpu], events=[],
                   processes=[p for p in doc["processes"] if p.get("gpu", 0) < ngpu])
        path = os.path.join(tmp, "topo-%d.json" % ngpu)
        with open(path, "w") as f:
            json.dump(sub, f)
        count = os.path.join(tmp, "count-%d" % ngpu)
        r = run(["query", "topo", "-m"], dict(ENV, NVML_SIM_SCENARIO=path, NVML_SIM_COUNT=count))
        calls = {}
        for line in open(count) if os.path.exists(count) else []:
            w = line.split()
            if w[:1] == ["nvml_call"]:
                calls[w[1]] = int(w[2])
        per_gpu[ngpu] = (calls.get("nvmlDeviceGetNvLinkState", 0) +
                         calls.get("nvmlDeviceGetNvLinkRemoteDeviceType", 0)) / ngpu
        caps_asked += calls.get("nvmlDeviceGetNvLinkCapability", 0)
        t.ok(r.returncode == 0 and r.stdout.count("NV%d\t" % links) == ngpu * (ngpu - 1),
             "topo -m on %d GPUs: NV%d between every pair" % (ngpu, links),
             detail=r.stdout + r.stderr[-300:])
    t.eq(per_gpu, {n: 2 * links + 1 for n in (2, 4, 8)},
         "topo -m: each GPU's NVLinks read once per answer (%d state and far-end reads a GPU "
         "for 2, 4 and 8 GPUs)" % (2 * links + 1))
    # the matrix prints no link capability: nvlink -c's six reads per link are not asked
    t.eq(caps_asked, 0, "topo -m: no nvmlDeviceGetNvLinkCapability call")

    strace = shutil.which("strace")
    # A container may forbid ptrace (seccomp, no CAP_SYS_PTRACE): then there is nothing to count
    probe = subprocess.run([strace, "-f", "-c", "-o", os.devnull, "/bin/true"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           timeout=30) if strace else None
    if not strace:
        t.skip("quick check: system calls within budget", "strace is not installed")
    elif probe.returncode != 0:
        t.skip("quick check: system calls within budget",
               "strace cannot trace here: " + probe.stderr.strip()[-200:])
    else:
        out = os.path.join(tmp, "strace")
        # -U calls,name: the summary's columns are the count and the name only
        r = subprocess.run([strace, "-f", "-c", "-U", "calls,name", "-o", out, BIN], env=ENV,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
        total = None
        table = open(out).read() if os.path.exists(out) else ""
        for line in table.splitlines():
            w = line.split()
            if len(w) == 2 and w[1] == "total":
                total = int(w[0])
        t.ok(r.returncode == 0 and total is not None and total <= SYSCALLS_BUDGET,
             "quick check: %s system calls, budget %d (today %d)"
             % (total, SYSCALLS_BUDGET, SYSCALLS_TODAY),
             detail="rc %d, stderr %s\n%s" % (r.returncode, r.stderr[-300:], table))
finally:
    shutil.rmtree(tmp, ignore_errors=True)
t.done()
