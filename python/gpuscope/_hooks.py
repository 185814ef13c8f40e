"""PyTorch hooks that open and close the profiler's phases.

forward    a forward pre-hook and a forward hook on the root module; calls outside a step
           (evaluation, generation between steps) are not counted.
backward   backward="gap" (the default): from the end of a forward that autograd records
           (grad mode on) to the begin of the next phase (optimizer step, the next
           micro-batch's data or forward, or the step's end). It includes the loss
           computation outside the model and gradient clipping; with CUDA events it is the
           GPU time of exactly that stretch of the stream. It costs nothing in the backward
           pass. backward="hook": from the moment the first gradient reaches one of the
           forward's output tensors (a tensor hook on the root's outputs only) to the end of
           autograd's pass (a callback queued on the execution engine from that hook, the
           mechanism DDP uses): exact, but autograd calling into Python costs ~8-10 us per
           step (bench/bench_callback.py).
optimizer  Optimizer.register_step_pre_hook / register_step_post_hook (torch >= 2.0), else
           the instance's step method is wrapped (a bound method, so LR schedulers that wrap
           it again keep working).
data       a wrapped DataLoader times each next() on the host.
comm       torch.distributed collectives are wrapped (once, when the process group is
           initialised); a DDP model gets a comm hook that times each bucket's allreduce.
"""
import functools
import sys
import types

from ._native import PH_BACKWARD, PH_COMM, PH_DATA, PH_FORWARD, PH_OPTIMIZER

_MAX_HOOKED_OUTPUTS = 4


def _output_tensors(out, found):
    """Up to _MAX_HOOKED_OUTPUTS tensors of a module output that autograd will differentiate."""
    import torch
    if len(found) >= _MAX_HOOKED_OUTPUTS:
        return found
    if isinstance(out, torch.Tensor):
        if out.requires_grad and out.grad_fn is not None:
            found.append(out)
    elif isinstance(out, dict):  # also transformers' ModelOutput (an OrderedDict)
        for v in out.values():
            _output_tensors(v, found)
    elif isinstance(out, (list, tuple)):
        for v in out:
            _output_tensors(v, found)
    return found


def _queue_engine_callback():
    try:
        import torch
        engine = torch.autograd.Variable._execution_engine
        return engine.queue_callback
    except Exception:
        return None


class ModelHooks:
    """Forward and backward timing of one model; remove() takes the hooks off."""

    def __init__(self, prof, model, auto_begin=False, backward="gap"):
        if backward not in ("gap", "hook"):
            raise ValueError(f"gpuscope: backward={backward!r}: expected 'gap' or 'hook'")
        import torch
        self.prof = prof
        self.auto_begin = auto_begin  # a forward outside a step begins one (instrument())
        self.backward_hook = backward == "hook"
        self._grad_enabled = torch.is_grad_enabled
        self._tensor = torch.Tensor
        self._token_dtypes = (torch.int64, torch.int32)
        self.fwd_samples = 0  # training forwards' input batch dimension since the last read
        self.fwd_tokens = 0  # their tokens (forward_tokens), and mask sums still on the GPU
        self.fwd_token_pending = []
        self._handles = []
        self._queue = _queue_engine_callback()
        self._handles.append(model.register_forward_pre_hook(self._pre))
        self._handles.append(model.register_forward_hook(self._post))

    def _pre(self, module, inputs):
        if module.training and self._grad_enabled() and inputs and \
                isinstance(inputs[0], self._tensor) and inputs[0].dim() > 0:
            self.fwd_samples += int(inputs[0].shape[0])
        # tokens (forward_tokens): only when the inputs may carry them (an integer first input,
        # or keyword inputs only); keyword inputs from the module call's frame (torch < 2
        # hooks see positional ones)
        if module.training and (not inputs or (isinstance(inputs[0], self._tensor) and
                                               inputs[0].dtype in self._token_dtypes)) \
                and self._grad_enabled():
            try:
                f = sys._getframe(1)
                kw = f.f_locals.get("kwargs") if f.f_code.co_name == "_call_impl" else None
                n, _, pending = forward_tokens(inputs, kw)
                self.fwd_tokens += n
                if pending is not None:
                    self.fwd_token_pending.append(pending)
            except Exception:
                pass
        if not self.prof._in_step and self.auto_begin and module.training:
            self.prof.step_begin()
        if self.prof._in_step:
            self.prof.phase_begin(PH_FORWARD)

    def _post(self, module, inputs, output):
        prof = self.prof
        if not prof._in_step or prof._open[PH_FORWARD] is None:
            return None
        prof.phase_end(PH_FORWARD)
        if not self.backward_hook:
            if self._grad_enabled():
                prof.phase_begin(PH_BACKWARD)  # closed by whatever phase comes next
            return None
        tensors = _output_tensors(output, [])
        if tensors:
            fired = [False]
            hook = functools.partial(self._grad, fired)
            for t in tensors:
                t.register_hook(hook)
        return None

    def _grad(self, fired, grad):
        if not fired[0]:
            fired[0] = True
            prof = self.prof
            if prof._in_step:
                prof.phase_begin(PH_BACKWARD)
                if self._queue is not None:
                    self._queue(self._backward_done)
        return None

    def _backward_done(self):
        self.prof.phase_end(PH_BACKWARD)

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []


