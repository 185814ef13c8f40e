"""`gpuscope query` end to end on nvml-sim: option spellings, -i, -f, format flags, loops and
their signals, a lost GPU, and every error path with its message and nvidia-smi exit status.

Scenarios are the capture replays of tests/e2e/scenarios plus a two-GPU one written to a
temporary directory (the H100 load capture twice, the second GPU on bus 0x0C).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN  # noqa: E402
from gsenv import sim_env, start_agent, stop_agent, clean_up_at_exit  # noqa: E402

SIM = os.path.join(BUILD, "sim", "libnvidia-ml.so.1")
SCEN = os.path.join(SRC, "tests", "e2e", "scenarios")
H100_LOAD = os.path.join(SCEN, "capture-h100-load.json")
TS = re.compile(r"^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}$")
HINT = "Please run 'gpuscope query -h' for help."


def env_for(scenario, **extra):
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_TIME="100", TZ="UTC")
    env.pop("NVML_SIM_SCENARIO", None)
    if scenario:
        env["NVML_SIM_SCENARIO"] = scenario
    env.update(extra)
    return env


def q(args, scenario=H100_LOAD, **extra):
    return subprocess.run([BIN, "query"] + args, env=env_for(scenario, **extra),
                          capture_output=True, text=True, timeout=60)


def two_gpu_scenario(tmp):
    """The H100 load capture twice; GPU 1 on bus 0x0C with its own UUID and one process.
    With lost=True GPU 1 has fallen off the bus before the query."""
    with open(H100_LOAD, encoding="utf-8") as fh:
        sc = json.load(fh)
    g = json.loads(json.dumps(sc["gpus"][0]))
    g["uuid"] = "GPU-11111111-2222-3333-4444-555555555555"
    g["pci"]["bus"] = 0x0C
    g["pci"]["device"] = 0
    sc["gpus"].append(g)
    sc["processes"].append({"pid": 4242, "gpu": 1, "type": "compute", "name": "python3",
                            "used_memory_mib": 100})
    paths = {}
    for lost in (False, True):
        if lost:
            sc["events"] = [{"at_s": 50, "type": "gpu_lost", "gpu": 1}]
        paths[lost] = os.path.join(tmp, "two-%s.json" % ("lost" if lost else "ok"))
        with open(paths[lost], "w", encoding="utf-8") as fh:
            json.dump(sc, fh)
    return paths


def errors(t):
    r = q(["--query-gpu=index,device_minor,name", "--format=csv"])
    t.eq((r.returncode, r.stdout, r.stderr),
         (2, 'Field "device_minor" is not a valid field to query.\n\n', ""),
         "unknown field: nvidia-smi's message on stdout, then an empty line; status 2")
    r = q(["--query-compute-apps=pid,memory.used", "--format=csv"])
    t.eq((r.returncode, r.stdout), (2, 'Field "memory.used" is not a valid field to query.\n\n'),
         "a GPU field is not a compute-apps field")
    r = q(["--query-gpu=index"])
    t.eq((r.returncode, r.stdout, r.stderr),
         (2, "", '"--format=" switch is missing. %s\n' % HINT), "missing --format: status 2")
    r = q(["--query-gpu=index", "--format=xml"])
    t.eq((r.returncode, r.stderr), (2, '"xml" is not a valid format option. %s\n' % HINT),
         "bad --format word")
    r = q(["--query-gpu=index", "--format=csv", "--bogus"])
    t.eq((r.returncode, r.stderr), (2, "ERROR: Option --bogus is not recognized. %s\n" % HINT),
         "unknown option")
    r = q(["--format=csv"])
    t.eq((r.returncode, r.stderr),
         (2, "Invalid combination of input arguments. %s\n" % HINT), "no --query-* switch")
    r = q(["--query-gpu=index", "--query-compute-apps=pid", "--format=csv"])
    t.eq(r.returncode, 2, "two --query-* switches")
    r = q(["--query-gpu=index", "--format=csv", "-i", "7"])
    t.eq((r.returncode, r.stdout, r.stderr), (6, "No devices were found\n", ""),
         "-i naming no GPU: 'No devices were found', status 6")
    r = q(["--query-gpu=index", "--format=csv", "-i", "GPU-ffffffff-0000-0000-0000-000000000000"])
    t.eq(r.returncode, 6, "-i with an unknown UUID: status 6")
    r = q(["--query-gpu=index", "--format=csv"], GPUSCOPE_NVML_LIBRARY="/nonexistent")
    t.eq(r.returncode, 12, "no NVML library: status 12 (nvidia-smi's library-not-found)")
    lines = r.stderr.splitlines()
    t.ok(r.stdout == "" and len(lines) == 2 and "/nonexistent" in lines[0] and
         "hint:" in lines[1] and "gpuscope demo" in lines[1],
         "no NVML library: one line on stderr naming the path, then the demo hint", detail=r.stderr)
    r = q(["--query-gpu=index", "--format=csv"], scenario=None)
    t.eq(r.returncode, 9, "driver not loaded (nvml-sim without a scenario): status 9")
    lines = r.stderr.splitlines()
    t.ok(len(lines) == 2 and r.stderr.startswith("gpuscope query: ") and "hint:" in lines[1],
         "driver not loaded: one line on stderr, then the demo hint", detail=r.stderr)
    r = q(["--query-gpu=index", "--format=csv", "-f", "/nonexistent-dir/out.csv"])
    t.ok(r.returncode == 255 and "/nonexistent-dir/out.csv" in r.stderr,
         "-f into a missing directory: status 255, the path named", detail=r.stderr)


CAPTURES = os.path.join(os.path.dirname(SRC), "shared", "reference", "nvidia-smi-captures")
BRANCH_HELP = (  # (driver, the real --help-query-gpu of that branch)
    ("590.48.01", os.path.join(CAPTURES, "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt")),
    ("595.71.05", os.path.join(CAPTURES,
                               "linux-x86_64__nvidia-geforce-rtx-2080-super__595.71.05.txt")),
    ("610.57.04", os.path.join(SRC, "tests", "e2e", "smi_610",
                               "capture-rtx2080s-610.57.04-idle.smi")))


def help_names(text):
    return re.findall(r'^"([^" ]+)"', text, re.M)  # not the '"0: Default"' value lines


def capture_help(path):
    """The field names of a capture's --help-query-gpu block, in order ([] if absent)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError:
        return []
    i = text.find("# $ nvidia-smi --help-query-gpu\n")
    if i < 0:
        return []
    j = text.find("\n# ", i + 10)
    return help_names(text[i:j if j > 0 else len(text)])


