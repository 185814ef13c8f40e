"""A training loop for `gpuscope tune`'s tests; never imports gpuscope.

    loop.py MODE STEPS      MODE: data (each sample sleeps: data-bound), compute (a bigger
                            model, no sleep), crash (exits 3 when its DataLoader has
                            workers), nodl (batches made in the loop: no DataLoader), hf (the
                            fake transformers Trainer, which builds its DataLoader from
                            TrainingArguments; loss logged every step)

Under torchrun (RANK, WORLD_SIZE set) every rank joins a gloo process group and trains a DDP
model. Batches depend only on the sample index and the seed, so every trial trains on the same
data and logs the same loss whatever its loader settings. In data, crash and nodl modes a
batch is 8 x 16 token ids (the package counts 128 tokens a step: tokens/s). LOOP_SLEEP: seconds per sample
(0.004). The trial's settings (GPUSCOPE_TUNE) are applied by the gpuscope package's hooks under
`gpuscope run` (docs/python.md, TUNE TRIALS), which write tune-applied-rank<R>.json.
"""
import os
import sys
import time

import torch

torch.set_num_threads(1)
mode, steps = sys.argv[1], int(sys.argv[2])
SLEEP = float(os.environ.get("LOOP_SLEEP", "0.004"))
WORLD = int(os.environ.get("WORLD_SIZE", "1"))
TOKENS = ("data", "crash", "nodl")  # modes whose batches are token ids (tokens/s, MFU)


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 10 ** 6

    def __getitem__(self, i):
        if mode != "compute":
            time.sleep(SLEEP)
        g = torch.Generator().manual_seed(i)
        x, y = torch.randn(32, generator=g), torch.randn(1, generator=g)
        if mode in TOKENS:  # 16 token ids: the package counts 8 x 16 tokens a step
            return torch.randint(0, 1000, (16,), generator=g), y
        return {"x": x, "labels": y[0]} if mode == "hf" else (x, y)


kw = {"batch_size": 8, "num_workers": 0}
if WORLD > 1:
    torch.distributed.init_process_group("gloo")
dl = torch.utils.data.DataLoader(Slow(), **kw) if mode != "hf" else None
h = 512 if mode == "compute" else 16
torch.manual_seed(0)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(1000, 32)
        self.body = torch.nn.Sequential(torch.nn.Linear(32, h), torch.nn.ReLU(),
                                        torch.nn.Linear(h, 1))

    def forward(self, x, labels=None):
        if not x.is_floating_point():  # token ids: embedded, averaged over the sequence
            x = self.embed(x).mean(dim=1)
        out = self.body(x)
        if labels is None:
            return out
        return {"loss": torch.nn.functional.mse_loss(out.squeeze(-1), labels)}


model = Net()
if mode == "hf":
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(logging_steps=1, learning_rate=0.01, max_steps=steps)
    Trainer(model=model, args=args, train_dataset=Slow()).train()
    sys.exit(0)
if WORLD > 1:
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
it = iter(dl) if mode != "nodl" else None
if mode == "crash" and dl.num_workers != 0:  # the trial's value, from the first iter() on
    sys.exit(3)
for s in range(steps):
    if it is None:
        time.sleep(SLEEP)
        x, y = torch.randint(0, 1000, (8, 16)), torch.randn(8, 1)
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
