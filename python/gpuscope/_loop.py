"""Zero-code instrumentation of any PyTorch training loop (docs/python.md, "AUTOMATIC
INSTRUMENTATION").

Installed by gpuscope/_auto/sitecustomize.py once `torch` has been imported (under `gpuscope
run`, unless --no-auto), or by install() from code. It patches what every loop goes through,
never the script:

  data           the time inside DataLoader iterators' __next__ (_BaseDataLoaderIter), on the
                 host; the batch's leading dimension counts as its samples
  forward        outermost module calls in training mode with grad enabled (global module
                 forward pre-/post-hooks; nested modules are not counted again, and forwards
                 inside backward, e.g. activation-checkpoint recomputation, stay backward)
  backward       torch.Tensor.backward / torch.autograd.backward, outermost call; DeepSpeed's
                 engine.backward
  optimizer_step the outermost optimizer step: torch's global optimizer step hooks where they
                 exist (torch >= 2.0), else each Optimizer class's step wrapped once (when its
                 first instance is made); GradScaler.step; DeepSpeed's engine.step at a
                 gradient-accumulation boundary; accelerate's AcceleratedOptimizer.step when it
                 syncs gradients
  communication  torch.distributed collectives (synchronous calls: the caller waits, so the
                 whole call is exposed and is taken out of the phase it ran in), and every
                 DistributedDataParallel: a comm hook (the default allreduce, or the user's own
                 hook wrapped) timing each bucket from launch to completion. Bucket time that
                 overlaps the rest of backward is hidden; what runs after the last bucket was
                 launched (backward waiting for it) is exposed and taken out of backward.

A step is the time between two optimizer-step ends (the first one begins at the first data
fetch, training forward or backward). Micro-batches of gradient accumulation are inside one
step. What is in no phase (logging, checkpointing, evaluation under no_grad, the loss's
.item(), zero_grad, LR schedulers) is the step's `other` time, so that data + forward +
backward + optimizer_step + exposed communication + other = the step's wall time.

Every patch is one attribute lookup and a branch when gpuscope is not collecting, and none
may break the training: a failure inside gpuscope is reported once and ignored.
"""
import functools
import os
import sys
import time

from ._native import (PH_BACKWARD, PH_COMM, PH_COMM_EXPOSED, PH_DATA, PH_FORWARD,
                      PH_OPTIMIZER)

_perf_ns = time.perf_counter_ns

COUNTERS = ("data", "forward", "backward", "optimizer_step", "communication", "ddp_models")


class _State:
    """The process's loop tracker (one training loop per process)."""

    def __init__(self):
        self.installed = False
        self.enabled = True
        self.prof = None          # gpuscope Profiler, made at the first activity
        self.config = {}          # Profiler keyword arguments (the HF callback adds its own)
        self.facts = {}
        self.top = None           # the open top-level phase (PH_*), or None
        self.fdepth = 0           # module forward nesting
        self.opt_depth = 0
        self.samples = 0          # samples fetched in the open step
        self.counts = dict.fromkeys(COUNTERS, 0)
        self.comm = []            # DDP buckets of the open backward: (launch_ns, done_ns)
        self.exposed_ms = 0.0     # exposed communication of the open step
        self.sink = None          # a profiler the DDP hooks feed when no tracker runs (callback)
        self.finished = False
        self.warned = False
        self.torch_version = None
        self.hooks = []           # what was installed, for the outcome ("forward hooks", ...)
        self.exc = None           # the exception sys.excepthook saw


S = _State()


def _warn(msg):
    if not S.warned:
        S.warned = True
        print(f"gpuscope: {msg}; step timing may be incomplete", file=sys.stderr, flush=True)


def active():
    """True when the loop tracker is installed in this process."""
    return S.installed and S.enabled


def configure(**kw):
    """Profiler options (output_dir, run_name, framework, rank, ...) and facts for the run,
    before it starts (the HF callback calls this at on_train_begin). Returns False when the
    run already started (the hello has gone)."""
    facts = kw.pop("facts", None)
    if facts:
        S.facts.update(facts)
    S.config.update({k: v for k, v in kw.items() if v is not None})
    return S.prof is None


