"""Zero-code instrumentation of any PyTorch training loop (docs/python.md, "AUTOMATIC
INSTRUMENTATION").

Installed by gpuscope/_auto/sitecustomize.py once `torch` has been imported (under `gpuscope
run`, unless --no-auto), or by install() from code. It patches what every loop goes through,
never the script:

  data           the time inside DataLoader iterators' __next__ (_BaseDataLoaderIter), on the
                 host, of the batches the training takes: a fetch's time is held until a
                 training forward counts it as data; a batch that only evaluation forwards
                 (model.eval() or no grad) took before the next fetch or the step's end is an
                 evaluation batch and its time stays in `other`, as does a fetch made with
                 grad disabled (an eval loop under no_grad / inference_mode). A batch no
                 forward took counts as data. The batch's leading dimension counts as its
                 samples
  forward        outermost module calls in training mode with grad enabled (global module
                 forward pre-/post-hooks; nested modules are not counted again, and forwards
                 inside backward, e.g. activation-checkpoint recomputation, stay backward);
                 their token input counts as the step's tokens (_hooks.forward_tokens), or
                 the HF Trainer's num_input_tokens_seen where the callback handed its state
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

from ._hooks import batch_size as _hooks_batch_size
from ._hooks import forward_tokens as _forward_tokens
from ._native import NAN, PH_BACKWARD, PH_COMM, PH_DATA, PH_FORWARD, PH_OPTIMIZER

_perf_ns = time.perf_counter_ns

ROOT_STABLE_STEPS = 3
OPEN_AFTER_S = 10.0  # the hello goes at the first step's end, or this far into it
COUNTERS = ("data", "forward", "backward", "optimizer_step", "communication", "ddp_models")
# (_State's n_<counter> attributes: one attribute increment on the hot paths, not a dict's)


class _State:
    """The process's loop tracker (one training loop per process)."""

    def __init__(self):
        self.installed = False
        self.enabled = True
        self.prof = None          # gpuscope Profiler, made at the first activity
        self.config = {}          # Profiler keyword arguments (the HF callback adds its own)
        self.facts = {}
        self.top = None           # the open top-level phase (PH_*), or None
        self.t_top = 0            # its start (host ns)
        self.fdepth = 0           # module forward nesting
        self.opt_depth = 0
        self.samples = 0          # training samples of the open step
        self.tokens = 0           # tokens the open step's training forwards were fed
        self.token_pending = []   # their mask sums still on the GPU (_hooks.forward_tokens)
        self.hf_state = None      # the HF Trainer's state (num_input_tokens_seen), from the callback
        self.hf_tokens_seen = 0   # its count at the previous step's end
        self.batch_n = 0          # the last fetched batch's samples, until a forward trains on it
        self.fetch_ns = 0         # fetch time held until a training forward takes the batch
        self.fetch_eval = False   # an evaluation forward took the held batch
        self.batch_facts = None   # its loader's settings (no reference to the iterator)
        self.loader_fed = False   # a DataLoader's batches feed the training forwards
        self.seen = {}            # settings the first step showed (facts, sent in the hello)
        for k in COUNTERS:        # what the hooks saw, for the outcome (outcome())
            setattr(self, "n_" + k, 0)
        self.comm = []            # DDP buckets of the open backward: (launch_ns, done_ns)
        self.exposed_ms = 0.0     # exposed communication of the open step
        self.sink = None          # a profiler the DDP hooks feed when no tracker runs (callback)
        self.finished = False
        self.warned = False
        self.torch_version = None
        self.hooks = []           # what was installed, for the outcome ("forward hooks", ...)
        self.exc = None           # the exception sys.excepthook saw
        self.patched = []         # (owner, attribute, original) for uninstall()
        self.global_opt = []      # torch >= 2 global optimizer hook handles
        self.opt_classes = set()  # optimizer classes whose step was wrapped (re-install)
        # forward hooks: global (every module call) until the same root modules have been
        # the outermost training forwards for ROOT_STABLE_STEPS steps, then on those roots
        # only; back to global when a step has a backward but no forward
        self.global_fwd = None    # the global hooks' handles while they are installed
        self.root_fwd = []        # per-root hook handles
        self.step_roots = set()
        self.prev_roots = None
        self.stable = 0
        self.step_fwd = 0
        self.step_bwd = 0
        # a tune trial scoped to the training DataLoader (gpuscope/_tune.py): until a training
        # forward has shown which loader feeds it, each batch's loader index
        self.tune_watch = False
        self.batch_tag = 0


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
    state = kw.pop("hf_state", None)
    if state is not None:
        S.hf_state = state
        S.hf_tokens_seen = _hf_tokens(state)
    S.config.update({k: v for k, v in kw.items() if v is not None})
    return S.prof is None


