"""GpuScopeCallback driven exactly as Hugging Face's Trainer drives it (fake_hf/transformers:
the event order of Trainer._inner_training_loop, gradient accumulation, on_log with the
final speed metrics before on_train_end), on a real CPU model; then the auto-injection
sitecustomize in a child process (callback added once, the shadowed sitecustomize still run,
GPUSCOPE_AUTO=0 respected)."""
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import types

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import FAKE_HF, PYROOT, PYTHON, Net, PreBatched, SlowDataset, Tap, near  # noqa: E402

sys.path.insert(0, FAKE_HF)
import torch  # noqa: E402
import transformers  # noqa: E402  (the fake one)
from transformers import Trainer, TrainingArguments  # noqa: E402

import gpuscope  # noqa: E402

t = Tap()
LINE2 = re.compile(r"^Step (\d+): Host time: forward=\d+\.\dms, backward=\d+\.\dms, "
                   r"optimizer_step=\d+\.\dms, total_step=\d+\.\dms$")

t.ok(issubclass(gpuscope.GpuScopeCallback, transformers.TrainerCallback),
     "GpuScopeCallback is a transformers.TrainerCallback when transformers imports")


def train(ds, out, ga=2, bs=4, epochs=2, rank=0, hidden=64, model=None, **cb_kw):
    torch.manual_seed(0)
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=bs,
                             gradient_accumulation_steps=ga, num_train_epochs=epochs,
                             logging_steps=5, process_index=rank)
    dl = torch.utils.data.DataLoader(ds, batch_size=bs if not isinstance(ds, PreBatched)
                                     else None)
    lines = []
    cb = gpuscope.GpuScopeCallback(log=lines.append, nvml="off", **cb_kw)
    tr = Trainer(model=model or Net(d_hidden=hidden), args=args, callbacks=[cb], dataloader=dl)
    if rank:
        tr.state.is_world_process_zero = False
    metrics = tr.train()
    return tr, cb, metrics, lines


def ids(rep):
    return [f["id"] for f in rep["findings"]]


