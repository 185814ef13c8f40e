"""Python calls per training step that the package adds (deterministic, unlike CPU time).

    PYTHONPATH=build/python OMP_NUM_THREADS=1 /usr/bin/python3 bench/calls_per_step.py

The tiny loop of bench_callback.py; sys.setprofile counts Python function calls ("call"
events) over 64 steps, after 64 warm steps, against the same loop without the package:
  zero-code  the zero-code loop tracker (gpuscope._loop) on a DataLoader loop
  explicit   gpuscope.step() + 3 gpuscope.phase() blocks on a list of batches
  instrument gpuscope.instrument(model, optimizer, batches)
Log lines (every 10 steps) are formatted and discarded, so their calls count (~0.9 a step);
the step records reach the native core 32 at a time (one push per step).
"""
import collections
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_callback as bc  # noqa: E402
import gpuscope  # noqa: E402
from gpuscope import _loop  # noqa: E402

N = 64


def counted(fn, *args):
    c = collections.Counter()

    def prof(frame, event, arg):
        if event == "call":
            c[(frame.f_code.co_filename.rsplit("/", 1)[-1], frame.f_code.co_name)] += 1
    sys.setprofile(prof)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return c


def main():
    torch.set_num_threads(1)
    _loop.install(torch)  # the optimizer class is wrapped when its first instance is made
    _loop.configure(nvml="off", log=lambda s: None)
    model, opt, batches = bc.make()
    _loop.uninstall()
    loader = torch.utils.data.DataLoader(batches, batch_size=None)

    def loader_loop(n):
        k, it = 0, iter(loader)
        while k < n:
            try:
                x, y = next(it)
            except StopIteration:
                it = iter(loader)
                continue
            bc.train_step(model, opt, x, y)
            k += 1

    def list_loop(n):
        for i in range(n):
            x, y = batches[i & 63]
            bc.train_step(model, opt, x, y)

    def explicit(n):
        step, phase = gpuscope.step, gpuscope.phase
        for i in range(n):
            x, y = batches[i & 63]
            with step():
                with phase("forward"):
                    loss = torch.nn.functional.mse_loss(model(x), y)
                with phase("backward"):
                    loss.backward()
                with phase("optimizer_step"):
                    opt.step()
            opt.zero_grad(set_to_none=True)

    def instrumented(n, it):
        k = 0
        for x, y in it:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            k += 1
            if k == n:
                break

    total = lambda c: sum(c.values())  # noqa: E731
    bare_dl = total(counted(loader_loop, N))
    _loop.install(torch)
    loader_loop(N)
    zc = counted(loader_loop, N)
    _loop.uninstall()
    bare = total(counted(list_loop, N))
    gpuscope.init(nvml="off", log=lambda s: None)
    explicit(N)
    ex = total(counted(explicit, N))
    gpuscope.finish()
    gpuscope.init(nvml="off", log=lambda s: None)
    ins = gpuscope.instrument(model, opt, [batches[i & 63] for i in range(4 * N)])
    it = iter(ins)
    instrumented(N, it)
    inst = total(counted(instrumented, N, it))
    ins.remove()
    gpuscope.finish()
    print(f"# Python calls per step added, {N} steps counted (sys.setprofile)")
    print(f"zero-code tracker   {(total(zc) - bare_dl) / N:6.2f}   (DataLoader loop alone "
          f"{bare_dl / N:.2f})")
    print(f"explicit step()+3   {(ex - bare) / N:6.2f}   (list loop alone {bare / N:.2f})")
    print(f"instrument()        {(inst - bare) / N:6.2f}")
    if "-v" in sys.argv:
        base = counted(loader_loop, N)
        for k, v in sorted((zc - base).items(), key=lambda kv: -kv[1]):
            print(f"    {v / N:6.2f}  {k[0]}:{k[1]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
