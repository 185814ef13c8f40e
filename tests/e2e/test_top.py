"""End-to-end tests of `gpuscope top` (docs/top.md), driven in a real terminal: tmux runs the
binary on nvml-sim scenarios, send-keys types, capture-pane reads the screen.

Covers: every GPU of the 8-GPU scenario reachable at 80x24 by scrolling; resize; sort and
filter; SIGTERM to a real child process after a confirmation (and no signal on "n"); a refusal
for another user's process; a lost GPU and the spinning badge; MIG instances; the agent as the
source (header, history in the graphs from the first frame); the training panel fed by a real
run on the agent's steps socket; two --host agents in one view; top.conf; --help and bad usage;
the ECC, row-remap and power-cap badges.
"""
import json
import socket
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import (BIN, SCENARIOS, TEST_RUNTIME_DIR, TEST_STEPS_SOCKET, clean_up_at_exit,  # noqa: E402
                   send_records, sim_env, start_agent, wait_until)
from tap import Tap  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-top-")
os.chmod(tmp, 0o755)
os.makedirs(TEST_RUNTIME_DIR, exist_ok=True)
clean_up_at_exit(procs, [tmp, TEST_RUNTIME_DIR])
TMUX = shutil.which("tmux")
BLOCKS = "\u2581\u2582\u2583\u2584\u2585\u2586\u2587\u2588"
_n = [0]


class Term:
    """gpuscope top in a private tmux server of w x h cells."""

    def __init__(self, args, env, w=80, h=24, prefix=()):
        _n[0] += 1
        self.sock = "gstop%d-%d" % (os.getpid(), _n[0])
        env = dict(env, TERM="screen-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8",
                   XDG_CONFIG_HOME=env.get("XDG_CONFIG_HOME", os.path.join(tmp, "cfg")))
        env.pop("TMUX", None)
        cmd = shlex.join(list(prefix) + [BIN, "top"] + list(args)) + "; echo EXITED $?; sleep 600"
        subprocess.run([TMUX, "-L", self.sock, "-f", "/dev/null", "new-session", "-d", "-s", "t",
                        "-x", str(w), "-y", str(h), cmd], env=env, check=True)

    def tmux(self, *a):
        return subprocess.run([TMUX, "-L", self.sock] + list(a), capture_output=True, text=True)

    def screen(self):
        return self.tmux("capture-pane", "-p", "-t", "t").stdout

    def keys(self, *k, literal=False):
        self.tmux("send-keys", "-t", "t", *(["-l"] if literal else []), *k)
        time.sleep(0.3)

    def wait(self, pattern, timeout=8.0):
        """The screen once pattern (a regex) is on it, else None."""
        rx = re.compile(pattern, re.M)
        return wait_until(lambda: (lambda s: s if rx.search(s) else None)(self.screen()), timeout)

    def close(self):
        self.tmux("kill-server")


def gpus_on(screen):
    return {int(m.group(1)) for m in re.finditer(r"^\s?(\d+) (?:H100|A100)", screen, re.M)}


if not TMUX:
    t.skip("gpuscope top in tmux", "tmux is not installed (scripts/deps.sh)")
    sys.exit(t.done())

# ---- usage ----
r = subprocess.run([BIN, "top", "--help"], capture_output=True, text=True)
t.ok(r.returncode == 0 and "--host" in r.stdout and "top.conf" in r.stdout, "top --help",
     detail=r.stdout + r.stderr)
r = subprocess.run([BIN, "top", "--bogus"], capture_output=True, text=True)
t.ok(r.returncode == 2 and "unknown option '--bogus'" in r.stderr, "a bad option: exit 2",
     detail=r.stderr)
r = subprocess.run([BIN, "top", "--interval", "0"], capture_output=True, text=True)
t.ok(r.returncode == 2 and "--interval" in r.stderr, "a bad interval: exit 2", detail=r.stderr)
r = subprocess.run([BIN, "top"], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                   env=sim_env("h100x8-training.json", GPUSCOPE_HTTP_SOCKET="off"))
t.ok(r.returncode == 2 and "needs a terminal" in r.stderr, "not a terminal: a clear error",
     detail=r.stderr)