def _hf_tokens(state):
    """The Trainer's num_input_tokens_seen (0 when it does not count: the argument
    include_num_input_tokens_seen is off, or an older transformers)."""
    try:
        v = getattr(state, "num_input_tokens_seen", 0) or 0
        return int(v) if v >= 0 else 0
    except Exception:
        return 0


def rank_share(n, rank, world_size):
    """This rank's share of n tokens counted over world_size processes: n // world_size, one
    more for the lowest n % world_size ranks, so that the ranks' shares add up to n."""
    w = world_size if world_size and world_size > 1 else 1
    r = rank if rank and 0 <= rank < w else 0
    return n // w + (1 if r < n % w else 0)


def _step_tokens(st):
    """The closing step's tokens: the Trainer's own count where it keeps one (its delta since
    the previous step's end; it counts a step's batches before their forwards, gathered over
    every process: this rank's share of it), else what the training forwards were fed."""
    if st.hf_state is not None:
        seen = _hf_tokens(st.hf_state)
        if seen > st.hf_tokens_seen:
            n, st.hf_tokens_seen = seen - st.hf_tokens_seen, seen
            st.token_pending = []
            p = st.prof
            return rank_share(n, p.rank, p.world_size)
    return st.tokens


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
    p.defer_native = True  # the hello waits for the first step's settings (_open_run)
    p.start()
    if p._native_pending:
        import threading
        timer = threading.Timer(OPEN_AFTER_S, _open_late, args=(p,))
        timer.daemon = True
        timer.start()
    if step:
        p.step_begin()
    S.prof = p
    return p


# The top-level phases (forward, backward, optimizer) are timed here on the host (the
# Profiler's accumulators, no phase bookkeeping: one of them is open at a time by
# construction), through the Profiler's CUDA events on a GPU.

def _open_run(p, ended=True):
    """Sends the run's hello once its first step has ended (ended), or from a timer once it
    has run OPEN_AFTER_S (a first step that hangs still has its run; its micro-batches are
    then not known): the settings the tracker saw (S.seen) join the facts, below those the
    code gave."""
    st = S
    seen = dict(st.seen)
    if ended and st.step_bwd:  # micro-batches (forward + backward) per optimizer step
        seen["step_forwards"] = st.step_fwd
        seen["step_backwards"] = st.step_bwd
        seen.setdefault("gradient_accumulation_steps", st.step_bwd)
    if p.world_size > 1:
        seen["world_size"] = p.world_size
    try:
        p.facts = {**seen, **p.facts}
    except Exception:
        pass
    p.open_native(flush=ended)


def _open_late(p):
    try:
        if p._native_pending and not S.finished:
            _open_run(p, ended=False)
    except Exception as e:
        _warn(f"the run's hello failed ({e})")


def _note_forward(p, module, inputs):
    """What a training forward of the first step shows: the loader that fed it, autocast,
    the model's parameters."""
    st = S
    seen = st.seen
    try:
        from . import _facts
        if st.batch_facts and "loader_batch_size" not in seen:
            seen.update(st.batch_facts)
        if "autocast" not in seen:
            torch = sys.modules["torch"]
            if torch.is_autocast_enabled():
                seen["autocast"], seen["autocast_dtype"] = True, str(
                    torch.get_autocast_gpu_dtype()).replace("torch.", "")
            elif torch.is_autocast_cpu_enabled():
                seen["autocast"], seen["autocast_dtype"] = True, str(
                    torch.get_autocast_cpu_dtype()).replace("torch.", "")
            else:
                seen["autocast"] = False
            for k, v in _facts.from_model(getattr(module, "module", module)).items():
                seen.setdefault(k, v)
    except Exception:
        pass


