#!/usr/bin/env python3
"""gpuscope's one-shot commands against their floor and against `nvtop -s` (issue 25).

Usage: bench/floor.py BUILD_DIR [RUNS] [NVTOP]

The floor is build/bench/floor (bench/floor.c): dlopen the same libnvidia-ml (nvml-sim here),
nvmlInit_v2, the NVML calls the gpuscope command makes, printf, exit. Measured, on the bundled
8-GPU training scenario with its clock frozen, every process's pid "self" (so each command's
procfs reads are real and the same) and the PCIe throughput call not sleeping:

- instructions of one run (valgrind callgrind's total: the same on a loaded machine), the same
  less nvml-sim's nvmlInit_v2 (its inclusive cost from callgrind_annotate: the scenario's JSON
  parsed, which a real driver does not do, ~5.3 M of every command's total), and NVML calls of
  one run (nvml-sim's NVML_SIM_COUNT);
- minor page faults of the last run (wait4);
- CPU time (user + system of the child from wait4, spawned with posix_spawn), RUNS rounds
  (default 41) in which every command runs once, in turn: the median and the spread
  (25th-75th percentile) per command, so a load that comes and goes hits all alike.

NVTOP: an `nvtop` binary (built from its sources: Debian's package is in contrib); it loads
libnvidia-ml.so.1 by name, so it runs with LD_LIBRARY_PATH on a folder holding the sim under
that name. Prints Markdown tables for bench/RESULTS.md.
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS = "index,name,utilization.gpu,memory.used,memory.total,temperature.gpu,power.draw"


def run_once(cmd, env):
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        pid = os.posix_spawn(cmd[0], cmd, env,
                             file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 1),
                                           (os.POSIX_SPAWN_DUP2, devnull, 2)])
    finally:
        os.close(devnull)
    _, status, ru = os.wait4(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("%s failed (status %d)" % (" ".join(cmd), status))
    return (ru.ru_utime + ru.ru_stime) * 1000.0, ru.ru_minflt


def instructions(cmd, env, tmp):
    """(instructions of one run, of them inside nvml-sim's nvmlInit_v2)."""
    out = os.path.join(tmp, "cg.out")
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + cmd,
                       env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    total = None
    for line in r.stderr.splitlines():
        if "Collected :" in line:
            total = int(line.split()[-1])
    if total is None:
        raise SystemExit("callgrind: %s" % r.stderr[-500:])
    a = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    init = 0
    for line in a.stdout.splitlines():  # "5,311,645 (84.12%)  FILE:nvmlInit_v2 [LIB]"
        w = line.split()
        if len(w) >= 3 and w[2].endswith("nvmlInit_v2") and w[2].split(":")[-1] == "nvmlInit_v2":
            init = max(init, int(w[0].replace(",", "")))
    return total, init


def nvml_calls(cmd, env, tmp):
    f = os.path.join(tmp, "count")
    if os.path.exists(f):
        os.unlink(f)
    subprocess.run(cmd, env=dict(env, NVML_SIM_COUNT=f), stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True)
    for line in open(f):
        w = line.split()
        if w[:2] == ["nvml_calls", "total"]:
            return int(w[2])
    return None


def commands(build, tmp, nvtop=None, nvml=None):
    """[(name, argv, env)] of the measured commands: the floor and gpuscope's one-shot commands
    on the bundled 8-GPU training scenario (written into tmp with every pid "self" and the PCIe
    call not sleeping), and `nvtop -s` when NVTOP is given (also used by bench/issue25.py).
    nvml: another libnvidia-ml for all of them (a real driver's) instead of BUILD's nvml-sim."""
    sim = nvml or os.path.join(build, "sim", "libnvidia-ml.so.1")
    gs = os.path.join(build, "gpuscope")
    floor = os.path.join(build, "bench", "floor")
    with open(os.path.join(ROOT, "sim", "scenarios", "h100x8-training.json")) as f:
        doc = json.load(f)
    for p in doc["processes"]:
        p["pid"] = "self"
    doc["pcie_throughput_delay_ms"] = 0
    scenario = os.path.join(tmp, "scenario.json")
    with open(scenario, "w") as f:
        json.dump(doc, f)
    libdir = os.path.join(tmp, "lib")
    os.mkdir(libdir)
    os.symlink(sim, os.path.join(libdir, "libnvidia-ml.so.1"))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("NVML_SIM", "GPUSCOPE", "LD_LIBRARY_PATH"))}
    env.update(GPUSCOPE_NVML_LIBRARY=sim, NVML_SIM_SCENARIO=scenario, NVML_SIM_TIME="100",
               GPUSCOPE_HTTP_SOCKET="/nonexistent/agent.sock",
               XDG_RUNTIME_DIR="/nonexistent", NO_COLOR="1", LC_ALL="C.UTF-8")
    cmds = [
        ("floor quick", [floor, "quick"], env),
        ("`gpuscope` (quick check)", [gs], env),
        ("floor query", [floor, "query"], env),
        ("`gpuscope query --query-gpu=` 7 fields",
         [gs, "query", "--query-gpu=" + FIELDS, "--format=csv"], env),
        ("`gpuscope query` (table)", [gs, "query"], env),
    ]
    if nvtop:
        cmds.append(("`nvtop -s`", [nvtop, "-s"], dict(env, LD_LIBRARY_PATH=libdir)))
    return cmds


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    build = os.path.abspath(sys.argv[1])
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 41
    nvtop = sys.argv[3] if len(sys.argv) > 3 else None
    tmp = tempfile.mkdtemp(prefix="gs-floor.")
    try:
        cmds = commands(build, tmp, nvtop)
        for _, cmd, e in cmds:  # warm-up (page cache)
            run_once(cmd, e)
        cpu = {name: [] for name, _, _ in cmds}
        faults = {}
        for _ in range(runs):
            for name, cmd, e in cmds:
                ms, faults[name] = run_once(cmd, e)
                cpu[name].append(ms)
        print("| command | NVML calls | instructions (callgrind) | less nvmlInit_v2 | minor faults "
              "| CPU ms median | spread (p25-p75) |")
        print("|---|---|---|---|---|---|---|")
        for name, cmd, e in cmds:
            q = statistics.quantiles(cpu[name], n=4)
            total, init = instructions(cmd, e, tmp)
            print("| %s | %s | {:,} | {:,} | %d | %.2f | %.2f-%.2f |".format(total, total - init)
                  % (name, nvml_calls(cmd, e, tmp), faults[name], statistics.median(cpu[name]),
                     q[0], q[2]))
        print("\n%d rounds, each command once per round in turn." % runs)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
