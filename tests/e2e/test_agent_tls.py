"""`gpuscope agent`'s TLS versions, keep-alive and credential-file checks (issue 18,
docs/security.md "TLS" and "CREDENTIAL FILES"), on nvml-sim: `openssl s_client -tls1` and
`-tls1_1` refused and `-tls1_2`/`-tls1_3` accepted by default, a web config's
`min_version: TLS13` refusing TLS 1.2 and `min_version: TLS10` letting the old versions in
(so the client can speak them and the refusals are the agent's), two requests on one
connection over HTTP and HTTPS without `Connection: close`; a tokens file, web config or TLS
key writable by others refused at start and on SIGHUP (the old credentials kept), and a
reload that would drop every credential refused and logged at warning.
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
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BIN, free_port, sim_env, stop_proc  # noqa: E402

SCENARIO = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")
t = Tap()
TMP = tempfile.mkdtemp(prefix="gs-agent-tls.")
os.chmod(TMP, 0o755)


def new_token(role, user=None):
    out = subprocess.run([BIN, "agent", "--new-token", role] + ([user] if user else []),
                         capture_output=True, text=True, timeout=10).stdout
    token = [ln.split()[1] for ln in out.splitlines() if ln.startswith("token: ")][0]
    line = [ln for ln in out.splitlines() if ln.startswith("sha256:")][0]
    return token, line


def make_cert(name):
    crt, key = os.path.join(TMP, name + ".crt"), os.path.join(TMP, name + ".key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", crt,
                    "-days", "2", "-subj", "/CN=" + name,
                    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True, timeout=30)
    os.chmod(key, 0o600)
    return crt, key


class Agent:
    def __init__(self, args):
        self.port = free_port()
        self.log = open(os.path.join(TMP, "agent-%d.log" % self.port), "w+")
        self.p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:%d" % self.port,
                                   "--history", "off", "--socket", "off",
                                   "--http-socket", "off", "--data-dir", TMP] + args,
                                  env=sim_env(SCENARIO, "10"), stdout=subprocess.DEVNULL,
                                  stderr=self.log)
        self.up = False
        for _ in range(200):
            if self.p.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                self.up = True
                break
            except OSError:
                time.sleep(0.05)

    def logtext(self):
        self.log.flush()
        with open(self.log.name) as f:
            return f.read()

    def stop(self):
        rc = stop_proc(self.p)
        self.log.close()
        return rc


def s_client(port, version):
    """Whether `openssl s_client -<version>` completes a handshake with the agent. The
    cipher list at security level 0 lets OpenSSL 3 offer TLS 1.0/1.1 at all."""
    cmd = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-" + version,
           "-cipher", "DEFAULT:@SECLEVEL=0", "-brief"]
    if version == "tls1_3":
        cmd[-3:-1] = []
    r = subprocess.run(cmd, input=b"", capture_output=True, timeout=20)
    out = (r.stdout + r.stderr).decode(errors="replace")
    return "Protocol version" in out and "CONNECTION ESTABLISHED" in out, out[-400:]


def two_on_one(conn, path, auth=None):
    """Two GETs on one http.client connection: (statuses, Connection headers, same socket)."""
    hdr = {"Authorization": auth} if auth else {}
    codes, conns, socks = [], [], []
    for _ in range(2):
        conn.request("GET", path, headers=hdr)
        r = conn.getresponse()
        r.read()
        codes.append(r.status)
        conns.append(r.getheader("Connection"))
        socks.append(conn.sock.getsockname() if conn.sock else None)
    conn.close()
    return codes, conns, socks[0] is not None and socks[0] == socks[1]


def wait_log(a, needle, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if needle in a.logtext():
            return True
        time.sleep(0.05)
    return False


def get(port, auth=None, ca=None):
    if ca:
        c = http.client.HTTPSConnection("127.0.0.1", port, timeout=5,
                                        context=ssl.create_default_context(cafile=ca))
    else:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        c.request("GET", "/metrics", headers={"Authorization": auth} if auth else {})
        r = c.getresponse()
        r.read()
        return r.status
    except OSError:
        return 0
    finally:
        c.close()


def tls_versions():
    crt, key = make_cert("srv")
    # -- the default: TLS 1.2 and 1.3 only --
    a = Agent(["--tls-cert-file", crt, "--tls-key-file", key])
    t.ok(a.up, "agent with a TLS pair starts", detail=a.logtext()[-500:])
    for v, want in (("tls1", False), ("tls1_1", False), ("tls1_2", True), ("tls1_3", True)):
        ok, out = s_client(a.port, v)
        t.ok(ok == want, "default: openssl s_client -%s %s" % (
            v, "accepted" if want else "refused"), detail=out)
    t.ok("VERS-TLS1.2" in a.logtext() and "VERS-TLS1.1" not in a.logtext(),
         "the start-up line names the GnuTLS versions", detail=a.logtext()[-400:])
    codes, conns, same = two_on_one(
        http.client.HTTPSConnection("127.0.0.1", a.port, timeout=5,
                                    context=ssl.create_default_context(cafile=crt)), "/metrics")
    t.ok(codes == [200, 200] and same and "close" not in [str(c).lower() for c in conns],
         "HTTPS: two scrapes on one connection (keep-alive, no Connection: close)",
         detail=(codes, conns, same))
    t.eq(a.stop(), 0, "agent stops cleanly")

    # -- the web config's min_version: TLS13 refuses 1.2; TLS10 lets 1.0 in --
    for minv, checks in (("TLS13", (("tls1_2", False), ("tls1_3", True))),
                         ("TLS10", (("tls1", True), ("tls1_2", True)))):
        web = os.path.join(TMP, "web-%s.yml" % minv)
        with open(web, "w") as f:
            f.write("tls_server_config:\n  cert_file: srv.crt\n  key_file: srv.key\n"
                    "  min_version: %s\n" % minv)
        os.chmod(web, 0o644)
        a = Agent(["--web-config-file", web])
        t.ok(a.up, "agent with min_version: %s starts" % minv, detail=a.logtext()[-500:])
        t.ok("is ignored" not in a.logtext(), "min_version: %s is not 'ignored'" % minv,
             detail=a.logtext()[-300:])
        for v, want in checks:
            ok, out = s_client(a.port, v)
            t.ok(ok == want, "min_version: %s: s_client -%s %s" % (
                minv, v, "accepted" if want else "refused"), detail=out)
        t.eq(a.stop(), 0, "agent stops cleanly")

    # -- plain HTTP keeps connections alive too --
    a = Agent([])
    codes, conns, same = two_on_one(http.client.HTTPConnection("127.0.0.1", a.port, timeout=5),
                                    "/metrics")
    t.ok(codes == [200, 200] and same and "close" not in [str(c).lower() for c in conns],
         "HTTP: two requests on one connection", detail=(codes, conns, same))
    t.eq(a.stop(), 0, "agent stops cleanly")


def write(path, text, mode):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def refused_at_start(args, needle, what):
    a = Agent(args)
    rc = a.p.wait(timeout=10) if not a.up else None
    if a.up:  # it listens: not refused
        a.stop()
    log = a.logtext() if not a.log.closed else ""
    t.ok(rc not in (None, 0) and needle in log, "%s: the agent refuses to start" % what,
         detail=(rc, log[-400:]))


def credential_files():
    tok_a, line_a = new_token("admin")
    tok_b, line_b = new_token("admin", "mallory")
    tokens = os.path.join(TMP, "tokens")
    # -- at start: world- or group-writable, or owned by another user --
    write(tokens, line_a + "\n", 0o666)
    refused_at_start(["--tokens-file", tokens], "writable by everyone", "tokens file 0666")
    write(tokens, line_a + "\n", 0o620)
    refused_at_start(["--tokens-file", tokens], "writable by its group", "tokens file 0620")
    if os.geteuid() == 0:
        write(tokens, line_a + "\n", 0o600)
        os.chown(tokens, 65534, 65534)
        refused_at_start(["--tokens-file", tokens], "owned by uid 65534",
                         "tokens file owned by nobody")
        os.chown(tokens, 0, 0)
    else:
        t.skip("tokens file owned by another user", "needs root to chown")
    web = os.path.join(TMP, "web-open.yml")
    write(web, "basic_auth_users: {}\n", 0o666)
    refused_at_start(["--web-config-file", web], "writable by everyone", "web config 0666")
    crt, key = make_cert("cred")
    os.chmod(key, 0o646)
    refused_at_start(["--tls-cert-file", crt, "--tls-key-file", key], "writable by everyone",
                     "TLS key 0646")
    os.chmod(key, 0o600)

    # -- a symlink (as Kubernetes mounts Secrets) to a good file is fine --
    write(tokens, line_a + "\n", 0o600)
    link = os.path.join(TMP, "tokens-link")
    os.symlink(tokens, link)
    a = Agent(["--tokens-file", link])
    t.ok(a.up, "a tokens file reached through a symlink (target 0600, ours) is accepted",
         detail=a.logtext()[-300:])
    t.eq(get(a.port, "Bearer " + tok_a), 200, "its admin token works")

    # -- on SIGHUP: made world-writable with a new admin token appended: refused --
    write(tokens, line_a + "\n" + line_b + "\n", 0o666)
    a.p.send_signal(signal.SIGHUP)
    t.ok(wait_log(a, "writable by everyone (mode 0666)") and
         wait_log(a, "keeping the running credentials"),
         "reload of a world-writable tokens file is refused", detail=a.logtext()[-400:])
    t.eq(get(a.port, "Bearer " + tok_b), 401, "the appended token does not work")
    t.eq(get(a.port, "Bearer " + tok_a), 200, "the running token still works")

    # -- on SIGHUP: the tokens file emptied: refused at warning, credentials stay on --
    write(tokens, "# nothing\n", 0o600)
    a.p.send_signal(signal.SIGHUP)
    t.ok(wait_log(a, "refusing to turn credentials off") and
         any("warn" in ln for ln in a.logtext().splitlines() if "turn credentials off" in ln),
         "a reload dropping every credential is refused, logged at warning",
         detail=a.logtext()[-400:])
    t.eq(get(a.port), 401, "no credential still gets 401")
    t.eq(get(a.port, "Bearer " + tok_a), 200, "the running token still works after it")
    t.eq(a.stop(), 0, "agent stops cleanly")


def main():
    if not os.path.exists(BIN) or not shutil.which("openssl"):
        t.skip("agent tls", "needs the gpuscope binary and openssl")
        return t.done()
    tls_versions()
    credential_files()
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