def _close_top(p):
    st = S
    ph = st.top
    if ph is None:
        return
    st.top = None
    if p.cuda:
        p.phase_end(ph)
    else:
        p._acc[ph] += (_perf_ns() - st.t_top) / 1e6
        p._seen[ph] = True


def boundary():
    """An optimizer step has ended: the step ends here and the next one begins (one clock
    read: the open phase's end, the step's end and the next step's begin)."""
    st = S
    p = st.prof
    if p is None:
        return
    ph = st.top
    if ph is not None:
        st.top = None
        if p.cuda:
            p.phase_end(ph)
            now = _perf_ns()
        else:  # _close_top, inline
            now = _perf_ns()
            p._acc[ph] += (now - st.t_top) / 1e6
            p._seen[ph] = True
    else:
        now = _perf_ns()
    st.fdepth = 0
    if st.fetch_ns:
        if not st.fetch_eval:  # fetched, no forward took it: data
            _fetch_to_data(p)
        st.fetch_ns, st.fetch_eval = 0, False  # else the step's last batch was evaluation's
    p._exposed = st.exposed_ms if p._seen[PH_COMM] else NAN  # Profiler.set_exposed, inline
    tokens = st.tokens if st.hf_state is None else _step_tokens(st)
    if p._native_pending or st.global_fwd is not None or (st.step_bwd and not st.step_fwd):
        # the first steps: the hello, the forward hooks settling on the roots, between steps
        p.step_end(st.samples, None, now, tokens, st.token_pending or None)
        st.samples = st.tokens = 0
        st.token_pending = []
        st.exposed_ms = 0.0
        if p._native_pending:
            _open_run(p)
            now = _perf_ns()
        _adapt_forward_hooks()
        p.step_begin(now)
        return
    p.step_next(now, st.samples, tokens, st.token_pending or None)  # the steady state
    st.samples = st.tokens = 0
    if st.token_pending:
        st.token_pending = []
    st.exposed_ms = 0.0
    st.step_fwd = st.step_bwd = 0


def _exposed(ms):
    """Communication the caller waited for: counted exposed and taken out of the phase it
    ran in (so that the phases still add up to the wall time)."""
    S.exposed_ms += ms
    p = S.prof
    if p is not None and S.top is not None:
        p.add_ms(S.top, -ms)


# ---- data ----

def _batch_size(batch):
    try:
        return _hooks_batch_size(batch)
    except Exception:
        return 0


def _wrap_next(orig):
    @functools.wraps(orig)
    def __next__(self):
        st = S
        if st.top is not None or not st.enabled or st.finished:
            return orig(self)
        p = st.prof or _begin()
        if p is None:
            return orig(self)
        # data is host time whatever the device: timed here, no phase bookkeeping
        st.top = PH_DATA
        t0 = _perf_ns()
        try:
            batch = orig(self)
        finally:
            st.top = None
            # held until the next forward says whose batch it is (_fwd_pre); a fetch with
            # grad disabled feeds an evaluation (its time stays the step's `other`)
            if st.fetch_eval:  # the last batch went to evaluation only: not data
                st.fetch_ns, st.fetch_eval = 0, False
            if p._in_step and _grad_on():
                st.fetch_ns += _perf_ns() - t0
        st.n_data += 1
        if st.tune_watch:
            st.batch_tag = getattr(self, "__gpuscope_tune__", 0)
        if p._native_pending:  # the loader's settings: facts of the first step only
            st.batch_facts = getattr(self, "__gpuscope_facts__", None)
        # the batch's leading dimension (a tuple / list of tensors without recursion): the
        # step's samples once a training forward takes it (an evaluation batch never does)
        try:
            tb = type(batch)
            first = batch[0] if (tb is tuple or tb is list) and batch else batch
            if type(first) is _Tensor:
                try:
                    st.batch_n = first.size(0)
                except IndexError:  # 0-d
                    st.batch_n = _hooks_batch_size(batch)
            else:
                st.batch_n = _hooks_batch_size(batch)
        except Exception:
            st.batch_n = 0
        return batch
    __next__.__gpuscope__ = orig
    return __next__


