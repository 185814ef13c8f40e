"""`gpuscope agent`'s HTTP viewers (docs/security.md), on nvml-sim (h100x8-training.json, time
frozen): Bearer tokens made by `gpuscope agent --new-token` (no token, a wrong one, a metrics
token that reaches /metrics only, viewer and admin tokens), bcrypt basic-auth users from an
exporter-toolkit web config, HTTPS with a certificate made here by openssl and checked by curl
--cacert, the certificate replaced on SIGHUP (and a bad pair refused, the old one kept), the
refusal to listen on a non-loopback address without TLS and credentials unless --insecure, a
slow TLS client cut off while others are served, and 1,000 malformed requests (garbage bytes,
bad headers, huge headers, bad methods, bad credentials) after which /metrics is still right.
"""
import base64
import ctypes
import http.client
import json
import os
import random
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
from gsenv import SRC, BIN, free_port, recv_all, sim_env, stop_proc  # noqa: E402

SCENARIO = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")
t = Tap()
TMP = tempfile.mkdtemp(prefix="gs-agent-auth.")


def new_token(role, user=None):
    out = subprocess.run([BIN, "agent", "--new-token", role] + ([user] if user else []),
                         capture_output=True, text=True, timeout=10).stdout
    token = [ln.split()[1] for ln in out.splitlines() if ln.startswith("token: ")][0]
    line = [ln for ln in out.splitlines() if ln.startswith("sha256:")][0]
    return token, line


def bcrypt(password):
    lib = ctypes.CDLL("libcrypt.so.1")
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt.restype = ctypes.c_char_p
    setting = lib.crypt_gensalt(b"$2b$", 4, None, 0)
    return lib.crypt(password.encode(), setting).decode()


def make_cert(name):
    """A self-signed EC certificate for 127.0.0.1 and localhost: (cert path, key path)."""
    crt, key = os.path.join(TMP, name + ".crt"), os.path.join(TMP, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "2", "-subj", "/CN=" + name,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=30)
    return crt, key


class Agent:
    def __init__(self, args, listen=None, tls_ca=None):
        self.port = free_port()
        self.host = "127.0.0.1"
        self.listen = listen or "127.0.0.1:%d" % self.port
        if listen:
            self.port = int(listen.rsplit(":", 1)[1])
        self.ca = tls_ca
        self.log = open(os.path.join(TMP, "agent-%d.log" % self.port), "w+")
        self.p = subprocess.Popen([BIN, "agent", "--listen", self.listen, "--history", "off",
                                   "--socket", "off", "--http-socket", "off",
                                   "--data-dir", TMP] + args,
                                  env=sim_env(SCENARIO, "10"), stdout=subprocess.DEVNULL,
                                  stderr=self.log)
        self.up = False
        for _ in range(200):
            if self.p.poll() is not None:
                break
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                self.up = True
                break
            except OSError:
                time.sleep(0.05)

    def conn(self, ca=None):
        if self.ca or ca:
            ctx = ssl.create_default_context(cafile=ca or self.ca)
            return http.client.HTTPSConnection(self.host, self.port, timeout=5, context=ctx)
        return http.client.HTTPConnection(self.host, self.port, timeout=5)

    def get(self, path, auth=None, ca=None, method="GET"):
        c = self.conn(ca)
        try:
            c.request(method, path, headers={"Authorization": auth} if auth else {})
            r = c.getresponse()
            return r.status, r.headers, r.read().decode()
        finally:
            c.close()

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        rc = stop_proc(self.p)
        self.log.close()
        return rc


def curl(port, path, cacert, auth=None):
    """curl's view of an HTTPS request: (exit status, HTTP code text)."""
    cmd = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5",
           "--cacert", cacert, "https://127.0.0.1:%d%s" % (port, path)]
    if auth:
        cmd[1:1] = ["-H", "Authorization: " + auth]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=15)
    return r.returncode, r.stdout.strip()


def gauge(text, name):
    return [ln for ln in text.splitlines() if ln.startswith(name + " ") or ln.startswith(name + "{")]