# ---- every GPU of 8 at 80x24, by scrolling; resize ----
env8 = sim_env("h100x8-training.json", GPUSCOPE_HTTP_SOCKET="off")
term = Term(["--no-save"], env8)
s = term.wait(r"GPUs 1-\d of 8")
t.ok(s is not None and "source: NVML direct" in s, "8 GPUs at 80x24: NVML source, scroll line",
     detail=s or term.screen())
t.ok(s is not None and re.search(r"gpuscope top\s+SIMULATED ", s.splitlines()[0]),
     "nvml-sim's GPUs: SIMULATED in the header, as in every other view",
     detail=(s or "").splitlines()[:1])
seen = gpus_on(s or "")
t.ok(0 < len(seen) < 8, "not every GPU fits at 80x24", detail=s)
for _ in range(8):
    term.keys("]")
    seen |= gpus_on(term.screen())
t.eq(sorted(seen), list(range(8)), "] scrolls to every GPU")
term.tmux("resize-window", "-t", "t", "-x", "120", "-y", "50")
s = term.wait(r"^\s?7 H100", 5)
s = term.screen()
for _ in range(8):
    term.keys("[")
s = term.screen()
t.ok(gpus_on(s) == set(range(8)) and "GPUs 1-" not in s, "resized to 120x50: all 8 GPUs, no scroll line",
     detail=s)
term.tmux("resize-window", "-t", "t", "-x", "80", "-y", "24")
s = term.wait(r"GPUs 1-\d of 8", 5)
t.ok(s is not None and len(s.splitlines()[0]) <= 80, "back to 80x24: the scroll line again",
     detail=term.screen())
term.keys("g")
s = term.wait(r"^\s+mem ", 4)
t.ok(s is not None and "graph: memory used" in s, "g switches the graph to memory", detail=term.screen())
term.keys("g")
t.ok(term.wait(r"^\s+pwr ", 4) is not None, "g again: power", detail=term.screen())
term.keys("q")
t.ok(term.wait(r"EXITED 0", 5) is not None, "q quits with status 0", detail=term.screen())
term.close()

# ---- real processes: sort, filter, kill with confirmation ----
with open(os.path.join(SCENARIOS, "h100x8-training.json")) as f:
    scen = json.load(f)
children = []
target_py = os.path.join(tmp, "stacktarget.py")
with open(target_py, "w") as f:
    f.write("import time\n\ndef in_spin_loop():\n    while True:\n        time.sleep(0.05)\n\n"
            "in_spin_loop()\n")
for i, p in enumerate(scen["processes"]):
    last = i == len(scen["processes"]) - 1
    c = subprocess.Popen(["/usr/bin/python3", target_py] if last else ["sleep", str(6000 + i)])
    procs.append(c)
    children.append(c)
    p["pid"] = {"env": "TOP_PID_%d" % i}
scen_path = os.path.join(tmp, "procs.json")
with open(scen_path, "w") as f:
    json.dump(scen, f)
envp = sim_env(scen_path, GPUSCOPE_HTTP_SOCKET="off",
               **{"TOP_PID_%d" % i: str(c.pid) for i, c in enumerate(children)})
term = Term(["--no-save"], envp)
s = term.wait(r"sleep 600\d")
t.ok(s is not None and re.search(r"root\s", s or "") is not None,
     "real processes: user and command from /proc", detail=s or term.screen())
term.keys("<", "<", "<")  # gpu_memory -> job -> user -> pid
s = term.wait(r"sort: pid")
pids = [int(m.group(1)) for m in re.finditer(r"^\s*\*?\s*\d+\s+(\d+) root", s or "", re.M)]
t.ok(len(pids) >= 4 and pids == sorted(pids), "< to the pid column: ascending pids",
     detail=s)