def driver_scenario(tmp, driver):
    with open(H100_LOAD, encoding="utf-8") as fh:
        scen = json.load(fh)
    scen["driver_version"] = driver
    path = os.path.join(tmp, "driver-%s.json" % driver)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    return path


def branches(t, tmp):
    """--help-query-gpu and --query-gpu follow the installed driver's branch: the field names,
    in order, of real nvidia-smi 590, 595 and 610; a field the branch lacks is refused as that
    nvidia-smi refuses it, one it has is answered."""
    for driver, cap in BRANCH_HELP:
        want = capture_help(cap)
        if not want:
            t.skip("--help-query-gpu at %s" % driver, "capture not found at " + cap)
            continue
        r = q(["--help-query-gpu"], scenario=driver_scenario(tmp, driver))
        got = help_names(r.stdout)
        diff = "only real: %s; only ours: %s" % ([x for x in want if x not in got],
                                                 [x for x in got if x not in want])
        t.ok(r.returncode == 0 and got == want,
             "--help-query-gpu at %s: the %d fields of that nvidia-smi, in its order"
             % (driver, len(want)), detail=diff)
    for driver, field, ok in (("595.71.05", "bbx.time_run", False),
                              ("595.71.05", "power_smoothing.primary_power_floor", False),
                              ("590.48.01", "kmd_version", False),
                              ("610.57.04", "bbx.time_run", True),
                              ("610.57.04", "gpu.base.current", True),
                              ("590.48.01", "power_smoothing.primary_power_floor", True)):
        r = q(["--query-gpu=index," + field, "--format=csv"],
              scenario=driver_scenario(tmp, driver))
        if ok:
            unit = {"bbx.time_run": " [seconds]", "gpu.base.current": " [W]",
                    "power_smoothing.primary_power_floor": " [W]"}[field]
            t.eq((r.returncode, r.stdout), (0, "index, %s%s\n0, [N/A]\n" % (field, unit)),
                 "driver %s: --query-gpu=%s is answered ([N/A]: not read)" % (driver, field))
        else:
            t.eq((r.returncode, r.stdout),
                 (2, 'Field "%s" is not a valid field to query.\n\n' % field),
                 "driver %s: --query-gpu=%s is refused as that nvidia-smi does, exit 2"
                 % (driver, field))


