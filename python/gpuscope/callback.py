"""GpuScopeCallback: step profiling inside a Hugging Face Trainer (and so inside ms-swift,
which trains with it).

The Trainer calls, per optimizer step (transformers' _inner_training_loop):
    on_step_begin, [training_step: forward, backward] x grad-accumulation (with
    on_substep_end between micro-batches), on_pre_optimizer_step, optimizer.step(),
    on_optimizer_step, lr_scheduler.step(), on_step_end, then logging / evaluation / saving
    (on_log, on_evaluate, on_save).
The step is on_step_begin .. on_step_end; forward and backward come from hooks on the model
(kwargs["model"] at on_train_begin), the optimizer phase from on_pre_optimizer_step ..
on_optimizer_step; the data phase is the gap from the previous step's end, or from the last
log / evaluate / save / epoch callback after it, to on_step_begin (the Trainer fetches the
step's batches just before on_step_begin).

At on_train_end the report is written to args.output_dir/metrics_report.json by the world
process zero, with train_runtime and the speeds the Trainer logged at the end of training.

The class is made on first use of the name GpuScopeCallback (PEP 562 module __getattr__),
so `import gpuscope` never imports transformers: then it derives from
transformers.TrainerCallback when that imports, otherwise it is a plain class with the same
methods (and a no-op for any other on_* event), so a loop that drives it like the Trainer
works without transformers.
"""
import math

import sys

from . import _core, _facts, _hooks, _loop
from ._native import PH_OPTIMIZER


def _trainer_callback_base():
    """transformers.TrainerCallback, or None when transformers cannot be imported."""
    try:
        from transformers import TrainerCallback
        return TrainerCallback
    except Exception:
        return None