def malformed(i, good):
    """The i-th malformed request as raw bytes (sent inside TLS)."""
    kind = i % 12
    if kind == 0:
        # random bytes, then the end of a head so the agent judges them at once
        return bytes(random.getrandbits(8) for _ in range(random.randint(1, 1500))) + b"\r\n\r\n"
    if kind == 1:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Big: " + b"y" * 50000 + b"\r\n\r\n"
    if kind == 2:
        return b"GET /metrics HTTP/1.1\r\n" + b"".join(b"H%d: v\r\n" % k for k in range(3000)) + b"\r\n"
    if kind == 3:
        return b"BREW /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n"
    if kind == 4:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + b"A" * 5000 + b"\r\n\r\n"
    if kind == 5:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic %%%%%%\r\n\r\n"
    if kind == 6:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Basic " + \
            base64.b64encode(b"nocolon") + b"\r\n\r\n"
    if kind == 7:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + \
            good[:-1].encode() + b"\r\n\r\n"
    if kind == 8:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nBad Header Without Colon\r\n\r\n"
    if kind == 9:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: -5\r\n\r\n"
    if kind == 10:
        return b"GET " + b"/x" * 5000 + b" HTTP/1.1\r\nHost: localhost\r\n\r\n"
    return b"\x00\xff\r\n\r\nGET / HTTP/7.7\r\n\r\n"


def tls_raw(port, ca, data, wait=2.0):
    # Read until the agent closes: ask it to (answers are kept alive otherwise).
    data = data.replace(b" HTTP/1.1\r\n", b" HTTP/1.1\r\nConnection: close\r\n", 1)
    ctx = ssl.create_default_context(cafile=ca)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=wait) as raw:
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(data)
                return recv_all(s)
    except (OSError, ssl.SSLError):
        return b""


def plain_raw(port, data, wait=0.5):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=wait) as s:
            s.sendall(data)
            return s.recv(4096)
    except OSError:  # sendall meets a reset when the agent closes on a too-large head
        return b""


