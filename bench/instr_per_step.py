"""Machine instructions per training step the Python package adds, counted by valgrind's
callgrind (deterministic to ~0.02 %, unlike CPU time on a shared machine).

    PYTHONPATH=build/python OMP_NUM_THREADS=1 /usr/bin/python3 bench/instr_per_step.py

The DataLoader loop of bench_callback.py (32-64-1 MLP, batch 8, SGD, one thread), 64 steps
after 64 warm ones, counted three ways in one process: bare, with the zero-code loop tracker
(gpuscope._loop) and with the explicit gpuscope.step() + 3 gpuscope.phase() blocks. It runs
itself under `valgrind --tool=callgrind --collect-atstart=no` (about two minutes: torch's
import runs under valgrind too) and counts only the loops: a small library built here with
gcc from valgrind's callgrind.h turns collection on and off (apt: valgrind, gcc).
"""
import ctypes
import glob
import os
import subprocess
import sys
import tempfile

N = 64
TRIGGER = "desc: Trigger: Client Request: "  # the label of a CALLGRIND_DUMP_STATS_AT dump
HELPER = r"""
#include <valgrind/callgrind.h>
void cg_on(void) { CALLGRIND_TOGGLE_COLLECT; }
void cg_off(void) { CALLGRIND_TOGGLE_COLLECT; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *s) { CALLGRIND_DUMP_STATS_AT(s); }
"""


def outer():
    tmp = tempfile.mkdtemp(prefix="gs-instr-")
    src, lib = os.path.join(tmp, "cg.c"), os.path.join(tmp, "cg.so")
    with open(src, "w") as f:
        f.write(HELPER)
    subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-o", lib, src], check=True)
    env = dict(os.environ, GS_CG_LIB=lib)
    subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no",
                    f"--callgrind-out-file={tmp}/cg.out", sys.executable,
                    os.path.abspath(__file__)], env=env, check=True,
                   stderr=subprocess.DEVNULL)
    got = {}
    for path in glob.glob(f"{tmp}/cg.out.*"):
        label = total = None
        with open(path) as f:
            for line in f:
                if line.startswith(TRIGGER):
                    label = line[len(TRIGGER):].strip()
                elif line.startswith("totals:"):
                    total = int(line.split()[1])
        if label and total is not None:
            got[label] = total / N
    for path in glob.glob(f"{tmp}/*"):
        os.unlink(path)
    os.rmdir(tmp)
    bare = got["bare"]
    print(f"# instructions per step (callgrind), {N} steps, DataLoader loop, bare "
          f"{bare / 1000:.1f} k")
    for k in ("zero-code", "explicit"):
        print(f"{k:<10} +{(got[k] - bare) / 1000:6.1f} k instructions a step")
    return 0


def inner():
    import torch
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_callback as bc
    import gpuscope
    from gpuscope import _loop
    cg = ctypes.CDLL(os.environ["GS_CG_LIB"])
    torch.set_num_threads(1)
    _loop.install(torch)  # the optimizer class is wrapped when its first instance is made
    _loop.configure(nvml="off", log=lambda s: None)
    model, opt, batches = bc.make()
    _loop.uninstall()
    loader = torch.utils.data.DataLoader(batches, batch_size=None)

    def region(label, fn):
        fn(N)
        cg.cg_zero()
        cg.cg_on()
        fn(N)
        cg.cg_off()
        cg.cg_dump(label.encode())

    def loop(n):
        k, it = 0, iter(loader)
        while k < n:
            try:
                x, y = next(it)
            except StopIteration:
                it = iter(loader)
                continue
            bc.train_step(model, opt, x, y)
            k += 1

    def explicit(n):
        step, phase = gpuscope.step, gpuscope.phase
        f, b, o = phase("forward"), phase("backward"), phase("optimizer_step")
        k, it = 0, iter(loader)
        while k < n:
            try:
                x, y = next(it)
            except StopIteration:
                it = iter(loader)
                continue
            with step(samples=8):
                with f:
                    loss = torch.nn.functional.mse_loss(model(x), y)
                with b:
                    loss.backward()
                with o:
                    opt.step()
            opt.zero_grad(set_to_none=True)
            k += 1

    region("bare", loop)
    _loop.install(torch)
    region("zero-code", loop)
    _loop.uninstall()
    _loop.step_aside()
    gpuscope.init(nvml="off", log=lambda s: None)
    region("explicit", explicit)
    gpuscope.finish()
    return 0


if __name__ == "__main__":
    sys.exit(inner() if os.environ.get("GS_CG_LIB") else outer())
