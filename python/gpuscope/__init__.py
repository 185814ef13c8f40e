"""gpuscope: per-step training profiles joined with what the GPUs did (docs/python.md).

Hugging Face Trainer / ms-swift:
    trainer.add_callback(gpuscope.GpuScopeCallback())

Plain PyTorch, explicit:
    gpuscope.init(output_dir="out")          # optional: defaults work
    for batch in loader:
        with gpuscope.step(samples=len(batch)):
            with gpuscope.phase("forward"):
                loss = model(batch).sum()
            with gpuscope.phase("backward"):
                loss.backward()
            with gpuscope.phase("optimizer_step"):
                opt.step()
    report = gpuscope.finish()               # also run at interpreter exit

Plain PyTorch, one line:
    for batch in gpuscope.instrument(model, opt, loader):
        ...                                  # unchanged loop body
"""
import atexit
import os

from . import _hooks
from ._core import PHASE_INDEX, Profiler, format_lines, utilization_estimate
from ._native import PHASES
from ._version import __version__  # meson's project version (_version.py.in)

__all__ = ["GpuScopeCallback", "Profiler", "init", "profiler", "step", "phase", "instrument",
           "finish", "log", "PHASES", "format_lines", "utilization_estimate"]

_default = [None]


def __getattr__(name):
    # GpuScopeCallback is made on first use, so that `import gpuscope` never imports
    # transformers (seconds) for plain PyTorch users.
    if name == "GpuScopeCallback":
        from . import callback
        return callback.GpuScopeCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def init(**kwargs):
    """Creates the process's profiler for the plain-loop API (see Profiler for the keyword
    arguments: output_dir, logging_steps, run_name, device, socket, nvml, sample_interval_s,
    log). output_dir defaults to $GPUSCOPE_OUTPUT_DIR. Replaces (and finishes) an earlier
    one. Returns it."""
    if _default[0] is not None:
        _default[0].finish()
    from . import _loop
    _loop.step_aside()  # the zero-code tracker (gpuscope run) leaves the run to this API
    kwargs.setdefault("output_dir", os.environ.get("GPUSCOPE_OUTPUT_DIR") or None)
    _default[0] = Profiler(**kwargs)
    return _default[0]


def profiler():
    """The process's profiler, created with the defaults on first use."""
    p = _default[0]
    return p if p is not None else init()


class step:
    """`with gpuscope.step(samples=n, tokens=m):` one training step (data time is the gap
    since the previous step's end); tokens: those the model was trained on in it (padding
    excluded), for tokens/s and MFU."""
    __slots__ = ("_p", "_samples", "_tokens")

    def __init__(self, samples=0, tokens=0):
        p = _default[0]
        self._p = p if p is not None else init()
        self._samples = samples
        self._tokens = tokens

    def __enter__(self):
        self._p.step_begin()
        return self

    def __exit__(self, et, ev, tb):
        self._p.step_end(samples=self._samples, tokens=self._tokens)
        return False


class _Phase:
    __slots__ = ("_i",)

    def __init__(self, i):
        self._i = i

    def __enter__(self):
        p = _default[0]
        (p if p is not None else init()).phase_begin(self._i)
        return self

    def __exit__(self, et, ev, tb):
        _default[0].phase_end(self._i)
        return False


_phases = {name: _Phase(i) for name, i in PHASE_INDEX.items()}


def log(values=None, step=None, **kw):
    """`gpuscope.log(loss=loss.item(), lr=sched.get_last_lr()[0])` or `gpuscope.log({"loss":
    1.2}, step=100)`: values the training loop logged, kept with the run (steps.jsonl under
    gpuscope run) and drawn as training curves by `gpuscope report`. Goes to the running
    profiler (this API's, the zero-code tracker's under gpuscope run, or the HF callback's);
    before any step it is dropped. Numbers only; returns whether a record was sent."""
    from . import _core
    p = _default[0] if _default[0] is not None else _core._current[0]
    if p is None:
        return False
    vals = dict(values or {})
    vals.update(kw)
    return p.log(vals, step=step)


