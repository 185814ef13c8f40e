"""The agent's doors (issue 24), with two real unix users made here (gsdoor_a, gsdoor_b; needs
root for them, the rest runs without):

- loopback TCP fairness by uid: gsdoor_a holding 40 idle connections from 127.0.0.1 keeps
  http_conn_per_uid (32) of them, and gsdoor_b's 10 probes from 127.0.0.1 are all answered
  (the per-address limit counts only connections of no known local uid, or root's); the
  refusal is logged once for gsdoor_a even when it lets go and comes back; root holding 40
  from one address meets the per-address limit (32), counted on
  gpuscope_refused_total{door="http",reason="address_connections"} and logged once;
- the Host allow-list: a foreign Host (DNS rebinding) is answered 421 on /api/v1/snapshot,
  /metrics and the capture POST; localhost, loopback addresses, the listen address, the
  hostname and allowed_hosts names are served; an agent on 0.0.0.0 is scraped by this
  machine's own IP address; the refusals counted (reason "host") and logged once per address;
- per-uid caps on ended runs: 40 short runs against ended_rows_per_uid = 200 leave at most
  200 rows of ended runs, the newest kept, and a live run of 300 steps (past the cap) whole.
"""
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, TempUsers, clean_up_at_exit, free_port, get_text, sim_env, \
    start_agent, stop_proc, wait_until  # noqa: E402

t = Tap()
USERS = ["gsdoor_a", "gsdoor_b"]
TMP = tempfile.mkdtemp(prefix="gs-agent-doors.")
os.chmod(TMP, 0o755)
PROCS = []

# As a user (or as root with "-"): "hold PORT SRC N" opens N TCP connections from SRC, prints
# how many the agent kept after 0.5 s and holds them until stdin closes (a line on stdin lets
# them go and holds N anew); "ask PORT SRC N" makes N requests from SRC and prints the statuses.
AS_USER = r'''
import os, pwd, socket, sys, time
if sys.argv[1] != "-":
    u = pwd.getpwnam(sys.argv[1])
    os.setgid(u.pw_gid); os.setuid(u.pw_uid)
mode, port, src, n = sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])

def conn():
    s = socket.socket(); s.settimeout(3)
    s.bind((src, 0)); s.connect(("127.0.0.1", port))
    return s

def hold():
    held = []
    for i in range(n):
        try:
            held.append(conn())
        except OSError:
            pass
    time.sleep(0.5)
    alive = 0
    for s in held:  # a connection the agent shut down reads as closed
        s.setblocking(False)
        try:
            alive += s.recv(1) != b""
        except BlockingIOError:
            alive += 1
        except OSError:
            pass
    print("alive %d" % alive, flush=True)
    return held

if mode == "hold":
    held = hold()
    while sys.stdin.readline():
        for s in held:
            s.close()
        time.sleep(0.3)
        held = hold()
else:
    for i in range(n):
        try:
            s = conn()
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            out = b""
            while True:
                c = s.recv(4096)
                if not c:
                    break
                out += c
            print(int(out[9:12]) if out[:5] == b"HTTP/" else 0, flush=True)
            s.close()
        except OSError:
            print(0, flush=True)
'''


