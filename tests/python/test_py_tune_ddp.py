"""A `gpuscope tune` trial's DistributedDataParallel settings (GPUSCOPE_TUNE "ddp",
python/gpuscope/_tune.py) on a plain PyTorch DDP job: 2 ranks, gloo, torchrun, real torch (CPU).
The script builds DistributedDataParallel(model, bucket_cap_mb=5) itself and reports what its
model holds (bucket_bytes_cap, gradient_as_bucket_view); checked against that,
tune-applied-rank<R>.json and the report's facts:

  parse                       "ddp" checked: a bucket size that is not a number over 0, a
                              non-boolean gradient_as_bucket_view, an unknown key reject it
  the trial's settings        both ranks' models built with bucket_cap_mb=50 and
                              gradient_as_bucket_view=True over the script's 5; each rank's
                              file says ddp.bucket_cap_mb 50, one DDP model, no error
  a rejected trial            the script's own 5 stays; the error is in the file and on stderr
  gpuscope tune --try         ddp.bucket_cap_mb=10 on the same kind of job (tests/python/tune/
                              loop.py): the trial measured over both ranks, each applied it
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
from gsenv import BIN, free_port  # noqa: E402

t = Tap()
HERE = os.path.dirname(os.path.abspath(__file__))
MB = 1024 * 1024

DDP = textwrap.dedent("""
    import json, os, sys, torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Linear(64, 1)),
                bucket_cap_mb=5)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(6):
        x, y = torch.randn(8, 16), torch.randn(8, 1)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step(); opt.zero_grad()
    json.dump({"bucket_bytes_cap": model.bucket_bytes_cap,
               "gradient_as_bucket_view": model.gradient_as_bucket_view},
              open(os.path.join(sys.argv[1], "model-%d.json" % rank), "w"))
    dist.barrier()
    dist.destroy_process_group()