def _wrap_iter_init(orig):
    """Each DataLoader iterator keeps its loader's settings (the facts of the loader the
    training forwards are fed from, _note_forward)."""
    @functools.wraps(orig)
    def __init__(self, loader, *args, **kwargs):
        orig(self, loader, *args, **kwargs)
        if S.prof is None or S.prof._native_pending:
            try:
                from ._facts import from_loader
                self.__gpuscope_facts__ = from_loader(loader)
            except Exception:
                pass
    __init__.__gpuscope__ = orig
    return __init__


def _tune_trained(index):
    try:
        from . import _tune
        _tune.trained_on(index)
    except Exception as e:
        S.tune_watch = False
        _warn(f"tune: the training DataLoader not identified ({e})")


# ---- forward ----

def _fetch_to_data(p):
    """The held fetch time is the step's data time (a training forward took the batch, or the
    step ends with no forward having taken it)."""
    st = S
    if st.fetch_ns and p._in_step:
        p._acc[PH_DATA] += st.fetch_ns / 1e6
        p._seen[PH_DATA] = True
    st.fetch_ns, st.fetch_eval = 0, False


def _fwd_pre(module, inputs):
    st = S
    st.fdepth += 1
    if st.fdepth != 1 or st.top is not None:
        return None
    if not (module.training and _grad_on()):
        if st.fetch_ns:
            # an evaluation forward took the held batch (or a frozen teacher: a training
            # forward may still take it, and then it is data)
            st.fetch_eval = True
        return None
    if not st.enabled:
        return None
    p = st.prof or _begin()
    if p is None:
        return None
    if st.fetch_ns:  # _fetch_to_data, inline: the batch it trains on was fetched
        if p._in_step:
            p._acc[PH_DATA] += st.fetch_ns / 1e6
            p._seen[PH_DATA] = True
        st.fetch_ns, st.fetch_eval = 0, False
    st.top = PH_FORWARD
    if p.cuda:
        p.phase_begin(PH_FORWARD)
    else:
        st.t_top = _perf_ns()
    st.step_fwd += 1
    if st.global_fwd is not None:
        st.step_roots.add(module)
    # the samples it trains on: the batch the loader gave, else (no DataLoader: get_batch(),
    # random tensors) its first input's leading dimension
    n = st.batch_n
    if n:
        st.samples += n
        st.batch_n = 0
        st.loader_fed = True
        if st.tune_watch:
            _tune_trained(st.batch_tag)
    # tokens: only a call when the forward may carry them (an integer first input, or keyword
    # inputs only); a float batch costs an attribute read
    if inputs:
        x = inputs[0]
        if type(x) is _Tensor:
            if not n and not st.loader_fed:
                try:
                    st.samples += x.size(0)
                except IndexError:  # 0-d
                    pass
            if x.dtype in _TOKEN_DTYPES:
                _count_tokens(st, p, inputs)
    else:
        _count_tokens(st, p, inputs)
    if p._native_pending:
        _note_forward(p, module, inputs)
    return None


def _count_tokens(st, p, inputs):
    """The training forward's tokens. A module hook sees the positional inputs only (torch <
    2: no keyword arguments); the keyword ones (input_ids=, attention_mask=: the HF way) are
    read from the module call's own frame (Module._call_impl's kwargs)."""
    try:
        kw = None
        f = sys._getframe(2)
        if f.f_code.co_name == "_call_impl":
            kw = f.f_locals.get("kwargs")
        n, seq, pending = _forward_tokens(inputs, kw)
        if not seq:
            return
        st.tokens += n
        if pending is not None:
            st.token_pending.append(pending)
        if p._native_pending and "seq_len" not in st.seen:
            st.seen["seq_len"] = seq
    except Exception as e:
        _warn(f"tokens not counted ({e})")