def as_user(user, *args):
    p = subprocess.Popen([sys.executable, "-c", AS_USER, user] + [str(a) for a in args],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    PROCS.append(p)
    return p


def refused(base):
    """gpuscope_refused_total by (door, reason) from /metrics."""
    code, body = get_text(base + "/metrics")
    out = {}
    for ln in body.splitlines() if code == 200 else []:
        if ln.startswith("gpuscope_refused_total{"):
            labels, value = ln[len("gpuscope_refused_total{"):].split("} ")
            kv = dict(x.split("=") for x in labels.split(","))
            out[(kv["door"].strip('"'), kv["reason"].strip('"'))] = float(value)
    return out


def ask(port, path, host, method="GET", addr="127.0.0.1", headers=""):
    """(status, body) of one request to addr:port with the Host header host."""
    s = socket.create_connection((addr, port), timeout=5)
    s.sendall(("%s %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n"
               % (method, path, host, headers)).encode())
    out = b""
    while True:
        c = s.recv(65536)
        if not c:
            break
        out += c
    s.close()
    head, _, body = out.partition(b"\r\n\r\n")
    return (int(head[9:12]) if head[:5] == b"HTTP/" else 0), body.decode(errors="replace")


def log_text(log):
    log.flush()
    with open(log.name) as f:
        return f.read()


def fairness(log):
    users = TempUsers(USERS)
    rc = 0
    for u in USERS:
        rc |= users.add_user(u, "-N", "-s", "/bin/sh")
    if rc:
        users.remove()
        t.skip("loopback fairness by uid", "useradd failed")
        return
    p = None
    try:
        p, base, up = start_agent(["--data-dir", os.path.join(TMP, "d1"), "--history", "off",
                                   "--socket", "off", "--http-socket", "off"],
                                  sim_env("h100x8-training.json", "10"), PROCS,
                                  stdout=subprocess.DEVNULL, stderr=log)
        t.ok(up, "agent starts")
        uid_a = int(subprocess.run(["id", "-u", USERS[0]], capture_output=True,
                                   text=True).stdout)
        hog = as_user(USERS[0], "hold", p.port, "127.0.0.1", 40)
        alive = hog.stdout.readline().split()
        t.ok(alive and alive[0] == "alive" and int(alive[1]) == 32,
             "gsdoor_a's 40 idle connections from 127.0.0.1: http_conn_per_uid (32) kept",
             detail=alive)
        codes = as_user(USERS[1], "ask", p.port, "127.0.0.1", 10).communicate(timeout=60)[0]
        codes = codes.split()
        t.eq(codes.count("200"), 10, "gsdoor_b's 10 probes from 127.0.0.1 all answered 200")
        hog.stdin.write("again\n")
        hog.stdin.flush()
        alive = hog.stdout.readline().split()
        t.ok(alive and int(alive[1]) == 32, "gsdoor_a lets go and holds 40 again: 32 kept",
             detail=alive)
        text = log_text(log)
        t.eq(text.count("uid %d holds 32 connections" % uid_a), 1,
             "the per-uid refusal is logged once for gsdoor_a, also after it came back")

        root = as_user("-", "hold", p.port, "127.0.0.7", 40)
        alive = root.stdout.readline().split()
        t.ok(alive and int(alive[1]) == 32,
             "root's 40 connections from 127.0.0.7 meet the per-address limit (32 kept)",
             detail=alive)
        codes = as_user(USERS[1], "ask", p.port, "127.0.0.7", 5).communicate(timeout=60)[0]
        t.eq(codes.split().count("200"), 5, "gsdoor_b from the same address is answered")
        got = {}
        wait_until(lambda: got.update(refused(base)) or
                   got.get(("http", "address_connections"), 0) >= 8, 15)
        t.ok(got.get(("http", "address_connections"), 0) >= 8 and
             got.get(("http", "uid_connections"), 0) >= 16,
             "gpuscope_refused_total counts them: address_connections and uid_connections",
             detail={k: v for k, v in got.items() if v})
        text = log_text(log)
        t.eq(text.count("127.0.0.7 (root) holds 32 connections"), 1,
             "the per-address refusal is logged once")
        for h in (hog, root):
            h.stdin.close()
            h.wait(timeout=10)
        t.eq(stop_proc(p), 0, "agent stops cleanly")
    finally:
        if p is not None:
            stop_proc(p)
        users.remove()


def local_ip():
    """A non-loopback IPv4 address of this machine, or None."""
    for target in ("10.255.255.255", "192.0.2.1"):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.connect((target, 9))
            ip = s.getsockname()[0]
            if not ip.startswith("127.") and ip != "0.0.0.0":
                return ip
        except OSError:
            pass
        finally:
            s.close()
    return None


def hosts(log):
    p, base, up = start_agent(["--data-dir", os.path.join(TMP, "d2"), "--history", "off",
                               "--socket", "off", "--http-socket", "off",
                               "--allowed-hosts", "gpu.example, dash.example:443"],
                              sim_env("h100x8-training.json", "10"), PROCS,
                              stdout=subprocess.DEVNULL, stderr=log)
    t.ok(up, "agent with allowed_hosts starts")
    port = p.port
    evil = "evil.example:%d" % port
    for path, method, hdr in (("/api/v1/snapshot", "GET", ""), ("/metrics", "GET", ""),
                              ("/api/v1/runs/1/capture", "POST", "X-Requested-By: x\r\n")):
        code, body = ask(port, path, evil, method, headers=hdr)
        t.ok(code == 421 and "allowed_hosts" in body and "evil.example" in body,
             "%s %s with Host %s: 421 naming allowed_hosts" % (method, path, evil),
             detail=(code, body[:200]))
    for host in ("localhost:%d" % port, "127.0.0.1:%d" % port, "[::1]:%d" % port,
                 socket.gethostname(), "GPU.example", "dash.example"):
        code, body = ask(port, "/api/v1/snapshot", host)
        t.eq(code, 200, "Host %s: served" % host)
    code, body = ask(port, "/metrics", "ev\x1b[2Jil.example")
    t.ok(code == 421 and "ev?[2Jil.example" in body and "\x1b" not in body,
         "a Host with a control character: 421, the character not echoed", detail=(code, body))
    got = {}
    wait_until(lambda: got.update(refused(base)) or got.get(("http", "host"), 0) >= 4, 15)
    t.eq(got.get(("http", "host")), 4.0,
         "gpuscope_refused_total{door=\"http\",reason=\"host\"} counts the 4 refusals")
    t.eq(log_text(log).count("127.0.0.1 asked for Host 'evil.example"), 1,
         "the Host refusals are logged once for the address")
    t.eq(stop_proc(p), 0, "agent stops cleanly")

    ip = local_ip()
    if ip is None:
        t.skip("Prometheus scraping by IP", "no non-loopback IPv4 address here")
        return
    port = free_port()
    p = subprocess.Popen([BIN, "agent", "--listen", "0.0.0.0:%d" % port, "--insecure",
                          "--data-dir", os.path.join(TMP, "d3"), "--history", "off",
                          "--socket", "off", "--http-socket", "off"],
                         env=sim_env("h100x8-training.json", "10"),
                         stdout=subprocess.DEVNULL, stderr=log)
    PROCS.append(p)
    up = wait_until(lambda: get_text("http://127.0.0.1:%d/healthz" % port, os_error=True)[0]
                    == 200, 10)
    t.ok(up, "agent on 0.0.0.0 starts")
    code, body = ask(port, "/metrics", "%s:%d" % (ip, port), addr=ip)
    t.ok(code == 200 and "gpuscope_up 1" in body,
         "/metrics scraped by this machine's IP (%s) with Host %s:%d: 200" % (ip, ip, port),
         detail=code)
    code, _ = ask(port, "/metrics", "evil.example", addr=ip)
    t.eq(code, 421, "and a foreign name on that address: 421")
    t.eq(stop_proc(p), 0, "agent stops cleanly")


def caps(log):
    ssock = os.path.join(TMP, "steps.sock")
    data = os.path.join(TMP, "d4")
    p, base, up = start_agent(["--data-dir", data, "--history", "on", "--socket", ssock,
                               "--http-socket", "off", "--flush-interval", "1",
                               "--ended-rows-per-uid", "200"],
                              sim_env("h100x8-training.json"), PROCS,
                              stdout=subprocess.DEVNULL, stderr=log)
    t.ok(up, "agent with ended_rows_per_uid = 200 starts")
    now = time.time()

    def hello(name):
        return json.dumps({"v": 1, "type": "hello", "run": name, "pid": os.getpid(),
                           "rank": 0, "world_size": 1}).encode()

    def step(k):
        return json.dumps({"v": 1, "type": "step", "step": k, "t0": now + k * 1e-3,
                           "t1": now + k * 1e-3 + 5e-4, "rank": 0}).encode()

    live = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    live.connect(ssock)
    live.send(hello("live"))
    for k in range(300):
        live.send(step(k))
    for i in range(40):  # 40 short runs: 11 rows each (the run and 10 steps), 440 in all
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.connect(ssock)
        s.send(hello("short%02d" % i))
        for k in range(10):
            s.send(step(k))
        s.send(json.dumps({"v": 1, "type": "end", "train_runtime": 0.1}).encode())
        s.close()
        time.sleep(0.01)
    db = os.path.join(data, "history.db")
    got = {}

    def bounded():
        try:
            c = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=5)
            try:
                ended = c.execute("SELECT name, (SELECT count(*) FROM step WHERE run = run.id)"
                                  " FROM run WHERE end_time IS NOT NULL ORDER BY id").fetchall()
                got["live"] = c.execute("SELECT count(*) FROM step JOIN run ON run.id = step.run"
                                        " WHERE run.name = 'live'").fetchone()[0]
            finally:
                c.close()
        except sqlite3.Error as e:
            got["error"] = str(e)
            return False
        got["ended"] = ended
        got["rows"] = sum(1 + n for _, n in ended)
        return bool(ended) and ended[-1][0] == "short39" and got["rows"] <= 200 and \
            got["live"] == 300

    t.ok(wait_until(bounded, 20),
         "40 short runs (440 rows): the ended runs keep at most 200 rows, the live run its 300",
         detail={k: v for k, v in got.items() if k != "ended"})
    names = [n for n, _ in got.get("ended", [])]
    t.ok(names and names == ["short%02d" % i for i in range(40 - len(names), 40)],
         "the oldest ended runs went first (the newest %d kept)" % len(names), detail=names)
    live.close()
    t.eq(stop_proc(p), 0, "agent stops cleanly")


def main():
    if not os.path.exists(BIN):
        t.skip("agent doors", "no gpuscope binary at %s" % BIN)
        return t.done()
    clean_up_at_exit(PROCS, [TMP])
    log = open(os.path.join(TMP, "agent.log"), "w+")
    try:
        if os.geteuid() == 0:
            fairness(log)
        else:
            t.skip("loopback fairness by uid", "needs root (useradd)")
        hosts(log)
        caps(log)
    finally:
        log.close()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