def _begin(step=True):
    """The profiler of the run, started at the first activity (which begins step 1)."""
    p = S.prof
    if p is not None:
        return p
    if S.finished and step:
        return None
    from . import _core, _facts
    cfg = dict(S.config)
    cfg.setdefault("output_dir", os.environ.get("GPUSCOPE_OUTPUT_DIR") or None)
    cfg.setdefault("framework", "torch")
    try:
        facts = {**S.facts, **_facts.from_process(None)}
    except Exception:
        facts = dict(S.facts)
    p = _core.Profiler(facts=facts, **cfg)
    p.data_in_step = True
    p.start()
    if step:
        p.step_begin()
    S.prof = p
    return p


def _close_top(p):
    if S.top is not None:
        p.phase_end(S.top)
        S.top = None


def boundary():
    """An optimizer step has ended: the step ends here and the next one begins."""
    p = S.prof
    if p is None:
        return
    if S.top is not None:
        _close_top(p)
    S.fdepth = 0
    p.set_exposed(S.exposed_ms)
    p.step_end(samples=S.samples)
    S.samples = 0
    S.exposed_ms = 0.0
    p.step_begin()


def _exposed(ms):
    """Communication the caller waited for: counted exposed and taken out of the phase it
    ran in (so that the phases still add up to the wall time)."""
    S.exposed_ms += ms
    p = S.prof
    if p is not None and S.top is not None:
        p.add_ms(S.top, -ms)


# ---- data ----

def _batch_size(batch):
    from ._hooks import batch_size
    try:
        return batch_size(batch)
    except Exception:
        return 0


def _wrap_next(orig):
    @functools.wraps(orig)
    def __next__(self):
        if S.top is not None or not S.enabled or S.finished:
            return orig(self)
        p = _begin()
        if p is None:
            return orig(self)
        S.top = PH_DATA
        p.phase_begin(PH_DATA)
        try:
            batch = orig(self)
        finally:
            if S.top == PH_DATA:
                p.phase_end(PH_DATA)
                S.top = None
        S.counts["data"] += 1
        S.samples += _batch_size(batch)
        return batch
    __next__.__gpuscope__ = orig
    return __next__


# ---- forward ----

def _fwd_pre(module, inputs):
    S.fdepth += 1
    if S.fdepth == 1 and S.top is None and S.enabled and module.training and _grad_on():
        p = _begin()
        if p is not None:
            S.top = PH_FORWARD
            p.phase_begin(PH_FORWARD)
    return None


def _fwd_post(module, inputs, output):
    S.fdepth -= 1
    if S.fdepth <= 0:
        S.fdepth = 0
        if S.top == PH_FORWARD:
            S.prof.phase_end(PH_FORWARD)
            S.top = None
            S.counts["forward"] += 1
    return None


_grad_on = None


# ---- backward ----

def _wrap_backward(orig):
    @functools.wraps(orig)
    def backward(*args, **kwargs):
        if S.top in (PH_BACKWARD, PH_OPTIMIZER, PH_DATA) or not S.enabled or S.finished:
            return orig(*args, **kwargs)
        p = _begin()
        if p is None:
            return orig(*args, **kwargs)
        if S.top == PH_FORWARD:  # a forward that raised never closed: it ends here
            _close_top(p)
        S.fdepth = 0
        S.comm = []
        S.top = PH_BACKWARD
        t0 = _perf_ns()
        p.phase_begin(PH_BACKWARD)
        try:
            return orig(*args, **kwargs)
        finally:
            if S.top == PH_BACKWARD:
                p.phase_end(PH_BACKWARD)
                S.top = None
            S.counts["backward"] += 1
            _ddp_exposed(p, t0, _perf_ns())
    backward.__gpuscope__ = orig
    return backward


def _ddp_exposed(p, b0, b1):
    """DDP buckets of one backward: total time into communication; the part after the last
    bucket was launched (nothing left to compute: backward waits) is exposed."""
    buckets, S.comm = S.comm, []
    if not buckets:
        return
    last_launch = max(a for a, _ in buckets)
    last_done = max(b for _, b in buckets)
    exposed = max(0.0, (min(last_done, b1) - max(last_launch, b0)) / 1e6)
    if exposed > 0:
        S.exposed_ms += exposed
        p.add_ms(PH_BACKWARD, -exposed)


# ---- optimizer ----

