#!/usr/bin/env python3
"""Start-up and call cost of one-shot gpuscope commands on nvml-sim (issue 11).

Usage: bench/startup.py BUILD_DIR [RUNS]

For each command: the median CPU time (user + system of the child, from wait4's rusage) and
minor page faults over RUNS runs (default 200, after 5 warm-ups), and the NVML calls per GPU
that one run makes (nvml-sim's NVML_SIM_COUNT counter, sim/core.c). Each command runs twice:
through `gpuscope` (main_light.c: the quick check, query and --version with only the
libraries they use) and through `gpuscope-full` (every command and every library: what the
single binary was before the split). Scenario: the bundled 8-GPU training scenario, clock
frozen (NVML_SIM_TIME=100). Prints a Markdown table for bench/RESULTS.md.
"""
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_once(cmd, env):
    """CPU ms and minor faults of one run. posix_spawn (vfork + exec): a fork of this Python
    process would charge the child the copy-on-write faults of its pages before the exec."""
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


def nvml_calls(cmd, env):
    with tempfile.NamedTemporaryFile(prefix="gs-nvml-count.") as f:
        e = dict(env, NVML_SIM_COUNT=f.name)
        subprocess.run(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        for line in open(f.name):
            w = line.split()
            if w[:2] == ["nvml_calls", "total"]:
                return int(w[2]) / max(int(w[4]), 1)
    return float("nan")


def counts(cmd, env, timeout_s=None):
    """nvml-sim's per-function call counts of one run (SIGINT after timeout_s, watch mode)."""
    with tempfile.NamedTemporaryFile(prefix="gs-nvml-count.") as f:
        e = dict(env, NVML_SIM_COUNT=f.name)
        if timeout_s:
            cmd = ["timeout", "-s", "INT", str(timeout_s)] + cmd
        subprocess.run(cmd, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out, gpus = {}, 1
        for line in open(f.name):
            w = line.split()
            if w[:2] == ["nvml_calls", "total"]:
                out["total"], gpus = int(w[2]), max(int(w[4]), 1)
            elif w[0] == "nvml_call":
                out[w[1]] = int(w[2])
        return out, gpus


def watch_per_refresh(exe, env):
    """NVML calls per GPU per watch refresh after the first frame: (watch total - one-shot
    total) / (refreshes - 1) / GPUs; refreshes counted by nvmlDeviceGetUtilizationRates."""
    one, gpus = counts([exe], env)
    w, _ = counts([exe, "-i", "0.2"], env, timeout_s=2.1)
    cycles = w.get("nvmlDeviceGetUtilizationRates", 0) // gpus
    if cycles < 2:
        return float("nan"), cycles
    return (w["total"] - one["total"]) / (cycles - 1) / gpus, cycles


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    env = dict(os.environ)
    env["GPUSCOPE_NVML_LIBRARY"] = os.path.abspath(os.path.join(build, "sim",
                                                                "libnvidia-ml.so.1"))
    env["NVML_SIM_SCENARIO"] = os.path.join(ROOT, "sim", "scenarios", "h100x8-training.json")
    env["NVML_SIM_TIME"] = "100"
    env["NO_COLOR"] = "1"
    env["GPUSCOPE_HTTP_SOCKET"] = "/nonexistent/agent.sock"  # never an agent's answer
    query = ["query", "--query-gpu=index,name,utilization.gpu,memory.used,memory.total,"
             "temperature.gpu,power.draw", "--format=csv"]
    cmds = [("--version", ["--version"]), ("(quick check)", []), ("--json", ["--json"]),
            ("query (7 fields)", query)]
    floor = [run_once(["/bin/true"], env) for _ in range(runs)]
    print("Floor: `/bin/true` %.2f ms CPU, %d page faults (median of %d)\n" % (
        statistics.median(c for c, _ in floor), statistics.median(f for _, f in floor), runs))
    print("| command | executable | runs | CPU ms (median) | page faults (median) |"
          " NVML calls per GPU |")
    print("|---|---|---|---|---|---|")
    for label, args in cmds:
        for exe in ("gpuscope", "gpuscope-full"):
            cmd = [os.path.abspath(os.path.join(build, exe))] + args
            for _ in range(5):
                run_once(cmd, env)
            cpu, flt = zip(*(run_once(cmd, env) for _ in range(runs)))
            calls = nvml_calls(cmd, env) if args != ["--version"] else 0
            print("| `gpuscope %s` | %s | %d | %.2f | %d | %.1f |" % (
                label if args else "", exe, runs, statistics.median(cpu),
                statistics.median(flt), calls))
    per, cycles = watch_per_refresh(os.path.abspath(os.path.join(build, "gpuscope")), env)
    print("\nWatch mode (`gpuscope -i 0.2`, %d refreshes): %.1f NVML calls per GPU per refresh"
          % (cycles, per))


if __name__ == "__main__":
    main()
