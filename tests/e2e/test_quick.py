"""`gpuscope` (the quick check) end to end, on nvml-sim.

Every bundled scenario in sim/scenarios/ is rendered at a frozen virtual time, as text and as
JSON: the GPU names, UUIDs, driver version and processes must be the scenario's, and every
number the text shows must be the JSON's (one snapshot each, same virtual time). Then: a GPU lost
before and during watch mode (time advanced through NVML_SIM_TIME=file:PATH), the failure exits
(no library, no driver, no GPU, bad flags), the --id filter, colour rules, and watch mode under
a pseudo-terminal and into a pipe, ended by SIGINT / SIGTERM with the cursor restored.
"""
import fcntl
import glob
import json
import math
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN  # noqa: E402

SIM = os.path.join(BUILD, "sim", "libnvidia-ml.so.1")
SCENARIOS = sorted(glob.glob(os.path.join(SRC, "sim", "scenarios", "*.json")))
MIB = 1048576
ESC = "\x1b"

t = Tap()


def env_for(scenario=None, sim_time="10", **extra):
    """A clean environment: the sim library, a scenario, frozen time, UTC, no NO_COLOR."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("NO_COLOR", "NVML_SIM_SCENARIO", "NVML_SIM_TIME", "NVML_SIM_EPOCH",
                        "COLUMNS", "TERM")}
    env["GPUSCOPE_NVML_LIBRARY"] = SIM
    env["TZ"] = "UTC"
    env["LC_ALL"] = "C.UTF-8"
    if scenario:
        env["NVML_SIM_SCENARIO"] = scenario
    if sim_time is not None:
        env["NVML_SIM_TIME"] = sim_time
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def run(args, env, timeout=30):
    p = subprocess.run([BIN] + args, env=env, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def scenario_gpus(sc):
    """The scenario's GPUs with their template merged in (shallow, nested dicts key by key)."""
    out = []
    for g in sc.get("gpus", []):
        merged = {}
        base = sc.get("templates", {}).get(g.get("template"), {})
        for src in (base, g):
            for k, v in src.items():
                if isinstance(v, dict) and isinstance(merged.get(k), dict):
                    merged[k] = {**merged[k], **v}
                else:
                    merged[k] = v
        out.append(merged)
    return out


def gpu_lines(text):
    return [l for l in text.splitlines() if l.startswith("[")]


def line_of_gpu(text, index):
    for l in gpu_lines(text):
        if re.match(r"\[%d\]\s" % index, l):
            return l
    return None


