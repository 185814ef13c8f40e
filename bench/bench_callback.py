"""Per-step overhead of the Python package on a tiny CPU model (issue 4's benchmark).

    PYTHONPATH=build/python /usr/bin/python3 bench/bench_callback.py [--steps N] [--rounds R]

A 32-64-1 MLP, batch 8, SGD, one thread: a step is short (~0.3 ms), so the package's cost is
as visible as it can be. Variants, each timed as the wall time of N steps:
  plain      the bare loop
  ctx        the loop inside gpuscope.step() + three gpuscope.phase() blocks
  hf-noop    a Trainer-order driver (on_step_begin .. on_step_end) calling a callback that
             does nothing
  hf-gpuscope the same driver calling GpuScopeCallback (model forward/backward hooks too)
  instrument gpuscope.instrument(model, optimizer, batches), loop body unchanged
Rounds interleave the variants (plain, ctx, hf-noop, hf-gpuscope, instrument, ...) so that
drift hits all alike; the overhead per step and as a ratio is given for one round and as
the median over the rounds. Times are this thread's CPU time (time.thread_time_ns): on a
shared machine wall time mostly measures the neighbours. Log lines (every 10 steps) are formatted and discarded; no
receiver, no NVML (nvml "off"): the in-process aggregate is fed.
With --zero-code, the zero-code loop tracker (gpuscope._loop, what `gpuscope run` installs
without any import in the script) instead: the same DataLoader loop in chunks of --steps,
alternately with the tracker installed and uninstalled (nvml off, log lines discarded),
--rounds pairs; with --versus also the explicit gpuscope.step() + 3 phases on the same
DataLoader loop, interleaved in the same rounds (tracker uninstalled meanwhile).
Then micro-costs: one phase mark (enter + exit of gpuscope.phase inside an open step), one
ctypes gs_run_step call, one step record from Python (StepRec filled + gs_run_step).
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

import torch

import gpuscope
from gpuscope import _native
from gpuscope._native import NAN, NativeRun, StepRec

perf = time.thread_time_ns  # CPU time of this thread: preemption by other work not counted
wall = time.perf_counter_ns


SIZE = {"hidden": 64, "batch": 8}


def make(seed=0):
    h, bs = SIZE["hidden"], SIZE["batch"]
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(32, h), torch.nn.ReLU(), torch.nn.Linear(h, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(seed)
    batches = [(torch.randn(bs, 32, generator=g), torch.randn(bs, 1, generator=g))
               for _ in range(64)]
    return model, opt, batches


def train_step(model, opt, x, y):
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def v_plain(n):
    model, opt, batches = make()
    t0 = perf()
    for i in range(n):
        x, y = batches[i & 63]
        train_step(model, opt, x, y)
    return perf() - t0


def v_ctx(n):
    model, opt, batches = make()
    gpuscope.init(nvml="off", log=lambda s: None)
    step, phase = gpuscope.step, gpuscope.phase
    f, b, o = phase("forward"), phase("backward"), phase("optimizer_step")
    t0 = perf()
    for i in range(n):
        x, y = batches[i & 63]
        with step(samples=8):
            with f:
                loss = torch.nn.functional.mse_loss(model(x), y)
            with b:
                loss.backward()
            with o:
                opt.step()
                opt.zero_grad(set_to_none=True)
    dt = perf() - t0
    gpuscope.finish()
    return dt


class _Args:
    output_dir = None
    logging_steps = 10
    per_device_train_batch_size = 8
    gradient_accumulation_steps = 1
    run_name = None
    process_index = 0
    local_process_index = 0
    world_size = 1


class _State:
    global_step = 0
    is_world_process_zero = True


class _Noop:
    def on_train_begin(self, a, s, c, **k): pass
    def on_step_begin(self, a, s, c, **k): pass
    def on_pre_optimizer_step(self, a, s, c, **k): pass
    def on_optimizer_step(self, a, s, c, **k): pass
    def on_step_end(self, a, s, c, **k): pass
    def on_train_end(self, a, s, c, **k): pass


def _hf(n, cb):
    model, opt, batches = make()
    args, state, control = _Args(), _State(), None
    cb.on_train_begin(args, state, control, model=model, optimizer=opt)
    t0 = perf()
    for i in range(n):
        x, y = batches[i & 63]
        cb.on_step_begin(args, state, control)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        cb.on_pre_optimizer_step(args, state, control)
        opt.step()
        cb.on_optimizer_step(args, state, control)
        opt.zero_grad(set_to_none=True)
        state.global_step += 1
        cb.on_step_end(args, state, control)
    dt = perf() - t0
    cb.on_train_end(args, state, control)
    return dt


def v_hf_noop(n):
    return _hf(n, _Noop())


def v_hf_gpuscope(n):
    return _hf(n, gpuscope.GpuScopeCallback(nvml="off", log=lambda s: None))


def v_instrument(n):
    model, opt, batches = make()
    gpuscope.init(nvml="off", log=lambda s: None)
    seq = [batches[i & 63] for i in range(n)]
    ins = gpuscope.instrument(model, opt, seq)
    t0 = perf()
    for x, y in ins:
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    dt = perf() - t0
    ins.remove()
    gpuscope.finish()
    return dt


def zero_code(a):
    """The tracker's cost per step: one process, the same DataLoader loop in short chunks
    alternately with the tracker installed and uninstalled (gpuscope._loop.uninstall), so
    that the machine's drift hits both alike."""
    from gpuscope import _loop
    torch.set_num_threads(1)
    _loop.install(torch)  # the optimizer class is wrapped when its first instance is made
    _loop.configure(nvml="off", log=lambda s: None)
    model, opt, batches = make()
    _loop.uninstall()
    loader = torch.utils.data.DataLoader(batches, batch_size=None)

    def chunk(n):
        t0, k = perf(), 0
        while k < n:
            for x, y in loader:
                train_step(model, opt, x, y)
                k += 1
        return (perf() - t0) / k / 1000

    ex = None
    if a.versus:  # the explicit API on the same loop, tracker uninstalled (step_aside: no-op)
        gpuscope.init(nvml="off", log=lambda s: None)
        step, phase = gpuscope.step, gpuscope.phase
        f, b, o = phase("forward"), phase("backward"), phase("optimizer_step")

        def chunk_explicit(n):
            t0, k = perf(), 0
            while k < n:
                for x, y in loader:
                    with step(samples=8):
                        with f:
                            loss = torch.nn.functional.mse_loss(model(x), y)
                        with b:
                            loss.backward()
                        with o:
                            opt.step()
                    opt.zero_grad(set_to_none=True)
                    k += 1
            return (perf() - t0) / k / 1000
        chunk_explicit(200)
        ex = []
    chunk(200)
    on, off = [], []
    orders = (("off", "on", "explicit"), ("on", "explicit", "off"), ("explicit", "off", "on"))
    for r in range(a.rounds):
        kinds = orders[r % 3] if a.versus else (("off", "on") if r % 2 == 0 else ("on", "off"))
        for kind in kinds:
            if kind == "explicit":
                ex.append(chunk_explicit(a.steps))
            elif kind == "on":
                _loop.install(torch)
                chunk(64)  # the forward hooks settle on the root again
                on.append(chunk(a.steps))
                _loop.uninstall()
            else:
                off.append(chunk(a.steps))
    d = [x - y for x, y in zip(on, off)]
    q = statistics.quantiles(d) if len(d) >= 2 else [d[0]] * 3
    print(f"# zero-code tracker: {a.rounds} x {a.steps}-step chunks alternating, MLP "
          f"32-{a.hidden}-1, batch {a.batch}, DataLoader loop, torch {torch.__version__}, "
          f"CPU time")
    print(f"bare {statistics.median(off):.2f} us/step, tracker {statistics.median(on):.2f} "
          f"us/step; overhead median {statistics.median(d):.2f} us/step (quartiles "
          f"{q[0]:.2f} .. {q[2]:.2f}), {100 * statistics.median(d) / statistics.median(off):.1f} %; "
          f"{_loop.S.prof.steps_done if _loop.S.prof else 0} steps recorded")
    if ex:
        de = [x - y for x, y in zip(ex, off)]
        qe = statistics.quantiles(de) if len(de) >= 2 else [de[0]] * 3
        dd = [x - y for x, y in zip(on, ex)]
        print(f"explicit gpuscope.step() + 3 phases, same loop, interleaved: "
              f"{statistics.median(ex):.2f} us/step; overhead median "
              f"{statistics.median(de):.2f} us/step (quartiles {qe[0]:.2f} .. {qe[2]:.2f}); "
              f"tracker minus explicit, median of rounds {statistics.median(dd):.2f} us/step")
        gpuscope.finish()
    if a.all:
        print("    rounds (us):", " ".join(f"{x:.1f}" for x in d))
    return 0


