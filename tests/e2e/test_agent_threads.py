"""`gpuscope agent` under concurrent load on both of its HTTP doors while SIGHUPs swap the TLS
pair: the test that makes the agent's threads meet (its target is the ThreadSanitizer build,
build-tsan, where any race makes the agent exit 66 and leave a report; in the normal build it
checks the same answers).

nvml-sim h100x8-training.json, interval 0.1 s, history on, an alert rule that fires, HTTPS with
a self-signed pair made by openssl, and the HTTP unix socket. Four client threads, two on
loopback TCP (HTTPS) and two on the unix socket, ask /metrics, /api/v1/snapshot,
/api/v1/processes, /api/v1/alerts and /api/v1/history for a few seconds with a small http_rate,
so that the rate limiter answers 429 on both doors (the TCP clients share one address, the unix
ones one uid); meanwhile the main thread replaces the certificate and sends SIGHUP five times
(each restart quiesces the old libmicrohttpd daemon while the new one already serves). Checked:
both doors answer 200 and 429 and nothing else, the agent still answers after the reloads,
and it exits 0 on SIGTERM. Needs openssl; else one TAP skip line.
"""
import http.client
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, clean_up, free_port, sim_env, stop_agent  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-threads-test.")
SOCK = os.path.join(tmp, "run", "agent.sock")
CRT, KEY = os.path.join(tmp, "live.crt"), os.path.join(tmp, "live.key")
PATHS = ("/metrics", "/api/v1/snapshot", "/api/v1/processes", "/api/v1/alerts",
         "/api/v1/history?gpu=0&metric=utilization_gpu")
LOAD_S = 4.0
RELOADS = 5


def make_cert(name):
    crt, key = os.path.join(tmp, name + ".crt"), os.path.join(tmp, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "2", "-subj", "/CN=" + name,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=30)
    return crt, key


def install(pair):
    for src, dst in zip(pair, (CRT, KEY)):
        shutil.copy(src, dst + ".new")
        os.replace(dst + ".new", dst)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.unix_path)


def tcp_conn(port):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the pair changes under the client: trust is not the point
    return http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=ctx)


def reopen(conn):
    """Closes conn after a failure; the next request opens a new one."""
    if conn is not None:
        conn.close()
    time.sleep(0.01)
    return None


def client(make, stop, tally, errors):
    """Requests the paths round-robin on kept-alive connections until stop; tally[status] +1
    per answer. A connection the agent closes (a TLS restart drops the old daemon's) is
    reopened and counted in errors["dropped"]; any other failure is kept in errors["other"]."""
    conn, i = None, 0
    while not stop.is_set():
        try:
            if conn is None:
                conn = make()
            conn.request("GET", PATHS[i % len(PATHS)])
            r = conn.getresponse()
            r.read()
            tally[r.status] = tally.get(r.status, 0) + 1
            i += 1
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = None
        except (ConnectionError, ssl.SSLError, http.client.RemoteDisconnected,
                http.client.BadStatusLine) as e:
            errors["dropped"].append(repr(e))
            conn = reopen(conn)
        except OSError as e:  # a timeout, a refused connection
            errors["other"].append(repr(e))
            conn = reopen(conn)
    if conn is not None:
        conn.close()


def main():
    if not os.path.exists(BIN) or not shutil.which("openssl"):
        t.skip("agent threads under load", "needs the gpuscope binary and openssl")
        return t.done()
    pairs = [make_cert("one"), make_cert("two")]
    install(pairs[0])
    conf = os.path.join(tmp, "agent.conf")
    with open(conf, "w") as f:
        f.write("interval = 0.1\nhttp_rate = 2\nhttp_burst = 5\nflush_interval = 1\n"
                "tls_cert_file = %s\ntls_key_file = %s\nhttp_socket = %s\n"
                "[alert hot]\nmetric = temperature_gpu\nop = >=\nthreshold = 0\nfor = 0s\n"
                % (CRT, KEY, SOCK))
    port = free_port()
    env = sim_env("h100x8-training.json")
    p = subprocess.Popen([BIN, "agent", "--config", conf, "--listen", "127.0.0.1:%d" % port,
                          "--data-dir", os.path.join(tmp, "data"), "--socket", "off"],
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    procs.append(p)
    up = False
    for _ in range(300):
        try:
            c = tcp_conn(port)
            c.request("GET", "/healthz")
            up = c.getresponse().status == 200 and os.path.exists(SOCK)
            c.close()
        except OSError:
            pass
        if up or p.poll() is not None:
            break
        time.sleep(0.05)
    if not t.ok(up, "the agent answers on HTTPS and has its unix socket"):
        rc, err = stop_agent(p)
        t.ok(False, "agent log", detail=(rc, err[-3000:]))
        return t.done()

    stop = threading.Event()
    doors = {"tcp": ({}, {"dropped": [], "other": []}), "unix": ({}, {"dropped": [], "other": []})}
    makers = {"tcp": lambda: tcp_conn(port), "unix": lambda: UnixHTTPConnection(SOCK, 10)}
    threads = [threading.Thread(target=client, args=(makers[d], stop) + doors[d])
               for d in ("tcp", "tcp", "unix", "unix")]
    for th in threads:
        th.start()
    for k in range(RELOADS):
        time.sleep(LOAD_S / RELOADS)
        install(pairs[(k + 1) % 2])
        p.send_signal(signal.SIGHUP)
    time.sleep(0.5)
    stop.set()
    for th in threads:
        th.join(timeout=30)
    for d in ("tcp", "unix"):
        tally, errors = doors[d]
        t.ok(tally.get(200, 0) >= 5, "%s: answers 200 under load (at least the burst)" % d,
             detail=tally)
        t.ok(tally.get(429, 0) > 0, "%s: the rate limiter answers 429" % d, detail=tally)
        t.ok(set(tally) <= {200, 429}, "%s: nothing but 200 and 429" % d, detail=tally)
        t.ok(not errors["other"], "%s: no request timed out or failed to connect" % d,
             detail=errors["other"][:5])
    t.ok(not doors["unix"][1]["dropped"], "unix: no connection dropped (TLS reloads are TCP's)",
         detail=doors["unix"][1]["dropped"][:5])
    time.sleep(1.1)  # a token again
    c = tcp_conn(port)
    try:
        c.request("GET", "/metrics")
        r = c.getresponse()
        body = r.read().decode()
        up_line = 'gpuscope_up{hostname="%s"} 1' % socket.gethostname()
        t.ok(r.status == 200 and up_line in body, "after %d reloads: /metrics up"
             % RELOADS, detail=r.status)
    except OSError as e:
        t.ok(False, "after %d reloads: /metrics up" % RELOADS, detail=repr(e))
    finally:
        c.close()
    rc, err = stop_agent(p, timeout=30)
    t.eq(rc, 0, "the agent exits 0 on SIGTERM (66: ThreadSanitizer found a race)")
    restarts = err.count("daemon restarted")
    t.ok(restarts >= RELOADS - 1, "the TLS daemon restarted on the SIGHUPs (%d)" % restarts,
         detail=err[-3000:])
    return t.done()


try:
    rc = main()
finally:
    clean_up(procs, [tmp])
sys.exit(rc)
