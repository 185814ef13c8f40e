"""Zero-code step phases: unmodified PyTorch scripts (none imports gpuscope) under `gpuscope
run`, timed by the loop tracker the auto sitecustomize installs when torch is imported
(python/gpuscope/_loop.py). Real PyTorch (Debian's, CPU). Each script measures with its own
clock what the report is checked against:

  plain loop, slow and fast loader  data_loading_time_ratio = the script's data share, +-0.05
  gradient accumulation             one step per optimizer step, its micro-batches' samples
  post-step logging                 in `other` (share of wall time, +-0.05), not in data
  2-rank gloo DDP                   communication > 0 and equal to the script's own comm
                                    hook's timing of the all-reduces (its hook kept working);
                                    the job's samples/s is the sum of the ranks'
  HF (fake transformers) with DDP   the Trainer's DDP wrapper is measured (comm > 0)
  DeepSpeed / accelerate            stand-ins with their documented call order
                                    (tests/python/fake_ds): steps = optimizer steps
  raise at step N, SIGINT, never steps, never imports torch
                                    the outcome, the summary and the diagnosis
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import FAKE_HF, PYTHON, Tap  # noqa: E402
from gsenv import BIN, free_port  # noqa: E402

t = Tap()
HERE = os.path.dirname(os.path.abspath(__file__))
FAKE_DS = os.path.join(HERE, "fake_ds")

PLAIN = textwrap.dedent("""
    import json, sys, time, torch
    torch.set_num_threads(1)
    cfg = json.loads(sys.argv[1])
    sleep, steps, ga = cfg["sleep"], cfg["steps"], cfg.get("ga", 1)
    log_s, raise_at = cfg.get("log_s", 0.0), cfg.get("raise_at")
    class DS(torch.utils.data.Dataset):
        def __len__(self): return 1000000
        def __getitem__(self, i):
            if sleep: time.sleep(sleep)
            return torch.randn(32), torch.randn(1)
    dl = torch.utils.data.DataLoader(DS(), batch_size=8)
    h = cfg.get("hidden", 256)
    model = torch.nn.Sequential(torch.nn.Linear(32, h), torch.nn.ReLU(), torch.nn.Linear(h, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    it = iter(dl); data = logged = 0.0; t0 = None
    if cfg.get("pidfile"):
        open(cfg["pidfile"], "w").write(str(__import__("os").getpid()))
    for s in range(steps):
        for m in range(ga):
            a = time.perf_counter()
            if s == 1 and m == 0:  # step 1 carries gpuscope's one-off start: clock from 2
                t0, data, logged = a, 0.0, 0.0
            x, y = next(it)
            data += time.perf_counter() - a
            loss = torch.nn.functional.mse_loss(model(x), y) / ga
            loss.backward()
        opt.step(); opt.zero_grad()
        if raise_at is not None and s + 1 == raise_at:
            raise ValueError("boom at step %d" % raise_at)
        if log_s:
            a = time.perf_counter(); time.sleep(log_s); logged += time.perf_counter() - a
    wall = time.perf_counter() - t0
    print(json.dumps({"data": data / wall, "other": logged / wall, "wall": wall}))
""")

NEVER_STEPS = textwrap.dedent("""
    import torch
    dl = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(64, 8)),
                                     batch_size=8)
    model = torch.nn.Linear(8, 1)
    for (x,) in dl:
        model(x).sum().backward()   # gradients, but no optimizer ever steps
