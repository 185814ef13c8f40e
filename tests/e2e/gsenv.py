"""Shared helpers of the end-to-end tests: paths, a free port, HTTP GETs, the sim environment,
starting and stopping the agent, polling for a condition, sending step records to the agent's
SOCK_SEQPACKET socket, temporary unix users.

Stdlib only. The paths come from the environment meson sets (tap_env), else from this file's place.
"""

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

SRC = os.environ.get("GPUSCOPE_SOURCE_ROOT",
                     os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ.get("GPUSCOPE_BUILD_ROOT", os.path.join(SRC, "build"))
BIN = os.environ.get("GPUSCOPE_BIN", os.path.join(BUILD, "gpuscope"))
SIM = os.environ.get("GPUSCOPE_SIM_LIB", os.path.join(BUILD, "sim", "libnvidia-ml.so.1"))
SCENARIOS = os.path.join(SRC, "sim", "scenarios")
# The agent's sockets default to $RUNTIME_DIRECTORY (systemd's); tests point it at a directory
# private to the test process.
TEST_RUNTIME_DIR = "/tmp/gpuscope-test-%d" % os.getpid()
TEST_STEPS_SOCKET = TEST_RUNTIME_DIR + "/steps.sock"


def meson_introspect(what):
    """`meson introspect --WHAT` of the build directory under test, as JSON."""
    return json.loads(subprocess.run(["meson", "introspect", "--" + what, BUILD], check=True,
                                     capture_output=True, text=True).stdout)


def build_options():
    """The build's options, name -> value (b_sanitize, prefix, sysconfdir, ...)."""
    return {o["name"]: o["value"] for o in meson_introspect("buildoptions")}


def project_version():
    """The version meson.build gives the project (what --version, the wheel and the package
    say)."""
    return meson_introspect("projectinfo")["version"]


def free_port():
    """A TCP port that was free a moment ago on every IPv4 address (bound on 0.0.0.0, so a
    test that listens on 0.0.0.0 or 127.0.0.x alike gets a port nobody holds on any of them)."""
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_get(url, method="GET", data=None, timeout=5):
    """Returns (status, headers, body text); an HTTP error status is returned, not raised."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, data=data, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def sim_env(scenario, time=None, **extra):
    """The environment for gpuscope on nvml-sim: no inherited NVML_SIM_*, the sim library,
    the scenario (a file name under sim/scenarios, or a path), UTC, NVML_SIM_TIME when time
    is given (else the real clock), the agent's sockets (steps.sock, agent.sock) in a directory
    private to this test process (so test agents started as root never bind, and clients never
    find, the system's /run/gpuscope), then extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVML_SIM")}
    env.update(GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=os.path.join(SCENARIOS, scenario),
               TZ="UTC", GPUSCOPE_AGENT_SOCKET=TEST_STEPS_SOCKET,
               RUNTIME_DIRECTORY=TEST_RUNTIME_DIR)
    if time is not None:
        env["NVML_SIM_TIME"] = str(time)
    env.update(extra)
    return env


def get_text(url, data=None, timeout=5, os_error=False):
    """Returns (status, body text); an HTTP error status is returned, not raised. With os_error,
    a connection failure is (0, its message) instead of an OSError raised."""
    try:
        with urllib.request.urlopen(url, data=data, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError as e:
        if not os_error:
            raise
        return 0, str(e)


def get_json(url):
    """Returns (status, parsed body); a body that is not JSON is {"_body": text}."""
    code, body = get_text(url)
    try:
        return code, json.loads(body)
    except ValueError:
        return code, {"_body": body}


def wait_until(fn, timeout=10.0, interval=0.1):
    """Calls fn every interval seconds until it returns a true value or timeout seconds have
    passed; returns that value, or fn's last (false) value."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(interval)


def stop_proc(p, sig=signal.SIGTERM, timeout=10):
    """Sends sig to p if it still runs, waits up to timeout seconds, then kills it; returns its
    exit status."""
    if p.poll() is None:
        p.send_signal(sig)
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        return p.wait()


def stop_agent(p, sig=signal.SIGTERM, timeout=10):
    """stop_proc, then what is left on p's stderr pipe: (exit status, stderr text; "" without
    a pipe)."""
    rc = stop_proc(p, sig, timeout)
    _, err = p.communicate()
    if isinstance(err, bytes):
        err = err.decode()
    return rc, err or ""


def reap(procs):
    """Kills and waits for every process of procs still running (a test's final cleanup)."""
    for p in procs:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def clean_up(procs, dirs=(), users=None, stop=None):
    """A test's final cleanup: each process of procs still running stopped with stop(p), else
    killed (reap); then the TempUsers users removed and the directories dirs deleted."""
    if stop:
        for p in procs:
            if p.poll() is None:
                stop(p)
    reap(procs)
    if users is not None:
        users.remove()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def clean_up_at_exit(procs, dirs=(), users=None):
    """clean_up when the test exits, also on meson's timeout (its SIGTERM exits through
    _on_signal below, so atexit still runs)."""
    atexit.register(clean_up, procs, dirs, users)


def wait_healthy(base, p=None, tries=100, interval=0.05, get=None):
    """Polls base + "/healthz" until it answers 200 (True), p exits or tries run out (False).
    get(url) -> (status, ...) defaults to get_text."""
    get = get or get_text
    for _ in range(tries):
        try:
            if get(base + "/healthz")[0] == 200:
                return True
        except OSError:
            pass
        if p is not None and p.poll() is not None:
            break
        time.sleep(interval)
    return False


def start_agent(args, env, procs=None, port=None, tries=100, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, **popen):
    """Starts `gpuscope agent --listen 127.0.0.1:PORT ARGS` (PORT free unless given), appends
    it to procs, waits for /healthz (wait_healthy). Returns (process, base URL, answered); the
    process carries .port."""
    port = port or free_port()
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:%d" % port] + list(args),
                         env=env, stdout=stdout, stderr=stderr, **popen)
    p.port = port
    if procs is not None:
        procs.append(p)
    base = "http://127.0.0.1:%d" % port
    return p, base, wait_healthy(base, p, tries)


def recv_all(s, limit=65536):
    """What socket s receives until the peer closes, or limit bytes (None: no limit)."""
    out = b""
    while limit is None or len(out) < limit:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    return out


def send_records(path, records, gap_s=0.0):
    """Connects a SOCK_SEQPACKET socket to path and sends each record of the iterable records
    as one datagram (a dict as JSON, a str encoded, bytes as they are), sleeping gap_s seconds
    after each (a generator then makes the next record after the pause); then closes it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        s.connect(path)
        for r in records:
            if isinstance(r, dict):
                r = json.dumps(r)
            s.send(r.encode() if isinstance(r, str) else r)
            if gap_s:
                time.sleep(gap_s)
    finally:
        s.close()


def quiet(*cmd):
    """The exit status of cmd run with its output discarded."""
    return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode


class TempUsers:
    """Unix users and groups made for a test and removed after it (needs root). The names are
    given first: ones left over from a killed run are removed at once; add_group / add_user
    then make them; remove() deletes them all, users first."""

    def __init__(self, users=(), groups=()):
        self.users = list(users)
        self.groups = list(groups)
        self.remove()

    def add_group(self, name):
        """groupadd name; returns its exit status."""
        if name not in self.groups:
            self.groups.append(name)
        return quiet("groupadd", name)

    def add_user(self, name, *useradd_args):
        """useradd -M useradd_args name; returns its exit status."""
        if name not in self.users:
            self.users.append(name)
        return quiet("useradd", "-M", *useradd_args, name)

    def remove(self):
        for u in self.users:
            quiet("userdel", u)
        for g in self.groups:
            quiet("groupdel", g)


# ---- Process hygiene: every process a test starts dies with the test --------------------------
# The first process of a test run that imports this module (the test itself; its children see
# GPUSCOPE_TEST_OWNER and leave this alone) makes every subprocess.Popen (so also subprocess.run,
# check_output, call) start its child in a new session, i.e. its own process group, with
# GPUSCOPE_TEST_RUN and GPUSCOPE_TEST_OWNER in its environment. Popen.kill() kills the whole
# group, so subprocess.run's timeout takes the grandchildren too (a 2-rank job under `gpuscope
# run` left its ranks spinning when only `gpuscope run` was killed). At exit, and on SIGTERM
# (meson's timeout: it SIGKILLs the test's own group 0.5 s later) or SIGINT to the test, every
# group started is sent SIGTERM, then SIGKILL after a short grace, and so is any process that
# left its group but still carries this test's GPUSCOPE_TEST_OWNER. GPUSCOPE_TEST_RUN (set by
# meson to the build directory, else set here) lets scripts/test-summary.py find what is left
# after the whole run.
TEST_RUN_VAR = "GPUSCOPE_TEST_RUN"
TEST_OWNER_VAR = "GPUSCOPE_TEST_OWNER"
_OriginalPopen = subprocess.Popen
_groups = []  # the GroupPopen of every process group this test started


def _proc_env_has(pid, entry):
    """Whether /proc/pid/environ holds entry (bytes "NAME=value")."""
    try:
        with open("/proc/%s/environ" % pid, "rb") as f:
            return entry in f.read().split(b"\0")
    except OSError:
        return False


def _owned_pids():
    """The pids of the processes other than this one that carry this test's owner mark."""
    entry = ("%s=%s" % (TEST_OWNER_VAR, _marks[TEST_OWNER_VAR])).encode()
    me = os.getpid()
    return [int(d) for d in os.listdir("/proc")
            if d.isdigit() and int(d) != me and _proc_env_has(d, entry)]


def _signal_all(sig):
    """Sends sig to every group this test started and to every process carrying its owner mark;
    returns whether any of them was still there."""
    alive = False
    for p in _groups:
        p.poll()  # reaps an exited leader, so a group of one zombie counts as gone
        try:
            os.killpg(p.pid, sig)
            alive = True
        except (ProcessLookupError, PermissionError):
            pass
    for pid in _owned_pids():
        try:
            os.kill(pid, sig)
            alive = True
        except (ProcessLookupError, PermissionError):
            pass
    return alive


def kill_started(grace=2.0, reap=True):
    """Stops every process this test started (see above): SIGTERM, then SIGKILL to what is left
    after grace seconds; with reap, waits for the leaders."""
    if not _marks:
        return
    if _signal_all(signal.SIGTERM):
        end = time.monotonic() + grace
        while time.monotonic() < end and _signal_all(0):
            time.sleep(0.02)
        _signal_all(signal.SIGKILL)
    for p in _groups if reap else ():
        try:
            p.wait(timeout=1)
        except subprocess.TimeoutExpired:
            pass


def exit_now(rc):
    """Leaves at once with status rc, without the interpreter's teardown (torch 1.13 can abort
    in its C++ teardown at exit) and without atexit: stdout and stderr flushed, what this test
    started stopped first."""
    sys.stdout.flush()
    sys.stderr.flush()
    kill_started()
    os._exit(rc)


class GroupPopen(_OriginalPopen):
    """subprocess.Popen whose child leads a new session (unless start_new_session or
    process_group is given) with this test run's marks in its environment; kill() kills its
    process group."""

    def __init__(self, args, *rest, **kw):
        if "start_new_session" not in kw and kw.get("process_group") is None:
            kw["start_new_session"] = True
        env = kw.get("env")
        kw["env"] = dict(os.environ if env is None else env, **_marks)
        super().__init__(args, *rest, **kw)
        self._gs_group = bool(kw.get("start_new_session")) or kw.get("process_group") == 0
        if self._gs_group:
            _groups.append(self)

    def kill(self):
        if not self._gs_group:
            return super().kill()
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _on_signal(signum, frame):
    kill_started(grace=0.3, reap=False)  # meson SIGKILLs the test 0.5 s after its SIGTERM
    sys.exit(128 + signum)


_marks = {}  # this test's TEST_RUN_VAR and TEST_OWNER_VAR; empty in the test's children
if TEST_OWNER_VAR not in os.environ:
    _marks = {TEST_RUN_VAR: os.environ.get(TEST_RUN_VAR) or os.path.realpath(BUILD),
              TEST_OWNER_VAR: "%d.%d" % (os.getpid(), time.time_ns())}
    os.environ.update(_marks)
    subprocess.Popen = GroupPopen
    atexit.register(kill_started)
    for _sig in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(_sig) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(_sig, _on_signal)