def check_gpu_line_against_json(line, g, where):
    """Every number on a GPU line equals the JSON snapshot's (or N/A where it is null)."""
    cells = [c.strip() for c in line.split(" |")]
    sens = cells[1]
    temp = g["temperature_gpu"]
    util = g["utilization_gpu"]
    ok = True
    want_temp = "N/A" if temp is None else "%d\u00b0C" % temp
    ok &= t.ok(sens.startswith(want_temp), "%s: temperature %s" % (where, want_temp),
               detail=line)
    want_util = "N/A" if util is None else "%d %%" % round(util * 100)
    if util is None and (g.get("unavailable") or {}).get("utilization_gpu") == "mig_mode":
        want_util = "MIG"  # NVML has no utilization in MIG mode: the JSON says why, text MIG
    ok &= t.ok(re.search(r",\s+%s" % re.escape(want_util), sens) is not None,
               "%s: utilization %s" % (where, want_util), detail=line)
    used, total = g["memory_used"], g["memory_total"]
    want_mem = "%s / %s MB" % ("N/A" if used is None else used // MIB,
                               "N/A" if total is None else total // MIB)
    ok &= t.ok(re.sub(r"\s+", " ", cells[2]).startswith(want_mem),
               "%s: memory %s" % (where, want_mem), detail=line)
    return ok


def scenario_checks(path):
    name = os.path.basename(path)
    sc = json.load(open(path))
    gpus = scenario_gpus(sc)
    at = "10"
    env = env_for(path, at)
    rc, out, err = run([], env)
    t.eq(rc, 0, "%s: exit 0" % name)
    t.ok(ESC not in out, "%s: no escape bytes into a pipe" % name, detail=out)
    lines = gpu_lines(out)
    t.eq(len(lines), len(gpus), "%s: one line per GPU" % name)
    header = out.splitlines()[0] if out else ""
    t.ok("driver " + sc.get("driver_version", "590.48.01") in header,
         "%s: header names the driver" % name, detail=header)
    for i, g in enumerate(gpus):
        line = line_of_gpu(out, i) or ""
        t.ok(g["name"] in line, "%s: GPU %d is a %s" % (name, i, g["name"]), detail=line)

    rc, js, err = run(["--json"], env)
    t.eq(rc, 0, "%s: --json exits 0" % name)
    try:
        doc = json.loads(js)
    except ValueError as e:
        t.ok(False, "%s: --json parses" % name, detail="%s\n%s" % (e, js[:2000]))
        return
    t.ok(True, "%s: --json parses" % name)
    t.eq(doc["driver_version"], sc.get("driver_version", "590.48.01"),
         "%s: JSON driver_version" % name)
    t.eq([g["uuid"] for g in doc["gpus"]], [g["uuid"] for g in gpus], "%s: JSON UUIDs" % name)
    t.eq([g["name"] for g in doc["gpus"]], [g["name"] for g in gpus], "%s: JSON names" % name)
    for i, g in enumerate(doc["gpus"]):
        want_total = gpus[i].get("memory", {}).get("total_mib")
        if want_total is not None and not g["lost"]:
            t.eq(g["memory_total"], want_total * MIB, "%s: GPU %d memory_total in bytes" % (name, i))
        line = line_of_gpu(out, i)
        if line and not g["lost"]:
            check_gpu_line_against_json(line, g, "%s GPU %d" % (name, i))
    # Processes: the scenario's (alive at t, on a GPU) are in the JSON and in the text.
    t_now = float(at)
    want = set()
    for p in sc.get("processes", []):
        if not isinstance(p.get("pid"), int):
            continue
        if not (p.get("start_s", 0) <= t_now < p.get("exit_s", math.inf)):
            continue
        want.add((p["gpu"], p["pid"]))
    got = set()
    for g in doc["gpus"]:
        for p in g.get("processes", []):
            got.add((g["index"], p["pid"]))
            if p["gpu_memory"] is not None:
                t.ok(isinstance(p["gpu_memory"], int), "%s: pid %d memory in bytes" % (name, p["pid"]))
    t.eq(got, want, "%s: JSON processes are the scenario's" % name)
    for gpu, pid in sorted(want):
        t.ok(re.search(r"/%d\(" % pid, out) is not None, "%s: pid %d shown" % (name, pid),
             detail=out)
    # MIG devices of the scenario show up under their GPU.
    for i, g in enumerate(gpus):
        mig = g.get("mig") or {}
        if mig.get("mode") == "enabled":
            for inst in mig.get("instances", []):
                t.ok(("MIG " + inst["profile"]) in out and "(gi %d, ci %d)" % (inst["gi"], inst["ci"]) in out,
                     "%s: MIG %s gi %d listed" % (name, inst["profile"], inst["gi"]), detail=out)
            t.eq(len(doc["gpus"][i]["mig_devices"]), len(mig.get("instances", [])),
                 "%s: JSON mig_devices" % name)
    # -a renders too, and keeps absent values N/A.
    rc, outa, err = run(["-a"], env)
    t.ok(rc == 0 and len(gpu_lines(outa)) == len(gpus), "%s: -a renders" % name, detail=err)


def lost_checks():
    path = os.path.join(SRC, "sim", "scenarios", "gpu-lost.json")
    if not os.path.exists(path):
        t.skip("gpu-lost", "no gpu-lost.json scenario")
        return
    # Lost from the start (t = 35): the GPU keeps a line, the others go on.
    rc, out, err = run([], env_for(path, "35"))
    t.eq(rc, 0, "lost at start: exit 0 (the other GPUs are fine)")
    l2 = line_of_gpu(out, 2) or ""
    t.ok(l2.endswith("| GPU is lost"), "lost at start: GPU 2 shows as lost", detail=out)
    for i in (0, 1, 3):
        t.ok("\u00b0C" in (line_of_gpu(out, i) or ""), "lost at start: GPU %d still read" % i,
             detail=out)
    rc, js, err = run(["--json"], env_for(path, "35"))
    doc = json.loads(js)
    t.ok(doc["gpus"][2]["lost"] is True and doc["gpus"][2]["temperature_gpu"] is None,
         "lost at start: JSON lost=true, readings null")

    # Lost in the middle of watch mode: time from a file, advanced from 25 s to 35 s.
    with tempfile.TemporaryDirectory() as d:
        clock = os.path.join(d, "t")
        with open(clock, "w") as f:
            f.write("25")
        env = env_for(path, "file:" + clock)
        rc, out, err = watch_with_clock(["-i", "0.2"], env, clock, signal.SIGINT)
        t.eq(rc, 0, "lost mid-watch: SIGINT ends with 0")
        frames = [f for f in out.split("\n\n") if f.strip()]
        t.ok(len(frames) >= 6, "lost mid-watch: several frames (%d)" % len(frames))
        first, last = frames[0], frames[-1]
        t.ok("GPU is lost" not in first and "\u00b0C" in (line_of_gpu(first, 2) or ""),
             "lost mid-watch: GPU 2 read before", detail=first)
        t.ok((line_of_gpu(last, 2) or "").endswith("NVIDIA A100 80GB PCIe | GPU is lost"),
             "lost mid-watch: GPU 2 lost after, its name kept", detail=last)
        t.ok(all("\u00b0C" in (line_of_gpu(last, i) or "") for i in (0, 1, 3)),
             "lost mid-watch: the others go on", detail=last)
        t.eq(err, "", "lost mid-watch: nothing on stderr")

        # The same as JSON Lines.
        rc, out, err = watch_with_clock(["--json", "-i", "0.2"], env, clock, signal.SIGTERM)
        t.eq(rc, 0, "JSON watch: SIGTERM ends with 0")
        docs = []
        for line in out.splitlines():
            try:
                docs.append(json.loads(line))
            except ValueError:
                t.ok(False, "JSON watch: every line is a document", detail=line)
                return
        t.ok(len(docs) >= 6, "JSON watch: one document per frame (%d)" % len(docs))
        t.ok(not docs[0]["gpus"][2]["lost"] and docs[-1]["gpus"][2]["lost"],
             "JSON watch: GPU 2 becomes lost")
        t.ok(all(d["gpus"][0]["temperature_gpu"] is not None for d in docs),
             "JSON watch: GPU 0 read throughout")
        stamps = [d["query_time_unix"] for d in docs]
        steps = sorted(b - a for a, b in zip(stamps, stamps[1:]))
        median = steps[len(steps) // 2] if steps else 0
        t.ok(0.15 <= median <= 0.3, "JSON watch: frames every 0.2 s (median %.3f)" % median)


def watch_with_clock(args, env, clock, sig):
    """Runs gpuscope in watch mode with virtual time 25 s, then 35 s, then sends sig. The output
    goes to a file: an unread pipe would fill up (a JSON frame is ~14 KB) and block gpuscope."""
    with open(clock, "w") as f:
        f.write("25")
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        p = subprocess.Popen([BIN] + args, env=env, stdout=out, stderr=err)
        time.sleep(1.0)
        with open(clock + ".tmp", "w") as f:
            f.write("35")
        os.rename(clock + ".tmp", clock)
        time.sleep(1.2)
        p.send_signal(sig)
        p.wait(timeout=10)
        out.seek(0)
        err.seek(0)
        return p.returncode, out.read().decode(), err.read().decode()


def failure_checks():
    rc, out, err = run([], env_for("x", GPUSCOPE_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1"))
    t.eq(rc, 12, "no library: exit 12")
    t.ok(err.count("\n") == 2 and err.startswith("gpuscope: ") and out == "" and
         err.splitlines()[1].startswith("gpuscope: hint: no NVIDIA driver here; `gpuscope demo`"),
         "no library: one line on stderr, then the hint at `gpuscope demo`", detail=err)
    rc, out, err = run([], env_for(None))
    t.eq(rc, 9, "no scenario (driver not loaded): exit 9")
    t.ok(err.count("\n") == 2 and err.startswith("gpuscope: ") and
         err.splitlines()[1].startswith("gpuscope: hint: "), "no driver: one line, then the hint",
         detail=err)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write('{"gpus": []}')
        empty = f.name
    try:
        rc, out, err = run([], env_for(empty))
        t.eq(rc, 6, "zero GPUs: exit 6")
        t.ok(err.count("\n") == 1, "zero GPUs: one line", detail=err)
    finally:
        os.unlink(empty)
    h100 = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")
    for args, what in ((["--bogus"], "unknown flag"), (["-i", "0.01"], "interval too short"),
                       (["-i", "61"], "interval too long"), (["--interval=x"], "bad interval"),
                       (["--no-header", "stray"], "stray argument"), (["--id", "zebra"], "bad --id")):
        rc, out, err = run(args, env_for(h100))
        t.eq(rc, 2, "%s: exit 2" % what)
        t.ok(err.count("\n") == 1 and err.startswith("gpuscope: ") and out == "",
             "%s: one clear line" % what, detail=err)
    rc, out, err = run(["--id", "99"], env_for(h100))
    t.eq(rc, 6, "--id of a missing GPU: exit 6")
    rc, out, err = run(["-h"], env_for(None))
    t.ok(rc == 0 and "--interval" in out and "--show-container" in out, "--help lists options")


def filter_and_colour_checks():
    h100 = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")
    sc = json.load(open(h100))
    uuid5 = scenario_gpus(sc)[5]["uuid"]
    rc, out, err = run(["--id", "1,3," + uuid5, "--no-header"], env_for(h100))
    t.eq([l[:3] for l in gpu_lines(out)], ["[1]", "[3]", "[5]"], "--id: indexes and a UUID")
    rc, js, err = run(["--id", "2", "--json"], env_for(h100))
    t.eq([g["index"] for g in json.loads(js)["gpus"]], [2], "--id applies to JSON")
    rc, out, err = run(["--color"], env_for(h100))
    t.ok(ESC + "[" in out, "--color into a pipe colours")
    rc, out, err = run(["--color"], env_for(h100, NO_COLOR="1"))
    t.ok(ESC + "[" in out, "--color wins over NO_COLOR")
    out = pty_run([], env_for(h100), 0)[0]
    t.ok(ESC + "[" in out, "a terminal gets colour", detail=repr(out[:300]))
    out = pty_run([], env_for(h100, NO_COLOR="1"), 0)[0]
    t.ok(ESC not in out, "NO_COLOR=1 on a terminal: no escape bytes", detail=repr(out[:300]))
    out = pty_run(["--no-color"], env_for(h100), 0)[0]
    t.ok(ESC not in out, "--no-color on a terminal: no escape bytes")


def pty_run(args, env, seconds, sig=signal.SIGINT, cols=160, rows=40):
    """Runs gpuscope on a pseudo-terminal; after `seconds` (0: let it finish) sends sig.
    Returns (output, exit status)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    p = subprocess.Popen([BIN] + args, env=env, stdin=slave, stdout=slave, stderr=slave,
                         close_fds=True)
    os.close(slave)
    buf = b""
    start = time.monotonic()
    sent = False
    while True:
        if seconds and not sent and time.monotonic() - start >= seconds:
            p.send_signal(sig)
            sent = True
        r, _, _ = select.select([master], [], [], 0.05)
        if r:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buf += chunk
        elif p.poll() is not None:
            # drain what is left
            try:
                while True:
                    r, _, _ = select.select([master], [], [], 0.1)
                    if not r:
                        break
                    chunk = os.read(master, 65536)
                    if not chunk:
                        break
                    buf += chunk
            except OSError:
                pass
            break
        if time.monotonic() - start > 30:
            p.kill()
            break
    p.wait(timeout=10)
    os.close(master)
    return buf.decode("utf-8", "replace"), p.returncode


def watch_checks():
    h100 = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")
    # Real time (no NVML_SIM_TIME): the values move between frames.
    for sig, name in ((signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")):
        out, rc = pty_run(["-i", "0.2"], env_for(h100, sim_time=None), 1.5, sig=sig)
        t.eq(rc, 0, "watch on a terminal: %s ends with 0" % name)
        t.ok(out.startswith(ESC + "[?25l"), "watch: cursor hidden first", detail=repr(out[:80]))
        frames = out.count(ESC + "[H") - 1  # the first is the initial clear-screen
        t.ok(frames >= 4, "watch: several frames in 1.5 s at 0.2 s (%d)" % frames)
        t.ok(out.count(ESC + "[J") >= frames, "watch: every frame clears below it")
        t.ok(ESC + "[K" in out, "watch: lines clear to their end")
        t.ok(out.rstrip("\r\n").endswith(ESC + "[?25h"), "watch: cursor shown again at the end",
             detail=repr(out[-80:]))
        t.ok(ESC + "[2J" not in out[out.find(ESC + "[2J") + 1:],
             "watch: the screen is cleared once, not per frame (no flicker)")
    # Into a pipe: plain frames a blank line apart.
    with tempfile.TemporaryFile() as f:
        p = subprocess.Popen([BIN, "-i", "0.2"], env=env_for(h100, sim_time=None), stdout=f,
                             stderr=subprocess.DEVNULL)
        time.sleep(1.1)
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)
        f.seek(0)
        out = f.read().decode()
    t.eq(p.returncode, 0, "watch into a file: SIGINT ends with 0")
    # A reader that stops reading: gpuscope blocks on the full pipe, and SIGTERM still ends it.
    p = subprocess.Popen([BIN, "--json", "-i", "0.1"], env=env_for(h100, sim_time=None),
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    time.sleep(1.5)
    p.send_signal(signal.SIGTERM)
    try:
        p.wait(timeout=5)
        t.eq(p.returncode, 0, "blocked on a full pipe: SIGTERM ends it with 0")
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        t.ok(False, "blocked on a full pipe: SIGTERM ends it")
    p.stdout.close()
    frames = [f for f in out.split("\n\n") if f.strip()]
    t.ok(len(frames) >= 4 and all(len(gpu_lines(f)) == 8 for f in frames),
         "watch into a file: whole frames (%d)" % len(frames), detail=out[-2000:])
    t.ok(ESC not in out, "watch into a file: no escape bytes")


def real_process_checks():
    """A scenario process that is a real child: user and command come from /proc."""
    h100 = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")
    sc = json.load(open(h100))
    child = subprocess.Popen(["sleep", "30"])
    try:
        sc["processes"] = [{"pid": {"env": "QUICK_CHILD"}, "gpu": 0, "used_memory_mib": 30822}]
        sc.pop("events", None)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(sc, f)
            path = f.name
        env = env_for(path, QUICK_CHILD=str(child.pid))
        import pwd
        user = pwd.getpwuid(os.getuid()).pw_name
        rc, out, err = run(["--no-header"], env)
        want = "sleep/%d(%s 30.1G)" % (child.pid, user)
        t.ok(want in (line_of_gpu(out, 0) or ""), "real process: %s" % want, detail=out + err)
        rc, out, err = run(["--no-header", "-f"], env)
        t.ok(re.search(r"\u2514\u2500 +%d \(.*\) %s: sleep 30$" % (child.pid, re.escape(user)),
                       out, re.M) is not None, "real process: -f shows the command line",
             detail=out)
        rc, js, err = run(["--json"], env)
        p = json.loads(js)["gpus"][0]["processes"][0]
        t.ok(p["user"] == user and p["command"] == "sleep 30" and p["uid"] == os.getuid(),
             "real process: JSON user, command, uid", detail=json.dumps(p))
        rc, out, err = run(["--show-container", "--no-header"], env)
        t.eq(rc, 0, "--show-container renders")
        os.unlink(path)
    finally:
        child.kill()
        child.wait()


def main():
    if not os.path.exists(BIN):
        t.skip("gpuscope", "binary not built: " + BIN)
        return t.done()
    if not os.path.exists(SIM):
        t.skip("nvml-sim", "not built: " + SIM)
        return t.done()
    for path in SCENARIOS:
        scenario_checks(path)
    lost_checks()
    failure_checks()
    filter_and_colour_checks()
    watch_checks()
    real_process_checks()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
