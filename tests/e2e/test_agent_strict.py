"""Strict input on the agent (issue 18), on nvml-sim: query parameters and paths take plain
decimal numbers only (`gpu=0x1`, `+0`, a space, `%00`, `1e3` are 400s, a path with `%00` is
404 instead of being cut short); a step record dated 1970 or an hour before its run's hello is
refused (logged once with the reason) while the run's good steps are kept; another user's run
answers exactly as a run that does not exist (ids cannot be probed through the unix socket,
asked as uid 65534 when root); once history.db's pages are garbled under the running agent,
a run read answers 503 with the reason (not "no run N"), the scheduled integrity check finds
it (gpuscope_history_integrity_ok 0, history and the run list 503, logged once), and the next
start refuses the file;
a data_dir through a symbolic link owned by another user is refused.
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
from gsenv import BIN, get_text, send_records, sim_env, start_agent, \
    wait_until  # noqa: E402

t = Tap()
TMP = tempfile.mkdtemp(prefix="gs-agent-strict.")
os.chmod(TMP, 0o755)
SOCK = os.path.join(TMP, "steps.sock")
HSOCK = os.path.join(TMP, "http.sock")

# A unix-socket GET as another uid: prints the status line and the body.
AS_UID = r'''
import os, socket, sys
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
s.sendall(("GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n" % sys.argv[2]).encode())
out = b""
while True:
    c = s.recv(65536)
    if not c:
        break
    out += c
head, _, body = out.decode(errors="replace").partition("\r\n\r\n")
print(head.split("\r\n")[0][9:12])
print(body)
'''


def as_nobody(path):
    r = subprocess.run([sys.executable, "-c", AS_UID, HSOCK, path], capture_output=True,
                       text=True, timeout=15)
    lines = r.stdout.splitlines()
    return (int(lines[0]) if lines and lines[0].isdigit() else 0), "\n".join(lines[1:])


def main():
    if not os.path.exists(BIN):
        t.skip("agent strict", "no gpuscope binary")
        return t.done()
    log = open(os.path.join(TMP, "agent.log"), "w+")
    p, base, up = start_agent(["--data-dir", os.path.join(TMP, "data"), "--socket", SOCK,
                               "--http-socket", HSOCK, "--integrity-check-interval", "1s"],
                              sim_env("h100x8-training.json"), stdout=subprocess.DEVNULL,
                              stderr=log)
    t.ok(up, "agent starts")

    # -- strict numbers in query parameters and paths --
    m = "metric=utilization_gpu"
    code, body = get_text(base + "/api/v1/history?gpu=0&" + m)
    t.eq(code, 200, "history gpu=0 answers 200")
    for bad in ("0x1", "+0", "%200", "0%20", "0%00", "0%001", "1e0", "0.0", "-0", "%00"):
        code, body = get_text(base + "/api/v1/history?gpu=%s&%s" % (bad, m))
        t.ok(code == 400 and "gpu" in body, "history gpu=%s is a 400" % bad,
             detail=(code, body[:200]))
    for name in ("from", "to", "step"):
        for bad in ("0x10", "+5", "1e3", "%2010", "10%00"):
            code, body = get_text(base + "/api/v1/history?gpu=0&%s&%s=%s" % (m, name, bad))
            t.ok(code == 400 and name in body, "history %s=%s is a 400" % (name, bad),
                 detail=(code, body[:200]))
    code, body = get_text(base + "/api/v1/history?gpu=0&%s&step=1.5" % m)
    t.eq(code, 200, "history step=1.5 (a plain decimal) is fine")
    for bad in ("0x1", "+1", "1%00"):
        code, body = get_text(base + "/api/v1/runs?limit=" + bad)
        t.ok(code == 400, "runs limit=%s is a 400" % bad, detail=(code, body[:200]))

    # -- step records dated 1970 or before the run's hello are refused --
    now = time.time()
    recs = [{"v": 1, "type": "hello", "run": "strict", "pid": 1, "rank": 0, "world_size": 1}]
    for n in range(3):
        recs.append({"v": 1, "type": "step", "step": n, "t0": now + n * 0.1,
                     "t1": now + n * 0.1 + 0.05, "rank": 0})
    recs.append({"v": 1, "type": "step", "step": 10, "t0": 1.0, "t1": 1.5, "rank": 0})
    recs.append({"v": 1, "type": "step", "step": 11, "t0": now - 3600, "t1": now - 3599,
                 "rank": 0})
    recs.append({"v": 1, "type": "end", "train_runtime": 1.0})
    send_records(SOCK, recs)
    runs = []

    def ended():
        code, body = get_text(base + "/api/v1/runs")
        doc = json.loads(body) if code == 200 else {}
        runs[:] = [r for r in doc.get("runs", []) if r.get("name") == "strict"]
        return runs and runs[0].get("state") == "ended"

    t.ok(wait_until(ended, 10), "the run ends", detail=runs)
    rid = runs[0]["id"] if runs else 0
    got = {}

    def stored():  # the recorder writes steps in batches
        got["code"], got["body"] = get_text(base + "/api/v1/runs/%d/steps" % rid)
        return got["code"] == 200 and json.loads(got["body"]).get("total", 0) >= 3

    wait_until(stored, 10)
    code, body = got["code"], got["body"]
    time.sleep(1.5)  # a late wrong step would show up by now
    code, body = get_text(base + "/api/v1/runs/%d/steps" % rid)
    doc = json.loads(body) if code == 200 else {}
    t.ok(code == 200 and [s["step"] for s in doc.get("steps", [])] == [0, 1, 2],
         "its 3 good steps are kept, the 1970 one and the one an hour early are not",
         detail=body[:300])
    log.flush()
    text = open(log.name).read()
    t.ok("before 2000-01-01" in text and text.count("refused: t0") == 1,
         "the refusal is logged once with its reason", detail=text[-600:])
    code, body = get_text(base + "/api/v1/runs/%d%%00" % rid)
    t.eq(code, 404, "a run path with %00 after the id is not found (not cut short)")

    # -- another user's run answers as a missing one --
    if os.geteuid() == 0:
        c1, b1 = as_nobody("/api/v1/runs/%d" % rid)
        c2, b2 = as_nobody("/api/v1/runs/%d" % (rid + 1000))
        t.ok(c1 == c2 == 404 and
             b1.replace(str(rid), "N") == b2.replace(str(rid + 1000), "N"),
             "another uid: its run and a missing run get the same answer",
             detail=(c1, b1, c2, b2))
        c1, b1 = as_nobody("/api/v1/runs/%d/steps" % rid)
        c2, b2 = as_nobody("/api/v1/runs/%d/steps" % (rid + 1000))
        t.ok(c1 == c2 == 404 and
             b1.replace(str(rid), "N") == b2.replace(str(rid + 1000), "N"),
             "another uid: the steps of its run and of a missing one: the same answer",
             detail=(c1, b1, c2, b2))
        c1, b1 = as_nobody("/api/v1/runs")
        doc = json.loads(b1) if c1 == 200 else {}
        t.ok(c1 == 200 and doc.get("runs") == [] and doc.get("total", 0) == 0,
             "another uid's list neither shows nor counts the run", detail=b1[:300])
    else:
        t.skip("another uid's view", "needs root")
    # -- a symbolic link another user owns, in the middle of data_dir, is not followed --
    if os.geteuid() == 0:
        target = os.path.join(TMP, "elsewhere")
        os.mkdir(target)
        link = os.path.join(TMP, "evil")
        os.symlink(target, link)
        os.lchown(link, 65534, 65534)
        r = subprocess.run([BIN, "agent", "--data-dir", os.path.join(link, "sub", "data"),
                            "--listen", "127.0.0.1:1", "--socket", "off", "--http-socket", "off"],
                           env=sim_env("h100x8-training.json"), capture_output=True, text=True,
                           timeout=60)
        t.ok(r.returncode != 0 and "symbolic link owned by uid 65534" in r.stderr and
             not os.path.exists(os.path.join(target, "sub")),
             "data_dir through another user's symlink: refused, nothing made behind it",
             detail=(r.returncode, r.stderr[-300:]))
    else:
        t.skip("data_dir symlink owned by another user", "needs root")

    # -- a read that meets damaged pages is a 503 with the reason, not "no run N" --
    db = os.path.join(TMP, "data", "history.db")
    con = sqlite3.connect(db)  # the pages into the main file, so that garbling them counts
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    con.close()
    size = os.path.getsize(db)
    with open(db, "r+b") as f:  # every page but the first (the header) garbled
        for off in range(4096, size, 4096):
            f.seek(off)
            f.write(b"\xa5" * 4096)
    code, body = get_text(base + "/api/v1/runs/%d" % rid)
    t.ok(code == 503 and "could not be read" in body,
         "a run on damaged pages: 503 with the reason (not 404)", detail=(code, body[:300]))

    # -- the scheduled integrity check (every 1 s here) finds it: writes stop, reads 503 --
    def integrity():
        code, body = get_text(base + "/metrics")
        return code == 200 and "\ngpuscope_history_integrity_ok 0\n" in body

    t.ok(wait_until(integrity, 20), "gpuscope_history_integrity_ok 0 after the scheduled check")
    code, body = get_text(base + "/api/v1/history?gpu=0&metric=utilization_gpu")
    t.ok(code == 503 and "is damaged" in body, "history then answers 503 with the reason",
         detail=(code, body[:300]))
    code, body = get_text(base + "/api/v1/runs")
    t.ok(code == 503 and "is damaged" in body, "the run list too", detail=(code, body[:300]))
    for page in ("steps", "logs"):
        code, body = get_text(base + "/api/v1/runs/%d/%s" % (rid, page))
        t.ok(code == 503 and ("is damaged" in body or "could not be read" in body),
             "a run's %s too" % page, detail=(code, body[:300]))
    log.flush()
    text = open(log.name).read()
    t.eq(text.count("history writes stopped"), 1, "the damage is logged once")
    code, body = get_text(base + "/healthz")
    t.eq(code, 200, "the agent goes on serving live data")
    p.kill()
    p.wait()
    log.close()
    code = subprocess.run([BIN, "agent", "--data-dir", os.path.join(TMP, "data"), "--listen",
                           "127.0.0.1:1", "--socket", "off", "--http-socket", "off"],
                          env=sim_env("h100x8-training.json"), capture_output=True, text=True,
                          timeout=60)
    t.ok(code.returncode == 2 and ("is damaged" in code.stderr or "malformed" in code.stderr),
         "the next start refuses the damaged history.db with a clear error, exit status 2",
         detail=(code.returncode, code.stderr[-400:]))
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
