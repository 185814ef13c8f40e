"""The straggler rule on a real 2-rank job (issue 23): `python3 -m torch.distributed.run`
starts two gloo DDP ranks under `gpuscope run`; the script never imports gpuscope. Each rank
does its own "compute" every step, half outside forward and half inside it (sleeps, so that the
truth does not depend on how loaded the machine is), and times it with its own clock; rank 1
does 50 % more, so rank 0 waits for it in the all-reduce. Checked against the script's own
figures: the report's slowest_rank names rank 1 as a straggler, its compute ratio within 10 % of
the script's, rank 0's wait within 35 % of the script's difference; the summary and
`gpuscope compare --job` name it; the findings carry a straggler finding and no bucket-size or
no_sync() advice. The same job with equal ranks names no straggler.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, Tap  # noqa: E402
from gsenv import BIN, free_port, reap  # noqa: E402

t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-py-strag.")

SCRIPT = textwrap.dedent("""
    import json, os, sys, time, torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank = int(os.environ["RANK"])
    work = float(sys.argv[1]) * (float(sys.argv[2]) if rank == 1 else 1.0)  # s per step
    torch.set_num_threads(1)
    dist.init_process_group("gloo")

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(16, 32), torch.nn.Linear(32, 1)
        def forward(self, x):
            time.sleep(work / 2)  # half of the rank's work inside forward
            return self.l2(torch.relu(self.l1(x)))

    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ds = torch.utils.data.TensorDataset(torch.randn(40 * 8, 16), torch.randn(40 * 8, 1))
    compute = []
    for x, y in torch.utils.data.DataLoader(ds, batch_size=8):
        t0 = time.perf_counter()
        time.sleep(work / 2)  # and half outside it (host-side preparation)
        out = model(x)
        compute.append(time.perf_counter() - t0)
        torch.nn.functional.mse_loss(out, y).backward()
        opt.step()
        opt.zero_grad()
    compute.sort()
    with open(os.path.join(sys.argv[3], "truth-%d.json" % rank), "w") as f:
        json.dump({"compute_p50_ms": 1e3 * compute[len(compute) // 2]}, f)
    dist.barrier()
    del model, opt
    dist.destroy_process_group()
""")


def start(name, slow):
    """Starts the 2-rank job under gpuscope run (both jobs run at once: torch's start-up is
    most of their time)."""
    out = os.path.join(tmp, name)
    os.makedirs(out + "-truth")
    env = pyhelp.child_env(NO_COLOR="1", OMP_NUM_THREADS="1")
    p = subprocess.Popen([BIN, "run", "--out", out, "--", PYTHON, "-m", "torch.distributed.run",
                          "--nproc_per_node", "2", "--master_port", str(free_port()),
                          "--redirects", "1", "--tee", "1", "--log_dir", out + "-logs", script,
                          "0.04", str(slow), out + "-truth"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    procs.append(p)
    return p, out


def finish(p, out):
    """(returncode, stderr, report, the script's truth per rank) of a job from start()."""
    _, err = p.communicate(timeout=150)
    try:
        rep = json.load(open(os.path.join(out, "metrics_report.json")))
    except (OSError, ValueError):
        rep = {}
    truth = {}
    for r in (0, 1):
        try:
            truth[r] = json.load(open(os.path.join(out + "-truth", "truth-%d.json" % r)))
        except (OSError, ValueError):
            truth[r] = {}
    return p.returncode, err, rep, truth


try:
    script = os.path.join(tmp, "ddp.py")
    with open(script, "w") as f:
        f.write(SCRIPT)

    slow, even = start("slow", 1.5), start("even", 1.0)
    rc, err, rep, truth = finish(*slow)
    out = slow[1]
    t.ok(rc == 0 and rep.get("ranks") == 2, "a 2-rank gloo job under torchrun: "
         "gpuscope run exit 0, two ranks", err[-2000:])
    sl = rep.get("slowest_rank") or {}
    c0, c1 = truth[0].get("compute_p50_ms"), truth[1].get("compute_p50_ms")
    want = c1 / c0 if c0 and c1 else None
    got = 1 + sl["slower_by_ratio"] if isinstance(sl.get("slower_by_ratio"), float) else None
    t.ok(sl.get("rank") == 1 and sl.get("straggler") is True,
         "slowest_rank: rank 1, a straggler", json.dumps(sl)[:1500])
    t.ok(pyhelp.near(got, want, 0.10),
         "rank 1's compute over rank 0's: report %r, the script's own clocks %r" % (got, want))
    wait = sl.get("others_comm_wait_p50_ms")
    t.ok(c0 and c1 and pyhelp.near(wait, c1 - c0, 0.35, 5.0),
         "rank 0 waits %r ms/step in communication; the script's compute difference %r ms"
         % (wait, c1 - c0 if c0 and c1 else None))
    t.ok("slowest rank: rank 1 computes" in err and "a straggler" in err,
         "the exit summary names rank 1 a straggler",
         "\n".join(ln for ln in err.splitlines() if "rank" in ln))
    ids = [f.get("id") for f in rep.get("findings") or []]
    advice = json.dumps(rep.get("findings") or [])
    t.ok("straggler" in ids and "bucket_cap_mb" not in advice and "no_sync" not in advice,
         "findings: a straggler finding, no bucket-size or no_sync() advice (no gradient "
         "accumulation)", json.dumps(ids))
    r = subprocess.run([BIN, "compare", "--job", "--json", out], capture_output=True, text=True,
                       timeout=30)
    try:
        jd = json.loads(r.stdout)
    except ValueError:
        jd = {}
    st = jd.get("straggler") or {}
    t.ok(st.get("rank") == 1 and pyhelp.near(st.get("ratio_to_others"), want, 0.10),
         "compare --job: the straggler is rank 1, %r x the other rank (script: %r)"
         % (st.get("ratio_to_others"), want), r.stdout[:2000] + r.stderr)
    r = subprocess.run([BIN, "compare", "--job", out], capture_output=True, text=True,
                       env=dict(os.environ, NO_COLOR="1"), timeout=30)
    t.ok("straggler: rank 1" in r.stdout and "computes" in r.stdout,
         "compare --job (text) names rank 1", r.stdout[-1500:])

    rc, err, rep, truth = finish(*even)
    out = even[1]
    sl = rep.get("slowest_rank") or {}
    t.ok(rc == 0 and rep.get("ranks") == 2 and sl.get("straggler") is False,
         "equal ranks: no straggler (the rank computing longest: %r x the other)"
         % (1 + sl["slower_by_ratio"] if isinstance(sl.get("slower_by_ratio"), float) else None),
         json.dumps(sl)[:1500] + err[-1500:])
    ids = [f.get("id") for f in rep.get("findings") or []]
    t.ok("straggler" not in ids, "equal ranks: no straggler finding", json.dumps(ids))
    r = subprocess.run([BIN, "compare", "--job", "--json", out], capture_output=True, text=True,
                       timeout=30)
    try:
        jd = json.loads(r.stdout)
    except ValueError:
        jd = {}
    t.ok(r.returncode == 0 and "straggler" in jd and jd["straggler"] is None,
         "equal ranks: compare --job names no straggler", r.stdout[:1500] + r.stderr)
finally:
    reap(procs)
    shutil.rmtree(tmp, ignore_errors=True)
pyhelp.exit_now(t.done())