def _adapt_forward_hooks():
    """At a step boundary: the cheaper per-root hooks once the roots are known and stable,
    the global ones again when a step trained (backward) without a forward seen."""
    st = S
    fwd, bwd = st.step_fwd, st.step_bwd
    st.step_fwd = st.step_bwd = 0
    if st.global_fwd is None and (fwd or not bwd):
        return  # per-root hooks, and they saw this step's forward: nothing to change
    roots, st.step_roots = st.step_roots, set()
    try:
        if st.global_fwd is not None:
            ids = frozenset(id(m) for m in roots)  # ids: no reference keeps a model alive
            if ids and ids == st.prev_roots:
                st.stable += 1
            else:
                st.stable = 0
            st.prev_roots = ids
            if st.stable >= ROOT_STABLE_STEPS:
                st.prev_roots = None
                for h in st.global_fwd:
                    h.remove()
                st.global_fwd = None
                for m in roots:
                    st.root_fwd.append(m.register_forward_pre_hook(_fwd_pre))
                    st.root_fwd.append(m.register_forward_hook(_fwd_post))
        elif bwd and not fwd:
            for h in st.root_fwd:
                h.remove()
            st.root_fwd = []
            st.stable = 0
            st.prev_roots = None
            _install_global_forward()
    except Exception as e:
        _warn(f"forward hooks not switched ({e})")


def _install_global_forward():
    from torch.nn.modules import module as mm
    S.global_fwd = (mm.register_module_forward_pre_hook(_fwd_pre),
                    mm.register_module_forward_hook(_fwd_post))


def _fwd_post(module, inputs, output):
    st = S
    d = st.fdepth - 1
    if d > 0:
        st.fdepth = d
        return None
    st.fdepth = 0
    if st.top == PH_FORWARD:
        p = st.prof
        st.top = None
        if p.cuda:
            p.phase_end(PH_FORWARD)
        else:
            p._acc[PH_FORWARD] += (_perf_ns() - st.t_top) / 1e6
            p._seen[PH_FORWARD] = True
        st.n_forward += 1
    return None


_grad_on = None
_Tensor = None
_TOKEN_DTYPES = ()  # torch.int64, torch.int32 (install())


# ---- backward ----

def _wrap_backward(orig):
    @functools.wraps(orig)
    def backward(*args, **kwargs):
        st = S
        top = st.top
        if top is not None and top != PH_FORWARD or not st.enabled or st.finished:
            return orig(*args, **kwargs)
        p = st.prof or _begin()
        if p is None:
            return orig(*args, **kwargs)
        if top == PH_FORWARD:  # a forward that raised never closed: it ends here
            _close_top(p)
        st.fdepth = 0
        if st.comm:
            st.comm = []
        st.top = PH_BACKWARD
        t0 = st.t_top = _perf_ns()
        if p.cuda:
            p.phase_begin(PH_BACKWARD)
        try:
            return orig(*args, **kwargs)
        finally:
            if st.top == PH_BACKWARD:  # _close_top, inline
                st.top = None
                if p.cuda:
                    p.phase_end(PH_BACKWARD)
                else:
                    p._acc[PH_BACKWARD] += (_perf_ns() - t0) / 1e6
                    p._seen[PH_BACKWARD] = True
            st.n_backward += 1
            st.step_bwd += 1
            if st.comm:
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
    p = S.prof or _begin()
    if p is None:
        return None
    if S.top is not None:
        _close_top(p)
    S.top = PH_OPTIMIZER
    if p.cuda:
        p.phase_begin(PH_OPTIMIZER)
    else:
        S.t_top = _perf_ns()
    return p


def _opt_exit(p):
    if S.opt_depth > 0:
        S.opt_depth -= 1
    if p is None:
        return
    S.n_optimizer_step += 1
    boundary()


