"""The step socket under a flood (issue 18): one uid floods the agent's step-record socket from
16 connections as fast as one Python process can send for 10 s, while another uid sends a
200-step run 3 s in. Prints, for the agent with its default quotas and with them off
(steps_rate_per_uid 0, steps_conn_per_uid 256, runs_per_uid 64; the per-run share of the flush
buffer stays, it has no key): records the flooder got out, records the agent received per
second, its CPU (user + system, % of one core) and peak RSS, step rows stored for the flood,
and how many of the victim's 200 steps were kept.

Needs root (the two senders become uids 65534 and 65533 with setuid; root itself is exempt
from the quotas) and the build's gpuscope.

usage: /usr/bin/python3 bench/step_flood.py [BUILD_DIR]   (default build)
"""
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build"))
BIN = os.environ.get("GPUSCOPE_BIN", os.path.join(BUILD, "gpuscope"))
FLOOD_S = 10

SENDER = r'''
import json, os, socket, sys, time
uid, mode, path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
os.setgid(uid); os.setuid(uid)
def conn(name):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.connect(path)
    s.send(json.dumps({"v": 1, "type": "hello", "run": name, "pid": 1, "rank": 0,
                       "world_size": 1}).encode())
    return s
now = time.time()
if mode == "victim":
    s = conn("victim")
    for k in range(200):
        s.send(json.dumps({"v": 1, "type": "step", "step": k, "t0": now + k * 0.01,
                           "t1": now + k * 0.01 + 0.005, "rank": 0}).encode())
    s.send(json.dumps({"v": 1, "type": "end"}).encode())
    s.close()
    sys.exit(0)
conns = []
for i in range(16):
    try:
        conns.append(conn("flood%d" % i))
    except OSError:
        pass
msgs = [json.dumps({"v": 1, "type": "step", "step": k, "t0": now + k * 1e-3,
                    "t1": now + k * 1e-3 + 5e-4, "rank": 0}).encode() for k in range(64)]
for s in conns:
    s.settimeout(0.2)
sent, t0 = 0, time.monotonic()
while time.monotonic() - t0 < float(sys.argv[4]) and conns:
    for s in list(conns):
        try:
            for m in msgs:
                s.send(m)
                sent += 1
        except socket.timeout:
            pass
        except OSError:
            conns.remove(s)
print(sent)
'''


def cpu_s(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid):
    for ln in open("/proc/%d/status" % pid):
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
    return 0


def received(base):
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        for ln in r.read().decode().splitlines():
            if ln.startswith("gpuscope_runs_records_received_total "):
                return float(ln.split()[1])
    return 0


def one(label, extra):
    data = tempfile.mkdtemp(prefix="gs-bench-steps.")
    os.chmod(data, 0o755)
    sock = os.path.join(data, "steps.sock")
    port = 20000 + (os.getpid() + len(extra)) % 20000
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=os.path.join(BUILD, "sim", "libnvidia-ml.so.1"),
               NVML_SIM_SCENARIO=os.path.join(SRC, "sim", "scenarios", "h100x8-training.json"),
               TZ="UTC", RUNTIME_DIRECTORY=data)
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:%d" % port, "--data-dir", data,
                          "--history", "on", "--socket", sock, "--http-socket", "off",
                          "--log-level", "error"] + extra, env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = "http://127.0.0.1:%d" % port
    for _ in range(100):
        try:
            urllib.request.urlopen(base + "/healthz", timeout=1).read()
            break
        except OSError:
            time.sleep(0.1)
    r0, c0, t0 = received(base), cpu_s(p.pid), time.monotonic()
    flood = subprocess.Popen([sys.executable, "-c", SENDER, "65534", "flood", sock,
                              str(FLOOD_S)], stdout=subprocess.PIPE, text=True)
    time.sleep(3)
    subprocess.run([sys.executable, "-c", SENDER, "65533", "victim", sock], check=True)
    sent = int(flood.communicate(timeout=FLOOD_S + 30)[0] or 0)
    r1, c1, t1 = received(base), cpu_s(p.pid), time.monotonic()
    time.sleep(6)  # the next flush
    rss = peak_rss_mb(p.pid)
    p.terminate()
    p.wait(timeout=30)
    db = sqlite3.connect(os.path.join(data, "history.db"))
    victim = db.execute("SELECT count(*) FROM step JOIN run ON run.id = step.run"
                        " WHERE run.name = 'victim'").fetchone()[0]
    flood_rows = db.execute("SELECT count(*) FROM step JOIN run ON run.id = step.run"
                            " WHERE run.name LIKE 'flood%'").fetchone()[0]
    db.close()
    shutil.rmtree(data, ignore_errors=True)
    dt = t1 - t0
    print("| %s | %d | %.0f/s | %.0f %% | %.0f MB | %d (%.0f/s) | %d of 200 |" %
          (label, sent, (r1 - r0) / dt, 100 * (c1 - c0) / dt, rss, flood_rows,
           flood_rows / dt, victim))


def main():
    if os.geteuid() != 0:
        raise SystemExit("step_flood.py: needs root (the senders setuid to 65534 and 65533)")
    print("| agent | flooder sent | received | agent CPU | peak RSS | flood steps stored |"
          " victim's steps kept |")
    print("|---|---|---|---|---|---|---|")
    one("default quotas", [])
    one("quotas off", ["--steps-rate-per-uid", "0", "--steps-conn-per-uid", "256",
                       "--runs-per-uid", "64"])


if __name__ == "__main__":
    main()
