"""Evaluation batches are not the training's data time (zero-code tracker, gpuscope/_loop.py):
unmodified PyTorch scripts (real torch, Debian's, CPU) under `gpuscope run`, each with a slow
evaluation DataLoader passed every 3 optimizer steps. Each script times its own training
fetches (perf_counter around next()) and its steps; the report is checked against that.

  hf        the HF Trainer's order: the eval batch is fetched with grad enabled, the model is
            put in eval mode and its forward runs under no_grad
  nograd    the whole eval loop under torch.no_grad()
  teacher   a frozen teacher (eval mode, no_grad) takes each training batch before the student:
            the training fetch still counts as data

Checked: phases.data.total_ms within 15 % (+ 10 ms) of the script's own training-fetch time
(the script's clock also holds the tracker's few microseconds a fetch, and each step's first
clock read differs by the wrapper's call), data_loading_time_ratio within 20 % of the
script's training fetch time over its first-fetch-to-last-optimizer-step wall time (the report
sums its steps, which begin at the first fetch and end at each optimizer step's end), and no
data_loading finding (the script's ratio is ~5 %; with eval fetch counted as data it is ~40 %).
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import PYTHON, Tap  # noqa: E402
from gsenv import BIN  # noqa: E402

t = Tap()

# argv[1]: hf | nograd | teacher
LOOP = textwrap.dedent("""
    import json, sys, time, torch
    torch.set_num_threads(1)
    mode = sys.argv[1]
    class DS(torch.utils.data.Dataset):
        def __init__(self, sleep_s): self.sleep_s = sleep_s
        def __len__(self): return 1000000
        def __getitem__(self, i):
            time.sleep(self.sleep_s)
            return torch.randn(32), torch.randn(1)
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(32, 64), torch.nn.Linear(64, 1)
        def forward(self, x):
            time.sleep(0.025)
            return self.l2(torch.relu(self.l1(x)))
    dl = torch.utils.data.DataLoader(DS(0.0012), batch_size=4)    # ~5 ms a batch
    ev = torch.utils.data.DataLoader(DS(0.010), batch_size=4)     # ~40 ms a batch
    model, teacher = Net(), Net().eval()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    it = iter(dl); fetch = 0.0; t_first = t_last = None
    for s in range(24):
        t0 = time.perf_counter()
        x, y = next(it)
        t1 = time.perf_counter()
        fetch += t1 - t0
        t_first = t0 if t_first is None else t_first
        if mode == "teacher":
            with torch.no_grad():
                teacher(x)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step(); opt.zero_grad()
        t_last = time.perf_counter()
        if s % 3 == 2 and s < 23 and mode != "teacher":
            model.eval()
            if mode == "hf":
                for i, (ex, ey) in enumerate(ev):
                    with torch.no_grad():
                        model(ex)
                    if i == 2:
                        break
            else:
                with torch.no_grad():
                    for i, (ex, ey) in enumerate(ev):
                        model(ex)
                        if i == 2:
                            break
            model.train()
    print(json.dumps({"fetch_s": fetch, "wall_s": t_last - t_first}))
""")


def gsrun(tmp, name, script, *args):
    out = os.path.join(tmp, name)
    p = subprocess.run([BIN, "run", "--out", out, "--interval", "0.2", "--", PYTHON, script,
                        *args], env=pyhelp.child_env(NO_COLOR="1"),
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
    return p, measured, rep


with tempfile.TemporaryDirectory(prefix="gs-py-evaldata.") as tmp:
    loop = os.path.join(tmp, "loop.py")
    with open(loop, "w") as f:
        f.write(LOOP)
    for mode in ("hf", "nograd", "teacher"):
        p, m, rep = gsrun(tmp, mode, loop, mode)
        t.ok(p.returncode == 0 and m and rep, f"{mode}: the script ran",
             detail=p.stderr[-1500:])
        if not (m and rep):
            continue
        data = (rep.get("phases") or {}).get("data") or {}
        got, want = data.get("total_ms"), m["fetch_s"] * 1000
        t.ok(isinstance(got, (int, float)) and abs(got - want) <= 0.15 * want + 10,
             f"{mode}: data time {got} ms = the script's training fetches {want:.1f} ms "
             f"(15 % + 10 ms)")
        ratio, own = rep.get("data_loading_time_ratio"), m["fetch_s"] / m["wall_s"]
        t.ok(isinstance(ratio, (int, float)) and abs(ratio - own) <= 0.2 * own,
             f"{mode}: data_loading_time_ratio {ratio} = the script's {own:.4f} (20 %)")
        ids = [f.get("id") for f in rep.get("findings") or []]
        t.ok("data_loading" not in ids, f"{mode}: no data_loading finding", detail=str(ids))

t.done()
