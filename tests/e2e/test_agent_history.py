"""`gpuscope agent` history end to end, on nvml-sim (h100x8-training.json, real clock).

An agent with its own data dir and `--flush-interval 1` runs a few seconds; then: history.db
passes `PRAGMA integrity_check` and holds rows of every GPU (read with Python's sqlite3, no
sqlite3 shell needed); /api/v1/history returns, at the time of a snapshot, the utilization and
memory /api/v1/snapshot reported; the defaults and the answer's shape; bad parameters get 400
with a JSON error naming the parameter; the history self metrics on /metrics; `kill -9` while
writing and a restart on the same dir keep the file intact and every row flushed before; a
foreign or non-SQLite history.db makes the agent refuse to start and stays byte-for-byte the
same; a file size limit (RLIMIT_FSIZE, a full disk for one process) makes flushes fail while
live data goes on, logged once, and writing resumes when it is lifted; a missing data dir is
made 0750; `--history off` writes nothing; bad durations are refused. Everything the test starts is stopped at the end.
"""
import os
import resource
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BIN, clean_up, free_port, get_json, get_text as get, \
    sim_env, start_agent as gs_start_agent, stop_agent  # noqa: E402

SCENARIO = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-agent-history.")


def env_for():
    # The real clock: no NVML_SIM_TIME, so samples change and carry their own times.
    return sim_env(SCENARIO)


def ignore_sigxfsz():
    # Passing RLIMIT_FSIZE then makes write(2) fail with EFBIG instead of killing the agent:
    # a full disk for one process, no mount needed.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def start_agent(data_dir, extra=()):
    p, base, _ = gs_start_agent(["--data-dir", data_dir, "--flush-interval", "1"] + list(extra),
                                env_for(), procs, preexec_fn=ignore_sigxfsz)
    return p, base


def stop(p, sig=signal.SIGTERM):
    return stop_agent(p, sig, timeout=10)


def db_check(path):
    """(integrity_check result, sample row ids) of a history file, opened read-only."""
    con = sqlite3.connect("file:%s?mode=ro" % path, uri=True)
    try:
        ok = con.execute("PRAGMA integrity_check").fetchone()[0]
        ids = {r[0] for r in con.execute("SELECT id FROM sample")}
    finally:
        con.close()
    return ok, ids


def history(base, **params):
    return get_json(base + "/api/v1/history?" + urllib.parse.urlencode(params))