def helps(t):
    r = q(["--help-query-gpu"], scenario=None, GPUSCOPE_NVML_LIBRARY="/nonexistent")
    names = re.findall(r'^"([^"]+)"(?: or "([^"]+)")?$', r.stdout, re.M)
    t.eq((r.returncode, len(names)), (0, 241),
         "--help-query-gpu without a driver: every branch's fields (241, as 610 lists)")
    t.ok(("name", "gpu_name") in names and ("clocks.current.sm", "clocks.sm") in names,
         "--help-query-gpu shows aliases as nvidia-smi does")
    # every field every capture queries is accepted
    wanted = set()
    for f in os.listdir(SCEN):
        if f.endswith(".expected"):
            with open(os.path.join(SCEN, f), encoding="utf-8") as fh:
                for line in fh:
                    m = re.match(r"# nvidia-smi --query-gpu=(\S+)", line)
                    if m:
                        wanted |= set(m.group(1).split(","))
    listed = {n for pair in names for n in pair if n}
    t.eq(sorted(wanted - listed), [], "every field of the captures' queries is listed")
    r = q(["--help-query-compute-apps"], scenario=None)
    t.ok(r.returncode == 0 and '"used_gpu_memory" or "used_memory"' in r.stdout,
         "--help-query-compute-apps", detail=r.stdout)
    r = q(["-h"], scenario=None)
    t.ok(r.returncode == 0 and "--query-gpu=FIELDS" in r.stdout, "-h prints the usage")


def formats(t, tmp):
    base = q(["--query-gpu=index,memory.used,power.draw,temperature.gpu", "--format=csv"])
    t.eq(base.stdout, "index, memory.used [MiB], power.draw [W], temperature.gpu\n"
                      "0, 19818 MiB, 631.95 W, 59\n", "csv with header and units")
    r = q(["--query-gpu", "index,memory.used,power.draw,temperature.gpu", "--format",
           "csv,noheader,nounits"])
    t.eq(r.stdout, "0, 19818, 631.95, 59\n", "--opt VALUE spelling, noheader and nounits")
    r = q(["--query-gpu=index,memory.used", "--format=nounits,csv"])
    t.eq(r.stdout, "index, memory.used [MiB]\n0, 19818\n",
         "nounits keeps the unit in the header")
    out = os.path.join(tmp, "out.csv")
    r = q(["--query-gpu=index,memory.used,power.draw,temperature.gpu", "--format=csv",
           "--filename=" + out])
    with open(out, encoding="utf-8") as fh:
        t.eq((r.returncode, r.stdout, fh.read()), (0, "", base.stdout),
             "-f writes the same bytes to the file, nothing to stdout")
    r = q(["--query-compute-apps=pid,used_memory", "--format=csv"],
          os.path.join(SCEN, "capture-h100-idle.json"))
    t.eq(r.stdout, "pid, used_memory [MiB]\n", "no compute process: the header alone")
    r = q(["--query-compute-apps=pid", "--format=csv,noheader"],
          os.path.join(SCEN, "capture-h100-idle.json"))
    t.eq((r.returncode, r.stdout), (0, ""), "no compute process, noheader: nothing")


def ids(t, tmp):
    paths = two_gpu_scenario(tmp)
    ok = paths[False]
    f = ["--query-gpu=index,pci.bus_id", "--format=csv,noheader"]
    both = "0, 00000000:00:09.0\n1, 00000000:0C:00.0\n"
    t.eq(q(f, ok).stdout, both, "two GPUs, index order")
    t.eq(q(f + ["-i", "1"], ok).stdout, "1, 00000000:0C:00.0\n", "-i by index")
    t.eq(q(f + ["--id=gpu-11111111-2222-3333-4444-555555555555"], ok).stdout,
         "1, 00000000:0C:00.0\n", "-i by UUID, case-insensitive")
    t.eq(q(f + ["-i", "0C:00.0"], ok).stdout, "1, 00000000:0C:00.0\n", "-i by short bus id")
    t.eq(q(f + ["-i", "00000000:0c:00.0,0"], ok).stdout, both,
         "-i list, rows still in index order")
    r = q(["--query-compute-apps=pid,process_name,gpu_bus_id", "--format=csv,noheader", "-i",
           "1"], ok)
    t.eq(r.stdout, "4242, python3, 00000000:0C:00.0\n", "-i filters compute apps by GPU")
    r = q(["--query-gpu=index,name,memory.used,inforom.img,fabric.state,display_mode",
           "--format=csv,noheader"], paths[True])
    t.eq((r.returncode, r.stdout),
         (0, "0, NVIDIA H100 80GB HBM3, 19818 MiB, G520.0200.00.05, Completed, "
             "[Requested functionality has been deprecated]\n"
             "1, [GPU is lost], [GPU is lost], [GPU is lost], [GPU is lost], "
             "[Requested functionality has been deprecated]\n"),
         "a GPU lost before the query: its cells say [GPU is lost], the others go on")


