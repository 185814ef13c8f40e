"""What applying a `gpuscope tune` trial costs the training process (python/gpuscope/_tune.py).

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_tune_hooks.py [--loaders N] [--rounds R]

The trial's DataLoader settings are applied in a wrapper of DataLoader.__iter__, so the cost
is per iterator, not per batch (per batch the tracker reads one flag, set only while a "train"
trial has not yet seen its first training forward). Measured here, with the zero-code tracker
installed (nvml off, no receiver) and GPUSCOPE_TUNE={"dataloader": {"num_workers": 0}} (the
loaders' own value: no worker start-up, which would dwarf everything else):

  first iter   iter() of a DataLoader never iterated before: the settings applied and
               tune-applied-rank0.json rewritten (a fresh file, fsync, rename) in a temporary
               $GPUSCOPE_RUN_DIR
  next iter    iter() of a DataLoader already seen: nothing changes, nothing written
  bare         iter() with DataLoader.__iter__ unwrapped (the same process, interleaved)

Wall time (the file's fsync is I/O), medians over R rounds of N loaders each, with the
quartiles.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

wall = time.perf_counter_ns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loaders", type=int, default=50, help="loaders per round (default 50)")
    ap.add_argument("--rounds", type=int, default=15, help="rounds (default 15)")
    a = ap.parse_args()
    run_dir = tempfile.mkdtemp(prefix="gs-bench-tune.")
    os.chmod(run_dir, 0o755)
    os.environ["GPUSCOPE_RUN_DIR"] = run_dir
    os.environ["GPUSCOPE_TUNE"] = json.dumps({"dataloader": {"num_workers": 0}})
    import torch
    from gpuscope import _loop, _tune
    torch.set_num_threads(1)
    if not _loop.install(torch):
        sys.exit("bench_tune_hooks: the tracker did not install (GPUSCOPE_AUTO=0?)")
    _loop.S.config.update(nvml="off", log=lambda line: None)
    dl_cls = torch.utils.data.DataLoader
    wrapped = dl_cls.__iter__
    bare_iter = wrapped.__gpuscope__
    ds = torch.utils.data.TensorDataset(torch.randn(64, 8))
    res = {"first": [], "next": [], "bare": []}
    for _ in range(a.rounds):
        loaders = [dl_cls(ds, batch_size=8) for _ in range(a.loaders)]
        dl_cls.__iter__ = wrapped
        t0 = wall()
        for dl in loaders:
            iter(dl)
        res["first"].append((wall() - t0) / a.loaders / 1e3)
        t0 = wall()
        for dl in loaders:
            iter(dl)
        res["next"].append((wall() - t0) / a.loaders / 1e3)
        dl_cls.__iter__ = bare_iter
        fresh = [dl_cls(ds, batch_size=8) for _ in range(a.loaders)]
        t0 = wall()
        for dl in fresh:
            iter(dl)
        res["bare"].append((wall() - t0) / a.loaders / 1e3)
    dl_cls.__iter__ = wrapped
    doc = _tune.document()
    print(f"# {a.rounds} rounds x {a.loaders} loaders; file rewritten "
          f"{doc['dataloaders_seen']} times; torch {torch.__version__}")
    print(f"{'':12} {'median us':>10} {'q1':>8} {'q3':>8}")
    for k, label in (("first", "first iter"), ("next", "next iter"), ("bare", "bare")):
        q = statistics.quantiles(res[k], n=4)
        print(f"{label:12} {statistics.median(res[k]):10.1f} {q[0]:8.1f} {q[2]:8.1f}")
    for name in os.listdir(run_dir):
        os.unlink(os.path.join(run_dir, name))
    os.rmdir(run_dir)


if __name__ == "__main__":
    main()
