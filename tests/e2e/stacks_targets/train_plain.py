"""A plain PyTorch loop (CPU) that never imports gpuscope, timed by the zero-code tracker:
its DataLoader busy-waits 2 ms a sample (8 a batch, ~16 ms), its backward is two 1024-wide
layers (a few ms). Runs for argv[1] seconds (default 4)."""
import sys
import time

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __len__(self):
        return 1 << 20

    def __getitem__(self, i):
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < 0.002:
            pass
        return torch.ones(256), torch.ones(1)


def main():
    torch.set_num_threads(1)
    dur = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    t_end = time.perf_counter() + dur
    for x, y in DataLoader(SlowDataset(), batch_size=8):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if time.perf_counter() > t_end:
            break


main()