VARIANTS = [("plain", v_plain), ("ctx", v_ctx), ("hf-noop", v_hf_noop),
            ("hf-gpuscope", v_hf_gpuscope), ("instrument", v_instrument)]
PAIRS = [("ctx", "plain"), ("instrument", "plain"), ("hf-gpuscope", "hf-noop")]


def empty_steps(n):
    """The package alone: step() + three phase() blocks around nothing."""
    gpuscope.init(nvml="off", log=lambda s: None)
    step, phase = gpuscope.step, gpuscope.phase
    f, b, o = phase("forward"), phase("backward"), phase("optimizer_step")
    t0 = perf()
    for _ in range(n):
        with step(samples=8):
            with f:
                pass
            with b:
                pass
            with o:
                pass
    dt = perf() - t0
    gpuscope.finish()
    return dt / n / 1000


def micro(n):
    out = {"ctx_step_empty_body_us": empty_steps(n // 4)}
    p = gpuscope.init(nvml="off", log=lambda s: None)
    ph = gpuscope.phase("forward")
    p.step_begin()
    t0 = perf()
    for _ in range(n):
        pass
    empty = perf() - t0
    t0 = perf()
    for _ in range(n):
        with ph:
            pass
    out["phase_mark_us"] = (perf() - t0 - empty) / n / 1000
    p.step_end()
    gpuscope.finish()

    nr = NativeRun({"nvml": "off"})
    rec = StepRec()
    rec.version, rec.step, rec.t_begin, rec.t_end = 1, 1, time.time(), time.time() + 0.001
    for i in range(6):
        rec.ms[i] = 1.0
    ref = ctypes.byref(rec)
    fn, run = nr._step, nr._run
    t0 = perf()
    for _ in range(n):
        fn(run, ref)
    out["gs_run_step_ctypes_us"] = (perf() - t0 - empty) / n / 1000
    t0 = perf()
    for k in range(n):
        rec.step = k
        rec.t_begin = 1.0
        rec.ms[1] = 2.0
        nr.step(rec)
    out["step_record_from_python_us"] = (perf() - t0 - empty) / n / 1000
    nr.finish({})
    nr.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--hidden", type=int, default=64, help="MLP width (default 64)")
    ap.add_argument("--batch", type=int, default=8, help="batch size (default 8)")
    ap.add_argument("--all", action="store_true", help="print every round's overheads")
    ap.add_argument("--zero-code", action="store_true",
                    help="the zero-code loop tracker against the bare loop (child processes)")
    ap.add_argument("--versus", action="store_true",
                    help="with --zero-code: also the explicit gpuscope.step() + phases on the "
                    "same loop, interleaved (the same chunks, the same process)")
    a = ap.parse_args()
    SIZE.update(hidden=a.hidden, batch=a.batch)
    if a.zero_code:
        return zero_code(a)
    torch.set_num_threads(1)
    if _native.load() is None:
        print(f"libgpuscope.so not loadable: {_native.load_error()}", file=sys.stderr)
        return 1
    for _, fn in VARIANTS:  # warm-up: allocator, autograd, first-call paths
        fn(200)
    per = {name: [] for name, _ in VARIANTS}
    for _ in range(a.rounds):
        for name, fn in VARIANTS:
            per[name].append(fn(a.steps) / a.steps / 1000)  # us per step
    print(f"# {a.steps} steps x {a.rounds} rounds, MLP 32-{a.hidden}-1, batch {a.batch}, "
          f"torch {torch.__version__}, python {sys.version.split()[0]}, 1 thread, CPU time")
    print(f"{'variant':<12} {'median us/step':>15} {'min':>9} {'max':>9}")
    for name, _ in VARIANTS:
        v = per[name]
        print(f"{name:<12} {statistics.median(v):15.2f} {min(v):9.2f} {max(v):9.2f}")
    print()
    print(f"{'overhead':<26} {'round 1 us':>10} {'ratio':>8} {'median us':>10} {'ratio':>8}")
    for a_name, b_name in PAIRS:
        d = [x - y for x, y in zip(per[a_name], per[b_name])]
        r = [x / y - 1 for x, y in zip(per[a_name], per[b_name])]
        print(f"{a_name + ' vs ' + b_name:<26} {d[0]:10.2f} {100 * r[0]:7.2f}% "
              f"{statistics.median(d):10.2f} {100 * statistics.median(r):7.2f}%")
        if a.all:
            print("    rounds (us):", " ".join(f"{x:.2f}" for x in d))
    print()
    m = micro(200_000)
    for k, v in m.items():
        print(f"{k:<28} {v:8.3f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