def _opt_enter():
    """Opens the optimizer phase of the outermost optimizer step; returns the profiler or
    None (nested, or not collecting)."""
    if S.opt_depth or not S.enabled or S.finished:
        S.opt_depth += 1
        return None
    S.opt_depth = 1
    p = _begin()
    if p is None:
        return None
    if S.top is not None:
        _close_top(p)
    S.top = PH_OPTIMIZER
    p.phase_begin(PH_OPTIMIZER)
    return p


def _opt_exit(p):
    S.opt_depth = max(0, S.opt_depth - 1)
    if p is None:
        return
    S.counts["optimizer_step"] += 1
    boundary()


def _wrap_step(orig):
    @functools.wraps(orig)
    def step(*args, **kwargs):
        p = _opt_enter()
        try:
            return orig(*args, **kwargs)
        finally:
            _opt_exit(p)
    step.__gpuscope__ = orig
    return step


def _wrap_optimizer_class(cls):
    st = cls.__dict__.get("step")
    if st is None or getattr(st, "__gpuscope__", None) is not None:
        return
    try:
        cls.step = _wrap_step(st)
    except (AttributeError, TypeError):
        pass


def _wrap_optimizer_init(orig):
    @functools.wraps(orig)
    def __init__(self, *args, **kwargs):
        orig(self, *args, **kwargs)
        try:
            for cls in type(self).__mro__:
                if cls.__dict__.get("step") is not None and cls.__module__ != "builtins":
                    _wrap_optimizer_class(cls)
                    break
        except Exception as e:
            _warn(f"optimizer step not wrapped ({e})")
    __init__.__gpuscope__ = orig
    return __init__


def _global_opt_pre(optimizer, args, kwargs):
    optimizer.__gpuscope_prof__ = _opt_enter()


def _global_opt_post(optimizer, args, kwargs):
    p = optimizer.__dict__.pop("__gpuscope_prof__", None)
    _opt_exit(p)


# ---- communication ----

_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter",
                "reduce_scatter_tensor", "broadcast", "reduce", "all_to_all",
                "all_to_all_single", "barrier", "gather", "scatter", "all_gather_object",
                "broadcast_object_list")


def _wrap_collective(fn):
    @functools.wraps(fn)
    def collective(*args, **kwargs):
        p = S.prof
        if p is None or kwargs.get("async_op") or S.top == PH_COMM or not S.enabled:
            return fn(*args, **kwargs)
        outer, S.top = S.top, PH_COMM
        t0 = _perf_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            S.top = outer
            ms = (_perf_ns() - t0) / 1e6
            p.add_ms(PH_COMM, ms)
            _exposed(ms)
            S.counts["communication"] += 1
    collective.__gpuscope_wrapped__ = fn
    return collective


def _comm_add(t0, t1):
    """One DDP bucket, launch to completion (may run on a communication thread)."""
    p = S.prof if S.installed else S.sink
    if p is None:
        return
    p.add_ms(PH_COMM, (t1 - t0) / 1e6)
    if S.installed and S.top == PH_BACKWARD:
        S.comm.append((t0, t1))
    S.counts["communication"] += 1


def _timed_hook(hook):
    """A DDP comm hook that times each bucket around hook (the default allreduce when
    None)."""
    if hook is None:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        hook = default_hooks.allreduce_hook

    def gpuscope_timed_hook(state, bucket):
        t0 = _perf_ns()
        fut = hook(state, bucket)

        def done(f):
            _comm_add(t0, _perf_ns())
            return f.value()
        return fut.then(done)
    gpuscope_timed_hook.__qualname__ = getattr(hook, "__qualname__", "allreduce_hook")
    return gpuscope_timed_hook