term.keys("i")
time.sleep(0.3)
s = term.screen()
pids = [int(m.group(1)) for m in re.finditer(r"^\s*\*?\s*\d+\s+(\d+) root", s, re.M)]
t.ok(len(pids) >= 4 and pids == sorted(pids, reverse=True), "i inverts the sort", detail=s)
victim = children[5]
term.keys("/")
term.keys("sleep 6005", literal=True)
term.keys("Enter")
s = term.screen()
rows = [ln for ln in s.splitlines() if re.search(r"^\s*\d+\s+\d+ root .*sleep 600\d", ln)]
t.ok(len(rows) == 1 and str(victim.pid) in rows[0], "/ filters to one process", detail=s)
term.keys("k")
s = term.wait(r"signal 1 process: 1 TERM")
t.ok(s is not None, "k asks for the signal", detail=term.screen())
term.keys("1")
s = term.wait(r"send SIGTERM to pid %d \(sleep 6005\)\? y/N" % victim.pid)
t.ok(s is not None, "and asks to confirm, naming pid and command", detail=term.screen())
term.keys("n")
s = term.wait(r"no signal sent")
time.sleep(0.3)
t.ok(s is not None and victim.poll() is None, "n: no signal, the process lives", detail=term.screen())
term.keys("k")
term.keys("1")
term.keys("y")
rc = None
try:
    rc = victim.wait(timeout=5)
except subprocess.TimeoutExpired:
    pass
t.eq(rc, -signal.SIGTERM, "y: the child got SIGTERM")
t.ok(term.wait(r"SIGTERM sent to pid %d" % victim.pid) is not None, "the view says so",
     detail=term.screen())
# tag two processes, KILL both
for n in (3, 4):
    term.keys("/")
    term.keys("Escape")
    term.keys("/")
    term.keys("sleep 600%d" % n, literal=True)
    term.keys("Enter")
    term.keys("Space")
term.keys("/")
term.keys("Escape")
s = term.screen()
t.ok(len(re.findall(r"^\*.*sleep 600[34]", s, re.M)) == 2, "space tags (*)", detail=s)
term.keys("k")
term.keys("2")
s = term.wait(r"send SIGKILL to 2 processes")
t.ok(s is not None, "k on tagged processes asks for all of them", detail=term.screen())
term.keys("y")
rcs = []
for c in (children[3], children[4]):
    try:
        rcs.append(c.wait(timeout=5))
    except subprocess.TimeoutExpired:
        rcs.append(None)
t.eq(rcs, [-signal.SIGKILL] * 2, "y: both got SIGKILL")
t.ok(term.wait(r"SIGKILL sent to 2 processes") is not None, "the view says so", detail=term.screen())
term.keys("/")
term.keys("Escape")
s = term.screen()
t.ok("matching" not in s, "Esc in the filter clears it", detail=s)
# detail screen of a real process
term.keys("Home")
term.keys("Enter")
s = term.wait(r"command line:")
t.ok(s is not None and "cgroup:" in s and "CUDA_VISIBLE_DEVICES" in s and
     re.search(r"sleep 600\d|stacktarget\.py", s),
     "Enter: the detail screen (command line, cgroup, CUDA_VISIBLE_DEVICES)", detail=term.screen())
term.keys("Escape")
# the Python stack of a Python process, from the detail screen
term.keys("/")
term.keys("stacktarget", literal=True)
term.keys("Enter")
term.keys("Enter")
s = term.wait(r"Python stack: press s")
t.ok(s is not None, "a Python process's detail offers its stack", detail=term.screen())
term.keys("s")
s = term.wait(r"in_spin_loop \(.*stacktarget\.py:\d+\)", 10)
t.ok(s is not None, "s: its current Python stack (src/stacks)", detail=term.screen())
term.keys("Escape")
term.keys("/")
term.keys("Escape")
# colours: SGR colours on a colour terminal, none with NO_COLOR
esc = term.tmux("capture-pane", "-p", "-e", "-t", "t").stdout
t.ok(re.search(r"\x1b\[(3[1-7]|38;5;\d+)m|\x1b\[[0-9;]*;3[1-7][;m]", esc) is not None,
     "colours on a colour terminal", detail=repr(esc[:400]))
term.keys("t")
s = term.wait(r"GPU\s+PID")
t.ok(s is not None, "t: the tree view draws", detail=term.screen())
term.keys("h")
s = term.wait(r"gpuscope top: keys")
t.ok(s is not None and "SPINNING" in s, "h: help", detail=term.screen())
term.keys("x")
term.keys("q")
term.close()