def _int_steps(v):
    """HF's logging_steps may be a ratio of the total (< 1): keep our default then."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return int(v) if v >= 1 else None


_SUMMARY_KEYS = frozenset(("train_runtime", "train_samples_per_second",
                           "train_steps_per_second", "train_loss", "total_flos"))


class _GpuScopeCallbackImpl:
    """A TrainerCallback that times every optimizer step and writes metrics_report.json.

    Arguments (all optional): output_dir (default args.output_dir), logging_steps (default
    args.logging_steps when >= 1, else 10), run_name (default args.run_name), socket (a
    receiver socket; default $GPUSCOPE_RUN_SOCKET / the agent's), nvml ("auto" | "off"),
    sample_interval_s, device, log (a callable taking one line; default the "gpuscope"
    logger), distributed (wrap torch.distributed collectives, default True), backward
    ("gap", the default, or "hook": how backward is delimited, see docs/python.md).
    """

    def __init__(self, output_dir=None, logging_steps=None, run_name=None, socket=None,
                 nvml="auto", sample_interval_s=0.5, device=None, log=None, distributed=True,
                 backward="gap"):
        self._opts = dict(output_dir=output_dir, logging_steps=logging_steps, run_name=run_name,
                          socket=socket, nvml=nvml, sample_interval_s=sample_interval_s,
                          device=device, log=log)
        self._distributed = distributed
        self._backward = backward
        self.profiler = None
        self.report = None
        self._model_hooks = None
        self._samples_per_step = 0
        self._tokens_seen = 0  # the Trainer's num_input_tokens_seen at the last step's end
        self._train_metrics = {}
        self._delegated = False  # the loop tracker (gpuscope._loop) times the steps

    # ---- setup ----

    def _start(self, args, state, model, loader=None):
        o = dict(self._opts)
        is_zero = getattr(state, "is_world_process_zero", True)
        if o["output_dir"] is None and is_zero:
            o["output_dir"] = getattr(args, "output_dir", None)
        if not is_zero:
            o["output_dir"] = None  # one report per job: rank 0 writes it
        if o["logging_steps"] is None:
            o["logging_steps"] = _int_steps(getattr(args, "logging_steps", None)) or 10
        if o["run_name"] is None:
            o["run_name"] = getattr(args, "run_name", None)
        if o["device"] is None and model is not None:
            try:
                o["device"] = next(model.parameters()).device
            except (StopIteration, AttributeError, TypeError):
                pass
        rank = getattr(args, "process_index", None)
        world = getattr(args, "world_size", None)
        local = getattr(args, "local_process_index", None)
        if rank is not None and local is not None and local < 0:
            local = None
        try:  # the loader as iterated first: it is what the arguments built
            facts = {**_facts.from_loader(loader), **_facts.from_args(args),
                     **_facts.from_model(model)}
        except Exception:
            facts = {}
        framework = "ms-swift" if "swift" in sys.modules else "hf"
        if _loop.active():
            # Under the loop tracker (gpuscope run, auto) one mechanism times every loop: the
            # Trainer's steps are its optimizer steps, data the time in the DataLoader (not the
            # Trainer's cross-rank gathers), DDP through the comm hook on the wrapped model.
            # The callback hands it the run's settings and, at the end, the Trainer's figures.
            self._delegated = True
            _loop.configure(framework=framework, rank=rank, world_size=world,
                            local_rank=local, facts=facts, hf_state=state, **o)
            return
        self.profiler = _core.Profiler(framework=framework, rank=rank, world_size=world,
                                       local_rank=local, facts=facts, **o)
        self.profiler.start()
        if model is not None:
            self._model_hooks = _hooks.ModelHooks(self.profiler, model, backward=self._backward)
        if self._distributed:
            _hooks.wrap_distributed(self.profiler)
            _loop.install_ddp(self.profiler)  # the Trainer wraps the model in DDP: time it
        bs = getattr(args, "per_device_train_batch_size", 0) or 0
        ga = getattr(args, "gradient_accumulation_steps", 1) or 1
        self._samples_per_step = int(bs) * int(ga)
        self._tokens_seen = _loop._hf_tokens(state)

    # ---- the Trainer's events ----

    def on_init_end(self, args, state, control, **kwargs):
        return None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if self._delegated:
            return None
        if self.profiler is None or self.profiler._finished:  # a new run per train()
            self._train_metrics = {}
            self._start(args, state, model, kwargs.get("train_dataloader"))
        return None

    def on_epoch_begin(self, args, state, control, **kwargs):
        return None

    def on_step_begin(self, args, state, control, **kwargs):
        p = self.profiler
        if p is not None and not p._in_step:
            p.step_begin()
        return None

    def on_substep_end(self, args, state, control, **kwargs):
        return None

    def on_pre_optimizer_step(self, args, state, control, **kwargs):
        if self.profiler is not None:
            self.profiler.phase_begin(PH_OPTIMIZER)
        return None

    def on_optimizer_step(self, args, state, control, **kwargs):
        if self.profiler is not None:
            self.profiler.phase_end(PH_OPTIMIZER)
        return None

    def on_step_end(self, args, state, control, **kwargs):
        if self.profiler is not None:
            # tokens: the Trainer's own count (include_num_input_tokens_seen), its delta; the
            # Trainer gathers it over every process: this rank's share
            seen = _loop._hf_tokens(state)
            tokens, self._tokens_seen = max(0, seen - self._tokens_seen), seen
            tokens = _loop.rank_share(tokens, self.profiler.rank, self.profiler.world_size)
            self.profiler.step_end(samples=self._samples_per_step,
                                   step=getattr(state, "global_step", None), tokens=tokens)
        return None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.profiler is not None:
            self.profiler.mark()
        if logs:
            for k in ("train_runtime", "train_samples_per_second", "train_steps_per_second",
                      "train_loss"):
                if k in logs:
                    self._train_metrics[k] = logs[k]
            # the training curves (loss, learning_rate, grad_norm, eval_*): the run's "log"
            # records; the end-of-training summary is the end record's, not a curve
            curve = {k: v for k, v in logs.items() if k not in _SUMMARY_KEYS}
            if set(curve) <= {"epoch", "step"}:  # the summary's leftovers: no curve
                curve = None
            # delegated: the loop tracker's profiler (the most recently started) has the run
            prof = self.profiler
            if prof is None and self._delegated:
                from . import _core
                prof = _core._current[0]
            if curve and prof is not None:
                try:
                    prof.log(curve, step=getattr(state, "global_step", None))
                except Exception:  # advisory: never a reason to fail the training
                    pass
        return None

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.profiler is not None:
            self.profiler.mark()
        return None

    def on_prediction_step(self, args, state, control, **kwargs):
        if self.profiler is not None and not self.profiler._in_step:
            self.profiler.mark()
        return None

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        return None

    def on_save(self, args, state, control, **kwargs):
        if self.profiler is not None:
            self.profiler.mark()
        return None

    def on_epoch_end(self, args, state, control, **kwargs):
        if self.profiler is not None:
            self.profiler.mark()
        return None

    def on_train_end(self, args, state, control, **kwargs):
        p = self.profiler
        if p is None and not self._delegated:
            return None
        m = self._train_metrics
        runtime = _num(m.get("train_runtime"))
        samples = steps = None
        if runtime is not None:
            sps = _num(m.get("train_samples_per_second"))
            stps = _num(m.get("train_steps_per_second"))
            samples = runtime * sps if sps is not None else None
            steps = runtime * stps if stps is not None else None
        end = dict(train_runtime=runtime, train_samples=samples, train_steps=steps,
                   train_loss=_num(m.get("train_loss")))
        if self._delegated:
            self.report = _loop.finish(**end)
            return None
        self.report = p.finish(**end)
        if self._model_hooks is not None:
            self._model_hooks.remove()
            self._model_hooks = None
        return None


def _num(v):
    try:
        v = float(v)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


class _NoTransformersBase:
    def __getattr__(self, name):
        if name.startswith("on_"):  # an event of a newer Trainer: nothing to do
            return _noop_event
        raise AttributeError(name)


def _noop_event(args, state, control, **kwargs):
    return None


_made = []


def __getattr__(name):
    if name != "GpuScopeCallback":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _made:
        base = _trainer_callback_base() or _NoTransformersBase
        _made.append(type("GpuScopeCallback", (_GpuScopeCallbackImpl, base),
                          {"__module__": __name__, "__doc__": _GpuScopeCallbackImpl.__doc__,
                           "__qualname__": "GpuScopeCallback"}))
    return _made[0]