def _patch_ddp(ddp_cls):
    if getattr(ddp_cls, "__gpuscope_patched__", False):
        return
    orig_reg = ddp_cls.register_comm_hook
    orig_fwd = ddp_cls.forward
    orig_builtin = getattr(ddp_cls, "_register_builtin_comm_hook", None)
    orig_init = ddp_cls.__init__

    @functools.wraps(orig_init)
    def __init__(self, *args, **kwargs):
        orig_init(self, *args, **kwargs)
        S.counts["ddp_models"] += 1

    @functools.wraps(orig_reg)
    def register_comm_hook(self, state, hook):
        # The user's own hook, timed; DDP takes one hook per model, so ours steps aside.
        self.__dict__["__gpuscope_hook__"] = "user"
        return orig_reg(self, state, _timed_hook(hook))

    def _register_builtin_comm_hook(self, comm_hook_type):
        self.__dict__["__gpuscope_hook__"] = "builtin"  # C++ hook: not timed
        return orig_builtin(self, comm_hook_type)

    @functools.wraps(orig_fwd)
    def forward(self, *args, **kwargs):
        if "__gpuscope_hook__" not in self.__dict__:
            self.__dict__["__gpuscope_hook__"] = "gpuscope"
            try:
                orig_reg(self, None, _timed_hook(None))
            except Exception as e:  # a hook registered behind our back: leave it
                self.__dict__["__gpuscope_hook__"] = f"none ({e})"
        return orig_fwd(self, *args, **kwargs)

    ddp_cls.__init__ = __init__
    ddp_cls.register_comm_hook = register_comm_hook
    if orig_builtin is not None:
        ddp_cls._register_builtin_comm_hook = _register_builtin_comm_hook
    ddp_cls.forward = forward
    ddp_cls.__gpuscope_patched__ = True


def install_ddp(sink=None):
    """Times every DistributedDataParallel's buckets (a comm hook installed at its first
    forward). sink: the profiler to add the time to when the loop tracker is not installed
    (the HF callback). Returns True when DDP is available."""
    if sink is not None:
        S.sink = sink
    try:
        from torch.nn.parallel import DistributedDataParallel
        _patch_ddp(DistributedDataParallel)
        return True
    except Exception:
        return False


def _patch_dist():
    try:
        import torch.distributed as dist
        if not dist.is_available():
            return
    except Exception:
        return
    for name in _COLLECTIVES:
        fn = getattr(dist, name, None)
        if fn is not None and not hasattr(fn, "__gpuscope_wrapped__"):
            setattr(dist, name, _wrap_collective(fn))
    install_ddp()
    S.hooks.append("torch.distributed collectives, DDP comm hooks")


# ---- frameworks that own the step: DeepSpeed, accelerate ----

def patch_deepspeed(module):
    """deepspeed.runtime.engine: DeepSpeedEngine.backward is the backward phase; its step()
    is the optimizer step (and the step boundary) when it is at a gradient-accumulation
    boundary (DeepSpeed steps the optimizer inside, optimizer.step() elsewhere is a no-op)."""
    eng = getattr(module, "DeepSpeedEngine", None)
    if eng is None or getattr(eng, "__gpuscope_patched__", False):
        return
    eng.backward = _wrap_backward(eng.backward)
    orig_step = eng.step

    @functools.wraps(orig_step)
    def step(self, *args, **kwargs):
        try:
            at_boundary = bool(self.is_gradient_accumulation_boundary())
        except Exception:
            at_boundary = True
        if not at_boundary:
            return orig_step(self, *args, **kwargs)
        p = _opt_enter()
        try:
            return orig_step(self, *args, **kwargs)
        finally:
            _opt_exit(p)
    eng.step = step
    eng.__gpuscope_patched__ = True
    S.hooks.append("DeepSpeedEngine")
    configure(framework=S.config.get("framework") or "deepspeed")


def patch_accelerate(module):
    """accelerate.optimizer: AcceleratedOptimizer.step is the optimizer step when it syncs
    gradients (under accumulate() it is called every micro-batch and steps only at the
    last). Its DeepSpeed subclass's step is a no-op and stays unwrapped."""
    acc = getattr(module, "AcceleratedOptimizer", None)
    if acc is None or getattr(acc, "__gpuscope_patched__", False):
        return
    orig_step = acc.step

    @functools.wraps(orig_step)
    def step(self, *args, **kwargs):
        gs = getattr(self, "gradient_state", None)
        if gs is not None and not getattr(gs, "sync_gradients", True):
            return orig_step(self, *args, **kwargs)
        p = _opt_enter()
        try:
            return orig_step(self, *args, **kwargs)
        finally:
            _opt_exit(p)
    step.__gpuscope__ = orig_step
    acc.step = step
    acc.__gpuscope_patched__ = True
    S.hooks.append("AcceleratedOptimizer")
    if not S.config.get("framework"):
        configure(framework="accelerate")


