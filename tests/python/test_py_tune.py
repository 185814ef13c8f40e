"""A `gpuscope tune` trial's settings (GPUSCOPE_TUNE) applied inside unmodified training
scripts under `gpuscope run` (python/gpuscope/_tune.py). Real PyTorch (Debian's, CPU). Each
script reports what its own loaders hold and how many worker processes exist; checked
against that, tune-applied-rank<R>.json and the report's facts:

  "all" scope                  every DataLoader gets num_workers / prefetch_factor; the
                               workers exist; pin_memory without CUDA is an error, not applied
  "train" scope                the training loader gets the settings, an evaluation loader
                               (iterated under no_grad) keeps its own
  "train", eval iterated first a sanity evaluation with grad on is iterated first: the
                               settings move to the loader the training forwards take from,
                               from its next epoch; the first choice gets its own back
  bad JSON, unknown key        an error in the file and one stderr line; the run unchanged
  no DataLoader                the file says so (0 seen), so the driver can refuse the trial
  HF Trainer (fake)            TrainingArguments fields set before Trainer.__init__ runs:
                               the accelerator's gradient accumulation, the train DataLoader's
                               workers; an unknown field rejects them all
  2-rank DDP (torchrun, gloo)  both ranks apply the trial, each writes its own file
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
from pyhelp import FAKE_HF, PYTHON, Tap  # noqa: E402
from gsenv import BIN, free_port  # noqa: E402

t = Tap()

# argv[1]: JSON {"epochs": E, "steps": S (per epoch), "sanity": bool (an evaluation pass with
# gradients on before training), "out": path of the script's own account}
LOOP = textwrap.dedent("""
    import json, multiprocessing, os, sys, time, torch
    torch.set_num_threads(1)
    cfg = json.loads(sys.argv[1])
    class DS(torch.utils.data.Dataset):
        def __len__(self): return 64
        def __getitem__(self, i):
            time.sleep(0.0005)
            return torch.randn(16), torch.randn(1)
    def workers_now():
        return len(multiprocessing.active_children())
    train = torch.utils.data.DataLoader(DS(), batch_size=8)
    ev = torch.utils.data.DataLoader(DS(), batch_size=16)
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    acc = {"train": [], "eval": []}
    def evaluate(grad):
        model.eval()
        with torch.set_grad_enabled(grad):
            for i, (x, y) in enumerate(ev):
                if i == 0:
                    acc["eval"].append({"num_workers": ev.num_workers, "procs": workers_now()})
                model(x)
        model.train()
    if cfg.get("sanity"):
        evaluate(True)
    for e in range(cfg["epochs"]):
        for s, (x, y) in enumerate(train):
            if s == 0:
                acc["train"].append({"num_workers": train.num_workers, "procs": workers_now(),
                                     "prefetch_factor": train.prefetch_factor,
                                     "batch_size": train.batch_size})
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step(); opt.zero_grad()
            if s + 1 == cfg["steps"]:
                break
        evaluate(False)
    json.dump(acc, open(cfg["out"], "w"))
""")

HF = textwrap.dedent("""
    import json, sys, time, torch
    from transformers import Trainer, TrainingArguments
    torch.set_num_threads(1)
    class DS(torch.utils.data.Dataset):
        def __len__(self): return 48
        def __getitem__(self, i):
            return {"x": torch.randn(16), "labels": torch.randn(())}
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(16, 1)
        def forward(self, x, labels):
            return {"loss": torch.nn.functional.mse_loss(self.l(x).squeeze(-1), labels)}
    if sys.argv[1] == "-":  # no arguments: the Trainer makes its own
        trainer = Trainer(model=Net(), train_dataset=DS())
        args = trainer.args
    else:
        args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=4,
                                 logging_steps=2, dataloader_num_workers=0,
                                 dataloader_pin_memory=False)
        trainer = Trainer(model=Net(), args=args, train_dataset=DS())
    trainer.train()
    loader = trainer.callback_handler.train_dataloader
    print(json.dumps({"args_workers": args.dataloader_num_workers,
                      "args_prefetch": args.dataloader_prefetch_factor,
                      "accelerator_ga": trainer.accelerator_gradient_accumulation_steps,
                      "loader_workers": loader.num_workers,
                      "loader_prefetch": loader.prefetch_factor,
                      "steps": trainer.state.global_step,
                      "batch_size": args.per_device_train_batch_size}))
