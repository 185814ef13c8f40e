"""The plain-PyTorch API on CPU, for real: a small MLP trained with `gpuscope.step()` /
`gpuscope.phase()` and with the one-line `gpuscope.instrument()`, fed by a DataLoader made
slow on purpose (sleep in __getitem__) and by a fast one. The report's fields are checked
against wall times this test measures with its own clock around the same code, the log
lines against the brief's shapes."""
import json
import os
import re
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import Net, PreBatched, SlowDataset, Tap, loader, near  # noqa: E402

import torch  # noqa: E402
import gpuscope  # noqa: E402

t = Tap()
perf = time.perf_counter
STEP_LINES = [
    re.compile(r"^Step (\d+): GPU memory usage: n/a \(no CUDA device\)$"),
    re.compile(r"^Step (\d+): Host time: forward=(\d+\.\d)ms, backward=(\d+\.\d)ms, "
               r"optimizer_step=(\d+\.\d)ms, total_step=(\d+\.\d)ms$"),
    re.compile(r"^Step (\d+): Step busy estimate: (\d+\.\d)% \(based on host timing\)$"),
]


def explicit_loop(dl, out, explicit_data, hidden=64):
    """Trains with step()/phase(); returns the test's own measurements."""
    torch.manual_seed(0)
    model = Net(d_hidden=hidden)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    lines = []
    gpuscope.init(output_dir=out, logging_steps=5, nvml="off", log=lines.append)
    m = {"gap": [], "step": [], "fwd": [], "bwd": [], "samples": 0, "first": None, "last": None}
    it = iter(dl)
    t_end = None
    while True:
        t0 = perf()
        if explicit_data:
            with gpuscope.phase("data"):
                batch = next(it, None)
        else:
            batch = next(it, None)
        if batch is None:
            break
        x, y = batch
        with gpuscope.step(samples=len(x)):
            ts = perf()
            if m["first"] is None:
                m["first"] = ts
            elif t_end is not None:
                m["gap"].append(ts - t_end if not explicit_data else ts - t0)
            with gpuscope.phase("forward"):
                a = perf()
                loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
                m["fwd"].append(perf() - a)
            with gpuscope.phase("backward"):
                a = perf()
                loss.backward()
                m["bwd"].append(perf() - a)
            with gpuscope.phase("optimizer_step"):
                opt.step()
                opt.zero_grad()
            t_end = perf()
        m["step"].append(t_end - ts)
        m["samples"] += len(x)
        m["last"] = t_end
    rep = gpuscope.finish()
    return rep, m, lines