""")

NO_TORCH = "print('no torch here')\n"

DDP = textwrap.dedent("""
    import datetime, gc, json, os, sys, time, torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from torch.nn.parallel import DistributedDataParallel as DDP

    def worker(rank, world, port, steps, out):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE=str(world))
        torch.set_num_threads(1)
        # a rank that never joins fails the other in 2 min, not gloo's default 30
        dist.init_process_group("gloo", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=120))
        model = DDP(torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(),
                                        torch.nn.Linear(512, 1)))
        # independent: the script's own comm hook times every bucket's all-reduce, launch to
        # completion (gpuscope must keep it working: DDP takes one hook per model)
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        mine = []
        def my_hook(state, bucket):
            a = time.perf_counter()
            fut = default_hooks.allreduce_hook(state, bucket)
            def done(f):
                mine.append(time.perf_counter() - a)
                return f.value()
            return fut.then(done)
        model.register_comm_hook(None, my_hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        ds = torch.utils.data.TensorDataset(torch.randn(steps * 8, 64), torch.randn(steps * 8, 1))
        for x, y in torch.utils.data.DataLoader(ds, batch_size=8):
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step(); opt.zero_grad()
        json.dump({"hook_ms": sum(mine) * 1000, "buckets": len(mine)},
                  open("%s.%d" % (out, rank), "w"))
        dist.barrier()  # both ranks done with every collective before the teardown
        del model, opt  # torch 1.13: no DDP object left when the group goes
        gc.collect()
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(worker, args=(2, int(sys.argv[3]), int(sys.argv[1]), sys.argv[2]), nprocs=2)
""")

HF_DDP = textwrap.dedent("""
    import gc, json, os, sys, torch
    import torch.distributed as dist
    sys.path.insert(0, {tests!r})
    from pyhelp import Net, SlowDataset
    from transformers import Trainer, TrainingArguments
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
    dist.init_process_group("gloo", rank=0, world_size=1)
    args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=8,
                             logging_steps=4)
    dl = torch.utils.data.DataLoader(SlowDataset(96, dict_items=True), batch_size=8)
    tr = Trainer(model=Net(), args=args, dataloader=dl)
    tr.train()
    print(json.dumps({{"ddp": type(tr.model_wrapped).__name__, "steps": tr.measured["steps"]}}))
    del tr  # torch 1.13: no DDP object left when the group goes
    gc.collect()
    dist.destroy_process_group()
""").format(tests=HERE)

# The callback added in code, no gpuscope run (no loop tracker): it still times the DDP
# wrapper the Trainer trains through (the same comm hook, fed to the callback's profiler).
HF_DDP_CALLBACK = HF_DDP.replace(
    "tr = Trainer(model=Net(), args=args, dataloader=dl)",
    "import gpuscope\n"
    "tr = Trainer(model=Net(), args=args, dataloader=dl,\n"
    "             callbacks=[gpuscope.GpuScopeCallback(nvml='off', log=lambda s: None)])")

DEEPSPEED = textwrap.dedent("""
    import torch, deepspeed
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                           config={"gradient_accumulation_steps": 4})
    ds = torch.utils.data.TensorDataset(torch.randn(24 * 8, 32), torch.randn(24 * 8, 1))
    for x, y in torch.utils.data.DataLoader(ds, batch_size=8):
        loss = torch.nn.functional.mse_loss(engine(x), y)
        engine.backward(loss)
        engine.step()
    print(engine.global_steps)