class OptimizerHooks:
    """Optimizer step timing; with end_step, the step's end is the optimizer step's end (the
    one-line instrument() mode)."""

    def __init__(self, prof, optimizer, end_step=False, samples=None, tokens=None):
        self.prof = prof
        self.end_step = end_step
        self.samples = samples  # callable giving the samples of the step, or None
        self.tokens = tokens  # the ModelHooks whose forwards' tokens end with the step, or None
        self._handles = []
        self._orig = None
        self.optimizer = optimizer
        if hasattr(optimizer, "register_step_pre_hook"):
            self._handles.append(optimizer.register_step_pre_hook(self._pre))
            self._handles.append(optimizer.register_step_post_hook(self._post))
        else:
            orig = optimizer.step
            hooks = self

            def step(self_opt, *args, **kwargs):
                hooks._pre(self_opt, args, kwargs)
                try:
                    return orig(*args, **kwargs)
                finally:
                    hooks._post(self_opt, args, kwargs)
            self._orig = orig
            optimizer.step = types.MethodType(step, optimizer)

    def _pre(self, opt, args, kwargs):
        self.prof.phase_begin(PH_OPTIMIZER)

    def _post(self, opt, args, kwargs):
        self.prof.phase_end(PH_OPTIMIZER)
        if self.end_step:
            m, tokens, pending = self.tokens, 0, None
            if m is not None and (m.fwd_tokens or m.fwd_token_pending):
                tokens, pending = m.fwd_tokens, m.fwd_token_pending or None
                m.fwd_tokens, m.fwd_token_pending = 0, []
            self.prof.step_end(samples=self.samples() if self.samples else 0, tokens=tokens,
                               token_pending=pending)

    def remove(self):
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._orig is not None:
            self.optimizer.step = self._orig
            self._orig = None


def forward_tokens(args, kwargs):
    """The tokens a forward is fed (docs/python.md, TOKENS): its input_ids-like input (the
    keyword input_ids, else the first positional argument) when it is an integer tensor of
    batch x sequence (2 dimensions, int64 or int32); with a keyword attention_mask of the same
    shape, the mask's sum (padding excluded), else batch x sequence. Returns (tokens,
    sequence length, pending): pending is None, or, for a mask on a GPU, a pinned host tensor
    its sum is being copied into without waiting (read it once the step's events completed:
    Profiler._drain); tokens is 0 then. (0, 0, None) when the input holds no tokens."""
    import torch
    ids = kwargs.get("input_ids") if kwargs else None
    if ids is None and args:
        ids = args[0]
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or \
            ids.dtype not in (torch.int64, torch.int32):
        return 0, 0, None
    b, t = int(ids.shape[0]), int(ids.shape[1])
    mask = kwargs.get("attention_mask") if kwargs else None
    if isinstance(mask, torch.Tensor) and tuple(mask.shape) == (b, t):
        if mask.device.type == "cpu":
            return int(round(float(mask.sum()))), t, None
        s = mask.sum()
        host = torch.empty((), dtype=s.dtype, pin_memory=True)
        host.copy_(s, non_blocking=True)
        return 0, t, host
    return b * t, t, None


