"""`gpuscope report` and `gpuscope compare` on real runs (docs/report-html.md, docs/compare.md).

Two runs of an unmodified PyTorch loop (Debian's torch, CPU) under `gpuscope run` on nvml-sim
(the child placed on GPU 0): a slow loader (4 ms per sample) and a fast one (no sleep, batch
16). Checked against the run directories themselves, read independently here:

  report        a self-contained page (no http(s) URL in it, < 300 KB), opened offline in
                headless Chromium: no console error, no request, every chart has the points
                of the run (rank 0's records of steps.jsonl, samples.db's rows of the run's
                GPU over the run), the findings of metrics_report.json; screenshots in
                tests/e2e/artifacts/
  compare       text, --json and --html: the data loading ratio's change is the two reports'
                difference, data_loading went away, NCCL_DEBUG (a fact) - -> INFO differs
  agent run id  `gpuscope report ID` of a run sent to an agent's step socket, its logged
                values drawn as curves, its steps' tokens in the step series and drawn as
                tokens / s; `gpuscope run --tag` and gpuscope.log() reaching
                the agent (tags in its run list, /api/v1/runs/ID/logs)
  curves        gpuscope.log() in a plain loop: log records in steps.jsonl, loss and learning
                rate drawn with every logged point
  --serve, --open, bad input (missing run, a broken steps.jsonl line, a foreign samples.db)
"""
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, Tap  # noqa: E402
from gsenv import BIN, SIM, SRC, free_port, send_records, sim_env, start_agent, \
    stop_proc  # noqa: E402

t = Tap()
HERE = os.path.dirname(os.path.abspath(__file__))
ARTIFACTS = os.path.join(SRC, "tests", "e2e", "artifacts")
CHROMIUM = os.environ.get("GS_CHROMIUM", "/usr/bin/chromium")
NODE = shutil.which("node")
PLAYWRIGHT = os.path.join(SRC, "web", "node_modules", "playwright-core")
BROWSER = NODE and os.access(CHROMIUM, os.X_OK) and os.path.isdir(PLAYWRIGHT)

SCENARIO = {
    "scenario_version": 1,
    "gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0d0e0f10-1111-2222-3333-444444444444",
         "pci": {"bus": "0x19", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
         "power": {"default_limit_w": 700}, "architecture": "hopper",
         "metrics": {"util_gpu_pct": {"square": {"period_s": 1.0, "duty": 0.5, "high": 90,
                                                 "low": 30}}, "power_w": 300}},
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0d0e0f10-1111-2222-3333-555555555555",
         "pci": {"bus": "0x2a", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
         "power": {"default_limit_w": 700}, "architecture": "hopper",
         "metrics": {"util_gpu_pct": 5, "power_w": 60}},
    ],
    "processes": [
        {"id": "child", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"}, "gpu": 0,
         "used_memory_mib": 4096},
    ],
}

PLAIN = textwrap.dedent("""
    import json, sys, time, torch
    torch.set_num_threads(1)
    cfg = json.loads(sys.argv[1])
    sleep = cfg["sleep"]
    class DS(torch.utils.data.Dataset):
        def __len__(self): return 1000000
        def __getitem__(self, i):
            if sleep: time.sleep(sleep)
            return torch.randn(32), torch.randn(1)
    dl = torch.utils.data.DataLoader(DS(), batch_size=cfg["batch"])
    h = cfg["hidden"]
    model = torch.nn.Sequential(torch.nn.Linear(32, h), torch.nn.ReLU(), torch.nn.Linear(h, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    it = iter(dl)
    for s in range(cfg["steps"]):
        x, y = next(it)
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step(); sched.step()
        if cfg.get("log") and s % 4 == 0:
            import gpuscope
            gpuscope.log(loss=loss.item(), learning_rate=sched.get_last_lr()[0], note="text")
            print(json.dumps({"logged": s, "loss": loss.item()}), flush=True)
""")