""")

DDP = textwrap.dedent("""
    import json, multiprocessing, os, sys, torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ds = torch.utils.data.TensorDataset(torch.randn(8 * 6, 16), torch.randn(8 * 6, 1))
    dl = torch.utils.data.DataLoader(ds, batch_size=8)
    model = DDP(torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    seen = None
    for x, y in dl:
        if seen is None:
            seen = {"num_workers": dl.num_workers, "procs": len(multiprocessing.active_children())}
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step(); opt.zero_grad()
    json.dump(seen, open(os.path.join(sys.argv[1], "seen-%d.json" % rank), "w"))
    dist.barrier()
    dist.destroy_process_group()
""")


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def gsrun(tmp, name, tune, cmd, pythonpath=None, run_args=()):
    """cmd under `gpuscope run` with GPUSCOPE_TUNE=tune (None: unset); (process, out dir)."""
    out = os.path.join(tmp, name)
    env = pyhelp.child_env(NO_COLOR="1", PYTHONPATH=pythonpath, GPUSCOPE_TUNE=tune)
    p = subprocess.run([BIN, "run", "--out", out, *run_args, "--", *cmd], env=env,
                       capture_output=True, text=True, timeout=180)
    return p, out


def loop(tmp, name, tune, **cfg):
    acc_path = os.path.join(tmp, name + "-acc.json")
    cfg.setdefault("epochs", 1)
    cfg.setdefault("steps", 4)
    p, out = gsrun(tmp, name, tune, [PYTHON, script, json.dumps(dict(cfg, out=acc_path))])
    return (p, load(acc_path) or {}, load(os.path.join(out, "tune-applied-rank0.json")) or {},
            load(os.path.join(out, "metrics_report.json")) or {}, out)


def tune_lines(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith("gpuscope: tune:")]


cuda = pyhelp.torch.cuda.is_available()

with tempfile.TemporaryDirectory() as tmp:
    script = write(tmp, "loop.py", LOOP)

    # ---- "all": every loader, the workers exist, pin_memory refused without CUDA ----
    p, acc, doc, rep, out = loop(tmp, "all", json.dumps(
        {"dataloader": {"num_workers": 2, "prefetch_factor": 3, "pin_memory": True}}))
    tr, ev = (acc.get("train") or [{}])[0], (acc.get("eval") or [{}])[0]
    t.ok(p.returncode == 0 and tr.get("num_workers") == 2 and tr.get("procs", 0) >= 2 and
         tr.get("prefetch_factor") == 3 and tr.get("batch_size") == 8,
         "all: the training loader runs with 2 worker processes and prefetch_factor 3, its "
         "batch size its own", detail=json.dumps(acc) + p.stderr[-1500:])
    t.ok(ev.get("num_workers") == 2 and ev.get("procs", 0) >= 2,
         "all: the evaluation loader too", detail=json.dumps(acc))
    want_applied = {"dataloader.num_workers": 2, "dataloader.prefetch_factor": 3}
    if cuda:
        want_applied["dataloader.pin_memory"] = True
    t.ok(doc.get("rank") == 0 and doc.get("framework") == "torch" and
         doc.get("scope") == "all" and doc.get("dataloaders_seen") == 2 and
         doc.get("dataloaders_changed") == 2 and doc.get("applied") == want_applied,
         "all: tune-applied-rank0.json: 2 loaders seen and changed, what was applied",
         detail=json.dumps(doc))
    pin_err = [e for e in doc.get("errors", []) if "pin_memory" in e]
    t.ok((not cuda and len(pin_err) == 1 and "no CUDA" in pin_err[0] and
          len(doc.get("errors", [])) == 1) or (cuda and not doc.get("errors")),
         "all: pin_memory=true without CUDA: one error, not applied", detail=json.dumps(doc))
    t.eq(len(tune_lines(p.stderr)), len(doc.get("errors", [])),
         "all: each error once on stderr, one 'gpuscope: tune:' line")
    fx = rep.get("facts") or {}
    t.ok(fx.get("loader_num_workers") == 2 and fx.get("loader_prefetch_factor") == 3 and
         fx.get("loader_pin_memory") is False,
         "all: the report's facts hold the effective settings", detail=json.dumps(fx))

    # ---- "train": the evaluation loader (iterated under no_grad) keeps its own ----
    p, acc, doc, rep, out = loop(tmp, "train", json.dumps(
        {"dataloader": {"num_workers": 2, "persistent_workers": True},
         "dataloader_scope": "train"}), epochs=2)
    trs, evs = acc.get("train") or [], acc.get("eval") or []
    t.ok(p.returncode == 0 and len(trs) == 2 and
         all(x.get("num_workers") == 2 and x.get("procs", 0) >= 2 for x in trs),
         "train: the training loader has 2 workers in both epochs",
         detail=json.dumps(acc) + p.stderr[-1500:])
    t.ok(len(evs) == 2 and all(x.get("num_workers") == 0 for x in evs),
         "train: the evaluation loader keeps num_workers 0", detail=json.dumps(acc))
    t.ok(doc.get("scope") == "train" and doc.get("dataloaders_seen") == 2 and
         doc.get("dataloaders_changed") == 1 and not doc.get("errors") and
         doc.get("applied") == {"dataloader.num_workers": 2,
                                "dataloader.persistent_workers": True},
         "train: the file: 2 seen, 1 changed, no error", detail=json.dumps(doc))
    fx = rep.get("facts") or {}
    t.ok(fx.get("loader_num_workers") == 2 and fx.get("loader_persistent_workers") is True,
         "train: the facts are the training loader's", detail=json.dumps(fx))

    # ---- "train" with a sanity evaluation (grad on) iterated first ----
    p, acc, doc, rep, out = loop(tmp, "sanity", json.dumps(
        {"dataloader": {"num_workers": 2}, "dataloader_scope": "train"}), epochs=2,
        sanity=True)
    trs, evs = acc.get("train") or [], acc.get("eval") or []
    t.ok(p.returncode == 0 and [x.get("num_workers") for x in trs] == [0, 2] and
         trs[1].get("procs", 0) >= 2,
         "train, eval first: the training loader gets the workers from its next epoch",
         detail=json.dumps(acc) + p.stderr[-1500:])
    t.ok([x.get("num_workers") for x in evs] == [2, 0, 0],
         "train, eval first: the evaluation loader (the first choice) gets its own back",
         detail=json.dumps(acc))
    errs = doc.get("errors") or []
    t.ok(len(errs) == 1 and "DataLoader #1" in errs[0] and "DataLoader #2" in errs[0] and
         len(tune_lines(p.stderr)) == 1,
         "train, eval first: the move is recorded and said once",
         detail=json.dumps(doc) + p.stderr[-800:])

    # ---- bad input: the trial is rejected, the run is unchanged ----
    for name, tune, says in (("badjson", '{"dataloader": {"num_workers": 2,}', "not valid JSON"),
                             ("badkey", '{"dataloader": {"batch_size": 4, "num_workers": 2}}',
                              'unknown dataloader key "batch_size"'),
                             ("badval", '{"dataloader": {"num_workers": "2"}}',
                              "integer from 0 to 1024")):
        p, acc, doc, rep, out = loop(tmp, name, tune)
        tr = (acc.get("train") or [{}])[0]
        lines = tune_lines(p.stderr)
        t.ok(p.returncode == 0 and tr.get("num_workers") == 0 and tr.get("batch_size") == 8 and
             tr.get("procs") == 0,
             f"{name}: the training runs with its own settings", detail=p.stderr[-1500:])
        t.ok(doc.get("applied") == {} and doc.get("dataloaders_changed") == 0 and
             len(doc.get("errors", [])) == 1 and says in doc["errors"][0],
             f"{name}: the file says why nothing was applied", detail=json.dumps(doc))
        t.ok(len(lines) == 1 and says in lines[0],
             f"{name}: one 'gpuscope: tune:' line on stderr", detail="\n".join(lines))

    # ---- no trial: no file ----
    p, acc, doc, rep, out = loop(tmp, "none", None)
    t.ok(p.returncode == 0 and not os.path.exists(os.path.join(out, "tune-applied-rank0.json"))
         and not tune_lines(p.stderr), "no GPUSCOPE_TUNE: no file, no line",
         detail=p.stderr[-800:])

    # ---- a loop without a DataLoader: the file says the trial reached nothing ----
    nodl = write(tmp, "nodl.py", textwrap.dedent("""
        import torch
        model = torch.nn.Linear(16, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for s in range(5):
            model(torch.randn(8, 16)).sum().backward()
            opt.step(); opt.zero_grad()
    """))
    p, out = gsrun(tmp, "nodl", json.dumps({"dataloader": {"num_workers": 2}}), [PYTHON, nodl])
    doc = load(os.path.join(out, "tune-applied-rank0.json")) or {}
    t.ok(p.returncode == 0 and doc.get("dataloaders_seen") == 0 and doc.get("applied") == {}
         and not doc.get("errors"),
         "no DataLoader: the process trained, its file says no loader was seen",
         detail=json.dumps(doc) + p.stderr[-800:])
    # ... also when the trial is stopped by SIGTERM (gpuscope tune's --stop-after-steps), the
    # file written on the signal rather than at interpreter exit
    endless = write(tmp, "nodl_endless.py", textwrap.dedent("""
        import time, torch
        model = torch.nn.Linear(16, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        while True:
            model(torch.randn(8, 16)).sum().backward()
            opt.step(); opt.zero_grad()
            time.sleep(0.01)
    """))
    p, out = gsrun(tmp, "nodl_stop", json.dumps({"dataloader": {"num_workers": 2}}),
                   [PYTHON, endless], run_args=("--stop-after-steps", "8"))
    doc = load(os.path.join(out, "tune-applied-rank0.json")) or {}
    t.ok(p.returncode == 0 and doc.get("dataloaders_seen") == 0 and doc.get("applied") == {},
         "no DataLoader, stopped by --stop-after-steps: the file is written on SIGTERM",
         detail=json.dumps(doc) + p.stderr[-800:])

    # ---- the Hugging Face Trainer (fake transformers): TrainingArguments fields ----
    hf = write(tmp, "hf.py", HF)
    p, out = gsrun(tmp, "hf", json.dumps({"training_args": {
        "dataloader_num_workers": 2, "dataloader_prefetch_factor": 3,
        "gradient_accumulation_steps": 2}}), [PYTHON, hf, os.path.join(tmp, "hf-trainer")],
        pythonpath=FAKE_HF)
    try:
        m = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        m = {}
    doc = load(os.path.join(out, "tune-applied-rank0.json")) or {}
    rep = load(os.path.join(out, "metrics_report.json")) or {}
    t.ok(p.returncode == 0 and m.get("args_workers") == 2 and m.get("loader_workers") == 2 and
         m.get("loader_prefetch") == 3 and m.get("batch_size") == 4,
         "HF: the Trainer's DataLoader is built with the trial's dataloader_num_workers and "
         "prefetch factor; the batch size is the script's", detail=json.dumps(m) + p.stderr[-1500:])
    t.ok(m.get("accelerator_ga") == 2 and m.get("steps") == 6,
         "HF: gradient_accumulation_steps (named) set before Trainer.__init__ built its "
         "accelerator: 48 samples / (4 x 2) = 6 steps", detail=json.dumps(m))
    t.ok(doc.get("framework") == "hf" and doc.get("applied") == {
        "training_args.dataloader_num_workers": 2, "training_args.dataloader_prefetch_factor": 3,
        "training_args.gradient_accumulation_steps": 2} and not doc.get("errors") and
        doc.get("dataloaders_seen") == 1,
        "HF: the file names the TrainingArguments fields", detail=json.dumps(doc))
    fx = rep.get("facts") or {}
    t.ok(fx.get("dataloader_num_workers") == 2 and fx.get("loader_num_workers") == 2 and
         fx.get("gradient_accumulation_steps") == 2,
         "HF: the facts hold the effective arguments", detail=json.dumps(fx))

    p, out = gsrun(tmp, "hfbad", json.dumps({"training_args": {
        "dataloader_num_workers": 2, "no_such_field": 1}}),
        [PYTHON, hf, os.path.join(tmp, "hfbad-trainer")], pythonpath=FAKE_HF)
    try:
        m = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        m = {}
    doc = load(os.path.join(out, "tune-applied-rank0.json")) or {}
    t.ok(p.returncode == 0 and m.get("loader_workers") == 0 and doc.get("applied") == {} and
         any("no_such_field" in e for e in doc.get("errors", [])) and
         len(tune_lines(p.stderr)) == 1,
         "HF: an unknown field rejects every training_args field, the run is unchanged",
         detail=json.dumps(m) + json.dumps(doc) + p.stderr[-800:])

    hfdir = os.path.join(tmp, "hf-noargs")
    os.makedirs(hfdir)
    env_cwd = os.getcwd()
    os.chdir(hfdir)  # the Trainer's own arguments write to ./tmp_trainer
    try:
        p, out = gsrun(tmp, "hfnoargs", json.dumps({"training_args": {
            "dataloader_num_workers": 1}}), [PYTHON, hf, "-"], pythonpath=FAKE_HF)
    finally:
        os.chdir(env_cwd)
    try:
        m = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        m = {}
    doc = load(os.path.join(out, "tune-applied-rank0.json")) or {}
    t.ok(p.returncode == 0 and m.get("loader_workers") == 1 and m.get("batch_size") == 8 and
         doc.get("applied") == {"training_args.dataloader_num_workers": 1},
         "HF: a Trainer made without arguments: the field set on the ones it made",
         detail=json.dumps(m) + json.dumps(doc) + p.stderr[-800:])

    # ---- 2-rank DDP under torchrun: both ranks apply the trial ----
    ddp = write(tmp, "ddp.py", DDP)
    seen_dir = os.path.join(tmp, "ddp-seen")
    os.makedirs(seen_dir)
    p, out = gsrun(tmp, "ddp", json.dumps({"dataloader": {"num_workers": 1}}),
                   [PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                    "--master_port", str(free_port()), "--redirects", "1", "--tee", "1",
                    "--log_dir", os.path.join(tmp, "ddp-logs"), ddp, seen_dir])
    docs = [load(os.path.join(out, "tune-applied-rank%d.json" % r)) or {} for r in (0, 1)]
    seen = [load(os.path.join(seen_dir, "seen-%d.json" % r)) or {} for r in (0, 1)]
    t.ok(p.returncode == 0 and all(s.get("num_workers") == 1 and s.get("procs", 0) >= 1
                                   for s in seen),
         "DDP: both ranks' loaders run with 1 worker process",
         detail=json.dumps(seen) + p.stderr[-1500:])
    t.ok([d.get("rank") for d in docs] == [0, 1] and
         all(d.get("applied") == {"dataloader.num_workers": 1} and
             d.get("dataloaders_changed") == 1 and not d.get("errors") for d in docs),
         "DDP: tune-applied-rank0.json and -rank1.json, each applied",
         detail=json.dumps(docs))
    files = sorted(f for f in os.listdir(out) if f.startswith("tune-applied"))
    t.eq(files, ["tune-applied-rank0.json", "tune-applied-rank1.json"],
         "DDP: the launcher (torchrun's agent) wrote no file")

pyhelp.exit_now(t.done())
