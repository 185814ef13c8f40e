"""A plain PyTorch loop (CPU) whose DataLoader is slow on purpose: __getitem__ busy-waits
4 ms a sample, 16 samples a batch, the model step takes ~1 ms. Instrumented by
gpuscope.instrument(); runs for argv[1] seconds (default 4)."""
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset

import gpuscope


class SlowDataset(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.004:
            pass
        return torch.ones(16), torch.ones(1)


def main():
    dur = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    mode = sys.argv[2] if len(sys.argv) > 2 else "data"
    model = torch.nn.Linear(16, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dl = DataLoader(SlowDataset(), batch_size=16 if mode == "data" else 1)
    a = torch.ones(400, 400)
    t_end = time.perf_counter() + dur
    for x, y in gpuscope.instrument(model, opt, dl):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if mode == "sync":
            for _ in range(8):
                v = (a @ a).sum().item()  # host sync: the wait is on this line
        if time.perf_counter() > t_end:
            break
    if mode == "hang":
        stuck_collective()
    gpuscope.finish()


def stuck_collective():
    import threading
    threading.Event().wait(float(sys.argv[3]) if len(sys.argv) > 3 else 6)


main()