def read_pending_tokens(pending, wait=False):
    """The sum of the pending mask sums forward_tokens handed out: their copies are done once
    the step's CUDA events completed; wait (a step timed without events) waits for the device
    first."""
    if wait:
        import torch
        torch.cuda.synchronize()
    return sum(int(round(float(h.item()))) for h in pending)


def batch_size(batch):
    """The leading dimension of the first tensor in a batch (tensor, dict, list, tuple)."""
    import torch
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0]) if batch.dim() > 0 else 1
    if isinstance(batch, dict):
        for v in batch.values():
            n = batch_size(v)
            if n:
                return n
    elif isinstance(batch, (list, tuple)):
        for v in batch:
            n = batch_size(v)
            if n:
                return n
    return 0


class TimedLoader:
    """Wraps an iterable of batches: each next() is the data phase; with begin_steps, the
    step begins once the batch is there (instrument() mode). Other attributes (dataset,
    batch_size, sampler, len()) are the wrapped loader's."""

    def __init__(self, prof, loader, begin_steps=True):
        self._prof = prof
        self._loader = loader
        self._begin_steps = begin_steps
        self.samples_in_step = 0
        self.iterated = False  # the loop iterates this wrapper (not the loader itself)

    def __iter__(self):
        self.iterated = True
        prof = self._prof
        it = iter(self._loader)
        while True:
            prof.phase_begin(PH_DATA)
            try:
                batch = next(it)
            except StopIteration:
                prof._open[PH_DATA] = None
                return
            prof.phase_end(PH_DATA)
            if self._begin_steps and not prof._in_step:
                self.samples_in_step = 0
                prof.step_begin()
            self.samples_in_step += batch_size(batch)
            yield batch

    def __len__(self):
        return len(self._loader)

    def __getattr__(self, name):
        return getattr(self._loader, name)


# ---- torch.distributed ----

_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                "reduce_scatter_tensor", "broadcast", "reduce", "all_to_all",
                "all_to_all_single", "barrier", "gather", "scatter")
_dist_prof = [None]


def _timed_collective(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        prof = _dist_prof[0]
        if (prof is None or not prof._in_step or prof._open[PH_COMM] is not None
                or kwargs.get("async_op")):
            return fn(*args, **kwargs)
        prof.phase_begin(PH_COMM)
        try:
            return fn(*args, **kwargs)
        finally:
            prof.phase_end(PH_COMM)
    wrapper.__gpuscope_wrapped__ = fn
    return wrapper


def wrap_distributed(prof):
    """Times torch.distributed collectives into prof (once per process; later calls only
    switch the profiler). Returns True when the process group is initialised. An async_op
    collective is not timed (its cost is in the wait; DDP's are timed by ddp_comm_hook)."""
    try:
        import torch.distributed as dist
    except Exception:
        return False
    if not (dist.is_available() and dist.is_initialized()):
        return False
    _dist_prof[0] = prof
    for name in _COLLECTIVES:
        fn = getattr(dist, name, None)
        if fn is not None and not hasattr(fn, "__gpuscope_wrapped__"):
            setattr(dist, name, _timed_collective(fn))
    return True


def ddp_comm_hook(prof, ddp_model):
    """Registers a comm hook on a DistributedDataParallel model that runs the default
    allreduce and adds, per bucket, the host time from launch to completion to the
    communication phase. Must be called before the first forward (DDP's rule); returns
    False when the model is not DDP or already has a hook."""
    try:
        from torch.nn.parallel import DistributedDataParallel as DDP
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    except Exception:
        return False
    if not isinstance(ddp_model, DDP):
        return False
    import time

    def hook(state, bucket):
        t0 = time.perf_counter_ns()
        fut = default_hooks.allreduce_hook(state, bucket)

        def done(f):
            prof.add_ms(PH_COMM, (time.perf_counter_ns() - t0) / 1e6)
            return f.value()
        return fut.then(done)
    try:
        ddp_model.register_comm_hook(None, hook)
    except RuntimeError:
        return False
    return True
