#!/usr/bin/env python3
"""NVML calls of each nvidia-smi mode of `gpuscope query`, and whether two builds print the same.

Usage: bench/smi_calls.py BUILD [OLD_BUILD] [SCENARIO ...]

Runs every mode below on nvml-sim (BUILD/sim/libnvidia-ml.so.1, the clock frozen, no agent
reachable) for each scenario (default: every file of sim/scenarios), counting NVML calls with
NVML_SIM_COUNT (sim/core.c: every entry point but nvmlInit*/nvmlShutdown). With OLD_BUILD, the
same runs with its gpuscope and nvml-sim, and a column saying whether stdout and the exit status
are the same (the wall-clock dates in -q and the table masked). The deterministic budgets of some
of these figures are in tests/e2e/test_budgets.py.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SECTIONS = ("MEMORY,UTILIZATION,ECC,TEMPERATURE,POWER,CLOCK,COMPUTE,PIDS,PERFORMANCE,"
            "SUPPORTED_CLOCKS,PAGE_RETIREMENT,ACCOUNTING,ENCODER_STATS,FBC_STATS,ROW_REMAPPER,"
            "VOLTAGE,RESET_STATUS").split(",")
MODES = [
    ("table", ["query"]),
    ("table -i 1", ["query", "-i", "1"]),
    ("-L", ["query", "-L"]),
    ("--version", ["query", "--version"]),
    ("-q", ["query", "-q"]),
    ("-q -x", ["query", "-q", "-x"]),
] + [("-q -d " + s, ["query", "-q", "-d", s]) for s in SECTIONS] + [
    ("-q -x -d " + s, ["query", "-q", "-x", "-d", s]) for s in SECTIONS] + [
    ("dmon", ["query", "dmon", "-c", "1"]),
    ("dmon -s pucvmet", ["query", "dmon", "-c", "1", "-s", "pucvmet"]),
    ("dmon -s e", ["query", "dmon", "-c", "1", "-s", "e"]),
    ("pmon", ["query", "pmon", "-c", "1"]),
    ("pmon -s um", ["query", "pmon", "-c", "1", "-s", "um"]),
    ("topo -m", ["query", "topo", "-m"]),
    ("nvlink -s", ["query", "nvlink", "-s"]),
    ("nvlink -c", ["query", "nvlink", "-c"]),
]
DATE = re.compile(rb"(Mon|Tue|Wed|Thu|Fri|Sat|Sun) [A-Z][a-z][a-z] [ 0-9]\d \d\d:\d\d:\d\d \d{4}")


def run(build, scenario, args, tmp):
    count = os.path.join(tmp, "count")
    if os.path.exists(count):
        os.unlink(count)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NVML_SIM") and k != "LD_LIBRARY_PATH"}
    env.update(GPUSCOPE_NVML_LIBRARY=os.path.join(build, "sim", "libnvidia-ml.so.1"),
               NVML_SIM_SCENARIO=scenario, NVML_SIM_TIME="100", NVML_SIM_COUNT=count, TZ="UTC",
               NO_COLOR="1", LC_ALL="C.UTF-8", GPUSCOPE_HTTP_SOCKET="/nonexistent/agent.sock",
               XDG_RUNTIME_DIR="/nonexistent")
    r = subprocess.run([os.path.join(build, "gpuscope")] + args, env=env, capture_output=True,
                       timeout=120)
    calls = None
    if os.path.exists(count):
        for line in open(count):
            w = line.split()
            if w[:2] == ["nvml_calls", "total"]:
                calls = int(w[2])
    return calls, r.returncode, DATE.sub(b"DATE", r.stdout)


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    build = os.path.abspath(args.pop(0))
    old = os.path.abspath(args.pop(0)) if args and os.path.isdir(args[0]) else None
    scenarios = args or sorted(os.path.join(ROOT, "sim", "scenarios", f)
                               for f in os.listdir(os.path.join(ROOT, "sim", "scenarios"))
                               if f.endswith(".json"))
    differ = 0
    with tempfile.TemporaryDirectory(prefix="gs-smi-calls.") as tmp:
        for sc in scenarios:
            with open(sc) as f:
                ngpu = len(json.load(f).get("gpus", []))
            print("%s (%d GPUs)" % (os.path.basename(sc), ngpu))
            print("  %-26s %8s %8s  %s" % ("mode", "old", "calls", "output"))
            for name, argv in MODES:
                n, rc, out = run(build, sc, argv, tmp)
                if old:
                    n0, rc0, out0 = run(old, sc, argv, tmp)
                    same = "same" if (rc0, out0) == (rc, out) else "DIFFERS"
                    differ += same != "same"
                else:
                    n0, same = "", ""
                print("  %-26s %8s %8s  %s" % (name, n0, n, same))
    if differ:
        print("%d runs print differently" % differ)
        sys.exit(1)


if __name__ == "__main__":
    main()