# An unmodified HF Trainer script (the fake transformers of tests/python/fake_hf): 16 updates,
# a log every 4 (loss, learning_rate); the callback is auto-injected by gpuscope run.
HF_TRAIN = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import torch
    from pyhelp import Net, SlowDataset
    from transformers import Trainer, TrainingArguments
    torch.set_num_threads(1)
    args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=8,
                             logging_steps=4)
    ds = SlowDataset(128, sleep_s=0.0, dict_items=True)
    dl = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=False)
    Trainer(model=Net(), args=args, dataloader=dl).train()
""").format(tests=HERE)


def gs(*args, env=None, timeout=120):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=timeout,
                          env=env or dict(os.environ, NO_COLOR="1"))


def report_of(d):
    with open(os.path.join(d, "metrics_report.json")) as f:
        return json.load(f)


def expected_points(d, rep):
    """What each chart must hold, read from the run directory without gpuscope."""
    steps = []
    with open(os.path.join(d, "steps.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if r.get("type") == "step":
                steps.append(r)
    r0 = min(s.get("rank", 0) for s in steps) if steps else 0
    n_steps = sum(1 for s in steps if s.get("rank", 0) == r0)
    run = rep["run"]
    gpus = [g["index"] for g in rep.get("gpus", [])]
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(d, "samples.db"), uri=True)
    lo, hi = run["start_time"] - 1.0, run["end_time"] + 1.0
    times = set()
    per = {}
    for (tm, g) in db.execute("SELECT id / 256, id % 256 FROM sample WHERE id >= ? AND id < ?",
                              (int((lo * 1000) // 1) * 256, (int(-(-hi * 1000 // 1)) + 1) * 256)):
        if g in gpus:
            times.add(tm)
            per[g] = per.get(g, 0) + 1
    db.close()
    return n_steps, len(times), per


def browse(files):
    """report_e2e.mjs over files: one result dict per file."""
    p = subprocess.run([NODE, os.path.join(SRC, "tests", "e2e", "report_e2e.mjs"), ARTIFACTS,
                        *files], capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, GS_CHROMIUM=CHROMIUM,
                                GS_WEB_DIR=os.path.join(SRC, "web")))
    out = []
    for line in p.stdout.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    if len(out) != len(files):
        for ln in ("report_e2e.mjs: rc %d\n%s" % (p.returncode, p.stderr[-2000:])).splitlines():
            print("# " + ln)
    return out


with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "scenario.json"), "w") as f:
        json.dump(SCENARIO, f)
    script = os.path.join(tmp, "plain.py")
    with open(script, "w") as f:
        f.write(PLAIN)
    env = pyhelp.child_env(GPUSCOPE_NVML_LIBRARY=SIM,
                           NVML_SIM_SCENARIO=os.path.join(tmp, "scenario.json"), NO_COLOR="1")
    runs = {}
    for name, cfg in (("slow", {"sleep": 0.004, "batch": 8, "hidden": 256, "steps": 50}),
                      ("fast", {"sleep": 0.0, "batch": 16, "hidden": 8192, "steps": 50}),
                      ("curves", {"sleep": 0.0, "batch": 8, "hidden": 64, "steps": 48,
                                  "log": True})):
        d = os.path.join(tmp, name)
        # a setting the run reports (facts): NCCL_DEBUG, from the environment when set
        renv = dict(env, NCCL_DEBUG="INFO") if name == "fast" else env
        p = subprocess.run([BIN, "run", "--out", d, "--interval", "0.2", "--", PYTHON, script,
                            json.dumps(cfg)], env=renv, capture_output=True, text=True,
                           timeout=240)
        t.ok(p.returncode == 0 and os.path.exists(os.path.join(d, "metrics_report.json")),
             f"{name}: gpuscope run made a run directory", detail=p.stderr[-1500:])
        runs[name] = d
        if name == "curves":
            logged = [json.loads(x) for x in p.stdout.splitlines() if x.startswith('{"logged"')]
    slow, fast = runs["slow"], runs["fast"]
    rs, rf = report_of(slow), report_of(fast)

    # ---- gpuscope report DIR ----
    for name, d, rep in (("slow", slow, rs), ("fast", fast, rf)):
        p = gs("report", d)
        html = os.path.join(d, "report.html")
        t.ok(p.returncode == 0 and os.path.isfile(html), f"{name}: report wrote DIR/report.html",
             detail=p.stderr)
        body = open(html, encoding="utf-8").read() if os.path.isfile(html) else ""
        t.ok(0 < len(body.encode()) < 300 * 1024, f"{name}: the page is under 300 KB "
             f"({len(body.encode())} bytes)")
        t.ok(not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", body),
             f"{name}: no external script, style or link in the page")
        t.ok("Content-Security-Policy" in body and "'unsafe-inline'" not in body,
             f"{name}: a CSP by hashes, no unsafe-inline")
        t.ok(os.listdir(d).count("samples.db-shm") == 0,
             f"{name}: reading samples.db left no -shm file in the run directory",
             detail=str(os.listdir(d)))

    # the data document matches the files
    p = gs("report", "--data", "-o", "-", slow)
    doc = json.loads(p.stdout) if p.returncode == 0 else {}
    n_steps, n_times, per_gpu = expected_points(slow, rs)
    t.eq(doc.get("steps", {}).get("n"), n_steps, "data: every step record of steps.jsonl")
    t.eq([g["index"] for g in doc.get("gpus", [])], [g["index"] for g in rs["gpus"]],
         "data: one series per GPU of the run (GPU 1 is not the run's)")
    t.eq({g["index"]: g["n"] for g in doc.get("gpus", [])}, per_gpu,
         "data: samples.db's rows of the run's GPU over the run")
    g0 = (doc.get("gpus") or [{}])[0]
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(slow, "samples.db"), uri=True)
    lo, hi = rs["run"]["start_time"] - 1.0, rs["run"]["end_time"] + 1.0
    util = [round(u * 100, 4) for (u,) in db.execute(
        "SELECT utilization_gpu FROM sample WHERE id % 256 = 0 AND id >= ? AND id < ? "
        "ORDER BY id", (int((lo * 1000) // 1) * 256, (int(-(-hi * 1000 // 1)) + 1) * 256))]
    db.close()
    t.eq([round(u, 4) for u in g0.get("util", [])], util,
         "data: GPU 0's utilization, sample by sample, as samples.db has it")
    t.eq(doc.get("report"), rs, "data: the report embedded as metrics_report.json has it")

    t.ok(re.fullmatch(r"plain\.py \d{4}-\d\d-\d\d \d\d:\d\d:\d\d",
                      rs["run"].get("name") or "") is not None,
         "run without a name: the script and its start time", detail=str(rs["run"].get("name")))

    # ---- training curves: gpuscope.log() in a plain loop ----
    curves = runs["curves"]
    with open(os.path.join(curves, "steps.jsonl")) as f:
        logs = [json.loads(x) for x in f if '"type":"log"' in x]
    t.ok(len(logs) == 12 and [round(x["values"]["loss"], 6) for x in logs] ==
         [round(x["loss"], 6) for x in logged] and all(set(x["values"]) ==
                                                       {"loss", "learning_rate"} for x in logs),
         "curves: every gpuscope.log() is a log record of steps.jsonl with its numbers "
         "(the string left out)", detail=str(logs[:2]))
    t.eq([x["values"]["learning_rate"] for x in logs][:4], [0.01, 0.01, 0.01, 0.005],
         "curves: the scheduler's learning rate as logged")
    p = gs("report", "--data", "-o", "-", curves)
    cdoc = json.loads(p.stdout) if p.returncode == 0 else {}
    got = cdoc.get("logs", {}).get("values", {}).get("loss", [])
    t.ok(cdoc.get("logs", {}).get("n") == 12 and len(got) == 12 and
         all(abs(a - x["values"]["loss"]) <= 1e-6 * abs(x["values"]["loss"])
             for a, x in zip(got, logs)),
         "curves: the page's data has the 12 logged losses", detail=str(cdoc.get("logs"))[:300])
    gs("report", curves)

    # the HF Trainer's on_log: loss and learning_rate every logging_steps, not the summary
    with open(os.path.join(tmp, "hf.py"), "w") as f:
        f.write(HF_TRAIN)
    hfd = os.path.join(tmp, "hf")
    p = subprocess.run([BIN, "run", "--out", hfd, "--", PYTHON, os.path.join(tmp, "hf.py"),
                        os.path.join(tmp, "hf-out")],
                       env=dict(env, PYTHONPATH=pyhelp.FAKE_HF), capture_output=True, text=True,
                       timeout=240)
    try:
        with open(os.path.join(hfd, "steps.jsonl")) as f:
            hlogs = [json.loads(x) for x in f if '"type":"log"' in x]
    except OSError:
        hlogs = []
    # (the fake Trainer logs step 16 twice: at the step and at the epoch's end)
    t.ok(p.returncode == 0 and sorted({x.get("step") for x in hlogs}) == [4, 8, 12, 16] and
         all({"loss", "learning_rate"} <= set(x["values"]) and
             "train_runtime" not in x["values"] for x in hlogs),
         "HF Trainer: on_log's loss and learning_rate at steps 4, 8, 12, 16 are log records",
         detail=p.stderr[-800:] + str(hlogs)[:400])

    # ---- the pages in a browser ----
    os.mkdir(os.path.join(tmp, "compare"))
    cmp_html = os.path.join(tmp, "compare", "slow-fast.html")
    p = gs("compare", "--html", "-o", cmp_html, slow, fast)
    t.ok(p.returncode == 0 and os.path.isfile(cmp_html), "compare --html wrote the page",
         detail=p.stderr)
    if not BROWSER:
        t.skip("reports in headless chromium", "missing node, chromium or "
               "web/node_modules/playwright-core (make deps installs them)")
    else:
        res = browse([os.path.join(slow, "report.html"), os.path.join(fast, "report.html"),
                      cmp_html, os.path.join(curves, "report.html")])
        for name, d, rep, r in zip(("slow", "fast"), (slow, fast), (rs, rf), res):
            n_steps, n_times, _ = expected_points(d, rep)
            t.eq(r["errors"], [], f"{name} page: no console errors")
            t.eq(r["requests"], [], f"{name} page: no request leaves the page (offline)")
            t.ok(r["state"] and r["state"]["ready"], f"{name} page: rendered")
            charts = {c["id"]: c for c in r["charts"]}
            want = {"chart-gpu-util": n_times, "chart-gpu-mem": n_times,
                    "chart-gpu-power": n_times, "chart-gpu-temp": n_times,
                    "chart-phases": n_steps, "chart-ratios": n_steps}
            t.eq({k: charts.get(k, {}).get("points") for k in want}, want,
                 f"{name} page: every chart has the run's points ({n_steps} steps, "
                 f"{n_times} sample times)")
            t.ok(all(charts.get(k, {}).get("uplot") and charts.get(k, {}).get("canvas")
                     for k in want), f"{name} page: every chart drawn by uPlot on its canvas",
                 detail=json.dumps(r["charts"]))
            t.eq(r["findings"], [f["id"] for f in rep.get("findings", [])],
                 f"{name} page: the report's findings, in order")
            t.ok("phases" in r["sections"] and "per-rank" in r["sections"] and
                 "facts" in r["sections"], f"{name} page: phases, per-rank and settings sections",
                 detail=str(r["sections"]))
            t.ok(os.path.getsize(r["screenshot"]) > 10000, f"{name} page: screenshot saved "
                 f"({os.path.relpath(r['screenshot'], SRC)})")
        if len(res) == 4:
            r = res[3]
            ch = {c["id"]: c for c in r["charts"]}
            t.eq(r["errors"], [], "curves page: no console errors")
            t.ok(ch.get("chart-log-loss", {}).get("points") == 12 and
                 ch.get("chart-log-learning_rate", {}).get("points") == 12 and
                 ch["chart-log-loss"]["canvas"], "curves page: loss and learning rate drawn, "
                 "12 points each", detail=json.dumps(r["charts"]))
        if len(res) >= 3:
            r = res[2]
            t.eq(r["errors"], [], "compare page: no console errors")
            t.ok(r["state"] and r["state"]["kind"] == "compare" and
                 "data_loading_time_ratio" in r["text"] and
                 ("went away" in r["text"] or "in every run" in r["text"]),
                 "compare page: the field table and the findings' changes",
                 detail=r["text"][:800])

    # ---- gpuscope compare: text and --json ----
    p = gs("compare", slow, fast)
    t.ok(p.returncode == 0, "compare: exit 0", detail=p.stderr)
    want_change = rf["data_loading_time_ratio"] - rs["data_loading_time_ratio"]
    line = next((x for x in p.stdout.splitlines() if x.startswith("data_loading_time_ratio")), "")
    cells = line.split()
    t.ok(len(cells) == 6 and abs(float(cells[1]) - rs["data_loading_time_ratio"]) < 0.0006 and
         abs(float(cells[2]) - rf["data_loading_time_ratio"]) < 0.0006 and
         abs(float(cells[3]) - want_change) < 0.0011 and cells[3].startswith("-"),
         "compare text: data_loading_time_ratio A, B and the change from the two reports",
         detail=line)
    t.ok("\x1b[" not in p.stdout, "compare text: no colour with NO_COLOR / into a pipe")
    t.ok(re.search(r"NCCL_DEBUG\s+- -> INFO", p.stdout) is not None,
         "compare text: the differing setting, NCCL_DEBUG - -> INFO", detail=p.stdout)
    # the slow run has data_loading; the fast one (on a loaded machine) may still have it
    fast_dl = [f["severity"] for f in rf.get("findings", []) if f["id"] == "data_loading"]
    want_dl = (r"B: -\s+went away" if not fast_dl else
               r"B: %s\s+in every run" % fast_dl[0])
    t.ok(re.search(r"data_loading\s+A: (warning|critical)\s+" + want_dl, p.stdout),
         "compare text: data_loading went away (or is in both, as the reports say)",
         detail=p.stdout[-800:])
    heads = [x for x in p.stdout.splitlines() if x.startswith("field")]
    rows = [x for x in p.stdout.splitlines() if re.match(r"(train_|gpu_|data_|communication_)", x)]
    t.ok(heads and len({len(x) for x in rows + heads}) == 1,
         "compare text: the table's rows are aligned", detail="\n".join(heads + rows))
    p = gs("compare", "--color", slow, fast)
    t.ok("\x1b[32m" in p.stdout or "\x1b[1;32m" in p.stdout,
         "compare --color: a change the good way in green")
    p = gs("compare", "--json", slow, fast)
    cj = json.loads(p.stdout) if p.returncode == 0 else {}
    row = next((r for r in cj.get("fields", []) if r["field"] == "data_loading_time_ratio"), {})
    t.ok(row and abs(row["changes"][0]["change"] - want_change) < 1e-9 and
         row["changes"][0]["better"] is True and
         abs(row["changes"][0]["change_percent"] -
             want_change / rs["data_loading_time_ratio"] * 100) < 1e-6,
         "compare --json: data ratio change, change % and direction", detail=str(row))
    t.eq([r["field"] for r in cj.get("fields", [])][:8],
         ["train_runtime", "train_samples_per_second", "train_steps_per_second",
          "gpu_peak_memory_allocated_gb", "gpu_avg_utilization_percent",
          "gpu_max_utilization_percent", "data_loading_time_ratio", "communication_time_ratio"],
         "compare --json: the eight headline fields first")
    ph = {r["field"]: r for r in cj.get("phases", [])}
    t.ok("data" in ph and abs(ph["data"]["values"][0] - rs["phases"]["data"]["mean_ms"]) < 1e-9,
         "compare --json: phase means from the reports")
    t.eq([f for f in cj.get("facts", []) if f["key"] == "NCCL_DEBUG"],
         [{"key": "NCCL_DEBUG", "values": [None, "INFO"]}], "compare --json: the differing fact")
    fd = {f["id"]: f for f in cj.get("findings", [])}
    t.ok(fd.get("data_loading", {}).get("change") == ("in every run" if fast_dl else "went away")
         and fd["data_loading"]["in"] == ([0, 1] if fast_dl else [0]),
         "compare --json: data_loading went away (or is in both, as the reports say)",
         detail=str(fd))
    p = gs("compare", slow, fast, os.path.join(slow, "metrics_report.json"))
    t.ok(p.returncode == 0 and re.search(r"^field\s+A\s+B\s+change\s+change %\s+C\s+change", p.stdout,
                                          re.M), "compare: three runs, changes against A",
         detail=p.stdout[:400])

    # ---- --open, --serve ----
    out = os.path.join(tmp, "x y.html")
    p = gs("report", "--open", "-o", out, slow)
    t.eq(p.stdout.strip(), "file://" + os.path.realpath(out).replace(" ", "%20"),
         "report --open prints the file's URL")
    port = free_port()
    sp = subprocess.Popen([BIN, "report", "--serve", "--port", str(port), slow],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = sp.stdout.readline().strip()
    try:
        body = urllib.request.urlopen(url, timeout=5).read()
        same = body == open(os.path.join(slow, "report.html"), "rb").read()
        # the same page but its "generated" time
        strip = lambda b: re.sub(rb'"generated":[0-9.]+', b"", b)  # noqa: E731
        same = strip(body) == strip(open(os.path.join(slow, "report.html"), "rb").read())
        t.ok(url == "http://127.0.0.1:%d/" % port and same,
             "report --serve: the page on loopback", detail=url)
        try:
            urllib.request.urlopen(url + "other", timeout=5)
            t.ok(False, "report --serve: other paths are 404")
        except urllib.error.HTTPError as e:
            t.eq(e.code, 404, "report --serve: other paths are 404")
    except OSError as e:
        t.ok(False, "report --serve: the page on loopback", detail=str(e))
    sp.send_signal(signal.SIGINT)
    t.eq(sp.wait(timeout=10), 0, "report --serve: Ctrl-C stops it, exit 0")

    # ---- a run the agent kept ----
    data_dir = os.path.join(tmp, "agent-data")
    sock = os.path.join(tmp, "steps.sock")
    hsock = os.path.join(tmp, "agent.sock")
    # the agent finds a run's GPUs by its senders' pids on them: this process on GPU 0
    asc = dict(SCENARIO, processes=[{"id": "me", "pid": os.getpid(), "gpu": 0,
                                     "used_memory_mib": 2048}])
    with open(os.path.join(tmp, "agent-scenario.json"), "w") as f:
        json.dump(asc, f)
    aenv = sim_env(os.path.join(tmp, "agent-scenario.json"))
    ap, base, up = start_agent(["--data-dir", data_dir, "--socket", sock, "--http-socket", hsock,
                                "--flush-interval", "1"], aenv, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        ms = {"data": 50.0, "forward": 80.0, "backward": 40.0, "optimizer_step": 10.0,
              "total_step": 180.0}

        def records():
            yield {"v": 1, "type": "hello", "run": "agent-run <x>", "pid": os.getpid(),
                   "rank": 0, "world_size": 1, "framework": "torch", "devices": [0]}
            for n in range(1, 13):
                now = time.time()
                yield {"v": 1, "type": "step", "step": n, "t0": now - 0.18, "t1": now,
                       "rank": 0, "device": 0, "samples": 8, "tokens": 100 * n, "ms": ms}
                if n % 2 == 0:  # the agent keeps log records too (history schema v3)
                    yield {"v": 1, "type": "log", "step": n, "t": now, "rank": 0,
                           "values": {"loss": 3.0 / n, "learning_rate": 1e-3 * n}}
            yield {"v": 1, "type": "end", "train_steps": 12}
        send_records(sock, records(), gap_s=0.2)
        rid = None
        for _ in range(100):
            try:
                doc = json.loads(urllib.request.urlopen(base + "/api/v1/runs", timeout=5).read())
                ended = [r for r in doc["runs"] if r["name"] == "agent-run <x>" and
                         r["state"] == "ended"]
                if ended:
                    rid = ended[0]["id"]
                    break
            except OSError:
                pass
            time.sleep(0.1)
        time.sleep(1.5)  # the steps reach history.db at the next flush
        henv = dict(os.environ, GPUSCOPE_HTTP_SOCKET=hsock)
        p = gs("report", "--data", "-o", "-", str(rid), env=henv)
        adoc = json.loads(p.stdout) if p.returncode == 0 else {}
        t.ok(up and rid is not None and adoc.get("label") == "agent-run <x>" and
             adoc.get("steps", {}).get("n") == 12,
             "report ID: an agent run's report and its 12 steps through the agent's socket",
             detail=p.stderr + str(adoc)[:300])
        t.ok(adoc.get("gpus") and adoc["gpus"][0]["index"] == 0 and adoc["gpus"][0]["n"] > 0,
             "report ID: GPU 0's samples from the agent's history", detail=str(adoc.get("gpus"))[:300])
        alogs = adoc.get("logs") or {}
        t.ok(alogs.get("n") == 6 and alogs.get("step") == [2, 4, 6, 8, 10, 12] and
             all(abs(a - 3.0 / n) < 1e-6 for a, n in
                 zip(alogs.get("values", {}).get("loss", []), range(2, 13, 2))) and
             len(alogs.get("values", {}).get("learning_rate", [])) == 6,
             "report ID: the agent run's 6 logged losses and learning rates (its curves)",
             detail=str(alogs)[:300])
        t.eq(adoc.get("steps", {}).get("tokens"), [100 * n for n in range(1, 13)],
             "report ID: the step series has each step's tokens as sent (history schema v6)")
        p = gs("report", "-o", os.path.join(tmp, "agent.html"), str(rid), env=henv)
        page = open(os.path.join(tmp, "agent.html"), encoding="utf-8").read() if p.returncode == 0 else ""
        t.ok("agent-run \\u003cx>" in page and "agent-run <x>" not in page,
             "report ID: the page writes the name's '<' as \\u003c (no markup from a run name)")
        if BROWSER:
            r = (browse([os.path.join(tmp, "agent.html")]) or [{}])[0]
            ch = {c["id"]: c for c in r.get("charts", [])}
            t.ok(r.get("errors") == [] and ch.get("chart-tokens", {}).get("points") == 12 and
                 ch["chart-tokens"]["canvas"],
                 "report ID page: tokens / s of each of the 12 steps drawn, no console error",
                 detail=json.dumps(r.get("charts")))
        else:
            t.skip("report ID page: tokens / s chart", "missing node, chromium or playwright-core")
        # ---- a run under gpuscope run --name reaches the agent's run list with its name ----
        named = os.path.join(tmp, "named")
        p = subprocess.run([BIN, "run", "--out", named, "--name", "named run <1>", "--tag",
                            "team=ml", "--tag", "try=3", "--", PYTHON, script,
                            json.dumps({"sleep": 0.0, "batch": 8, "hidden": 64, "steps": 30,
                                        "log": True})],
                           env=dict(env, GPUSCOPE_AGENT_SOCKET=sock), capture_output=True,
                           text=True, timeout=240)
        nrep = report_of(named) if p.returncode == 0 else {}
        t.ok(nrep.get("run", {}).get("name") == "named run <1>" and
             nrep["run"].get("tags") == {"team": "ml", "try": "3"},
             "run --name/--tag: the report's run.name and run.tags", detail=p.stderr[-600:])
        try:
            db = sqlite3.connect("file:%s?mode=ro" % os.path.join(named, "samples.db"), uri=True)
            srow = db.execute("SELECT tags FROM run").fetchone()
            db.close()
        except sqlite3.Error as e:
            srow = (str(e),)
        t.ok(srow and srow[0] and json.loads(srow[0]) == {"team": "ml", "try": "3"},
             "run --tag: samples.db's run row has the tags (schema v3)", detail=str(srow))
        arun = None
        for _ in range(100):
            doc = json.loads(urllib.request.urlopen(base + "/api/v1/runs", timeout=5).read())
            hits = [r for r in doc["runs"] if r["name"] == "named run <1>"]
            if hits and hits[0]["state"] == "ended":
                arun = hits[0]
                break
            time.sleep(0.1)
        t.ok(arun is not None and arun["steps"] == 30,
             "run --name: the run is in the agent's run list with its name and its 30 steps",
             detail=str(arun))
        t.ok(arun is not None and arun.get("tags") == {"team": "ml", "try": "3"},
             "run --tag: the agent's run list shows the run's tags (hello \"tags\")",
             detail=str(arun))
        # its gpuscope.log() records reached the agent as they reached steps.jsonl
        with open(os.path.join(named, "steps.jsonl")) as f:
            nlogs = [json.loads(x) for x in f if '"type":"log"' in x]
        time.sleep(1.5)  # the next flush
        alog = json.loads(urllib.request.urlopen(
            "%s/api/v1/runs/%s/logs" % (base, (arun or {}).get("id")), timeout=5).read()) \
            if arun else {}
        t.ok(len(nlogs) == 8 and alog.get("total") == 8 and
             all(abs(a["values"]["loss"] - b["values"]["loss"]) <= 1e-12 and
                 a["step"] == b["step"] for a, b in zip(alog.get("logs", []), nlogs)),
             "run: the agent keeps the run's 8 gpuscope.log() records (/api/v1/runs/ID/logs)",
             detail=str(alog)[:300])
        p = subprocess.run([BIN, "run", "--out", os.path.join(tmp, "unlisted"), "--no-agent",
                            "--name", "unlisted", "--", PYTHON, script,
                            json.dumps({"sleep": 0.0, "batch": 8, "hidden": 64, "steps": 5})],
                           env=dict(env, GPUSCOPE_AGENT_SOCKET=sock), capture_output=True,
                           text=True, timeout=240)
        time.sleep(0.5)
        doc = json.loads(urllib.request.urlopen(base + "/api/v1/runs", timeout=5).read())
        t.ok(p.returncode == 0 and not [r for r in doc["runs"] if r["name"] == "unlisted"],
             "run --no-agent: the agent does not get the run")
        p = gs("report", "99999", env=henv)
        t.ok(p.returncode != 0 and "run 99999" in p.stderr, "report ID: an unknown id is an error",
             detail=p.stderr)
    finally:
        stop_proc(ap)

    # ---- bad input ----
    p = gs("report", os.path.join(tmp, "nope"))
    t.ok(p.returncode == 1 and "nope" in p.stderr and "No such file" in p.stderr,
         "report: a missing run is a clear error", detail=p.stderr)
    p = gs("report", tmp)
    t.ok(p.returncode == 1 and "no metrics_report.json" in p.stderr,
         "report: a directory without a report says so", detail=p.stderr)
    bad = os.path.join(tmp, "bad")
    shutil.copytree(slow, bad)
    with open(os.path.join(bad, "steps.jsonl"), "a") as f:
        f.write('{"type":"step", "t0": \n')
    n_lines = sum(1 for _ in open(os.path.join(bad, "steps.jsonl")))
    p = gs("report", bad)
    t.ok(p.returncode == 1 and ("steps.jsonl:%d:" % n_lines) in p.stderr,
         "report: a broken steps.jsonl line is named file:line", detail=p.stderr)
    shutil.copy(os.path.join(slow, "steps.jsonl"), os.path.join(bad, "steps.jsonl"))
    os.unlink(os.path.join(bad, "samples.db"))
    db = sqlite3.connect(os.path.join(bad, "samples.db"))
    db.execute("CREATE TABLE x(a)")
    db.commit()
    db.close()
    p = gs("report", bad)
    t.ok(p.returncode == 1 and "not a gpuscope history database" in p.stderr,
         "report: a foreign samples.db is refused", detail=p.stderr)
    with open(os.path.join(bad, "metrics_report.json"), "w") as f:
        f.write('{"schema": "1.0", "run": ')
    p = gs("compare", bad, slow)
    t.ok(p.returncode == 1 and "metrics_report.json:1:" in p.stderr,
         "compare: a broken report is named file:line", detail=p.stderr)
    p = gs("compare", slow)
    t.ok(p.returncode == 2 and "two runs" in p.stderr, "compare: one run is a usage error")

pyhelp.exit_now(t.done())