# ---- slow loader, gradient accumulation 2 ----
with tempfile.TemporaryDirectory() as out:
    torch.manual_seed(0)
    net = Net(d_hidden=64)
    net.config = types.SimpleNamespace(_attn_implementation="sdpa")  # as an HF model has
    tr, cb, metrics, lines = train(SlowDataset(80, sleep_s=0.003, dict_items=True), out,
                                   model=net)
    steps = tr.state.global_step
    path = os.path.join(out, "metrics_report.json")
    t.ok(os.path.exists(path), "report written to args.output_dir/metrics_report.json")
    rep = json.load(open(path)) if os.path.exists(path) else {}
    t.eq(rep.get("steps"), steps, f"report steps = the Trainer's global_step ({steps})")
    t.ok(near(rep.get("train_runtime"), metrics["train_runtime"], 1e-9),
         "train_runtime is the Trainer's (from on_log before on_train_end)",
         detail=f"{rep.get('train_runtime')} vs {metrics['train_runtime']}")
    t.ok(near(rep.get("train_samples_per_second"), metrics["train_samples_per_second"], 1e-6),
         "train_samples_per_second is the Trainer's",
         detail=f"{rep.get('train_samples_per_second')} vs {metrics['train_samples_per_second']}")
    t.ok(near(rep.get("train_steps_per_second"), metrics["train_steps_per_second"], 1e-6),
         "train_steps_per_second is the Trainer's")
    t.ok(near(rep["run"].get("train_loss"), metrics["train_loss"], 1e-6),
         "run.train_loss is the Trainer's")
    t.eq(rep["run"].get("framework"), "hf", "run.framework is hf")
    ph = rep["phases"]
    t.eq([ph[p]["count"] for p in ("forward", "backward", "optimizer_step", "total_step")],
         [steps] * 4, "forward, backward, optimizer and step measured in every step")
    # first step of each epoch has its data gap from on_epoch_end/on_log: all steps have data
    t.ok(ph["data"]["count"] >= steps - 1, f"data measured for the steps ({ph['data']['count']})")
    m = tr.measured
    want = m["data_s"] / (m["data_s"] + m["step_s"])
    t.ok(near(rep["data_loading_time_ratio"], want, 0.1, 0.03),
         f"data_loading_time_ratio = the Trainer's measured fetch share "
         f"({rep['data_loading_time_ratio']:.3f} vs {want:.3f})")
    t.ok(rep["data_loading_time_ratio"] > 0.15 and "data_loading" in ids(rep),
         "slow loader: ratio > 0.15 and the data_loading finding", detail=ids(rep))
    want_step = 1000 * m["step_s"] / m["steps"]
    t.ok(near(ph["total_step"]["mean_ms"], want_step, 0.15, 0.2),
         f"total_step mean = on_step_begin..on_step_end measured by the Trainer "
         f"({ph['total_step']['mean_ms']:.3f} vs {want_step:.3f} ms)")
    t.eq(len(lines), 3 * (steps // 5), "three log lines every logging_steps (5)")
    t.ok(all(LINE2.match(x) for x in lines[1::3]), "log lines have the brief's shape",
         detail=lines[:3])
    t.eq([int(x.split(":")[0].split()[1]) for x in lines[::3]],
         [s for s in range(1, steps + 1) if s % 5 == 0], "lines carry state.global_step")
    t.ok(cb.report is not None and cb.report.get("steps") == steps,
         "callback.report holds the report")
    # the run's settings, as the training side found them, and the advice naming them
    fx = rep.get("facts", {})
    want = {"loader_num_workers": 0, "loader_pin_memory": False, "loader_batch_size": 4,
            "dataloader_num_workers": 0, "dataloader_pin_memory": True,
            "per_device_train_batch_size": 4, "gradient_accumulation_steps": 2,
            "gradient_checkpointing": False, "bf16": False, "fp16": False,
            "attn_implementation": "sdpa", "param_dtype": "float32",
            "param_count": sum(p.numel() for p in net.parameters()),
            "torch_version": torch.__version__, "cpu_count": len(os.sched_getaffinity(0))}
    t.eq({k: fx.get(k) for k in want}, want, "report facts: loader, TrainingArguments, model "
         "and process settings")
    t.ok("ddp_find_unused_parameters" not in fx and "cuda_device_name" not in fx
         and "loader_prefetch_factor" not in fx, "unknown settings stay absent from the facts",
         detail=fx)
    adv = [a for f in rep["findings"] if f["id"] == "data_loading" for a in f["advice"]]
    t.ok(any("num_workers is 0 of" in a and "dataloader_num_workers=" in a and
             "(TrainingArguments)" in a for a in adv),
         "data_loading advice names num_workers=0, spelled as TrainingArguments", detail=adv)
    t.ok(not any("pin_memory" in a for a in adv) and
         not any("DataLoader(" in a for a in adv),
         "a CPU Trainer run: no pin_memory advice, no plain-PyTorch spelling",
         detail=adv)
    att = [f for f in rep["findings"] if f["id"] == "attention_implementation"]
    t.ok((rep.get("gpu_avg_utilization_percent") or 100) >= 70 or
         (att and "flash_attention_2" in " ".join(att[0]["advice"])),
         "sdpa attention with low utilization: the attention_implementation finding",
         detail=[f["id"] for f in rep["findings"]])

# ---- facts never fail the training on an odd object ----
class _Odd:
    def __getattr__(self, name):
        raise RuntimeError("odd " + name)

    def parameters(self):
        raise RuntimeError("no parameters")


from gpuscope import _facts  # noqa: E402
odd = _Odd()
t.eq([_facts.from_args(odd), _facts.from_loader(odd), _facts.from_model(odd)], [{}, {}, {}],
     "facts readers leave out what raises")
t.eq(_facts.clean({"ok": 1, "bad key": 2, "nested": {"a": 1}, "s": "x" * 200 + "\x07",
                   "nan": float("nan"), "big": 1 << 60}),
     {"ok": 1, "s": "x" * 128}, "facts cleaned to the wire rules (keys, scalars, 128 bytes)")
t.eq(len(_facts.clean({"k%d" % i: i for i in range(40)})), 32, "at most 32 facts")

# ---- fast loader ----
with tempfile.TemporaryDirectory() as out:
    tr, cb, metrics, lines = train(PreBatched(40, 256, dict_items=True), out, ga=1, bs=256,
                                   hidden=512)
    rep = cb.report
    t.ok(rep["data_loading_time_ratio"] < 0.05 and "data_loading" not in ids(rep),
         f"fast loader: ratio < 0.05 ({rep['data_loading_time_ratio']:.4f}) and no finding",
         detail=ids(rep))

    # train() again on the same Trainer: a new run, a new report
    os.unlink(os.path.join(out, "metrics_report.json"))
    tr.state.global_step = 0
    tr.train()
    rep2 = json.load(open(os.path.join(out, "metrics_report.json")))
    t.eq([rep2.get("steps"), rep2["phases"]["forward"]["count"]], [80, 80],
         "a second train() makes a new run with its own 80 steps (not 160)")

# ---- a rank other than 0 does not write the report ----
with tempfile.TemporaryDirectory() as out:
    tr, cb, metrics, lines = train(PreBatched(10, 8, dict_items=True), out, ga=1, bs=8,
                                   epochs=1, rank=1)
    t.ok(not os.path.exists(os.path.join(out, "metrics_report.json")),
         "rank 1 (not world process zero) writes no metrics_report.json")
    t.eq(cb.report["steps"] if cb.report else None, 10, "rank 1 still aggregates its steps")

# ---- `import gpuscope` does not import transformers (seconds) for plain PyTorch users ----
p = subprocess.run([PYTHON, "-c", "import sys, gpuscope; a = 'transformers' in sys.modules; "
                    "cb = gpuscope.GpuScopeCallback; import transformers; "
                    "print(a, issubclass(cb, transformers.TrainerCallback))"],
                   env=pyhelp.child_env(PYTHONPATH=os.pathsep.join([PYROOT, FAKE_HF])),
                   capture_output=True, text=True, timeout=60)
t.eq(p.stdout.split(), ["False", "True"], "import gpuscope leaves transformers alone; "
     "GpuScopeCallback, on first use, is a TrainerCallback")
p = subprocess.run([PYTHON, "-c", "import gpuscope; cb = gpuscope.GpuScopeCallback(); "
                    "print(cb.on_some_future_event(1, 2, 3, model=None))"],
                   env=pyhelp.child_env(), capture_output=True, text=True, timeout=60)
t.eq(p.stdout.strip(), "None", "without transformers: a plain class, unknown on_* events no-ops")

# ---- auto-injection through _auto/sitecustomize.py, in a child ----
CHILD = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {tests!r})
    from pyhelp import Net, PreBatched
    import torch
    from transformers import Trainer, TrainingArguments
    from gpuscope.callback import GpuScopeCallback
    out = sys.argv[1]
    def count(tr):
        return sum(isinstance(c, GpuScopeCallback) for c in tr.callback_handler.callbacks)
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=8, logging_steps=2)
    dl = torch.utils.data.DataLoader(PreBatched(6, 8, dict_items=True), batch_size=None)
    tr = Trainer(model=Net(), args=args, dataloader=dl)
    tr2 = Trainer(model=Net(), args=args, callbacks=[GpuScopeCallback()], dataloader=dl)
    res = dict(auto=count(tr), with_own=count(tr2), shadow=os.environ.get("SHADOW_RAN"),
               sitecustomize=getattr(sys.modules.get("sitecustomize"), "__file__", None))
    tr.train()
    print(json.dumps(res))