""")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def torchrun(tmp, name, tune):
    """The DDP script under `gpuscope run` (2 ranks) with GPUSCOPE_TUNE=tune: (process, out,
    [rank 0's and rank 1's model account], [their tune-applied files])."""
    out, seen = os.path.join(tmp, name), os.path.join(tmp, name + "-seen")
    os.makedirs(seen)
    env = pyhelp.child_env(NO_COLOR="1", GPUSCOPE_TUNE=tune, OMP_NUM_THREADS="1")
    p = subprocess.run([BIN, "run", "--out", out, "--", PYTHON, "-m", "torch.distributed.run",
                        "--nproc_per_node", "2", "--master_port", str(free_port()),
                        "--redirects", "1", "--tee", "1", "--log_dir",
                        os.path.join(tmp, name + "-logs"), os.path.join(tmp, "ddp.py"), seen],
                       env=env, capture_output=True, text=True, timeout=180)
    models = [load(os.path.join(seen, "model-%d.json" % r)) or {} for r in (0, 1)]
    docs = [load(os.path.join(out, "tune-applied-rank%d.json" % r)) or {} for r in (0, 1)]
    return p, out, models, docs


def main(tmp):
    # ---- parse: the "ddp" object checked ----
    from gpuscope import _tune
    spec, errs = _tune.parse('{"ddp": {"bucket_cap_mb": 12.5, "gradient_as_bucket_view": true}}')
    t.ok(spec is not None and spec["ddp"] == {"bucket_cap_mb": 12.5,
                                              "gradient_as_bucket_view": True} and not errs,
         "parse: ddp bucket_cap_mb and gradient_as_bucket_view accepted", json.dumps(errs))
    for text, why in (('{"ddp": {"bucket_cap_mb": 0}}', "number over 0"),
                      ('{"ddp": {"bucket_cap_mb": true}}', "number over 0"),
                      ('{"ddp": {"bucket_cap_mb": "50"}}', "number over 0"),
                      ('{"ddp": {"gradient_as_bucket_view": 1}}', "true or false"),
                      ('{"ddp": {"find_unused_parameters": true}}', "unknown ddp key"),
                      ('{"ddp": [50]}', "must be an object")):
        spec, errs = _tune.parse(text)
        t.ok(spec is None and any(why in e for e in errs) and errs[-1].endswith("nothing applied"),
             "parse: %s rejected (%s)" % (text, why), json.dumps(errs))

    with open(os.path.join(tmp, "ddp.py"), "w") as f:
        f.write(DDP)

    # ---- the trial's settings reach both ranks' DistributedDataParallel ----
    p, out, models, docs = torchrun(
        tmp, "bucket", json.dumps({"ddp": {"bucket_cap_mb": 50, "gradient_as_bucket_view": True}}))
    t.ok(p.returncode == 0 and
         all(m.get("bucket_bytes_cap") == 50 * MB and m.get("gradient_as_bucket_view") is True
             for m in models),
         "DDP: both ranks' models built with bucket_cap_mb=50, gradient_as_bucket_view=True "
         "(the script asked for 5)", json.dumps(models) + p.stderr[-1500:])
    t.ok([d.get("rank") for d in docs] == [0, 1] and
         all(d.get("applied") == {"ddp.bucket_cap_mb": 50, "ddp.gradient_as_bucket_view": True}
             and d.get("ddp_models") == 1 and d.get("framework") == "torch" and
             not d.get("errors") for d in docs),
         "DDP: tune-applied-rank0.json and -rank1.json say ddp.bucket_cap_mb 50 applied",
         json.dumps(docs))
    report = load(os.path.join(out, "metrics_report.json")) or {}
    t.ok(report.get("facts", {}).get("ddp_bucket_cap_mb") == 50,
         "DDP: the report's facts see the trial's bucket size (50 MiB)",
         json.dumps(report.get("facts")))

    # ---- a rejected trial leaves the script's own bucket size ----
    p, out, models, docs = torchrun(tmp, "rejected", '{"ddp": {"bucket_cap_mb": -1}}')
    t.ok(p.returncode == 0 and all(m.get("bucket_bytes_cap") == 5 * MB and
                                   m.get("gradient_as_bucket_view") is False for m in models),
         "DDP, rejected trial: both ranks keep the script's bucket_cap_mb=5",
         json.dumps(models) + p.stderr[-1500:])
    t.ok(all(d.get("applied") == {} and d.get("ddp_models") == 1 and
             any("ddp.bucket_cap_mb" in e for e in d.get("errors", [])) for d in docs) and
         "gpuscope: tune: GPUSCOPE_TUNE: ddp.bucket_cap_mb" in p.stderr,
         "DDP, rejected trial: the error in both files and on stderr", json.dumps(docs))

    # ---- gpuscope tune --try ddp.bucket_cap_mb on a plain DDP job ----
    tout = os.path.join(tmp, "tune")
    env = pyhelp.child_env(NO_COLOR="1", OMP_NUM_THREADS="1", LOOP_SLEEP="0")
    p = subprocess.run([BIN, "tune", "--out", tout, "--steps", "6", "--warmup", "2", "--only-try",
                        "--try", "ddp.bucket_cap_mb=10", "--", PYTHON, "-m",
                        "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                        str(free_port()), "--redirects", "1", "--tee", "1", "--log_dir",
                        os.path.join(tmp, "tune-logs"), os.path.join(HERE, "tune", "loop.py"),
                        "data", "100000"], env=env, capture_output=True, text=True, timeout=240)
    doc = load(os.path.join(tout, "tune.json")) or {}
    tr = {x.get("settings"): x for x in doc.get("trials", [])}
    one = tr.get("ddp.bucket_cap_mb=10", {})
    files = [load(os.path.join(tout, one.get("dir", "-"), "tune-applied-rank%d.json" % r)) or {}
             for r in (0, 1)]
    t.ok(one.get("status") == "measured" and one.get("window", {}).get("ranks") == 2 and
         one.get("gpuscope_tune") == {"ddp": {"bucket_cap_mb": 10}} and
         one.get("changes") == [{"route": "ddp", "key": "bucket_cap_mb", "value": 10}],
         "tune --try ddp.bucket_cap_mb=10: measured over two ranks, GPUSCOPE_TUNE's \"ddp\"",
         json.dumps(one) + p.stdout[-1500:] + p.stderr[-1000:])
    t.ok([f.get("applied", {}).get("ddp.bucket_cap_mb") for f in files] == [10, 10],
         "tune --try ddp.bucket_cap_mb=10: both ranks applied it",
         json.dumps(files))
    change = doc.get("change") or ""
    t.ok(doc.get("best") is None or change == "DistributedDataParallel(model, ..., bucket_cap_mb=10)",
         "tune: a bucket size worth it is spelled as the DistributedDataParallel call (%r)"
         % change)


tmp = tempfile.mkdtemp(prefix="gs-tune-ddp-")
try:
    main(tmp)
finally:
    shutil.rmtree(tmp, True)
pyhelp.exit_now(t.done())
