"""`gpuscope agent` started as root with `user = U` (docs/security.md, HARDENING): it binds a
port below 1024 as root, then runs as U for good, and refuses data directories and
history.db paths that are symbolic links someone else could have planted.

nvml-sim h100x8-training.json, copied with the sim library into a 0755 directory so that U can
load them after the drop. U is made with useradd (supplementary group video, as the NVIDIA
device nodes' group would be) and removed at the end. Checks: /proc/PID/status Uid, Gid (all
four fields), Groups and NoNewPrivs; the data dir and history.db owned by U; /metrics on the
TCP port and on the unix socket; the step-record socket accepts; SIGHUP applies a new interval
and warns that `user` needs a restart; SIGTERM exits 0 and U removes its sockets. Refusals:
a data dir that is a link to another uid's directory, a link owned by another uid, a symlink
at DATA_DIR/history.db (its target untouched), an unknown user (FILE:LINE), and `user` set
while not root.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, SIM, SCENARIOS, TempUsers, clean_up_at_exit, free_port, \
    quiet, recv_all, send_records, sim_env, wait_until as until  # noqa: E402

t = Tap()
if os.geteuid() != 0:
    t.skip("the agent drops root for `user`", "not root")
    sys.exit(t.done())
for tool in ("useradd", "userdel"):
    if not shutil.which(tool):
        t.skip("the agent drops root for `user`", "%s not installed" % tool)
        sys.exit(t.done())

USER = "gspd%d" % (os.getpid() % 1000000)
OTHER_UID = 4242424  # a uid nobody on the host has: "another user"
procs = []
tmp = tempfile.mkdtemp(prefix="gs-privdrop.")
os.chmod(tmp, 0o755)  # U must reach what is below it


users = TempUsers([USER])  # left over from a killed run: removed now
clean_up_at_exit(procs, [tmp], users)  # also on meson's timeout

groups = ["-G", "video"] if quiet("getent", "group", "video") == 0 else []
if users.add_user(USER, "-s", "/usr/sbin/nologin", *groups) != 0:
    t.skip("the agent drops root for `user`", "useradd failed")
    sys.exit(t.done())
ids = subprocess.check_output(["id", USER]).decode()
UID = int(subprocess.check_output(["id", "-u", USER]).decode())
GID = int(subprocess.check_output(["id", "-g", USER]).decode())
GROUPS = sorted(int(g) for g in subprocess.check_output(["id", "-G", USER]).decode().split())

# The sim library and scenario where U may read them (the build tree may be in a 0700 home).
shutil.copy(SIM, os.path.join(tmp, "libnvidia-ml.so.1"))
shutil.copy(os.path.join(SCENARIOS, "h100x8-training.json"), os.path.join(tmp, "scen.json"))
ENV = sim_env(os.path.join(tmp, "scen.json"), GPUSCOPE_NVML_LIBRARY=os.path.join(tmp, "libnvidia-ml.so.1"))
DATA = os.path.join(tmp, "data", "gs")  # missing: made by the agent, parents 0755
RUN = os.path.join(tmp, "run")          # missing: made by the agent and given to U
CONF = os.path.join(tmp, "agent.conf")


def low_port():
    """A free port below 1024 on 127.0.0.1 (U alone could not bind it)."""
    for p in range(980, 600, -1):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            return p
        except OSError:
            continue
        finally:
            s.close()
    return None


PORT = low_port()


def write_conf(extra=""):
    with open(CONF, "w") as f:
        f.write("[agent]\nlisten = 127.0.0.1:%d\ninterval = 0.2\nflush_interval = 1\n"
                "data_dir = %s\nsocket = %s/steps.sock\nhttp_socket = %s/agent.sock\n"
                "user = %s\n%s" % (PORT, DATA, RUN, RUN, USER, extra))
    os.chmod(CONF, 0o644)  # SIGHUP re-reads it as U


def start(args, log):
    f = open(log, "w")
    p = subprocess.Popen([BIN, "agent"] + args, env=ENV, stdout=f, stderr=subprocess.STDOUT,
                         stdin=subprocess.DEVNULL, cwd="/")
    f.close()
    procs.append(p)
    return p


def run_fail(args, log, timeout=15):
    """Runs an agent expected to refuse to start: (exit code, its log)."""
    p = start(args, log)
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        rc = None
    with open(log) as f:
        return rc, f.read()


def http(port=None, unix=None, path="/metrics"):
    try:
        if unix:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(unix)
        else:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(("GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" % path).encode())
        data = recv_all(s, None)
        s.close()
        head, _, body = data.decode(errors="replace").partition("\r\n\r\n")
        m = re.match(r"HTTP/1\.[01] (\d+)", head)
        return (int(m.group(1)) if m else 0), body
    except OSError as e:
        return 0, str(e)


def status_ids(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.split()
    return out


def read(path):
    with open(path) as f:
        return f.read()


# ---- the drop ----
t.ok(PORT is not None, "a free port below 1024 on 127.0.0.1", detail="none in 601..980")
t.ok(int(read("/proc/sys/net/ipv4/ip_unprivileged_port_start")) > PORT,
     "port %s needs root to bind on this host" % PORT)
write_conf()
LOG = os.path.join(tmp, "agent.log")
agent = start(["--config", CONF], LOG)
code, body = until(lambda: (lambda r: r if r[0] == 200 else None)(http(PORT)), 15) or (0, "")
t.eq(code, 200, "GET /metrics on port %s answers after the drop" % PORT)
UP_RE = r'^gpuscope_up\{hostname="[^"]*"\} 1$'
t.ok(re.search(UP_RE, body, re.M) is not None, "gpuscope_up 1: NVML opened as U",
     detail=body[:400] + read(LOG)[-2000:])
t.ok(re.search(r'^gpuscope_gpu_utilization_ratio\{[^}]*gpu="7"', body, re.M) is not None,
     "8 GPUs' series on /metrics", detail=body[:400])
st = status_ids(agent.pid)
t.eq(st.get("Uid"), [str(UID)] * 4, "Uid: real, effective, saved, fs are U's")
t.eq(st.get("Gid"), [str(GID)] * 4, "Gid: real, effective, saved, fs are U's")
t.eq(sorted(int(g) for g in st.get("Groups", [])), GROUPS,
     "Groups: U's supplementary groups (%s)" % ids.strip())
t.eq(st.get("NoNewPrivs"), ["1"], "NoNewPrivs: 1")
t.ok("user: now %s (uid %d, gid %d)" % (USER, UID, GID) in read(LOG), "the drop is logged",
     detail=read(LOG)[-1500:])
hist = os.path.join(DATA, "history.db")
t.ok(until(lambda: os.path.exists(hist), 10), "history.db written")
t.eq((os.stat(DATA).st_uid, os.stat(DATA).st_gid, os.stat(DATA).st_mode & 0o777),
     (UID, GID, 0o750), "data dir made for U, 0750")
t.eq(os.stat(os.path.dirname(DATA)).st_mode & 0o777, 0o755, "its parent made 0755 (U passes)")
t.eq((os.stat(hist).st_uid, os.stat(hist).st_gid), (UID, GID), "history.db owned by U")
t.eq((os.stat(RUN).st_uid, os.stat(RUN).st_mode & 0o777), (UID, 0o755),
     "socket directory made 0755 and given to U")
code, body = http(unix=os.path.join(RUN, "agent.sock"))
t.ok(code == 200 and re.search(UP_RE, body, re.M), "/metrics on the unix socket",
     detail="%s %s" % (code, body[:200]))
steps = os.path.join(RUN, "steps.sock")
try:
    send_records(steps, [])  # connect, close
    ok = True
except OSError as e:
    ok = e
t.ok(ok is True, "the step-record socket accepts a connection", detail=ok)
t.eq(os.stat(steps).st_mode & 0o777, 0o666, "steps.sock mode 0666")

# SIGHUP: read by U; a new interval applies, a new user does not.
with open(CONF) as f:
    text = f.read()
with open(CONF, "w") as f:
    f.write(text.replace("interval = 0.2", "interval = 0.5").replace("user = %s" % USER, "user = root"))
agent.send_signal(signal.SIGHUP)
t.ok(until(lambda: "reload: interval 0.5s" in read(LOG), 10), "SIGHUP re-reads the file as U",
     detail=read(LOG)[-1500:])
t.ok("reload: user '%s' -> 'root' needs a restart" % USER in read(LOG),
     "SIGHUP warns that user needs a restart", detail=read(LOG)[-1500:])
t.eq([l for l in read(LOG).splitlines() if "needs a restart" in l and "user" not in l], [],
     "no other restart-only key seen as changed by U's SIGHUP")
t.eq(status_ids(agent.pid).get("Uid"), [str(UID)] * 4, "still U after SIGHUP")
t.eq(http(PORT)[0], 200, "/metrics after SIGHUP")
agent.send_signal(signal.SIGTERM)
try:
    rc = agent.wait(timeout=15)
except subprocess.TimeoutExpired:
    rc = None
t.eq(rc, 0, "SIGTERM: exit 0")
t.ok("agent: stopped" in read(LOG), "clean stop logged", detail=read(LOG)[-800:])
t.ok(not os.path.exists(os.path.join(RUN, "agent.sock")), "U removed agent.sock on exit")
t.eq(os.stat(hist).st_uid, UID, "history.db still U's after the stop")

# A restart as root with a root-owned data dir holding only the history: handed over to U.
for n in os.listdir(DATA):
    os.chown(os.path.join(DATA, n), 0, 0)
os.chown(DATA, 0, 0)
write_conf()
agent = start(["--config", CONF], LOG + "2")
t.eq((until(lambda: http(PORT)[0] == 200, 15), os.stat(DATA).st_uid, os.stat(hist).st_uid),
     (True, UID, UID), "a root-owned data dir with only history.db is given back to U")
agent.send_signal(signal.SIGTERM)
t.eq(agent.wait(timeout=15), 0, "second agent: SIGTERM, exit 0")

# ---- refusals ----
other = os.path.join(tmp, "other")
os.mkdir(other, 0o700)
os.chown(other, OTHER_UID, OTHER_UID)
link = os.path.join(tmp, "datalink")
os.symlink(other, link)
rc, log = run_fail(["--config", CONF, "--data-dir", link, "--listen", "127.0.0.1:%d" % free_port()],
                   os.path.join(tmp, "refuse1.log"))
t.ok(rc not in (0, None) and ("owned by uid %d" % OTHER_UID) in log and "refusing" in log,
     "data dir linked to another uid's directory: refused", detail="rc %s\n%s" % (rc, log[-800:]))
t.eq(os.listdir(other), [], "the other user's directory untouched")
t.eq(os.stat(other).st_uid, OTHER_UID, "and still theirs")

mine = os.path.join(tmp, "mine")
os.mkdir(mine, 0o750)
os.chown(mine, UID, GID)
link2 = os.path.join(tmp, "planted")
os.symlink(mine, link2)
os.lchown(link2, OTHER_UID, OTHER_UID)
rc, log = run_fail(["--config", CONF, "--data-dir", link2, "--listen", "127.0.0.1:%d" % free_port()],
                   os.path.join(tmp, "refuse2.log"))
t.ok(rc not in (0, None) and "symbolic link owned by uid %d" % OTHER_UID in log,
     "data dir through a link another uid owns: refused", detail="rc %s\n%s" % (rc, log[-800:]))

victim = os.path.join(tmp, "victim")
with open(victim, "w") as f:
    f.write("precious\n")
for n in os.listdir(DATA):
    os.unlink(os.path.join(DATA, n))
os.symlink(victim, hist)
rc, log = run_fail(["--config", CONF, "--listen", "127.0.0.1:%d" % free_port()],
                   os.path.join(tmp, "refuse3.log"))
t.ok(rc not in (0, None) and "history.db is a symbolic link" in log,
     "a symlink at DATA_DIR/history.db: refused", detail="rc %s\n%s" % (rc, log[-800:]))
t.eq((read(victim), os.stat(victim).st_uid), ("precious\n", 0), "its target untouched")
t.ok(os.path.islink(hist), "the link left as it was")
t.eq(sorted(os.listdir(DATA)), ["history.db"], "no -wal or -shm made beside it")

bad = os.path.join(tmp, "bad.conf")
with open(bad, "w") as f:
    f.write("[agent]\ninterval = 1\nuser = no-such-user-%d\n" % os.getpid())
rc, log = run_fail(["--config", bad], os.path.join(tmp, "refuse4.log"))
t.ok(rc not in (0, None) and "%s:3: user: no such user" % bad in log,
     "unknown user: config error with FILE:LINE", detail="rc %s\n%s" % (rc, log[-800:]))


def as_user():
    os.setgroups([])
    os.setgid(GID)
    os.setuid(UID)


logf = os.path.join(tmp, "refuse5.log")
with open(logf, "w") as f:
    p = subprocess.Popen([BIN, "agent", "--user", "root", "--history", "off", "--socket", "off",
                          "--http-socket", "off", "--listen", "127.0.0.1:%d" % free_port()],
                         env=ENV, stdout=f, stderr=subprocess.STDOUT, preexec_fn=as_user, cwd="/")
    procs.append(p)
    try:
        rc = p.wait(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        rc = None
log = read(logf)
t.ok(rc not in (0, None) and "runs as uid %d, not root: it cannot become root" % UID in log,
     "user set while not root: clear error", detail="rc %s\n%s" % (rc, log[-800:]))

sys.exit(t.done())