""").format(tests=os.path.dirname(os.path.abspath(__file__)))

with tempfile.TemporaryDirectory() as tmp:
    shadow = os.path.join(tmp, "shadow")
    os.mkdir(shadow)
    with open(os.path.join(shadow, "sitecustomize.py"), "w") as f:
        f.write("import os\nos.environ['SHADOW_RAN'] = 'yes'\n")
    child = os.path.join(tmp, "child.py")
    with open(child, "w") as f:
        f.write(CHILD)
    auto = os.path.join(PYROOT, "gpuscope", "_auto")

    def run_child(extra_path, **env):
        out = os.path.join(tmp, "out%d" % len(os.listdir(tmp)))
        e = pyhelp.child_env(PYTHONPATH=os.pathsep.join([auto, PYROOT, FAKE_HF] + extra_path),
                             **env)
        p = subprocess.run([PYTHON, child, out], env=e, capture_output=True, text=True,
                           timeout=120)
        try:
            res = json.loads(p.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            res = None
        return p, res, out

    p, res, out = run_child([shadow])
    t.ok(res is not None, "child with the auto sitecustomize ran", detail=p.stderr[-2000:])
    res = res or {}
    t.eq(res.get("auto"), 1, "auto: a Trainer built without callbacks has one GpuScopeCallback")
    t.eq(res.get("with_own"), 1, "auto: a Trainer given its own GpuScopeCallback has still one")
    t.eq(res.get("shadow"), "yes", "the shadowed sitecustomize (next on sys.path) ran")
    t.eq(os.path.dirname(res.get("sitecustomize") or ""), auto,
         "the sitecustomize imported is gpuscope's")
    t.ok(os.path.exists(os.path.join(out, "metrics_report.json")),
         "auto: the injected callback wrote args.output_dir/metrics_report.json")
    t.ok(re.search(r"^Step 2: Step busy estimate: \d+\.\d% \(based on host timing\)$",
                   p.stderr, re.M) is not None,
         "auto: the log lines reach stderr without any logging setup", detail=p.stderr[-1500:])

    p, res, out = run_child([shadow], GPUSCOPE_AUTO="0")
    t.eq((res or {}).get("auto"), 0, "GPUSCOPE_AUTO=0: no callback injected")
    t.eq((res or {}).get("shadow"), "yes", "GPUSCOPE_AUTO=0: the shadowed sitecustomize ran")

pyhelp.exit_now(t.done())