def run_loop(args, seconds, sig, first_lines):
    """Starts a loop, waits for its first output (start-up time does not count), lets it run
    `seconds` more, sends sig and returns (status, every output line, stderr)."""
    p = subprocess.Popen([BIN, "query"] + args, env=env_for(H100_LOAD), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    lines = [p.stdout.readline().rstrip("\n") for _ in range(first_lines)]
    time.sleep(seconds)
    p.send_signal(sig)
    try:
        out, err = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    return p.returncode, lines + out.splitlines(), err


def loops(t):
    for sig in (signal.SIGINT, signal.SIGTERM):
        rc, lines, err = run_loop(["--query-gpu=timestamp,index", "--format=csv", "-lms", "200"],
                                  1.1, sig, 2)
        name = signal.Signals(sig).name
        t.eq(rc, 0, "-lms 200 ended by %s: status 0 (stderr: %s)" % (name, err.strip()))
        t.ok(lines[:1] == ["timestamp, index"] and lines.count("timestamp, index") == 1,
             "-lms 200: one header", detail=lines)
        rows = [ln.split(", ")[0] for ln in lines[1:]]
        t.ok(4 <= len(rows) <= 9 and all(TS.match(x) for x in rows),
             "-lms 200 for 1.1 s after the first row: 4..9 rows (%d)" % len(rows), detail=lines)
        ms = [int(x[-6:-4]) * 1000 + int(x[-3:]) for x in rows]  # seconds.millis of the minute
        span = sum((b - a) % 60000 for a, b in zip(ms, ms[1:]))
        mean = span / max(1, len(ms) - 1)
        # ticks sit on start + k * 200 ms, so a late sample does not shift the ones after it
        t.ok(180 <= mean <= 220, "-lms 200: rows 200 ms apart on average (%.1f)" % mean,
             detail=rows)
    rc, lines, _ = run_loop(["--query-gpu=index", "--format=csv,noheader", "-l", "1"], 1.5,
                            signal.SIGINT, 1)
    t.eq((rc, lines), (0, ["0", "0"]), "-l 1 for 1.5 s after the first row: two rows")


def agent_source(t, tmp):
    """Fields of the -q detail readings, which the agent's cycle does not read, come from NVML
    even when a local agent answers; where NVML does not open, from the agent (N/A cells)."""
    procs = []
    clean_up_at_exit(procs)
    sock = os.path.join(tmp, "agent.sock")
    p, _, up = start_agent(["--data-dir", os.path.join(tmp, "agent-data"), "--socket", "off",
                            "--http-socket", sock],
                           sim_env(os.path.join(SCEN, "capture-h100-idle.json"), time=100),
                           procs)
    if not up:
        t.ok(False, "agent for the source checks answers /healthz")
        return
    detail = ["--query-gpu=index,addressing_mode,fabric.state", "--format=csv,noheader"]
    r = q(["--query-gpu=index,name", "--format=csv,noheader"], GPUSCOPE_HTTP_SOCKET=sock)
    t.ok(r.returncode == 0 and "via agent" in r.stderr, "plain fields: read through the agent",
         detail=r.stderr)
    r = q(detail, os.path.join(SCEN, "capture-h100-idle.json"), GPUSCOPE_HTTP_SOCKET=sock)
    t.eq((r.returncode, r.stdout, "via agent" in r.stderr), (0, "0, None, Completed\n", False),
         "detail fields: read from NVML although the agent answers")
    r = q(detail, None, GPUSCOPE_HTTP_SOCKET=sock, GPUSCOPE_NVML_LIBRARY="/nonexistent/libnvml.so")
    t.eq((r.returncode, r.stdout, "via agent" in r.stderr), (0, "0, [N/A], N/A\n", True),
         "detail fields without NVML: the agent's answer, N/A where it has none")
    stop_agent(p)


def main():
    t = Tap()
    if not os.path.exists(SIM):
        t.skip("gpuscope query end to end", "nvml-sim not built (%s)" % SIM)
        return t.done()
    with tempfile.TemporaryDirectory() as tmp:
        errors(t)
        helps(t)
        branches(t, tmp)
        formats(t, tmp)
        ids(t, tmp)
        loops(t)
        agent_source(t, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