def _wrap_step(orig, counts=None):
    """orig timed as the optimizer step. counts(self), when given, says whether this call
    is one (False: a micro-batch step that only accumulates, passed through untimed)."""
    @functools.wraps(orig)
    def step(*args, **kwargs):
        if counts is not None and args and not counts(args[0]):
            return orig(*args, **kwargs)
        st = S
        p = st.prof
        if p is None or p.cuda or st.opt_depth or not st.enabled or st.finished:
            p = _opt_enter()
            try:
                return orig(*args, **kwargs)
            finally:
                _opt_exit(p)
        # the common case (host timing, a running profiler, outermost): _opt_enter and
        # _opt_exit inline, one clock read for the previous phase's end and this one's begin
        st.opt_depth = 1
        now = _perf_ns()
        ph = st.top
        if ph is not None:
            p._acc[ph] += (now - st.t_top) / 1e6
            p._seen[ph] = True
        st.top = PH_OPTIMIZER
        st.t_top = now
        try:
            return orig(*args, **kwargs) if kwargs else orig(*args)
        finally:
            st.opt_depth = 0  # (nested steps inside went back to 1)
            st.n_optimizer_step += 1
            boundary()
    step.__gpuscope__ = orig
    return step


def _wrap_optimizer_class(cls):
    st = cls.__dict__.get("step")
    if st is None or getattr(st, "__gpuscope__", None) is not None:
        return
    try:
        cls.step = _wrap_step(st)
        S.patched.append((cls, "step", st))
        S.opt_classes.add(cls)
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
            S.n_communication += 1
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
    S.n_communication += 1


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
        tune = sys.modules.get("gpuscope._tune")
        if tune is not None and tune.active():  # a `gpuscope tune` trial's "ddp" settings
            try:
                args, kwargs = tune.ddp_arguments(orig_init, (self,) + args, kwargs)
                args = args[1:]
            except Exception as e:
                print(f"gpuscope: tune: the trial's DDP settings cannot be applied ({e})",
                      file=sys.stderr, flush=True)
        orig_init(self, *args, **kwargs)
        S.n_ddp_models += 1
        try:  # the settings of the (first) DDP model, for the facts
            cap = getattr(self, "bucket_bytes_cap", None)
            if isinstance(cap, int) and "ddp_bucket_cap_mb" not in S.seen:
                S.seen["ddp_bucket_cap_mb"] = round(cap / (1024 * 1024), 3)
                fu = getattr(self, "find_unused_parameters", None)
                if isinstance(fu, bool):
                    S.seen["ddp_find_unused_parameters"] = fu
        except Exception:
            pass

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
            _patch(dist, name, _wrap_collective(fn))
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

    def at_boundary(self):
        try:
            return bool(self.is_gradient_accumulation_boundary())
        except Exception:
            return True
    eng.step = _wrap_step(orig_step, at_boundary)
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

    def syncs(self):
        gs = getattr(self, "gradient_state", None)
        return gs is None or getattr(gs, "sync_gradients", True)
    acc.step = _wrap_step(orig_step, syncs)
    acc.__gpuscope_patched__ = True
    S.hooks.append("AcceleratedOptimizer")
    if not S.config.get("framework"):
        configure(framework="accelerate")


# ---- install / finish ----

def _patch(owner, name, new):
    S.patched.append((owner, name, getattr(owner, name)))
    setattr(owner, name, new)


def uninstall():
    """Takes every patch and hook out again (tests, benchmarks); the run is not finished."""
    for owner, name, orig in reversed(S.patched):
        setattr(owner, name, orig)
    S.patched = []
    for h in list(S.global_fwd or ()) + S.root_fwd + S.global_opt:
        h.remove()
    S.global_fwd, S.root_fwd, S.global_opt = None, [], []
    S.installed = False


