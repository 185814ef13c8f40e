#!/usr/bin/env python3
"""Instructions per agent cycle, counted by callgrind (stable on a loaded machine).

Usage: bench/agent_cycle_callgrind.py BUILD [SOURCE_ROOT]

Runs BUILD/tests/unit/test_budget (the agent's gs_agent_cycle on the bundled 8-GPU training
scenario, 120 warm cycles then one whole cadence period of 60) under valgrind's callgrind,
collecting only inside gs_agent_cycle with one dump per cycle, and prints the instructions of
the counted cycles (121..180): mean, median, the part inside libnvidia-ml (nvml-sim), and the
mean by position in the 10-cycle health/NVLink-state period.
"""
import glob
import os
import re
import statistics
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    root = os.path.abspath(sys.argv[2] if len(sys.argv) > 2 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    exe = os.path.join(build, "tests/unit/test_budget")
    sim = os.path.join(build, "sim/libnvidia-ml.so.1")
    with tempfile.TemporaryDirectory(prefix="gs-cg.") as d:
        env = dict(os.environ, GPUSCOPE_SIM_LIB=sim, GPUSCOPE_SOURCE_ROOT=root, TMPDIR=d)
        r = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                            "--toggle-collect=gs_agent_cycle", "--dump-after=gs_agent_cycle",
                            "--callgrind-out-file=" + os.path.join(d, "cg.%p"), exe],
                           env=env, capture_output=True, text=True)
        for line in r.stdout.splitlines():
            if line.startswith("# agent cycle"):
                print(line)
        files = {int(f.rsplit(".", 1)[1]): f for f in glob.glob(os.path.join(d, "cg.*.*"))}
        tot, sim_i = [], []
        for k in range(121, 181):
            t = 0
            with open(files[k]) as f:
                for line in f:
                    if line.startswith(("summary:", "totals:")):
                        t = int(line.split()[1])
            out = subprocess.run(["callgrind_annotate", "--inclusive=no", "--threshold=100",
                                  files[k]], capture_output=True, text=True).stdout
            s = 0
            for line in out.splitlines():
                m = re.match(r"\s*([\d,]+)\s.*\[(.*)\]\s*$", line)
                if m and "libnvidia-ml" in m.group(2):
                    s += int(m.group(1).replace(",", ""))
            tot.append(t)
            sim_i.append(s)
    own = [a - b for a, b in zip(tot, sim_i)]
    print("instructions per cycle (60 cycles): mean %.0f, median %.0f, min %d, max %d" %
          (statistics.mean(tot), statistics.median(tot), min(tot), max(tot)))
    print("inside libnvidia-ml: mean %.0f; the rest: mean %.0f, median %.0f" %
          (statistics.mean(sim_i), statistics.mean(own), statistics.median(own)))
    print("mean by cycle number mod 10:", [round(statistics.mean(tot[i::10])) for i in range(10)])


if __name__ == "__main__":
    main()