def check_lines(lines, n_steps, what):
    want_steps = [s for s in range(1, n_steps + 1) if s % 5 == 0]
    t.eq(len(lines), 3 * len(want_steps), f"{what}: three log lines every 5 steps")
    ok = True
    for k, line in enumerate(lines):
        mt = STEP_LINES[k % 3].match(line)
        if not mt or int(mt.group(1)) != want_steps[k // 3]:
            ok = False
            t.ok(False, f"{what}: line {k} has the brief's shape", detail=line)
            break
    if ok:
        t.ok(True, f"{what}: every line matches the brief's shape at steps {want_steps}")
    return ok


def check_report(rep, m, out, what, n_steps):
    path = os.path.join(out, "metrics_report.json")
    t.ok(os.path.exists(path), f"{what}: metrics_report.json written in output_dir")
    with open(path) as f:
        on_disk = json.load(f)
    t.ok(same(on_disk, rep), f"{what}: the file holds the report gpuscope.finish() returned",
         detail=f"file {on_disk}\nreturned {rep}")
    for k in ("train_runtime", "train_samples_per_second", "train_steps_per_second",
              "gpu_peak_memory_allocated_gb", "gpu_avg_utilization_percent",
              "gpu_max_utilization_percent", "data_loading_time_ratio",
              "communication_time_ratio"):
        if k not in rep:
            t.ok(False, f"{what}: report has the brief's field {k}")
            return
    t.ok(True, f"{what}: report has the brief's eight fields")
    t.eq(rep["steps"], n_steps, f"{what}: steps")
    wall = m["last"] - m["first"]
    t.ok(near(rep["train_runtime"], wall, 0.05, 0.003),
         f"{what}: train_runtime = measured first step begin .. last step end",
         detail=f"report {rep['train_runtime']:.4f} s, measured {wall:.4f} s")
    t.ok(near(rep["train_samples_per_second"], m["samples"] / wall, 0.06),
         f"{what}: train_samples_per_second = samples / measured wall",
         detail=f"report {rep['train_samples_per_second']}, measured {m['samples'] / wall}")
    data = sum(m["gap"])
    steps = sum(m["step"])
    want = data / (data + steps)
    got = rep["data_loading_time_ratio"]
    t.ok(near(got, want, 0.1, 0.02), f"{what}: data_loading_time_ratio = measured data / "
         f"(data + step) ({got:.3f} vs {want:.3f})")
    ph = rep["phases"]
    t.eq(ph["forward"]["count"], n_steps, f"{what}: one forward per step")
    fwd = 1000 * sum(m["fwd"]) / len(m["fwd"])
    t.ok(near(ph["forward"]["mean_ms"], fwd, 0.3, 0.15),
         f"{what}: forward mean_ms = measured ({ph['forward']['mean_ms']:.3f} vs {fwd:.3f})")
    st = 1000 * steps / len(m["step"])
    t.ok(near(ph["total_step"]["mean_ms"], st, 0.2, 0.15),
         f"{what}: total_step mean_ms = measured ({ph['total_step']['mean_ms']:.3f} vs {st:.3f})")
    t.ok(ph["total_step"]["p50_ms"] <= ph["total_step"]["p95_ms"],
         f"{what}: p50 <= p95")
    t.eq(rep["run"]["source"] if isinstance(rep.get("run"), dict) else None, "in-process",
         f"{what}: run.source is in-process")


def same(a, b):
    """Equal up to the file's 10 significant digits."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and \
            abs(a - b) <= 1e-9 * max(abs(a), abs(b), 1e-300)
    return a == b


def finding_ids(rep):
    return [f.get("id") for f in rep.get("findings", [])]


# ---- 1. explicit API, slow loader (the gap is the data time) ----
with tempfile.TemporaryDirectory() as out:
    n = 15
    dl = loader(SlowDataset(n * 4, sleep_s=0.004), batch=4)
    rep, m, lines = explicit_loop(dl, out, explicit_data=False)
    check_report(rep, m, out, "slow loader", n)
    t.ok(rep["data_loading_time_ratio"] > 0.15,
         f"slow loader: data_loading_time_ratio > 0.15 ({rep['data_loading_time_ratio']:.3f})")
    t.ok("data_loading" in finding_ids(rep), "slow loader: the data_loading finding",
         detail=finding_ids(rep))
    check_lines(lines, n, "slow loader")
    # explicit API, no loader seen: only the process's facts, and the generic advice
    fx = rep.get("facts", {})
    t.ok(fx.get("cpu_count") == len(os.sched_getaffinity(0)) and
         fx.get("torch_version") == torch.__version__ and "loader_num_workers" not in fx,
         "explicit API: process facts only (cpu_count, torch_version)", detail=fx)

# ---- 2. explicit API with a "data" phase, fast loader ----
with tempfile.TemporaryDirectory() as out:
    n = 20
    dl = loader(PreBatched(n, 256))
    rep, m, lines = explicit_loop(dl, out, explicit_data=True, hidden=512)
    check_report(rep, m, out, "fast loader", n)
    t.ok(rep["data_loading_time_ratio"] < 0.05,
         f"fast loader: data_loading_time_ratio < 0.05 ({rep['data_loading_time_ratio']:.4f})")
    t.ok("data_loading" not in finding_ids(rep), "fast loader: no data_loading finding",
         detail=finding_ids(rep))
    check_lines(lines, n, "fast loader")
    # the util line is (forward + backward + optimizer) / (data + step) of that step
    mt = [STEP_LINES[k % 3].match(x) for k, x in enumerate(lines)]
    f, b, o, s = (float(mt[1].group(i)) for i in (2, 3, 4, 5))
    t.ok(float(mt[2].group(2)) <= 100.0 and (f + b + o) <= s + 0.15,
         "fast loader: phases of a logged step fit in its total_step",
         detail=lines[:3])

# ---- 3. one line: instrument(model, optimizer, dataloader), loop body unchanged ----
for mode in ("gap", "hook"):
    with tempfile.TemporaryDirectory() as out:
        torch.manual_seed(0)
        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        n, bs = 12, 4
        dl = loader(SlowDataset(n * bs, sleep_s=0.004), batch=bs)
        lines = []
        gpuscope.init(output_dir=out, logging_steps=4, nvml="off", log=lines.append)
        bwd = []
        fetch = []
        bwd_closed = []
        prof = gpuscope.profiler()
        t_prev = perf()
        ins = gpuscope.instrument(model, opt, dl, backward=mode)
        for x, y in ins:
            a = perf()
            fetch.append(a - t_prev)
            out_ = model(x)
            b = perf()  # forward hooks done: "gap" backward starts about here
            loss = torch.nn.functional.mse_loss(out_.squeeze(-1), y)
            c = perf()  # "hook" backward starts when the gradient reaches out_
            loss.backward()
            bwd.append(perf() - (b if mode == "gap" else c))
            bwd_closed.append(prof._open[2] is None and prof._seen[2])
            opt.step()
            opt.zero_grad()
            t_prev = perf()
        rep = gpuscope.finish()
        ins.remove()
        ph = rep["phases"]
        w = f"instrument backward={mode}"
        t.eq([ph[p]["count"] for p in ("data", "forward", "backward", "optimizer_step",
                                       "total_step")], [n] * 5,
             f"{w}: data, forward, backward, optimizer and step timed once per step")
        if mode == "hook":
            t.ok(all(bwd_closed), f"{w}: backward closed by autograd's engine callback when "
                 "loss.backward() returns", detail=bwd_closed)
        else:
            t.ok(not any(bwd_closed), f"{w}: backward still open after loss.backward() (it "
                 "ends at the optimizer step)", detail=bwd_closed)
        want_bwd = 1000 * sum(bwd) / n
        got_bwd = ph["backward"]["mean_ms"]
        if mode == "gap":
            t.ok(near(got_bwd, want_bwd, 0.35, 0.1), f"{w}: backward = the test's clock from "
                 f"the forward's return to backward()'s ({got_bwd:.3f} vs {want_bwd:.3f} ms)")
        else:  # starts when the gradient reaches the output: inside loss.backward()
            t.ok(0.02 < got_bwd <= want_bwd * 1.1 + 0.02, f"{w}: backward within the test's "
                 f"clock around loss.backward() ({got_bwd:.3f} <= {want_bwd:.3f} ms)")
        want_data = 1000 * sum(fetch) / n
        t.ok(near(ph["data"]["mean_ms"], want_data, 0.1, 0.5),
             f"{w}: data mean = measured batch fetch ({ph['data']['mean_ms']:.2f} vs "
             f"{want_data:.2f} ms)")
        t.ok(rep["data_loading_time_ratio"] > 0.15 and "data_loading" in finding_ids(rep),
             f"{w}: slow loader found ({rep['data_loading_time_ratio']:.3f})")
        fx = rep.get("facts", {})
        t.eq([fx.get(k) for k in ("loader_num_workers", "loader_batch_size", "loader_pin_memory",
                                  "param_dtype", "param_count", "cpu_count")],
             [0, bs, False, "float32", sum(p.numel() for p in model.parameters()),
              len(os.sched_getaffinity(0))], f"{w}: report facts from the loader and model")
        adv = [a for f in rep["findings"] if f["id"] == "data_loading" for a in f["advice"]]
        t.ok(any("num_workers is 0 of" in a and "DataLoader(num_workers=" in a for a in adv),
             f"{w}: data_loading advice names num_workers=0", detail=adv)
        t.ok(near(rep["train_samples_per_second"] * rep["train_runtime"], n * bs, 0.001),
             f"{w}: samples counted from the batches (samples/s x runtime)",
             detail=rep["train_samples_per_second"])
        t.eq(len(lines), 3 * (n // 4), f"{w}: log lines every 4 steps")
        opt.step()  # after remove() the optimizer is usable as before
        t.ok(not model._forward_hooks and not model._forward_pre_hooks,
             f"{w}: remove() takes the model hooks off")

# ---- 4. bad phase name, finish twice ----
try:
    gpuscope.phase("fwd")
    t.ok(False, "unknown phase name raises ValueError")
except ValueError as e:
    t.ok("forward" in str(e), "unknown phase name raises ValueError naming the valid ones")
t.eq(gpuscope.finish(), None, "finish() a second time returns None")

pyhelp.exit_now(t.done())