# ---- install / finish ----

def install(torch=None):
    """Installs the patches into an imported torch (idempotent). Returns True when
    installed."""
    global _grad_on
    if S.installed:
        return True
    if os.environ.get("GPUSCOPE_AUTO", "1") == "0":
        return False
    if torch is None:
        import torch
    S.installed = True
    S.torch_version = str(getattr(torch, "__version__", "?"))
    _grad_on = torch.is_grad_enabled
    try:
        import torch.utils.data.dataloader as dl
        it = dl._BaseDataLoaderIter
        if not hasattr(it.__next__, "__gpuscope__"):
            it.__next__ = _wrap_next(it.__next__)
        S.hooks.append("DataLoader")
    except Exception as e:
        _warn(f"DataLoader not instrumented ({e})")
    try:
        from torch.nn.modules import module as mm
        mm.register_module_forward_pre_hook(_fwd_pre)
        mm.register_module_forward_hook(_fwd_post)
        S.hooks.append("module forward")
    except Exception as e:
        _warn(f"module forward not instrumented ({e})")
    try:
        torch.Tensor.backward = _wrap_backward(torch.Tensor.backward)
        torch.autograd.backward = _wrap_backward(torch.autograd.backward)
        S.hooks.append("backward")
    except Exception as e:
        _warn(f"backward not instrumented ({e})")
    try:
        import importlib
        oo = importlib.import_module("torch.optim.optimizer")
        if hasattr(oo, "register_optimizer_step_pre_hook"):
            oo.register_optimizer_step_pre_hook(_global_opt_pre)
            oo.register_optimizer_step_post_hook(_global_opt_post)
            S.hooks.append("optimizer step hooks")
        else:
            opt = torch.optim.Optimizer
            opt.__init__ = _wrap_optimizer_init(opt.__init__)
            S.hooks.append("Optimizer.step")
        try:
            from torch.cuda.amp import GradScaler
            GradScaler.step = _wrap_step(GradScaler.step)
        except Exception:
            pass
    except Exception as e:
        _warn(f"optimizer step not instrumented ({e})")
    _patch_dist()
    for name, fn in (("deepspeed.runtime.engine", patch_deepspeed),
                     ("accelerate.optimizer", patch_accelerate)):
        if name in sys.modules:
            fn(sys.modules[name])
    if not hasattr(sys.excepthook, "__gpuscope__"):
        sys.excepthook = _excepthook(sys.excepthook)
    import atexit
    atexit.register(finish)
    return True


def outcome():
    """What the tracker saw, for the end record (docs/report.md, OUTCOME)."""
    return {"torch_imported": True, "instrumented": ", ".join(S.hooks)[:128],
            **{"seen_" + k: v for k, v in S.counts.items()}}


def failure():
    """The last line of the uncaught exception's traceback ("ValueError: boom"), or None.
    Python keeps the exception it printed at top level in sys.last_value (sys.last_exc from
    3.12) before atexit handlers run, whatever sys.excepthook the script installed."""
    e = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None) or S.exc
    if e is None or isinstance(e, SystemExit):
        return None
    try:
        import traceback
        line = traceback.format_exception_only(type(e), e)[-1].strip()
    except Exception:
        line = type(e).__name__
    return line[:128] or type(e).__name__


def _excepthook(orig):
    def excepthook(et, ev, tb):
        S.exc = ev
        return orig(et, ev, tb)
    excepthook.__gpuscope__ = orig
    return excepthook


def finish(**end):
    """Ends the run: the open step (no optimizer step closed it) is dropped, the report is
    written (when output_dir is set) and returned. Also run at interpreter exit."""
    if S.finished:
        return None
    S.finished = True
    exc = failure()
    p = S.prof
    if p is None and exc is None:
        return None  # nothing ran here (a launcher, a helper process): nothing to say
    try:
        if p is None:  # failed before the first step: the run still learns why
            p = _begin(step=False)
        p.abandon_step()
        if exc is not None:
            p.outcome["exception"] = exc
        p.outcome.update(outcome())
        return p.finish(**end)
    except Exception as e:
        _warn(f"finishing the run failed ({e})")
        return None
