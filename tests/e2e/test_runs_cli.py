"""`gpuscope runs` (src/cli/runs.c, docs/runs.md): an agent on nvml-sim receives an unmodified
torch loop run under `gpuscope run`; `gpuscope runs` lists it from the agent's unix socket as an
aligned table whose figures are the loop's own step count and the API's, `--json` is the API's
document unchanged, and --help, bad usage and no agent get clear answers.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gsenv import (BIN, TEST_RUNTIME_DIR, clean_up_at_exit, get_json, sim_env,  # noqa: E402
                   start_agent, wait_until)
from tap import Tap  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-runs-")
os.makedirs(TEST_RUNTIME_DIR, exist_ok=True)
clean_up_at_exit(procs, [tmp, TEST_RUNTIME_DIR])
env = sim_env("h100x8-training.json", NO_COLOR="1")
env.pop("PYTHONPATH", None)
sock = os.path.join(TEST_RUNTIME_DIR, "agent.sock")
LOOP = ("import json, torch\ntorch.set_num_threads(1)\nm = torch.nn.Linear(4, 1)\n"
        "o = torch.optim.SGD(m.parameters(), lr=0.1)\nn = 0\n"
        "for x in torch.utils.data.DataLoader(torch.randn(56, 4), batch_size=4):\n"
        "    m(x).sum().backward(); o.step(); o.zero_grad(); n += 1\n"
        "print(json.dumps({'steps': n}))\n")


def runs(*args, e=None):
    return subprocess.run([BIN, "runs", *args], env=e or dict(env, GPUSCOPE_HTTP_SOCKET=sock),
                          capture_output=True, text=True, timeout=30)


agent, base, ok = start_agent(["--data-dir", os.path.join(tmp, "data"), "--interval", "1"], env,
                              procs)
t.ok(ok, "the agent answers")
loop = os.path.join(tmp, "loop.py")
open(loop, "w").write(LOOP)
r = subprocess.run([BIN, "run", "--out", os.path.join(tmp, "run"), "--name", "tiny loop",
                    "--", "/usr/bin/python3", loop], env=dict(env, OMP_NUM_THREADS="1"),
                   capture_output=True, text=True, timeout=120)
try:
    own = json.loads(r.stdout.strip().splitlines()[-1])["steps"]
except (ValueError, IndexError, KeyError):
    own = None
t.ok(r.returncode == 0 and own == 14, "the loop ran under gpuscope run", detail=r.stderr[-1500:])
api = wait_until(lambda: (lambda d: d if d.get("runs") and d["runs"][0]["state"] == "ended"
                          else None)(get_json(base + "/api/v1/runs?from=0&limit=20")[1]), 15)
t.ok(api is not None, "the agent has the run, ended", detail=api)
api = api or {"runs": [{}], "total": 0}
run = api["runs"][0]

p = runs()
lines = p.stdout.splitlines()
t.ok(p.returncode == 0 and len(lines) == 3, "a header, one run, a footer",
     detail=p.stdout + p.stderr)
head = lines[0] if lines else ""
t.eq(head.split(), ["ID", "STATE", "USER", "STEPS", "STARTED", "DURATION", "SAMPLES/S", "GPU%",
                    "NAME"], "the header names every column")
row = lines[1] if len(lines) > 1 else ""
cols = row.split()
t.ok(len(cols) >= 9 and cols[0] == str(run.get("id")) and cols[1] == "ended" and
     cols[3] == str(own) and cols[3] == str(run.get("steps")),
     "the row: the agent's id, ended, the loop's own step count", detail=row)
# Aligned: each column starts where its header does.
for name in ("STATE", "USER", "NAME"):
    at = head.find(name)
    t.ok(at > 0 and row[at - 2:at] == "  " and row[at] != " ",
         "column %s starts under its header" % name, detail=head + "\n" + row)
sps = run.get("train_samples_per_second")
t.ok(sps is not None and ("%.1f" % sps) in row, "samples/s is the API's", detail=(sps, row))
t.ok(row.endswith("tiny loop"), "the run's name last", detail=row)
t.eq(lines[2] if len(lines) > 2 else "", "1 of 1 run", "the footer counts the runs")

j = runs("--json", "--limit", "5")
try:
    doc = json.loads(j.stdout)
except ValueError:
    doc = None
want = get_json(base + "/api/v1/runs?from=0&limit=5")[1]
t.eq(doc, want, "--json: the API's /api/v1/runs document unchanged")

h = runs("--help")
t.ok(h.returncode == 0 and "usage: gpuscope runs" in h.stdout and "--json" in h.stdout,
     "--help", detail=h.stdout)
b = runs("--limit", "0")
t.ok(b.returncode == 2 and "1..1000" in b.stderr, "--limit 0: exit 2, the range named",
     detail=b.stderr)
b = runs("--bogus")
t.ok(b.returncode == 2 and "unknown argument '--bogus'" in b.stderr, "unknown argument: exit 2",
     detail=b.stderr)
n = runs(e=dict(env, GPUSCOPE_HTTP_SOCKET=os.path.join(tmp, "nothing.sock")))
t.ok(n.returncode != 0 and n.stdout == "" and "gpuscope agent" in n.stderr,
     "no agent at the socket: an error saying where runs come from", detail=n.stderr)
shutil.rmtree(os.path.join(tmp, "run"), ignore_errors=True)
sys.exit(t.done())
