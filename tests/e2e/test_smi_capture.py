"""nvidia-smi's other outputs (the default table, -L, --version, -q, dmon, pmon, nvlink -s, topo -m)
against real captures, byte for byte.

tests/e2e/scenarios/capture-<board>-<state>.smi holds the capture's sections verbatim (each a
"# $ nvidia-smi ARGS" line, then its bytes; shared/reference/nvidia-smi-captures). The board's
scenario (capture-<board>-<state>.json, the one test_query_capture.py replays) describes the
machine at the instant of the --query-gpu section; nvidia-smi ran each other section a moment
later, when power, temperatures and process memory had moved. capture-<board>-<state>.smi.json
holds, per section, the readings of that instant ("table", "-q", "dmon", "pmon": a scenario
fragment merged over the base one, GPUs by position, processes by pid). Nothing else differs.

The output must equal the capture with only these substitutions:
- the table's first line and -q's Timestamp: the time of our sample (format checked);
- cells the model does not carry (NOT_IN_MODEL below): we demand nvidia-smi's "N/A" there, and
  each case reports how many such cells it has.
dmon and pmon run with -c 1 here (their sampling interval is at least a second); their header
and first sample are compared, and one case checks -c 3 prints three samples.
"""
import copy
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN  # noqa: E402

SIM = os.path.join(BUILD, "sim", "libnvidia-ml.so.1")
SCEN = os.path.join(SRC, "tests", "e2e", "scenarios")
CASES = {"h100-idle": 100, "h100-load": 100, "h100-mig-idle": 100, "h100-mig-load": 100,
         "rtx4080s-idle": 100, "rtx4080s-load": 100, "rtx2080s-idle": 1000,
         "rtx2080s-load": 1000, "l40s-idle": 1000, "l40s-load": 1000}
CTIME = re.compile(r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}$")
SECTIONS = ("table", "-L", "--version", "-q", "dmon", "pmon", "nvlink", "topo")
# SMI_SECTIONS=table,-L limits a run to some sections (while working on one)
ONLY = [x for x in os.environ.get("SMI_SECTIONS", "").split(",") if x]


def load_blocks(name):
    """[(args after 'nvidia-smi', text)] from a .smi file."""
    blocks = []
    with open(os.path.join(SCEN, "capture-%s.smi" % name), encoding="utf-8") as fh:
        for line in fh.read().split("\n")[:-1]:
            if line.startswith("# $ nvidia-smi"):
                blocks.append((line[len("# $ nvidia-smi"):].split(), []))
            elif blocks:
                blocks[-1][1].append(line)
    return [(argv, "".join(x + "\n" for x in lines)) for argv, lines in blocks]


def section_key(argv):
    if not argv:
        return "table"
    return argv[0]


def merge(base, over):
    """over merged into base: dicts by key, "gpus" and MIG "instances" by position, "processes"
    by pid."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        if k in ("gpus", "instances"):
            for i, g in enumerate(v):
                out[k][i] = merge(out[k][i], g)
        elif k == "processes":
            procs = out.setdefault("processes", [])
            for p in v:
                hit = [q for q in procs if q["pid"] == p["pid"] and q.get("gpu", 0) == p.get("gpu", 0)]
                if hit:
                    hit[0].update(p)
                else:
                    procs.append(p)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


def scenario_for(name, key, tmp):
    with open(os.path.join(SCEN, "capture-%s.json" % name), encoding="utf-8") as fh:
        base = json.load(fh)
    path = os.path.join(SCEN, "capture-%s.smi.json" % name)
    over = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            over = json.load(fh).get(key, {})
    out = os.path.join(tmp, "%s-%s.json" % (name, key.strip("-")))
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(merge(base, over), fh)
    return out


def run(name, argv, scenario):
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=scenario,
               NVML_SIM_TIME=str(CASES[name]), TZ="UTC")
    env.pop("NO_COLOR", None)  # topo -m underlines its header as the captures show
    return subprocess.run([BIN, "query"] + argv, env=env, capture_output=True, text=True,
                          timeout=60)


def mask_table(want, got, notes):
    """The capture's table with our timestamp line."""
    w, g = want.split("\n"), got.split("\n")
    if g and CTIME.match(g[0].rstrip()):
        notes.setdefault("stamps", []).append(g[0])
        w[0] = g[0]
    return "\n".join(w)