term = Term(["--no-save"], dict(envp, NO_COLOR="1"))
term.wait(r"sleep 600\d")
esc = term.tmux("capture-pane", "-p", "-e", "-t", "t").stdout
colours = [esc[max(0, m.start() - 40):m.end()]
           for m in re.finditer(r"\x1b\[[0-9;]*3[1-7]m|38;5;", esc)]
t.ok(not colours and "7m" in esc, "NO_COLOR: no colours, reverse video only",
     detail=repr(colours[:3]) + repr(esc[:300]))
term.close()

# another user's process: refused, with the reason
nobody = Term(["--no-save"], dict(envp, XDG_CONFIG_HOME=tmp),
              prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
s = nobody.wait(r"sleep 600\d")
if s is None:
    t.skip("refusal for another user's process", "top could not run as nobody: " + nobody.screen()[:200])
else:
    nobody.keys("k")
    s = nobody.wait(r"belongs to root \(uid 0\); you are uid 65534 and not root")
    t.ok(s is not None and children[0].poll() is None,
         "k as another user: refused with the reason", detail=nobody.screen())
nobody.close()

# ---- a lost GPU, spinning GPUs ----
term = Term(["--no-save"], sim_env("gpu-lost.json", time=45, GPUSCOPE_HTTP_SOCKET="off"))
s = term.wait(r"LOST")
t.ok(s is not None and "fell off the bus" in s, "gpu-lost: the LOST badge", detail=term.screen())
t.ok(s is not None and "SPINNING" in s, "the hung ranks' GPUs: SPINNING (100% busy at 68 W of 300 W)",
     detail=s)
term.close()

# ---- the health badges (the view's NVML need mask must keep what they read) ----
with open(os.path.join(SCENARIOS, "h100x8-training.json")) as f:
    bdoc = json.load(f)
bdoc.setdefault("events", []).extend([
    {"at_s": 1, "type": "ecc_error", "gpu": 0, "error": "uncorrected", "count": 2},
    {"at_s": 1, "type": "throttle_on", "gpu": 3, "reasons": ["sw_power_cap"]}])
bdoc["gpus"][2]["remapped_rows"] = {"correctable": 0, "uncorrectable": 1, "pending": True,
                                    "failure": False}
bpath = os.path.join(tmp, "badges.json")
with open(bpath, "w") as f:
    json.dump(bdoc, f)
term = Term(["--no-save", "--source", "nvml"], sim_env(bpath, time=5, GPUSCOPE_HTTP_SOCKET="off"),
            w=120, h=40)
s = term.wait(r"ROW REMAP")
t.ok(s is not None and re.search(r"^   ECC 2 ", s, re.M) and re.search(r"^   power cap ", s, re.M),
     "badges: ECC 2 (uncorrected volatile), ROW REMAP (pending), power cap (throttle)",
     detail=term.screen())
term.close()

# ---- MIG ----
term = Term(["--no-save"], sim_env("h100-mig.json", GPUSCOPE_HTTP_SOCKET="off"))
s = term.wait(r"MIG 3g\.40gb")
t.ok(s is not None and len(re.findall(r"MIG \dg\.\d+gb", s)) >= 3, "h100-mig: MIG instances under the GPU",
     detail=term.screen())
t.ok(s is not None and re.search(r"^ 0:2 ", s, re.M), "processes name their GPU instance (0:2)", detail=s)
term.close()
# through an agent (which reads GPM per GPU instance): each instance's GR beside its memory
mig_sock = os.path.join(tmp, "mig-agent.sock")
menv = sim_env("h100-mig.json")
magent, _, mup = start_agent(["--data-dir", os.path.join(tmp, "mig-data"), "--history", "off",
                              "--socket", "off", "--interval", "0.2", "--http-socket", mig_sock],
                             menv, procs)
term = Term(["--no-save"], dict(menv, GPUSCOPE_HTTP_SOCKET=mig_sock), w=100)
s = term.wait(r"3g\.40gb .*MEM\[.*\] GR\[.*\d+%\]", timeout=15)
t.ok(mup and s is not None, "h100-mig through the agent: each instance's GR (GPM) beside its memory",
     detail=term.screen())
term.close()
magent.terminate()
magent.wait(timeout=10)

# ---- the agent: source, history, training runs; --host ----
data = os.path.join(tmp, "data")
os.makedirs(data)
http_sock = os.path.join(TEST_RUNTIME_DIR, "agent.sock")
aenv = sim_env("h100x8-training.json")
# the hang rule at 2 x p95 and 1 s, so a run that stops stepping shows as stalled quickly
aconf = os.path.join(tmp, "agent.conf")
with open(aconf, "w") as f:
    f.write("training_hang_after = 2\ntraining_hang_min = 1s\n")
agent, base, up = start_agent(["--config", aconf, "--data-dir", data, "--interval", "0.25",
                               "--flush-interval", "1", "--http-socket", http_sock], aenv, procs)
t.ok(up, "agent started")
time.sleep(10)  # some history to show


def steps():
    yield json.dumps({"v": 1, "type": "hello", "run": "top-e2e", "pid": os.getpid(), "rank": 0,
                      "world_size": 1, "framework": "torch", "devices": [0]})
    ms = {"data": 50.0, "forward": 80.0, "backward": 40.0, "optimizer_step": 10.0,
          "communication": 20.0, "total_step": 150.0}
    for n in range(300):
        now = time.time()
        yield json.dumps({"v": 1, "type": "step", "step": n, "t0": now - 0.2, "t1": now, "rank": 0,
                          "device": 0, "samples": 8, "cuda_events": True, "ms": ms})


def send_quietly():
    try:
        send_records(TEST_STEPS_SOCKET, steps(), 0.05)
    except OSError:
        pass  # the agent stopped first


sender = threading.Thread(target=send_quietly, daemon=True)
sender.start()
t_start = time.monotonic()
term = Term(["--no-save"], dict(aenv, GPUSCOPE_HTTP_SOCKET=http_sock))
s = term.wait(r"source: agent")
first = s or term.screen()
t.ok("SIMULATED" in first.splitlines()[0], "through the agent: SIMULATED in the header",
     detail=first.splitlines()[:1])
live_max = int(time.monotonic() - t_start) + 2  # points a 1 s refresh could have drawn itself
t.ok(s is not None and http_sock in s, "the agent answers: the header says agent and its socket",
     detail=first)
util_lines = [ln for ln in first.splitlines() if ln.strip().startswith("util")]
points = sum(ln.count(b) for ln in util_lines[:1] for b in BLOCKS)
t.ok(points >= 6 and points > live_max, "history fills the graph from the first frame",
     detail="%d points, at most %d live\n%s" % (points, live_max, first))
term.keys("r")
s = term.wait(r"p50 150\.0 ms", 12)
t.ok(s is not None and "top-e2e" in s and "running" in s, "r: the training panel shows the live run",
     detail=term.screen())
t.ok(s is not None and "data 25%" in s and "comm 10%" in s, "data and communication ratios",
     detail=s)
s = term.wait(r"warning\s+Data loading", 8)
t.ok(s is not None, "findings appear as they arise", detail=term.screen())
t.ok(s is not None and re.search(r"phases [DFBOX]+", s), "the phase split bar", detail=s)


# a 2-rank job (one run): rank 1 slower; the panel shows the per-rank spread
def ddp_steps(rank, total_ms):
    yield json.dumps({"v": 1, "type": "hello", "run": "top-ddp", "pid": os.getpid(), "rank": rank,
                      "world_size": 2, "framework": "torch", "devices": [rank]})
    ms = {"data": 10.0, "forward": 80.0, "backward": 40.0, "optimizer_step": 10.0,
          "total_step": total_ms}
    for n in range(300):
        now = time.time()
        yield json.dumps({"v": 1, "type": "step", "step": n, "t0": now - total_ms / 1000.0,
                          "t1": now, "rank": rank, "device": rank, "samples": 8,
                          "cuda_events": True, "ms": ms})


def send_ddp(rank, total_ms):
    try:
        send_records(TEST_STEPS_SOCKET, ddp_steps(rank, total_ms), 0.05)
    except OSError:
        pass


threading.Thread(target=send_ddp, args=(0, 150.0), daemon=True).start()
wait_until(lambda: "top-ddp" in term.screen(), 8)
threading.Thread(target=send_ddp, args=(1, 300.0), daemon=True).start()
s = term.wait(r"slowest r1 \+\d+%", 15)
t.ok(s is not None and re.search(r"ranks r0 \d+/\d+ms\s+r1 \d+/\d+ms", s),
     "a 2-rank run: per-rank step p50/p95 and the slowest rank's lag", detail=term.screen())
# a run that stops stepping with its connection open: the agent's hang rule calls it stalled
stall = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
stall.connect(TEST_STEPS_SOCKET)
stall.send(json.dumps({"v": 1, "type": "hello", "run": "top-stall", "pid": os.getpid(),
                       "rank": 0, "world_size": 1, "framework": "torch"}).encode())
for n in range(8):
    now = time.time()
    stall.send(json.dumps({"v": 1, "type": "step", "step": n + 1, "t0": now - 0.05, "t1": now,
                           "rank": 0, "samples": 8, "ms": {"total_step": 50.0}}).encode())
    time.sleep(0.05)
s = term.wait(r"stalled\s+top-stall\s+8 ", 15)
t.ok(s is not None, "a run with no step for 2 x its p95 (at least 1 s): state stalled",
     detail=term.screen())
stall.close()
term.close()
# a run whose sender goes away without an end (a resume token in its hello): the agent keeps it
# interrupted, waiting for its sender (docs/agent.md, RESUMING A RUN); top marks it in yellow
intr = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
intr.connect(TEST_STEPS_SOCKET)
intr.send(json.dumps({"v": 1, "type": "hello", "run": "top-intr", "pid": os.getpid(), "rank": 0,
                      "world_size": 1, "framework": "torch", "token": "cd" * 16}).encode())
for n in range(3):
    now = time.time()
    intr.send(json.dumps({"v": 1, "type": "step", "step": n + 1, "t0": now - 0.05, "t1": now,
                          "rank": 0, "samples": 8, "ms": {"total_step": 50.0}}).encode())
intr.close()
term = Term(["--no-save"], dict(aenv, GPUSCOPE_HTTP_SOCKET=http_sock), w=132)
term.keys("r")
s = term.wait(r"interrupted\s+top-intr\s+3 .*waiting for its sender to resume", 15)
esc = term.tmux("capture-pane", "-p", "-e", "-t", "t").stdout
row = next((ln for ln in esc.splitlines() if "top-intr" in ln), "")
plain = next((ln for ln in esc.splitlines() if "top-e2e" in ln), "")
yellow = re.compile(r"\x1b\[(?:[0-9;]*;)?(?:33|93|38;5;(?:3|11))m")
t.ok(s is not None and yellow.search(row) is not None and "top-e2e" in plain and
     yellow.search(plain) is None,
     "a run whose sender left without an end: state interrupted in its own colour, waiting for "
     "its sender to resume", detail=repr(row) + "\n" + repr(plain) + "\n" + term.screen())
term.close()
# the visibility policy applies: another user sees the processes withheld, as counts
term = Term(["--no-save"], dict(aenv, GPUSCOPE_HTTP_SOCKET=http_sock, HOME=tmp),
            prefix=["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
s = term.wait(r"^ \d\s+- .*\d+ hidden", 8)
t.ok(s is not None and "python3" not in s.split("GPU ", 1)[-1], "as another user through the agent: "
     "processes withheld, shown as 'N hidden'", detail=term.screen())
term.keys("k")
t.ok(term.wait(r"visibility policy\) cannot be signalled") is not None, "hidden rows cannot be signalled",
     detail=term.screen())
term.close()
term = Term(["--no-save", "--source", "nvml"], dict(aenv, GPUSCOPE_HTTP_SOCKET=http_sock))
s = term.wait(r"source: NVML direct")
t.ok(s is not None, "--source nvml skips the agent", detail=term.screen())
term.keys("r")
s = term.wait(r"Training runs come from the agent")
t.ok(s is not None, "the training panel without an agent says where runs come from",
     detail=term.screen())
term.close()

# two hosts, one of them down
dead = "127.0.0.1:1"
term = Term(["--no-save", "--host", "127.0.0.1:%d" % agent.port, "--host", dead], aenv, h=40)
s = term.wait(r"2 hosts \(1 answering\)", 10)
t.ok(s is not None and len(gpus_on(s)) >= 4, "--host x2: one view, the GPUs of the one answering",
     detail=term.screen())
t.ok(s is not None and re.search(r"-- 127\.0\.0\.1:1 .*(connect|Connect)", s), "the dead host's error in place",
     detail=s)
t.ok(s is not None and re.search(r"^ 127\.0\.0\.1:\d+/\d", s, re.M), "processes carry their host",
     detail=s)
term.keys("k")
s = term.wait(r"signal it there")
t.ok(s is not None, "a remote process is not signalled from here", detail=term.screen())
term.close()

# an agent over HTTPS with tokens (docs/security.md): certificate checked, Bearer token sent
if shutil.which("openssl"):
    crt, key = os.path.join(tmp, "agent.crt"), os.path.join(tmp, "agent.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "2", "-subj", "/CN=gs-top", "-addext",
                    "subjectAltName=IP:127.0.0.1,DNS:localhost"], check=True, capture_output=True)
    out = subprocess.run([BIN, "agent", "--new-token", "admin"], capture_output=True, text=True).stdout
    token = [ln.split()[1] for ln in out.splitlines() if ln.startswith("token: ")][0]
    with open(os.path.join(tmp, "tokens"), "w") as f:
        f.write([ln for ln in out.splitlines() if ln.startswith("sha256:")][0] + "\n")
    with open(os.path.join(tmp, "token"), "w") as f:
        f.write(token + "\n")
    from gsenv import free_port
    tport = free_port()
    tls = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:%d" % tport, "--history", "off",
                            "--socket", "off", "--http-socket", "off", "--data-dir", tmp,
                            "--tokens-file", os.path.join(tmp, "tokens"), "--tls-cert-file", crt,
                            "--tls-key-file", key], env=sim_env("h100x8-training.json"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(tls)
    url = "https://127.0.0.1:%d" % tport
    term = Term(["--no-save", "--host", url, "--cacert", crt], aenv)
    s = term.wait(r"answered 401 \(a token", 10)
    t.ok(s is not None, "HTTPS without a token: the 401 and what to do", detail=term.screen())
    term.close()
    term = Term(["--no-save", "--host", url, "--cacert", crt, "--token-file",
                 os.path.join(tmp, "token")], aenv)
    s = term.wait(r"^ 0 H100", 10)
    t.ok(s is not None and ("agent " + url) in s, "HTTPS with --token-file and --cacert: the GPUs",
         detail=term.screen())
    term.close()
    term = Term(["--no-save", "--host", url], dict(aenv, GPUSCOPE_TOKEN=token))
    s = term.wait(r"-- https://127\.0\.0\.1:\d+ .*(certificate|SSL|TLS)", 10)
    t.ok(s is not None, "GPUSCOPE_TOKEN, but an unknown CA: the certificate error, nothing shown",
         detail=term.screen())
    term.close()
else:
    t.skip("--host over HTTPS", "openssl is not installed")

# ---- top.conf ----
cfg = os.path.join(tmp, "cfgtest")
os.makedirs(os.path.join(cfg, "gpuscope"))
with open(os.path.join(cfg, "gpuscope", "top.conf"), "w") as f:
    f.write("graph = power\nbogus = 1\n")
term = Term([], dict(env8, XDG_CONFIG_HOME=cfg))
s = term.wait(r"top\.conf:2: unknown key 'bogus' \(ignored\)")
t.ok(s is not None and re.search(r"^\s+pwr ", s, re.M), "top.conf read: graph = power, a bad line named",
     detail=term.screen())
term.keys("t")
term.keys("q")
term.wait(r"EXITED 0", 5)
term.close()
with open(os.path.join(cfg, "gpuscope", "top.conf")) as f:
    saved = f.read()
t.ok("graph = power" in saved and "tree = yes" in saved, "preferences saved on quit", detail=saved)

sys.exit(t.done())
