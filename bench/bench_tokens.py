"""Cost of counting a training forward's tokens (python/gpuscope/_hooks.forward_tokens and the
loop tracker's read of the module call's keyword arguments), per outermost training forward.

    PYTHONPATH=build/python OMP_NUM_THREADS=1 /usr/bin/python3 bench/bench_tokens.py [--n N]

Times (this thread's CPU time, median of 9 rounds of N calls) of: forward_tokens on a
positional int64 batch x sequence input (no mask), with a CPU attention mask passed as a
keyword (its sum read), on a float input (nothing to count: the tracker does not even call
it), and the loop tracker's whole _count_tokens (frame read + forward_tokens) called from a
module's forward pre-hook with input_ids= and attention_mask= keywords. Also the Python calls
it adds per step to a token-fed loop (sys.setprofile), for bench/RESULTS.md.
"""
import argparse
import statistics
import sys
import time

import torch

from gpuscope import _hooks, _loop

torch.set_num_threads(1)
perf = time.thread_time_ns


def per_call_ns(fn, n):
    rounds = []
    for _ in range(9):
        t0 = perf()
        for _ in range(n):
            fn()
        rounds.append((perf() - t0) / n)
    return statistics.median(rounds)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    a = ap.parse_args()
    ids = torch.randint(0, 1000, (8, 512))
    mask = torch.ones(8, 512, dtype=torch.long)
    x = torch.randn(8, 512)
    kw = {"attention_mask": mask}
    print("# ns per call, median of 9 rounds of %d" % a.n)
    print("forward_tokens(ids)                 %8.0f" % per_call_ns(
        lambda: _hooks.forward_tokens((ids,), None), a.n))
    print("forward_tokens(ids, attention_mask) %8.0f" % per_call_ns(
        lambda: _hooks.forward_tokens((ids,), kw), a.n))
    print("forward_tokens(float input)         %8.0f" % per_call_ns(
        lambda: _hooks.forward_tokens((x,), None), a.n))

    # the tracker's whole path, from a real forward pre-hook (the frame it reads is
    # Module._call_impl's)
    class M(torch.nn.Module):
        def forward(self, input_ids=None, attention_mask=None):
            return input_ids

    m = M()
    st = _loop._State()

    class P:
        _native_pending = False

    p = P()

    def pre(module, inputs):
        _loop._count_tokens(st, p, inputs)

    h = m.register_forward_pre_hook(pre)
    bare = per_call_ns(lambda: m._call_impl(input_ids=ids, attention_mask=mask), a.n // 4)
    h.remove()
    none = per_call_ns(lambda: m._call_impl(input_ids=ids, attention_mask=mask), a.n // 4)
    print("module call + _count_tokens hook    %8.0f (the call alone %.0f: +%.0f)"
          % (bare, none, bare - none))
    calls = [0]

    def prof(frame, event, arg):
        if event == "call":
            calls[0] += 1

    sys.setprofile(prof)
    _loop._count_tokens(st, p, (ids,))
    sys.setprofile(None)
    print("Python calls of one _count_tokens   %8d" % calls[0])


if __name__ == "__main__":
    main()
