"""A training loop for `gpuscope tune`'s tests; never imports gpuscope.

    loop.py MODE STEPS      MODE: data (each sample sleeps: data-bound), compute (a bigger
                            model, no sleep), crash (exits 3 when num_workers != 0), nodl
                            (batches made in the loop: no DataLoader), hf (the fake
                            transformers Trainer, its DataLoader built from TrainingArguments,
                            loss logged every step)

Under torchrun (RANK, WORLD_SIZE set) every rank joins a gloo process group and trains a DDP
model. Batches depend only on the sample index, so every trial trains on the same data and
logs the same loss whatever its loader settings. LOOP_SLEEP: seconds per sample (0.004).

Until the package's tune hooks apply GPUSCOPE_TUNE (the contract of docs/tune.md), this
script applies it itself ("dataloader" to its DataLoader, "training_args" to its
TrainingArguments) and writes tune-applied-rank<R>.json into $GPUSCOPE_RUN_DIR as the hooks
do; LOOP_SELF_APPLY=0 leaves both to the package.
"""
import json
import os
import sys
import time

import torch

torch.set_num_threads(1)
mode, steps = sys.argv[1], int(sys.argv[2])
SLEEP = float(os.environ.get("LOOP_SLEEP", "0.004"))
RANK = int(os.environ.get("RANK", "0"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 10 ** 6

    def __getitem__(self, i):
        if mode != "compute":
            time.sleep(SLEEP)
        g = torch.Generator().manual_seed(i)
        x, y = torch.randn(32, generator=g), torch.randn(1, generator=g)
        return {"x": x, "labels": y[0]} if mode == "hf" else (x, y)


kw = {"batch_size": 8, "num_workers": 0}
args = None
if mode == "hf":
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(logging_steps=1, learning_rate=0.01, max_steps=steps)
tune = json.loads(os.environ.get("GPUSCOPE_TUNE", "{}") or "{}")
if os.environ.get("LOOP_SELF_APPLY", "1") == "1" and "GPUSCOPE_TUNE" in os.environ:
    applied = {}
    if args is not None:
        for k, v in tune.get("training_args", {}).items():
            setattr(args, k, v)
            applied["training_args." + k] = v
    elif mode != "nodl":  # a hook that sees no DataLoader applies nothing
        for k, v in tune.get("dataloader", {}).items():
            kw[k] = v
            applied["dataloader." + k] = v
    rd = os.environ.get("GPUSCOPE_RUN_DIR")
    if rd:
        seen = 0 if mode == "nodl" else 1
        doc = {"rank": RANK, "framework": "hf" if args is not None else "torch",
               "dataloaders_seen": seen, "dataloaders_changed": 1 if applied and seen else 0,
               "applied": applied, "errors": []}
        with open(os.path.join(rd, "tune-applied-rank%d.json" % RANK), "w") as f:
            json.dump(doc, f)
if args is not None:
    kw["num_workers"] = args.dataloader_num_workers
if mode == "crash" and kw["num_workers"] != 0:
    sys.exit(3)
if WORLD > 1:
    torch.distributed.init_process_group("gloo")
dl = torch.utils.data.DataLoader(Slow(), **kw)
h = 512 if mode == "compute" else 16
torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.Linear(32, h), torch.nn.ReLU(),
                                        torch.nn.Linear(h, 1))

    def forward(self, x, labels=None):
        out = self.body(x)
        if labels is None:
            return out
        return {"loss": torch.nn.functional.mse_loss(out.squeeze(-1), labels)}


model = Net()
if mode == "hf":
    Trainer(model=model, args=args, dataloader=dl).train()
    sys.exit(0)
if WORLD > 1:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
it = iter(dl) if mode != "nodl" else None
for s in range(steps):
    if it is None:
        time.sleep(SLEEP)
        x, y = torch.randn(8, 32), torch.randn(8, 1)
    else:
        x, y = next(it)
    if mode == "compute":
        for _ in range(20):
            loss = torch.nn.functional.mse_loss(model(x.repeat(16, 1)), y.repeat(16, 1))
    else:
        loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