def main():
    if not os.path.exists(BIN) or not shutil.which("openssl") or not shutil.which("curl"):
        t.skip("agent auth", "needs the gpuscope binary, openssl and curl")
        return t.done()

    tok_m, line_m = new_token("metrics", "prometheus")
    tok_v, line_v = new_token("viewer", "alice")
    tok_a, line_a = new_token("admin")
    t.ok(len(tok_m) == 43 and line_m.endswith(" metrics prometheus"),
         "--new-token prints a 43-character token and its tokens-file line", detail=line_m)
    tokens = os.path.join(TMP, "tokens")
    with open(tokens, "w") as f:
        f.write("# gpuscope tokens\n%s\n%s\n%s\n" % (line_m, line_v, line_a))
    web = os.path.join(TMP, "web.yml")
    live_crt, live_key = make_cert("one")  # what the web config names; replaced below
    crt, key = os.path.join(TMP, "first.crt"), os.path.join(TMP, "first.key")
    shutil.copy(live_crt, crt)
    shutil.copy(live_key, key)
    with open(web, "w") as f:
        f.write("tls_server_config:\n  cert_file: one.crt\n  key_file: one.key\n"
                "basic_auth_users:\n  bob: %s\n" % bcrypt("hunter2"))

    # -- tokens, roles, basic auth, over TLS --
    a = Agent(["--tokens-file", tokens, "--web-config-file", web], tls_ca=crt)
    t.ok(a.up, "agent starts with tokens, basic-auth users and TLS from the web config",
         detail=a.logtext()[-2000:])
    code, hdr, body = a.get("/metrics")
    t.ok(code == 401 and hdr.get("WWW-Authenticate", "").startswith("Bearer") and
         "error" in json.loads(body), "no credential: 401, WWW-Authenticate: Bearer, JSON error",
         detail=(code, dict(hdr), body))
    t.ok(a.get("/api/v1/snapshot")[0] == 401 and a.get("/")[0] == 401,
         "no credential: 401 on the API and the page too")
    t.eq(a.get("/metrics", "Bearer " + tok_m[:-1] + "x")[0], 401, "wrong token: 401")
    t.eq(a.get("/metrics", "Bearer")[0], 401, "empty Bearer: 401")
    code, hdr, body = a.get("/metrics", "Bearer " + tok_m)
    up_line = 'gpuscope_up{hostname="%s"} 1' % socket.gethostname()
    t.ok(code == 200 and gauge(body, "gpuscope_up") == [up_line] and
         len(gauge(body, "gpuscope_gpu_memory_used_bytes")) == 8,
         "metrics token: /metrics with gpuscope_up 1 and 8 GPUs", detail=(code, body[:300]))
    t.eq(hdr.get("Cache-Control"), "no-store", "Cache-Control: no-store on /metrics")
    t.eq(a.get("/healthz", "Bearer " + tok_m)[0], 200, "metrics token: /healthz 200")
    for path in ("/api/v1/snapshot", "/api/v1/processes", "/", "/api/v1/history"):
        t.eq(a.get(path, "Bearer " + tok_m)[0], 403, "metrics token: 403 on %s" % path)
    code, _, body = a.get("/api/v1/snapshot", "Bearer " + tok_v)
    t.ok(code == 200 and "gpus" in json.loads(body), "viewer token: /api/v1/snapshot 200",
         detail=(code, body[:200]))
    code, _, body = a.get("/api/v1/processes", "Bearer " + tok_a)
    t.ok(code == 200 and len(json.loads(body)["processes"]) > 0,
         "admin token: /api/v1/processes lists processes", detail=(code, body[:200]))
    basic = "Basic " + base64.b64encode(b"bob:hunter2").decode()
    t.eq(a.get("/api/v1/snapshot", basic)[0], 200, "basic auth bob: 200")
    t0 = time.monotonic()
    for _ in range(20):
        a.get("/metrics", basic)
    per = (time.monotonic() - t0) / 20
    t.ok(per < 0.05, "basic auth: the bcrypt result is cached (%.1f ms per request)" % (per * 1e3))
    t.eq(a.get("/metrics", "Basic " + base64.b64encode(b"bob:hunter3").decode())[0], 401,
         "basic auth, wrong password: 401")
    t.eq(a.get("/metrics", "Basic " + base64.b64encode(b"eve:hunter2").decode())[0], 401,
         "basic auth, unknown user: 401")
    rc, code = curl(a.port, "/metrics", crt, "Bearer " + tok_m)
    t.ok(rc == 0 and code == "200", "curl --cacert completes the TLS handshake: 200",
         detail=(rc, code))
    other, _ = make_cert("other")
    rc, code = curl(a.port, "/metrics", other, "Bearer " + tok_m)
    t.ok(rc != 0, "curl with another CA refuses the certificate", detail=(rc, code))
    t.ok(b"HTTP/1.1 200" not in plain_raw(a.port, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"),
         "plain HTTP on the TLS port gets no answer")

    # -- certificate reload on SIGHUP; a bad pair keeps the old one --
    shutil.copy(other, live_crt)
    shutil.copy(os.path.join(TMP, "other.key"), live_key)
    a.p.send_signal(signal.SIGHUP)
    ok = False
    for _ in range(50):
        time.sleep(0.1)
        if curl(a.port, "/metrics", other, "Bearer " + tok_m) == (0, "200"):
            ok = True
            break
    t.ok(ok, "SIGHUP: the new certificate is served", detail=a.logtext()[-1500:])
    t.ok(curl(a.port, "/metrics", crt, "Bearer " + tok_m)[0] != 0,
         "SIGHUP: the old certificate is gone")
    t.ok("daemon restarted" in a.logtext(), "SIGHUP: the restart is logged")
    shutil.copy(crt, live_crt)  # the first certificate with the other key: a bad pair
    a.p.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    t.ok(curl(a.port, "/metrics", other, "Bearer " + tok_m) == (0, "200") and
         "keeping the running credentials and TLS" in a.logtext(),
         "SIGHUP with a mismatched pair: refused, logged, the running one kept",
         detail=a.logtext()[-1500:])
    shutil.copy(other, live_crt)

    # -- 60 malformed requests inside TLS, then a correct answer --
    st = [tls_raw(a.port, other, malformed(i, tok_m))[:12] for i in range(60)]
    t.ok(not any(x.startswith(b"HTTP/1.1 200") for x in st) and
         a.get("/metrics", "Bearer " + tok_m, ca=other)[0] == 200,
         "60 malformed requests inside TLS: none answered 200, /metrics still served",
         detail=st[:12])

    # -- a slow TLS client is cut off; others keep getting answers --
    slow = {"closed_after": None}

    def slow_client():
        ctx = ssl.create_default_context(cafile=other)
        t0 = time.monotonic()
        try:
            raw = socket.create_connection(("127.0.0.1", a.port), timeout=30)
            s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
            s.settimeout(30)
            s.send(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n")
            for _ in range(30):
                time.sleep(1)
                s.send(b"X-Slow: z\r\n")
        except (OSError, ssl.SSLError):
            slow["closed_after"] = time.monotonic() - t0

    th = threading.Thread(target=slow_client)
    th.start()
    answers = 0
    for _ in range(12):
        if a.get("/metrics", "Bearer " + tok_m, ca=other)[0] == 200:
            answers += 1
        time.sleep(1)
    th.join(timeout=40)
    t.eq(answers, 12, "others are answered while a slow TLS client dribbles its head")
    ca = slow["closed_after"]
    t.ok(ca is not None and 8 <= ca <= 16, "the slow TLS client is cut off after ~10 s",
         detail=ca)
    t.eq(a.stop(), 0, "agent stops cleanly")

    # -- 1,000 malformed requests, then a correct /metrics --
    # Over plain HTTP (TLS handshakes would make this minutes on a shared machine); the TLS
    # layer got its own garbage above.
    b = Agent(["--tokens-file", tokens, "--http-rate", "0"])
    ref = sorted(gauge(b.get("/metrics", "Bearer " + tok_m)[2], "gpuscope_gpu_memory_used_bytes"))
    random.seed(5)
    statuses = {}
    slowest = {}
    for i in range(1000):
        t0 = time.monotonic()
        out = plain_raw(b.port, malformed(i, tok_m), wait=2.0)
        st = out[9:12].decode(errors="replace") if out.startswith(b"HTTP/1.") else "closed"
        statuses[st] = statuses.get(st, 0) + 1
        k = i % 12
        slowest[k] = max(slowest.get(k, 0), time.monotonic() - t0)
    print("# slowest per kind: %r" % sorted(slowest.items(), key=lambda kv: -kv[1])[:4])
    t.ok("200" not in statuses, "none of 1,000 malformed requests got a 200",
         detail=statuses)
    t.ok(statuses.get("401", 0) >= 300 and statuses.get("431", 0) + statuses.get("413", 0) +
         statuses.get("closed", 0) >= 100,
         "malformed requests met 401s, header-size refusals or a closed connection",
         detail=statuses)
    code, _, body = b.get("/metrics", "Bearer " + tok_m)
    t.ok(code == 200 and len(ref) == 8 and
         sorted(gauge(body, "gpuscope_gpu_memory_used_bytes")) == ref and b.p.poll() is None,
         "after 1,000 malformed requests /metrics is unchanged and the agent is up",
         detail=(code, statuses))
    t.eq(b.stop(), 0, "agent stops cleanly")

    # -- the non-loopback rule --
    c = Agent([], listen="0.0.0.0:%d" % free_port())
    rc = c.p.wait(timeout=10) if c.p.poll() is None else c.p.returncode
    t.ok(rc != 0 and "refusing a non-loopback address" in c.logtext(),
         "0.0.0.0 without TLS and tokens: refused", detail=c.logtext()[-800:])
    c.stop()
    c = Agent(["--tokens-file", tokens], listen="0.0.0.0:%d" % free_port())
    rc = c.p.wait(timeout=10) if c.p.poll() is None else c.p.returncode
    t.ok(rc != 0 and "without TLS" in c.logtext(), "0.0.0.0 with tokens but no TLS: refused",
         detail=c.logtext()[-800:])
    c.stop()
    c = Agent(["--insecure"], listen="0.0.0.0:%d" % free_port())
    t.ok(c.up and c.get("/healthz")[0] == 200 and "INSECURE" in c.logtext(),
         "0.0.0.0 with --insecure: serves, and warns at start", detail=c.logtext()[-800:])
    t.eq(c.stop(), 0, "agent stops cleanly")
    c = Agent(["--tokens-file", tokens, "--tls-cert-file", other, "--tls-key-file",
               os.path.join(TMP, "other.key")], listen="0.0.0.0:%d" % free_port(), tls_ca=other)
    t.ok(c.up and c.get("/healthz", "Bearer " + tok_a)[0] == 200 and
         "INSECURE" not in c.logtext(), "0.0.0.0 with TLS and tokens: serves, no warning",
         detail=c.logtext()[-800:])
    t.eq(c.stop(), 0, "agent stops cleanly")

    # -- a bad tokens file stops the start with FILE:LINE --
    bad = os.path.join(TMP, "bad-tokens")
    with open(bad, "w") as f:
        f.write("%s\nsha256:1234 viewer\n" % line_v)
    c = Agent(["--tokens-file", bad])
    rc = c.p.wait(timeout=10) if c.p.poll() is None else c.p.returncode
    t.ok(rc != 0 and "%s:2: expected sha256:" % bad in c.logtext(),
         "a bad tokens file: the agent refuses to start, naming FILE:LINE",
         detail=c.logtext()[-800:])
    c.stop()
    return t.done()


if __name__ == "__main__":
    try:
        rc = main()
    finally:
        shutil.rmtree(TMP, ignore_errors=True)
    sys.exit(rc)
