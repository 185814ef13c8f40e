"""`gpuscope agent`'s HTTP surface under abuse, on nvml-sim (h100x8-training.json, time frozen).

Checks /api/v1/processes and the per-process /metrics series (with their cap), the security
headers, 400 naming an unknown query parameter, then 1,000 malformed requests (bad paths,
huge URIs, bad parameters, bodies on GET, garbage bytes over raw sockets) from 20 loopback
source addresses while a slow client sends its request head one byte a second: the agent must
keep serving a correct /metrics to another address, close the slow client, and stay up. Last a
burst from one address must meet 429 with Retry-After. All on 127.0.0.0/8 (any address there
is local on Linux, so per-address limits can be exercised from one machine).
"""
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BIN, recv_all, sim_env, start_agent, stop_proc, \
    wait_healthy  # noqa: E402

SCENARIO = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")

t = Tap()


def env_for():
    return sim_env(SCENARIO, "10")


def get(port, path, src="127.0.0.2", method="GET"):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5, source_address=(src, 0))
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.headers, r.read().decode()
    finally:
        c.close()


def raw(port, data, src, wait=2.0):
    """Sends bytes on a fresh connection from src; returns what came back (b"" if closed)."""
    s = socket.socket()
    s.settimeout(wait)
    # Read until the agent closes: ask it to (answers are kept alive otherwise).
    data = data.replace(b" HTTP/1.1\r\n", b" HTTP/1.1\r\nConnection: close\r\n", 1)
    try:
        s.bind((src, 0))
        s.connect(("127.0.0.1", port))
        s.sendall(data)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        return recv_all(s)
    except OSError:
        return b""
    finally:
        s.close()


def start(args):
    data = tempfile.mkdtemp(prefix="gs-agent-http.")
    # Polled from 127.0.0.2 like every request of this test (start_agent's poll: tries=0).
    p, base, _ = start_agent(["--data-dir", data, "--history", "off"] + args, env_for(),
                             tries=0, stdout=subprocess.DEVNULL)
    wait_healthy(base, p, get=lambda _url: get(p.port, "/healthz"))
    return p, p.port, data


def stop(p):
    return stop_proc(p)


def series(text, name):
    return [ln for ln in text.splitlines() if ln.startswith(name + "{") or ln.startswith(name + " ")]


def malformed(i, port):
    """The i-th malformed request, as raw bytes."""
    kind = i % 10
    if kind == 0:
        return b"GET /%s HTTP/1.1\r\nHost: localhost\r\n\r\n" % (b"nope/" * random.randint(1, 20))
    if kind == 1:
        return b"GET /metrics?%s HTTP/1.1\r\nHost: localhost\r\n\r\n" % (b"a" * 40000)
    if kind == 2:
        return b"GET /api/v1/history?gpu=x&metric=%%ff%%00&step=-1 HTTP/1.1\r\nHost: localhost\r\n\r\n"
    if kind == 3:
        return b"GET /api/v1/snapshot?evil=1 HTTP/1.1\r\nHost: localhost\r\n\r\n"
    if kind == 4:
        return bytes(random.getrandbits(8) for _ in range(random.randint(1, 2000)))
    if kind == 5:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello"
    if kind == 6:
        return b"POST /metrics HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\n\r\nabc"
    if kind == 7:
        return b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n" + b"X-Junk: " + b"y" * 60000 + b"\r\n\r\n"
    if kind == 8:
        return b"GET /api/v1/history?" + b"&".join(b"p%d=1" % k for k in range(300)) + \
            b" HTTP/1.1\r\nHost: localhost\r\n\r\n"
    return b"\x00\xff GARBAGE \r\n\r\n" + b"GET / HTTP/9.9\r\n\r\n"