def wait_flushed(base, gpu, t0, timeout=6.0):
    """Waits until the sample taken at t0 is in the history (flushed)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        code, doc = history(base, gpu=gpu, metric="utilization_gpu", step=0,
                            **{"from": "%.3f" % (t0 - 2), "to": "%.3f" % (t0 + 2)})
        if code == 200 and any(abs(pt[0] - t0) < 0.0015 for pt in doc.get("points", [])):
            return True
        time.sleep(0.2)
    return False


def self_metrics(base):
    code, body = get(base + "/metrics")
    out = {k: float(v) for k, v in (ln.rsplit(" ", 1) for ln in body.splitlines()
                                    if ln and not ln.startswith("#") and "{" not in ln)}
    up = [ln for ln in body.splitlines() if ln.startswith("gpuscope_up{")]  # {hostname=...}
    if up:
        out["gpuscope_up"] = float(up[0].rsplit(" ", 1)[1])
    return out


def disk_full(data):
    """The file size limit (RLIMIT_FSIZE) lowered under the running agent, then raised."""
    p, base = start_agent(data, ["--interval", "0.1"])
    db = os.path.join(data, "history.db")
    time.sleep(1.5)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    # The WAL only grows between checkpoints (none this soon): its next append is refused.
    limit = os.path.getsize(db + "-wal")
    resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (limit, hard))
    m = {}
    for _ in range(60):
        m = self_metrics(base)
        if m.get("gpuscope_history_write_errors_total", 0) >= 2:
            break
        time.sleep(0.1)
    cycles = m.get("gpuscope_cycles_total", 0)
    time.sleep(0.5)
    live = self_metrics(base)
    t.ok(m.get("gpuscope_history_write_errors_total", 0) >= 2
         and live.get("gpuscope_up") == 1 and live.get("gpuscope_cycles_total", 0) > cycles,
         "disk full: flushes fail and are counted, live data goes on", detail=(m, live))
    resource.prlimit(p.pid, resource.RLIMIT_FSIZE, (soft, hard))
    rows = m.get("gpuscope_history_rows_written_total", 0)
    for _ in range(60):
        after = self_metrics(base)
        if after.get("gpuscope_history_rows_written_total", 0) > rows:
            break
        time.sleep(0.1)
    t.ok(after.get("gpuscope_history_rows_written_total", 0) > rows,
         "disk space back: writing resumes", detail=after)
    rc, err = stop(p)
    t.ok(rc == 0 and err.count("history: write failed") == 1
         and err.count("history: writes recovered") == 1,
         "disk full: logged once when it starts, once when it ends", detail=err)
    t.eq(db_check(db)[0], "ok", "disk full: integrity_check ok afterwards")


def close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def main():
    data = os.path.join(tmp, "data")
    p, base = start_agent(data, ["--interval", "0.5"])
    time.sleep(1.5)
    code, snap = get_json(base + "/api/v1/snapshot")
    t.eq(code, 200, "/api/v1/snapshot answers 200")
    t0 = snap.get("query_time_unix") or 0
    gpus = snap.get("gpus", [])
    t.ok(wait_flushed(base, 0, t0), "the snapshot's sample reaches the history within a flush")
    util_ok = mem_ok = True
    details = []
    for g in gpus:
        for metric, want in (("utilization_gpu", g.get("utilization_gpu")),
                             ("memory_used", g.get("memory_used"))):
            code, doc = history(base, gpu=g["index"], metric=metric, step=0,
                                **{"from": "%.3f" % (t0 - 2), "to": "%.3f" % (t0 + 2)})
            pts = [pt for pt in doc.get("points", []) if abs(pt[0] - t0) < 0.0015]
            good = (code == 200 and want is not None and len(pts) == 1
                    and all(close(v, want) for v in pts[0][1:]))
            if not good:
                details.append((g["index"], metric, want, code, pts, doc))
                if metric == "utilization_gpu":
                    util_ok = False
                else:
                    mem_ok = False
    t.ok(len(gpus) == 8 and util_ok, "history utilization_gpu of every GPU at the snapshot's "
         "time equals /api/v1/snapshot's", detail=details)
    t.ok(len(gpus) == 8 and mem_ok, "history memory_used of every GPU at the snapshot's time "
         "equals /api/v1/snapshot's", detail=details)

    code, doc = history(base, gpu=0, metric="memory_used")
    keys = sorted(doc)
    t.eq((code, keys), (200, sorted(["gpu", "metric", "unit", "source", "from", "to", "step",
                                     "truncated", "points"])), "answer shape (defaults)")
    t.ok(doc.get("unit") == "bytes" and doc.get("source") == "raw" and doc.get("step") == 1
         and abs(doc.get("to", 0) - doc.get("from", 0) - 900) < 1e-6 and doc.get("points"),
         "defaults: to=now, from=to-900, step 1 s from raw samples", detail=doc)
    code, doc = history(base, gpu=0, metric="power_draw", step=3600,
                        **{"from": int(t0) - 30 * 86400, "to": int(t0) + 60})
    t.ok(code == 200 and doc.get("source") == "rollup" and doc.get("step") == 3600,
         "a 30-day range reads the per-minute rollups", detail=doc)

    bad = [
        ({"metric": "utilization_gpu"}, "gpu:"),
        ({"gpu": "x", "metric": "utilization_gpu"}, "gpu:"),
        ({"gpu": "256", "metric": "utilization_gpu"}, "gpu:"),
        ({"gpu": "0"}, "metric:"),
        ({"gpu": "0", "metric": "nope"}, "metric:"),
        ({"gpu": "0", "metric": "utilization_gpu", "from": "yesterday"}, "from:"),
        ({"gpu": "0", "metric": "utilization_gpu", "from": "200", "to": "100"}, "from:"),
        ({"gpu": "0", "metric": "utilization_gpu", "to": "soon"}, "to:"),
        ({"gpu": "0", "metric": "utilization_gpu", "step": "-1"}, "step:"),
        ({"gpu": "0", "metric": "utilization_gpu", "step": "0.001", "from": "0",
          "to": "100000"}, "step:"),
    ]
    wrong = []
    for params, prefix in bad:
        code, doc = history(base, **params)
        if code != 400 or not str(doc.get("error", "")).startswith(prefix):
            wrong.append((params, code, doc))
    t.ok(not wrong, "bad parameters: 400 with a JSON error naming the parameter", detail=wrong)
    code, doc = history(base, gpu=0, metric="memory_total")
    t.ok(code == 400 and "not kept in history" in doc.get("error", "")
         and "utilization_gpu" in doc.get("error", ""),
         "a metric the history does not keep: 400 listing the kept ones", detail=doc)

    code, body = get(base + "/metrics")
    lines = dict(ln.rsplit(" ", 1) for ln in body.splitlines() if ln and not ln.startswith("#"))
    t.ok(float(lines.get("gpuscope_history_rows_written_total", 0)) > 0
         and "gpuscope_history_flush_duration_seconds" in lines
         and "gpuscope_history_flush_duration_max_seconds" in lines
         and lines.get("gpuscope_history_write_errors_total") == "0"
         and lines.get("gpuscope_history_snapshots_dropped_total") == "0",
         "/metrics: history rows written, flush duration last/max, write errors, dropped",
         detail="\n".join(k + " " + v for k, v in lines.items() if "history" in k))

    rc, err = stop(p)
    t.eq(rc, 0, "SIGTERM: exit 0 after the last flush")
    db = os.path.join(data, "history.db")
    ok, ids1 = db_check(db)
    t.eq(ok, "ok", "history.db: PRAGMA integrity_check ok")
    t.ok(len(ids1) >= 8 * 3 and {i & 255 for i in ids1} == set(range(8)),
         "history.db holds samples of all 8 GPUs", detail=len(ids1))
    t.ok(stat.S_IMODE(os.stat(data).st_mode) == 0o750, "a missing data dir is made 0750",
         detail=oct(os.stat(data).st_mode))

    # kill -9 while writing (0.1 s samples, 1 s flushes), then a restart on the same dir
    p, base = start_agent(data, ["--interval", "0.1"])
    time.sleep(2.3)
    code, doc = history(base, gpu=3, metric="utilization_gpu", step=0)
    acked = [pt[0] for pt in doc.get("points", [])]
    p.send_signal(signal.SIGKILL)
    p.wait()
    p.communicate()
    ok, ids2 = db_check(db)
    t.eq(ok, "ok", "after kill -9: integrity_check ok")
    t.ok(ids1 <= ids2, "after kill -9: every row of the first run still present",
         detail=len(ids1 - ids2))
    have = {i >> 8 for i in ids2 if i & 255 == 3}
    lost = [x for x in acked if int(round(x * 1000)) not in have]
    t.ok(acked and not lost, "after kill -9: every sample /api/v1/history had served is kept",
         detail=(len(acked), lost[:5]))
    p, base = start_agent(data, ["--interval", "0.2"])
    time.sleep(1.5)
    t.eq(get(base + "/healthz")[0], 200, "restart on the same data dir serves")
    rc, err = stop(p)
    ok, ids3 = db_check(db)
    t.ok(rc == 0 and ok == "ok" and ids2 <= ids3 and len(ids3) > len(ids2),
         "restart: integrity ok, old rows kept, new rows written", detail=(rc, ok, err))

    disk_full(data)

    # a foreign database and a non-SQLite file are refused and left alone
    for kind in ("foreign", "garbage"):
        d = os.path.join(tmp, kind)
        os.mkdir(d)
        path = os.path.join(d, "history.db")
        if kind == "foreign":
            con = sqlite3.connect(path)
            con.execute("PRAGMA application_id = 1234")
            con.execute("CREATE TABLE accounts (id INTEGER PRIMARY KEY, name TEXT)")
            con.execute("INSERT INTO accounts VALUES (1, 'alice')")
            con.commit()
            con.close()
        else:
            open(path, "wb").write(b"these are not the bytes of an SQLite database\n" * 100)
        before = open(path, "rb").read()
        r = subprocess.run([BIN, "agent", "--listen", "127.0.0.1:%d" % free_port(),
                            "--data-dir", d], env=env_for(), capture_output=True, timeout=20)
        err = r.stderr.decode()
        t.ok(r.returncode != 0 and "not a gpuscope history database" in err
             and path in err, "%s history.db: the agent refuses to start, naming the file"
             % kind, detail="rc %d: %s" % (r.returncode, err))
        t.ok(open(path, "rb").read() == before and os.listdir(d) == ["history.db"],
             "%s history.db: byte-for-byte unchanged, nothing added" % kind,
             detail=os.listdir(d))

    # history off: nothing written, /api/v1/history 404
    d = os.path.join(tmp, "off")
    p, base = start_agent(d, ["--history", "off"])
    code, doc = history(base, gpu=0, metric="utilization_gpu")
    t.ok(code == 404 and "history is off" in doc.get("error", ""),
         "--history off: /api/v1/history 404 with a JSON error", detail=(code, doc))
    stop(p)
    t.ok(not os.path.exists(os.path.join(d, "history.db")), "--history off: no history.db")

    r = subprocess.run([BIN, "agent", "--retention-raw", "5x"], env=env_for(),
                       capture_output=True, timeout=10)
    t.ok(r.returncode == 2 and "--retention-raw: '5x' is not a duration" in r.stderr.decode(),
         "a bad duration flag: exit 2, named", detail=r.stderr.decode())
    r = subprocess.run([BIN, "agent", "--retention-raw", "36h", "--retention-rollup", "90d",
                        "--data-dir", "/x/y", "--check-config"], env=env_for(),
                       capture_output=True, timeout=10)
    out = r.stdout.decode()
    t.ok(r.returncode == 0 and "retention_raw = 129600s" in out
         and "retention_rollup = 7776000s" in out and 'data_dir = "/x/y"' in out
         and "history = on" in out and "flush_interval = 5" in out,
         "--check-config shows the history keys", detail=out)


try:
    main()
finally:
    clean_up(procs, [tmp])
sys.exit(t.done())