# -q rows whose value gpuscope's model (include/gpuscope/gs_model.h) does not carry, with the
# NVML call that would fill them: there we print N/A, as nvidia-smi does for a call that fails.
Q_NOT_IN_MODEL = {
    "GPU Part Number": "no public NVML call (nvml.h 13.3, driver 610.43.02)",
    "Platform Info/Peer Type": "nvmlDeviceGetPlatformInfo (values unconfirmed by any capture)",
    "Platform Info/Host ID": "nvmlDeviceGetPlatformInfo",
    "Platform Info/Tray Index": "nvmlDeviceGetPlatformInfo",
    "Platform Info/Slot Number": "nvmlDeviceGetPlatformInfo",
    "Platform Info/Chassis Serial Number": "nvmlDeviceGetPlatformInfo",
    "Platform Info/GPU Fabric GUID": "nvmlDeviceGetPlatformInfo",
    "PCI/GPU Link Info/PCIe Generation/Host Max": "no public NVML call (nvml.h 13.3, driver 610.43.02)",
    "Sparse Operation Mode": "no public NVML call (nvml.h 13.3, driver 610.43.02)",
}
Q_LINE = re.compile(r"^( *)(.*?) *: (.*)$")


def q_paths(text):
    """[(path, value or None)] of -q text lines, path joined with '/' by indentation."""
    stack, out = [], []
    for line in text.split("\n"):
        m = Q_LINE.match(line)
        label = m.group(2) if m else line.strip()
        depth = (len(line) - len(line.lstrip(" "))) // 4
        del stack[max(depth - 1, 0):]
        path = "/".join(stack + [label]) if depth else label
        out.append((path, m.group(3) if m else None))
        if not m and line.strip():
            stack.append(line.strip() if not line.endswith(" ") else line.lstrip())
    return out


def mask_q(want, got, notes):
    """The capture's -q with our Timestamp and N/A where the model lacks the row."""
    w, g = want.split("\n"), got.split("\n")
    wp, gp = q_paths(want), q_paths(got)
    for i, line in enumerate(w):
        if i >= len(g) or line == g[i]:
            continue
        path = wp[i][0]
        if path == "Timestamp" and CTIME.match(gp[i][1] or ""):
            w[i] = g[i]
        elif path in Q_NOT_IN_MODEL and gp[i][0] == path and gp[i][1] == "N/A":
            notes.setdefault("not_in_model", []).append("%s=%s" % (path, wp[i][1]))
            w[i] = g[i]
    return "\n".join(w)


PMON_UTIL = [(22, 29), (29, 36), (36, 43), (43, 50)]  # sm, mem, enc, dec columns


def mask_pmon(want, got, notes):
    """pmon's first sample with our cell where one side has a utilization and the other "-":
    nvidia-smi drops an engine without samples in the interval, the model keeps one utilization
    status for a process's four engines."""
    w, g = want.split("\n"), got.split("\n")
    for i in range(2, min(len(w), len(g))):
        a, b = w[i], g[i]
        if len(a) != len(b):
            continue
        for lo, hi in PMON_UTIL:
            x, y = a[lo:hi].strip(), b[lo:hi].strip()
            if x != y and "-" in (x, y):
                notes.setdefault("not_in_model", []).append("%s->%s" % (x, y))
                a = a[:lo] + b[lo:hi] + a[hi:]
        w[i] = a
    return "\n".join(w)


def main():
    t = Tap()
    if not os.path.exists(SIM):
        t.skip("smi capture replay", "nvml-sim not built (%s)" % SIM)
        return t.done()
    with tempfile.TemporaryDirectory() as tmp:
        for name in CASES:
            for argv, want in load_blocks(name):
                key = section_key(argv)
                if key not in SECTIONS or (ONLY and key not in ONLY):
                    continue
                if key in ("dmon", "pmon"):
                    argv = [key, "-c", "1"]
                    lines = want.split("\n")
                    nrows = 1 if key == "dmon" else max(1, sum(
                        1 for x in lines[2:] if x and x.split()[0] == "0") // 5)
                    want = "\n".join(lines[:2 + nrows]) + "\n"
                what = "%s nvidia-smi %s" % (name, " ".join(argv))
                r = run(name, argv, scenario_for(name, key, tmp))
                t.eq(r.returncode, 0, "%s: exit status 0 (stderr: %s)" % (what, r.stderr.strip()))
                notes = {}
                if key == "table":
                    want = mask_table(want, r.stdout, notes)
                elif key == "-q":
                    want = mask_q(want, r.stdout, notes)
                elif key == "pmon":
                    want = mask_pmon(want, r.stdout, notes)
                diff = "".join(difflib.unified_diff(want.splitlines(True), r.stdout.splitlines(True),
                                                    "capture", "gpuscope", n=1))
                t.ok(r.stdout == want, "%s: output equals the capture byte for byte" % what,
                     detail=diff)
                miss = notes.get("not_in_model", [])
                if miss:
                    print("# %s: %d cells differ only because the model lacks the field"
                          % (what, len(miss)), flush=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
