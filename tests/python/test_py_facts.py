"""The run's settings and its samples on every path: unmodified PyTorch scripts (none imports
gpuscope, but the instrument() one) under `gpuscope run`, real PyTorch (Debian's, CPU). Each
script counts its own training samples; the report is checked against that count.

  num_workers 0, then 2        facts.loader_* as iterated, the micro-steps; no advice that
                               names a worker count at or below the run's own;
                               `gpuscope compare` lists the setting and the command line
  an eval pass every K steps   train_samples_per_second x train_runtime = the script's
                               training samples (the eval batches are not training samples)
  get_batch(), no DataLoader   samples from the training forward's input batch dimension
  gpuscope.instrument()        train_samples_per_second filled from its loader, whether the
                               loop iterates what it returns or its own loader
  a GPU shared with two other  (nvml-sim places the script's pid on GPU 0 next to two other
  processes                    tenants) the run's memory and SM utilization are its own, the
                               device's are labelled; a CPU torch job gets no CUDA advice
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, Tap  # noqa: E402
from gsenv import BIN, SIM  # noqa: E402

t = Tap()

# argv: workers, steps, ga (micro-batches per optimizer step), eval_every (0 = never)
LOOP = textwrap.dedent("""
    import json, sys, time, torch
    torch.set_num_threads(1)
    workers, steps, ga, eval_every = (int(a) for a in sys.argv[1:5])
    class DS(torch.utils.data.Dataset):
        def __len__(self): return 1000000
        def __getitem__(self, i):
            time.sleep(0.0005)
            return torch.randn(32), torch.randn(1)
    if __name__ == "__main__":
        dl = torch.utils.data.DataLoader(DS(), batch_size=8, num_workers=workers)
        ev = torch.utils.data.DataLoader(DS(), batch_size=16)
        model = torch.nn.Sequential(torch.nn.Linear(32, 256), torch.nn.ReLU(),
                                    torch.nn.Linear(256, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        it = iter(dl); trained = 0
        for s in range(steps):
            for m in range(ga):
                x, y = next(it)
                trained += x.shape[0]
                (torch.nn.functional.mse_loss(model(x), y) / ga).backward()
            opt.step(); opt.zero_grad()
            if eval_every and (s + 1) % eval_every == 0:
                model.eval()
                with torch.no_grad():
                    for i, (x, y) in enumerate(ev):
                        model(x)
                        if i == 3:
                            break
                model.train()
        print(json.dumps({"samples": trained}))
""")

GET_BATCH = textwrap.dedent("""
    import json, torch
    torch.set_num_threads(1)
    data = torch.randn(10000, 32)
    def get_batch(n):
        ix = torch.randint(len(data) - 1, (n,))
        return data[ix], data[ix, :1]
    model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    trained = 0
    for s in range(30):
        x, y = get_batch(12)
        trained += 12
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step(); opt.zero_grad(set_to_none=True)
    print(json.dumps({"samples": trained}))
""")

# argv[1]: "wrap" iterates what instrument() returns, "own" its own loader after the call
INSTRUMENT = textwrap.dedent("""
    import json, sys, torch, gpuscope
    torch.set_num_threads(1)
    ds = torch.utils.data.TensorDataset(torch.randn(32 * 20, 16), torch.randn(32 * 20, 1))
    dl = torch.utils.data.DataLoader(ds, batch_size=32)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    trained = 0
    inst = gpuscope.instrument(model, opt, dl)
    for x, y in (inst if sys.argv[1] == "wrap" else dl):
        trained += x.shape[0]
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step(); opt.zero_grad()
    gpuscope.finish()
    print(json.dumps({"samples": trained}))
""")


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def gsrun(tmp, name, script, *args, scenario=None):
    out = os.path.join(tmp, name)
    env = pyhelp.child_env(NO_COLOR="1")
    if scenario:
        env.update(GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=scenario)
    p = subprocess.run([BIN, "run", "--out", out, "--interval", "0.2", "--", PYTHON, script,
                        *args], env=env,
                       capture_output=True, text=True, timeout=240)
    try:
        measured = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        measured = {}
    try:
        with open(os.path.join(out, "metrics_report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = {}
    return p, measured, rep, out


def samples_of(rep):
    """The report's training samples: samples/s x the time it was computed over (the steps'
    span; train_runtime is the job's wall time under gpuscope run, docs/report.md)."""
    sps, rt = rep.get("train_samples_per_second"), rep.get("steps_span_seconds")
    return sps * rt if sps is not None and rt else None


def workers_advice_ok(rep, workers):
    """No advice names a num_workers at or below the run's own (a contradiction)."""
    bad = []
    for f in rep.get("findings", []):
        for a in f.get("advice", []):
            for n in re.findall(r"num_workers[=\s]+(\d+)", a if isinstance(a, str) else ""):
                if int(n) <= workers:
                    bad.append(a)
    return bad


with tempfile.TemporaryDirectory() as tmp:
    loop = write(tmp, "loop.py", LOOP)

    # ---- num_workers 0 then 2, two micro-batches per step: facts, advice, compare ----
    outs = []
    for w in (0, 2):
        p, m, rep, out = gsrun(tmp, "w%d" % w, loop, str(w), "24", "2", "0")
        outs.append(out)
        fx = rep.get("facts") or {}
        t.ok(p.returncode == 0 and m, f"workers={w}: the script ran", detail=p.stderr[-1500:])
        t.ok(fx.get("loader_num_workers") == w and fx.get("loader_batch_size") == 8 and
             fx.get("loader_pin_memory") is False,
             f"workers={w}: the DataLoader as iterated in the facts", detail=json.dumps(fx))
        t.ok(fx.get("step_forwards") == 2 and fx.get("step_backwards") == 2 and
             fx.get("gradient_accumulation_steps") == 2 and fx.get("autocast") is False and
             fx.get("param_dtype") == "float32",
             f"workers={w}: micro-steps, autocast and precision in the facts",
             detail=json.dumps(fx))
        if w == 2:
            t.ok(fx.get("loader_persistent_workers") is False and
                 fx.get("loader_prefetch_factor") == 2,
                 "workers=2: prefetch_factor and persistent_workers", detail=json.dumps(fx))
        bad = workers_advice_ok(rep, w)
        t.ok(not bad, f"workers={w}: no advice names num_workers <= {w}", detail=bad)
        t.ok(pyhelp.near(samples_of(rep), (m or {}).get("samples"), 0.01),
               f"workers={w}: samples = the script's count")
    p = subprocess.run([BIN, "compare", "--json", *outs], capture_output=True, text=True,
                       timeout=60, env=pyhelp.child_env(NO_COLOR="1"))
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {}
    rows = {r["key"]: r["values"] for r in doc.get("facts", [])}
    t.ok(rows.get("loader_num_workers") == [0, 2], "compare --json: loader_num_workers 0 -> 2",
         detail=p.stdout[-1500:] + p.stderr[-500:])
    cmd = rows.get("command") or ["", ""]
    t.ok(len(cmd) == 2 and " 0 24 2 0" in cmd[0] and " 2 24 2 0" in cmd[1],
         "compare --json: the command lines differ", detail=json.dumps(cmd))
    p = subprocess.run([BIN, "compare", *outs], capture_output=True, text=True, timeout=60,
                       env=pyhelp.child_env(NO_COLOR="1"))
    t.ok(re.search(r"loader_num_workers\s+0 -> 2", p.stdout) is not None and
         re.search(r"\n  command\s+\S", p.stdout) is not None,
         "compare: the setting and the command line under 'settings that differ'",
         detail=p.stdout[-2000:])

    # ---- an eval pass every 4 steps: its batches are not training samples ----
    p, m, rep, _ = gsrun(tmp, "eval", loop, "0", "24", "1", "4")
    t.ok(p.returncode == 0 and m, "eval every 4 steps: the script ran", detail=p.stderr[-1500:])
    t.eq(rep.get("steps"), 24, "eval every 4 steps: 24 steps")
    t.ok(pyhelp.near(samples_of(rep), (m or {}).get("samples"), 0.01),
           "eval every 4 steps: samples = the script's training samples (no eval batch)")

    # ---- get_batch(): no DataLoader ----
    p, m, rep, _ = gsrun(tmp, "get_batch", write(tmp, "get_batch.py", GET_BATCH))
    t.ok(p.returncode == 0 and m, "get_batch(): the script ran", detail=p.stderr[-1500:])
    t.ok(rep.get("train_samples_per_second") is not None,
         "get_batch(): train_samples_per_second present", detail=json.dumps(rep)[:1500])
    t.ok(pyhelp.near(samples_of(rep), (m or {}).get("samples"), 0.01),
           "get_batch(): samples from the forward's input batch dimension")

    # ---- gpuscope.instrument(model, opt, loader), its loader iterated or the script's own ----
    inst = write(tmp, "instrument.py", INSTRUMENT)
    for mode in ("wrap", "own"):
        p, m, rep, _ = gsrun(tmp, "instrument-" + mode, inst, mode)
        t.ok(p.returncode == 0 and m, f"instrument() {mode}: the script ran",
             detail=p.stderr[-1500:])
        t.ok(rep.get("train_samples_per_second") is not None,
             f"instrument() {mode}: train_samples_per_second present",
             detail=json.dumps(rep)[:1500])
        t.ok(pyhelp.near(samples_of(rep), (m or {}).get("samples"), 0.01),
             f"instrument() {mode}: samples = the script's count")
        t.eq((rep.get("facts") or {}).get("loader_batch_size"), 32,
             f"instrument() {mode}: the loader's batch size in the facts")

    # ---- a GPU shared with two other tenants: the run's own share ----
    gpu = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0d0e0f10-1111-2222-3333-444444444444",
           "pci": {"bus": "0x19", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
           "power": {"default_limit_w": 700}, "architecture": "hopper",
           "metrics": {"util_gpu_pct": 95, "power_w": 500}}
    scen = write(tmp, "shared.json", json.dumps({
        "scenario_version": 1, "gpus": [gpu],
        "processes": [
            {"id": "child", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"}, "gpu": 0,
             "used_memory_mib": 1075, "sm_util_pct": 12},
            {"id": "a", "pid": 999990, "gpu": 0, "name": "tenant-a", "used_memory_mib": 28672,
             "sm_util_pct": 40},
            {"id": "b", "pid": 999991, "gpu": 0, "name": "tenant-b", "used_memory_mib": 28672,
             "sm_util_pct": 40}]}))
    p, m, rep, _ = gsrun(tmp, "shared", loop, "0", "40", "1", "0", scenario=scen)
    t.ok(p.returncode == 0 and m and [g.get("index") for g in rep.get("gpus", [])] == [0],
         "shared GPU: the script ran, GPU 0 is the run's", detail=p.stderr[-1500:])
    t.ok(pyhelp.near(rep.get("gpu_peak_memory_allocated_gb"), 1075 / 1024, 0.01) and
         rep.get("gpu_peak_memory_source") == "nvml_processes",
         "shared GPU: gpu_peak_memory_allocated_gb is the run's process's 1.05 GiB",
         detail=json.dumps({k: rep.get(k) for k in rep if k.startswith("gpu")}))
    t.ok((rep.get("gpu_peak_memory_device_gb") or 0) > 50 and
         rep.get("gpu_other_processes_max") == 2,
         "shared GPU: the device's memory labelled as such, two other processes",
         detail=json.dumps({k: rep.get(k) for k in rep if k.startswith("gpu")}))
    t.ok(pyhelp.near(rep.get("gpu_run_sm_utilization_avg_percent"), 12, 0.05),
         "shared GPU: the run's own SM utilization (12 %), not the device's 95 %",
         detail=json.dumps(rep.get("gpus"))[:1500])
    adv = " ".join(a for f in rep.get("findings", []) for a in f.get("advice", []))
    t.ok("data_loading" in [f.get("id") for f in rep.get("findings", [])] and
         "pin_memory" not in adv and "nccl" not in adv,
         "shared GPU: a CPU torch job gets no CUDA advice (pin_memory, nccl)", detail=adv)
    t.ok("shared GPU" in p.stderr and "whole device" in p.stderr,
         "shared GPU: the summary labels the device-wide figures", detail=p.stderr[-1500:])

t.done()
