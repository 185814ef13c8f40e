"""A plain PyTorch training loop for `gpuscope tune`'s tests; never imports gpuscope.

    loop.py MODE STEPS      MODE: data (each sample sleeps: data-bound), compute (a bigger
                            model, no sleep), crash (exits 3 when num_workers != 0), nodl
                            (batches made in the loop: no DataLoader)

Until the package's tune hooks apply GPUSCOPE_TUNE (the contract of docs/tune.md), this
script applies it to its own DataLoader and writes tune-applied-rank0.json into
$GPUSCOPE_RUN_DIR as the hooks would; LOOP_SELF_APPLY=0 leaves both to the package.
"""
import json
import os
import sys
import time

import torch

torch.set_num_threads(1)
mode, steps = sys.argv[1], int(sys.argv[2])
SLEEP = float(os.environ.get("LOOP_SLEEP", "0.004"))


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 10 ** 6

    def __getitem__(self, i):
        if mode != "compute":
            time.sleep(SLEEP)
        return torch.randn(32), torch.randn(1)


kw = {"batch_size": 8, "num_workers": 0}
tune = json.loads(os.environ.get("GPUSCOPE_TUNE", "{}") or "{}")
if os.environ.get("LOOP_SELF_APPLY", "1") == "1" and "GPUSCOPE_TUNE" in os.environ:
    applied = {}
    for k, v in tune.get("dataloader", {}).items():
        kw[k] = v
        applied["dataloader." + k] = v
    rd = os.environ.get("GPUSCOPE_RUN_DIR")
    if rd:
        seen = 0 if mode == "nodl" else 1
        doc = {"rank": 0, "framework": "torch", "dataloaders_seen": seen,
               "dataloaders_changed": 1 if applied and seen else 0, "applied": applied, "errors": []}
        with open(os.path.join(rd, "tune-applied-rank0.json"), "w") as f:
            json.dump(doc, f)
if mode == "crash" and kw["num_workers"] != 0:
    sys.exit(3)
dl = torch.utils.data.DataLoader(Slow(), **kw)
h = 512 if mode == "compute" else 16
model = torch.nn.Sequential(torch.nn.Linear(32, h), torch.nn.ReLU(), torch.nn.Linear(h, 1))
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