def main():
    if not os.path.exists(BIN):
        t.skip("agent http", "no gpuscope binary at %s" % BIN)
        return t.done()

    # -- processes, per-process series and their cap, headers, unknown parameters --
    p, port, _ = start(["--process-metrics", "on", "--process-metrics-max", "5"])
    code, hdr, body = get(port, "/api/v1/processes")
    t.eq(code, 200, "/api/v1/processes answers 200")
    doc = json.loads(body)
    snap = json.loads(get(port, "/api/v1/snapshot")[2])
    want = sorted((g["index"], pr["pid"]) for g in snap["gpus"] for pr in g["processes"])
    got = sorted((pr["gpu"], pr["pid"]) for pr in doc["processes"])
    t.ok(want and got == want, "/api/v1/processes lists every (gpu, pid) of the snapshot",
         detail="got %r want %r" % (got, want))
    pr0 = doc["processes"][0] if doc["processes"] else {}
    for k in ("gpu", "gpu_uuid", "pid", "user", "container", "pod_uid", "slurm_job",
              "gpu_memory", "utilization_sm", "cpu_ratio", "memory_rss", "start_time",
              "command"):
        t.ok(k in pr0, "process entries carry %s" % k)
    m = get(port, "/metrics")[2]
    mem = series(m, "gpuscope_process_gpu_memory_bytes")
    total = sum(len(series(m, n)) for n in ("gpuscope_process_gpu_memory_bytes",
                                             "gpuscope_process_sm_utilization_ratio",
                                             "gpuscope_process_cpu_ratio",
                                             "gpuscope_process_resident_memory_bytes",
                                             "gpuscope_process_start_time_seconds"))
    dropped = series(m, "gpuscope_process_series_dropped")
    t.ok(mem and 'pid="' in mem[0] and 'user="' in mem[0] and 'container="' in mem[0],
         "per-process series carry pid, user, container labels", detail=mem[:1])
    t.ok(0 < total <= 5, "process_metrics_max = 5 caps the per-process series", detail=total)
    t.ok(dropped and float(dropped[0].split()[-1]) > 0, "the series left out are counted",
         detail=dropped)
    for path in ("/", "/metrics", "/api/v1/snapshot", "/nope"):
        code, hdr, body = get(port, path)
        t.ok(hdr.get("X-Content-Type-Options") == "nosniff" and
             hdr.get("X-Frame-Options") == "DENY" and
             "default-src 'none'" in hdr.get("Content-Security-Policy", ""),
             "security headers on %s (%d)" % (path, code), detail=dict(hdr))
    code, _, body = get(port, "/")
    t.ok(code == 200 and not re.search(r"<script(?![^>]*\bsrc=\"/assets/)", body) and
         "/api/v1/processes" in body,
         "the page at / has no inline script (only /assets/) and links /api/v1/processes")
    code, _, body = get(port, "/api/v1/processes?verbose=1")
    t.ok(code == 400 and json.loads(body)["error"].startswith("verbose"),
         "unknown parameter on /api/v1/processes: 400 naming it", detail=(code, body))
    code, _, body = get(port, "/api/v1/history?gpu=0&metric=utilization_gpu&color=red")
    t.ok(code == 400 and "color" in json.loads(body)["error"],
         "unknown parameter on /api/v1/history: 400 naming it", detail=(code, body))
    t.eq(stop(p), 0, "agent stops cleanly")

    # -- 1,000 malformed requests and a slow client; another address keeps scraping --
    p, port, _ = start([])
    ref = get(port, "/metrics")[2]
    ref_gpu = sorted(series(ref, "gpuscope_gpu_memory_used_bytes"))
    slow = {"closed_after": None}

    def slow_client():
        s = socket.socket()
        s.bind(("127.0.0.99", 0))
        s.connect(("127.0.0.1", port))
        t0 = time.monotonic()
        try:
            for b in b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"z" * 100:
                s.send(bytes([b]))
                time.sleep(1)
                if time.monotonic() - t0 > 30:
                    break
        except OSError:
            slow["closed_after"] = time.monotonic() - t0
        finally:
            s.close()

    th = threading.Thread(target=slow_client)
    th.start()
    random.seed(3)
    answered = 0
    good_ok = 0
    for i in range(1000):
        out = raw(port, malformed(i, port), "127.0.%d.%d" % (1 + i % 20, 10 + i % 7), wait=1.0)
        answered += out.startswith(b"HTTP/1.")
        if i % 100 == 99:
            code, _, body = get(port, "/metrics", src="127.0.0.2")
            good_ok += code == 200 and sorted(
                series(body, "gpuscope_gpu_memory_used_bytes")) == ref_gpu
    t.ok(answered >= 800, "the malformed requests get an HTTP answer (or are closed)",
         detail=answered)
    t.eq(good_ok, 10, "another client got a correct /metrics throughout the storm")
    th.join(timeout=40)
    t.ok(slow["closed_after"] is not None and slow["closed_after"] < 25,
         "a client sending a header byte a second is closed", detail=slow)
    code, _, body = get(port, "/metrics", src="127.0.0.2")
    t.ok(code == 200 and sorted(series(body, "gpuscope_gpu_memory_used_bytes")) == ref_gpu,
         "/metrics is still correct after the storm")
    t.ok(p.poll() is None, "the agent is still up")

    # -- a burst from one address meets the token bucket (default 50/s, burst 100) --
    codes = []
    retry = None
    for _ in range(300):
        code, hdr, _ = get(port, "/healthz", src="127.0.0.3")
        codes.append(code)
        if code == 429 and retry is None:
            retry = hdr.get("Retry-After")
    t.ok(codes.count(200) >= 100 and codes.count(429) > 0,
         "a burst of 300 requests from one address gets 429 past the burst",
         detail="200: %d, 429: %d" % (codes.count(200), codes.count(429)))
    t.eq(retry, "1", "429 carries Retry-After")
    t.eq(get(port, "/healthz", src="127.0.0.4")[0], 200, "other addresses are not limited")
    err = b""
    rc = stop(p)
    err = p.stderr.read() if p.stderr else b""
    t.ok(rc == 0, "agent stops cleanly after the abuse", detail=err.decode(errors="replace")[-2000:])
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