""")

# Two models one after the other: the tracker has moved its forward hooks onto the first
# model's root by then; the second model's first step shows backward without forward, which
# brings the global hooks back (that one step's forward time lands in other).
TWO_MODELS = textwrap.dedent("""
    import torch
    torch.set_num_threads(1)
    ds = torch.utils.data.TensorDataset(torch.randn(48, 8), torch.randn(48, 1))
    dl = torch.utils.data.DataLoader(ds, batch_size=8)
    for _ in range(2):
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for x, y in dl:
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step(); opt.zero_grad()
""")

ACCELERATE = textwrap.dedent("""
    import torch
    from accelerate import Accelerator
    torch.set_num_threads(1)
    acc = Accelerator(gradient_accumulation_steps=3)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    ds = torch.utils.data.TensorDataset(torch.randn(24 * 8, 32), torch.randn(24 * 8, 1))
    model, opt, dl = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.01),
                                 torch.utils.data.DataLoader(ds, batch_size=8))
    for x, y in dl:
        with acc.accumulate(model):
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step(); opt.zero_grad()
""")


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def report(out):
    try:
        with open(os.path.join(out, "metrics_report.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def gsrun(tmp, name, script, *args, pythonpath=None, popen=False):
    out = os.path.join(tmp, name)
    env = pyhelp.child_env(NO_COLOR="1", PYTHONPATH=pythonpath)
    cmd = [BIN, "run", "--out", out, "--", PYTHON, script, *args]
    if popen:
        return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True), out
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    try:
        measured = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        measured = None
    return p, measured, report(out), out


def ids(rep):
    return [f.get("id") for f in rep.get("findings", [])]


with tempfile.TemporaryDirectory() as tmp:
    plain = write(tmp, "plain.py", PLAIN)

    # ---- slow and fast loaders: the data share of wall time against the script's clock ----
    # the fast loader's steps are a few ms of compute (a wider model), as any real step is
    for name, sleep, hidden in (("slow", 0.002, 256), ("fast", 0.0, 8192)):
        p, m, rep, _ = gsrun(tmp, name, plain, json.dumps({"sleep": sleep, "steps": 40,
                                                           "hidden": hidden}))
        t.ok(p.returncode == 0 and m is not None, f"{name} loader: the script ran",
             detail=p.stderr[-1500:])
        m = m or {"data": -1}
        got = rep.get("data_loading_time_ratio")
        t.ok(got is not None and abs(got - m["data"]) < 0.05,
             f"{name} loader: data_loading_time_ratio {got} vs the script's {m['data']:.3f}",
             detail=p.stderr[-800:])
        t.eq(rep.get("steps"), 40, f"{name} loader: 40 steps, one per optimizer step")
        t.ok(rep.get("gpu_avg_utilization_percent") is None and
             rep.get("gpu_utilization_source") is None and
             rep.get("step_busy_estimate_source") == "host_timing",
             f"{name} loader: a CPU run names no GPU utilization, only a host step estimate")
        t.ok("GPU busy" not in p.stderr and "GPU utilization" not in p.stderr,
             f"{name} loader: the summary prints no GPU figure for a CPU run",
             detail=p.stderr[-1500:])
        ph = rep.get("phases", {})
        parts = sum((ph.get(k, {}).get("total_ms") or 0) for k in
                    ("data", "forward", "backward", "optimizer_step", "communication_exposed",
                     "other"))
        wall = (ph.get("data", {}).get("total_ms") or 0) + (ph.get("total_step", {})
                                                           .get("total_ms") or 0)
        t.ok(wall > 0 and abs(parts - wall) < 0.01 * wall + 0.5,
             f"{name} loader: data+forward+backward+optimizer+exposed comm+other = wall",
             detail="%r vs %r" % (parts, wall))
        if name == "slow":
            t.ok("data_loading" in ids(rep), "slow loader: the data_loading finding")
            adv = " ".join(a for f in rep.get("findings", []) for a in f.get("advice", []))
            t.ok("DataLoader(num_workers=" in adv and "pin_memory" not in adv and
                 "prefetch_factor" not in adv and "TrainingArguments" not in adv and
                 "too few" not in adv, "slow loader: advice spelled for a plain loop, no "
                 "pin_memory (CPU), no prefetch_factor (no workers)", detail=adv)

    # ---- gradient accumulation ----
    p, m, rep, out = gsrun(tmp, "ga", plain, json.dumps({"sleep": 0, "steps": 10, "ga": 4}))
    t.eq(rep.get("steps"), 10, "gradient accumulation: 10 steps for 40 micro-batches")
    with open(os.path.join(out, "steps.jsonl")) as f:
        recs = [json.loads(x) for x in f if '"type":"step"' in x]
    t.ok(recs and all(r.get("samples") == 32 for r in recs),
         "gradient accumulation: each step carries its 4 micro-batches' 32 samples",
         detail=str([r.get("samples") for r in recs]))
    t.eq((rep.get("outcome") or {}).get("seen", {}).get("seen_forward"), 40,
         "gradient accumulation: 40 outermost forwards seen (nested modules not counted)")

    # ---- post-step logging is `other` ----
    p, m, rep, _ = gsrun(tmp, "logging", plain,
                         json.dumps({"sleep": 0.0025, "steps": 30, "log_s": 0.02}))
    m = m or {"data": -1, "other": -1}
    got_o, got_d = rep.get("other_time_ratio"), rep.get("data_loading_time_ratio")
    t.ok(got_o is not None and abs(got_o - m["other"]) < 0.05,
         f"post-step logging: other_time_ratio {got_o} vs the script's {m['other']:.3f}")
    t.ok(got_d is not None and abs(got_d - m["data"]) < 0.05,
         f"post-step logging: data share {got_d} vs {m['data']:.3f} (logging not data)")

    # ---- a script that raises at step 7 ----
    p, m, rep, _ = gsrun(tmp, "raise", plain, json.dumps({"sleep": 0, "steps": 20,
                                                          "raise_at": 7}))
    oc = rep.get("outcome") or {}
    t.eq(p.returncode, 1, "raise at step 7: gpuscope run exits with the script's status 1")
    t.eq([oc.get("status"), oc.get("exit_code"), oc.get("steps_completed"),
          oc.get("exception")], ["failed", 1, 7, "ValueError: boom at step 7"],
         "raise at step 7: outcome failed, exit 1, 7 steps, the exception's last line")
    t.ok(ids(rep)[:1] == ["run_failed"] and "healthy" not in ids(rep),
         "raise at step 7: run_failed comes first, never healthy", detail=ids(rep))
    t.ok("outcome                      failed: exit 1 after 7 step(s): ValueError: boom at "
         "step 7" in p.stderr, "raise at step 7: the summary says so", detail=p.stderr[-1500:])

    # ---- SIGINT to the script ----
    pidfile = os.path.join(tmp, "pid")
    proc, out = gsrun(tmp, "sigint", plain, json.dumps({"sleep": 0.002, "steps": 100000,
                                                        "pidfile": pidfile}), popen=True)
    deadline = time.time() + 60
    pid = None
    while time.time() < deadline:
        try:
            pid = int(open(pidfile).read())
            with open(os.path.join(out, "steps.jsonl")) as f:
                if sum('"type":"step"' in x for x in f) >= 3:
                    break
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    if pid:
        os.kill(pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    rep = report(out)
    oc = rep.get("outcome") or {}
    t.eq(proc.returncode, 130, "SIGINT: 128 + 2, as a shell")
    t.ok(oc.get("status") == "interrupted" and oc.get("signal_name") == "SIGINT" and
         (oc.get("exception") or "").startswith("KeyboardInterrupt") and
         oc.get("steps_completed", 0) >= 3, "SIGINT: outcome interrupted by SIGINT, "
         "KeyboardInterrupt, the steps done", detail=json.dumps(oc))
    t.ok("run_failed" in ids(rep) and "healthy" not in ids(rep),
         "SIGINT: a run_failed finding, never healthy", detail=ids(rep))

    # ---- never steps / never imports torch ----
    p, _, rep, _ = gsrun(tmp, "nostep", write(tmp, "nostep.py", NEVER_STEPS))
    oc = rep.get("outcome") or {}
    why = oc.get("zero_steps_reason") or ""
    t.ok(rep.get("steps") == 0 and "no optimizer step" in why and "8 DataLoader batches" in why
         and "8 backward calls" in why and "no process of the command appeared on a GPU" in why,
         "never steps: why (no optimizer step; what the hooks saw; no GPU)", detail=why)
    t.ok("no_steps" in ids(rep) and "why no steps" in p.stderr,
         "never steps: a no_steps finding and the summary's reason", detail=p.stderr[-800:])
    p, _, rep, _ = gsrun(tmp, "notorch", write(tmp, "notorch.py", NO_TORCH))
    why = (rep.get("outcome") or {}).get("zero_steps_reason") or ""
    t.ok(rep.get("steps") == 0 and why.startswith("torch was never imported"),
         "never imports torch: the report says so (the command's own process tells)",
         detail=why)
    p, _, rep, _ = gsrun(tmp, "notorch-fail", write(tmp, "notorch2.py",
                                                    "raise RuntimeError('no torch here')\n"))
    oc = rep.get("outcome") or {}
    t.eq([oc.get("status"), oc.get("exception")], ["failed", "RuntimeError: no torch here"],
         "never imports torch and raises: the exception still reaches the outcome")

    # ---- 2 gloo ranks under DDP ----
    ar = os.path.join(tmp, "allreduce.json")
    ddp_port = str(free_port())
    p, _, rep, _ = gsrun(tmp, "ddp", write(tmp, "ddp.py", DDP), "40", ar, ddp_port)
    t.ok(p.returncode == 0, "DDP: 2 gloo ranks ran", detail=p.stderr[-1500:])
    t.eq((rep.get("run") or {}).get("job"), "master-127.0.0.1:" + ddp_port,
         "DDP: the job id from MASTER_ADDR:MASTER_PORT in run.job (docs/run.md, JOBS)")
    try:
        mine = [json.load(open("%s.%d" % (ar, r))) for r in (0, 1)]
    except (OSError, ValueError):
        mine = []
    indep = sum(m["hook_ms"] for m in mine) if len(mine) == 2 else None
    comm = (rep.get("phases", {}).get("communication") or {})
    t.ok(rep.get("ranks") == 2 and (comm.get("count") or 0) == 80 and
         (rep.get("communication_total_seconds") or 0) > 0,
         "DDP: communication measured on every step of both ranks", detail=json.dumps(comm))
    got = comm.get("total_ms")
    t.ok(indep and got and abs(got - indep) <= 0.2 * indep + 2.0,
         "DDP: communication total = the script's own comm-hook timing of the all-reduces "
         "(within 20 %), the script's hook kept working",
         detail="report %r ms, script %r ms over %s buckets" % (
             got, indep, [m.get("buckets") for m in mine]))
    per = rep.get("per_rank") or []
    s_sum = sum(r.get("samples_per_second") or 0 for r in per)
    job = rep.get("train_samples_per_second") or 0
    t.ok(len(per) == 2 and s_sum > 0 and abs(job - s_sum) < 0.15 * s_sum,
         "DDP: job samples/s is the sum of the ranks'", detail="%r vs %r" % (job, s_sum))
    t.ok((rep.get("facts") or {}).get("dist_backend") == "gloo" and "NCCL" not in p.stderr,
         "DDP: backend gloo in the facts, no NCCL advice", detail=p.stderr[-1200:])
    t.ok(isinstance(rep.get("slowest_rank"), dict) and "slowest rank" in p.stderr,
         "DDP: the slowest rank is named")

    # ---- the HF Trainer (fake) training through DDP ----
    p, m, rep, _ = gsrun(tmp, "hfddp", write(tmp, "hfddp.py", HF_DDP),
                         os.path.join(tmp, "hfddp-out"), str(free_port()), pythonpath=FAKE_HF)
    t.ok(m is not None and m.get("ddp") == "DistributedDataParallel",
         "HF + DDP: the Trainer trained through a DDP wrapper", detail=p.stderr[-1500:])
    t.ok(rep.get("steps") == 12 and (rep.get("communication_total_seconds") or 0) > 0 and
         (rep.get("run") or {}).get("framework") == "hf",
         "HF + DDP: 12 steps, communication measured on the wrapped model (callbacks see the "
         "unwrapped one)", detail=json.dumps({k: rep.get(k) for k in
                                              ("steps", "communication_total_seconds")}))

    hf_out = os.path.join(tmp, "hfcb-out")
    p = subprocess.run([PYTHON, write(tmp, "hfcb.py", HF_DDP_CALLBACK), hf_out,
                        str(free_port())], env=pyhelp.child_env(
                            PYTHONPATH=FAKE_HF + os.pathsep + pyhelp.PYROOT),
                       capture_output=True, text=True, timeout=120)
    own = report(hf_out)
    t.ok(p.returncode == 0 and own.get("steps") == 12 and
         (own.get("communication_total_seconds") or 0) > 0,
         "HF + DDP, callback in code without gpuscope run: the DDP wrapper is timed too",
         detail=p.stderr[-1200:] + json.dumps({k: own.get(k) for k in
                                               ("steps", "communication_total_seconds")}))

    # ---- DeepSpeed and accelerate stand-ins ----
    p, m, rep, _ = gsrun(tmp, "ds", write(tmp, "ds.py", DEEPSPEED), pythonpath=FAKE_DS)
    t.ok(p.returncode == 0 and rep.get("steps") == 6 and
         (rep.get("phases", {}).get("optimizer_step") or {}).get("count") == 6 and
         (rep.get("run") or {}).get("framework") == "deepspeed",
         "DeepSpeed stand-in: 24 micro-batches, ga 4: 6 steps at engine.step boundaries",
         detail=p.stderr[-1200:])
    p, m, rep, _ = gsrun(tmp, "acc", write(tmp, "acc.py", ACCELERATE), pythonpath=FAKE_DS)
    t.ok(p.returncode == 0 and rep.get("steps") == 8 and
         (rep.get("outcome") or {}).get("seen", {}).get("seen_backward") == 24,
         "accelerate stand-in: 24 micro-batches, ga 3: 8 steps where gradients sync",
         detail=p.stderr[-1200:])

    p, _, rep, _ = gsrun(tmp, "two", write(tmp, "two.py", TWO_MODELS))
    t.ok(rep.get("steps") == 12 and
         (rep.get("phases", {}).get("forward") or {}).get("count") == 11,
         "a second model: 12 steps, forward measured in all but its first step (the hooks "
         "return to every module)", detail=json.dumps(rep.get("phases", {}).get("forward")))

    # ---- --no-auto: nothing instrumented ----
    p, m, rep, _ = gsrun(tmp, "noauto0", plain, json.dumps({"sleep": 0, "steps": 5}))
    env = pyhelp.child_env(NO_COLOR="1")
    out = os.path.join(tmp, "noauto")
    subprocess.run([BIN, "run", "--no-auto", "--out", out, "--", PYTHON, plain,
                    json.dumps({"sleep": 0, "steps": 5})], env=env, capture_output=True,
                   timeout=120)
    t.eq(report(out).get("steps"), 0, "--no-auto: the loop is not instrumented")

pyhelp.exit_now(t.done())