def install(torch=None):
    """Installs the patches into an imported torch (idempotent). Returns True when
    installed."""
    global _grad_on, _Tensor, _TOKEN_DTYPES
    if S.installed:
        return True
    if os.environ.get("GPUSCOPE_AUTO", "1") == "0":
        return False
    if torch is None:
        import torch
    S.installed = True
    first = S.torch_version is None
    S.torch_version = str(getattr(torch, "__version__", "?"))
    S.hooks = []
    _grad_on = torch.is_grad_enabled
    _Tensor = torch.Tensor
    _TOKEN_DTYPES = (torch.int64, torch.int32)
    try:
        import torch.utils.data.dataloader as dl
        it = dl._BaseDataLoaderIter
        if not hasattr(it.__next__, "__gpuscope__"):
            _patch(it, "__next__", _wrap_next(it.__next__))
        if not hasattr(it.__init__, "__gpuscope__"):
            _patch(it, "__init__", _wrap_iter_init(it.__init__))
        S.hooks.append("DataLoader")
    except Exception as e:
        _warn(f"DataLoader not instrumented ({e})")
    if os.environ.get("GPUSCOPE_TUNE") is not None:  # a `gpuscope tune` trial's settings
        try:
            from . import _tune
            if _tune.install():
                _tune.wrap_dataloader(torch, _patch)
        except Exception as e:
            print(f"gpuscope: tune: the trial's DataLoader settings cannot be applied ({e})",
                  file=sys.stderr, flush=True)
    try:
        _install_global_forward()
        S.hooks.append("module forward")
    except Exception as e:
        _warn(f"module forward not instrumented ({e})")
    try:
        # Tensor.backward calls torch.autograd.backward through the module attribute: one
        # wrapper there times both
        _patch(torch.autograd, "backward", _wrap_backward(torch.autograd.backward))
        S.hooks.append("backward")
    except Exception as e:
        _warn(f"backward not instrumented ({e})")
    try:
        import importlib
        oo = importlib.import_module("torch.optim.optimizer")
        if hasattr(oo, "register_optimizer_step_pre_hook"):
            S.global_opt = [oo.register_optimizer_step_pre_hook(_global_opt_pre),
                            oo.register_optimizer_step_post_hook(_global_opt_post)]
            S.hooks.append("optimizer step hooks")
        else:
            opt = torch.optim.Optimizer
            _patch(opt, "__init__", _wrap_optimizer_init(opt.__init__))
            for cls in list(S.opt_classes):  # classes seen before an uninstall()
                _wrap_optimizer_class(cls)
            S.hooks.append("Optimizer.step")
        try:
            from torch.cuda.amp import GradScaler
            _patch(GradScaler, "step", _wrap_step(GradScaler.step))
        except Exception:
            pass
    except Exception as e:
        _warn(f"optimizer step not instrumented ({e})")
    _patch_dist()
    for name, fn in (("deepspeed.runtime.engine", patch_deepspeed),
                     ("accelerate.optimizer", patch_accelerate)):
        if name in sys.modules:
            fn(sys.modules[name])
    if first:
        if not hasattr(sys.excepthook, "__gpuscope__"):
            sys.excepthook = _excepthook(sys.excepthook)
        import atexit
        atexit.register(finish)
    return True


def step_aside():
    """The script uses gpuscope's explicit API (init / step / instrument): one profiler per
    process, so the tracker stops collecting. Steps it already closed are reported."""
    if not S.installed or not S.enabled:
        return
    S.enabled = False
    p = S.prof
    if p is None:
        S.finished = True
        return
    if p.steps_done:
        finish()
    else:
        S.finished = True
        p.abandon_step()
        if p.native is not None:
            p.native.close()  # nothing measured: no report, no record


def outcome():
    """What the tracker saw, for the end record (docs/report.md, OUTCOME)."""
    return {"torch_imported": True, "instrumented": ", ".join(S.hooks)[:128],
            **{"seen_" + k: getattr(S, "n_" + k) for k in COUNTERS}}


def _send_end(outcome_):
    """One end record straight to `gpuscope run`'s socket (no hello, no native run)."""
    path = os.environ.get("GPUSCOPE_RUN_SOCKET")
    if not path:
        return
    try:
        import json
        import socket
        from ._facts import clean
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(1.0)
        s.connect(path)
        s.send(json.dumps({"v": 1, "type": "end", "outcome": clean(outcome_)}).encode())
        s.close()
    except Exception:
        pass


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
    if p is None:
        # Nothing ran here (a launcher such as mp.spawn's parent, a helper): no profiler and
        # no hello (its settings would stand for the ranks'); a failure still reaches the
        # receiver as an end record.
        if exc is not None:
            _send_end({**outcome(), "exception": exc})
        return None
    try:
        p.abandon_step()
        if exc is not None:
            p.outcome["exception"] = exc
        p.outcome.update(outcome())
        return p.finish(**end)
    except Exception as e:
        _warn(f"finishing the run failed ({e})")
        return None