def phase(name):
    """`with gpuscope.phase("forward"):` times a phase of the current step: "data",
    "forward", "backward", "optimizer_step" (or "optimizer"), "communication" (or "comm").
    A "data" phase outside a step counts for the next step."""
    try:
        return _phases[name]
    except KeyError:
        raise ValueError(f"gpuscope.phase: unknown phase {name!r}; one of "
                         f"{', '.join(PHASES[:5])}") from None


class Instrumentation:
    """What instrument() returns: iterate it to iterate the wrapped dataloader; remove()
    takes the hooks off."""

    def __init__(self, prof, model, optimizer, dataloader, backward="gap"):
        self.profiler = prof
        self.loader = (_hooks.TimedLoader(prof, dataloader, begin_steps=True)
                       if dataloader is not None else None)
        self._model = (_hooks.ModelHooks(prof, model, auto_begin=True, backward=backward)
                       if model is not None else None)
        self._opt = (_hooks.OptimizerHooks(prof, optimizer, end_step=True, samples=self._samples,
                                           tokens=self._model)
                     if optimizer is not None else None)
        self.distributed = _hooks.wrap_distributed(prof)
        self.ddp_comm_hook = _hooks.ddp_comm_hook(prof, model) if model is not None else False

    def _samples(self):
        """The step's samples: the batches of the wrapped loader when the loop iterates it,
        else (the loop iterates its own loader, or get_batch()) the batch dimension of the
        model's training forwards."""
        n = 0
        if self.loader is not None and self.loader.iterated:
            n = self.loader.samples_in_step
        elif self._model is not None:
            n = self._model.fwd_samples
        if self._model is not None:
            self._model.fwd_samples = 0
        return n

    def __iter__(self):
        if self.loader is None:
            raise TypeError("gpuscope.instrument() was given no dataloader to iterate")
        return iter(self.loader)

    def __len__(self):
        return len(self.loader)

    def remove(self):
        if self._model is not None:
            self._model.remove()
        if self._opt is not None:
            self._opt.remove()


def instrument(model=None, optimizer=None, dataloader=None, backward="gap", **kwargs):
    """Profiles an unchanged training loop: a step begins when a batch arrives from the
    wrapped dataloader (or, without one, at the first training-mode forward), forward and
    backward come from hooks on model (backward: "gap" or "hook", see docs/python.md), and
    the step ends when optimizer.step() returns. With kwargs, (re)creates the profiler first
    (see init). Returns an Instrumentation:
        for batch in gpuscope.instrument(model, opt, loader): ..."""
    prof = init(**kwargs) if kwargs or _default[0] is None else _default[0]
    if prof.device is None and model is not None and not prof._started:
        try:  # time on the model's device: CUDA events when it is on a GPU
            prof.device = next(model.parameters()).device
        except (StopIteration, AttributeError, TypeError):
            pass
    if not prof._started:  # the settings travel in the hello that start() sends
        try:
            from . import _facts
            prof.facts = {**_facts.from_loader(dataloader), **_facts.from_model(model),
                          **prof.facts}
        except Exception:
            pass
    prof.start()
    return Instrumentation(prof, model, optimizer, dataloader, backward=backward)


def finish(**kwargs):
    """Ends the plain-loop run: writes <output_dir>/metrics_report.json and returns the report
    (a dict), or None (no native core, or already finished). kwargs: train_runtime,
    train_samples, train_steps, train_loss, when the loop measured them itself."""
    p = _default[0]
    if p is None:
        return None
    return p.finish(**kwargs)


@atexit.register
def _finish_at_exit():
    p = _default[0]
    if p is not None and p.steps_done and not p._finished:
        p.finish()


# In-process stack sampling when the environment asks for it (stacks.py, docs/stacks.md).
if os.environ.get("GPUSCOPE_STACKS_INPROC") or os.environ.get("GPUSCOPE_STACKS_HZ"):
    from . import stacks as _stacks
    _stacks.auto_start()
