"""gpuscope's auto-injection: with this directory first on PYTHONPATH (`gpuscope run` puts it
there), any PyTorch training loop is timed (gpuscope._loop, installed once torch has been
imported; DeepSpeed's engine and accelerate's optimizer once they load) and every
transformers.Trainer gets a GpuScopeCallback, without code changes.

Python imports `sitecustomize` once at start-up; this one:
1. installs an import hook for the module transformers.trainer (it does not import
   transformers itself). When that module has finished executing, Trainer.__init__ is wrapped
   to add one GpuScopeCallback unless the trainer already has one (the user's own, or ours),
   and, under a `gpuscope tune` trial (GPUSCOPE_TUNE), to set the trial's TrainingArguments
   fields before the original __init__ runs (gpuscope/_tune.py).
   The wrapping is done once per process (Trainer.__gpuscope_patched__);
2. then runs the sitecustomize it shadows, if any (Debian ships one in /usr/lib/python3.X):
   the next one found on sys.path after this directory.
Set GPUSCOPE_AUTO=0 to keep the hook out (the shadowed sitecustomize still runs).
Nothing here may break the child: every failure is reported on stderr and ignored.
"""
import importlib.machinery
import os
import sys

# No importlib.abc (it pulls in importlib.resources, typing, pathlib...: ~15 ms at every
# interpreter start) and no importlib.util (contextlib: ~3 ms). The import system only needs
# the methods, not the base classes.

_HERE = os.path.dirname(os.path.abspath(__file__))
_TARGET = "transformers.trainer"


def _patch_torch(module):
    # Any PyTorch loop, no import in the script: gpuscope._loop patches the DataLoader, module
    # forwards, backward, optimizer steps and communication once torch has loaded.
    from gpuscope import _loop
    _loop.install(module)


def _patch_deepspeed(module):
    from gpuscope import _loop
    _loop.patch_deepspeed(module)


def _patch_accelerate(module):
    from gpuscope import _loop
    _loop.patch_accelerate(module)


def _tune_args(targs):
    """The trial's TrainingArguments fields on targs (gpuscope/_tune.py); True when a trial
    is set."""
    try:
        from gpuscope import _tune
        if not _tune.install():
            return False
        if targs is not None:
            _tune.training_args(targs)
        return True
    except Exception as e:  # never break the user's training
        print(f"gpuscope: tune: TrainingArguments not changed: {e}", file=sys.stderr)
        return False


def _patch_trainer(module):
    trainer_cls = getattr(module, "Trainer", None)
    if trainer_cls is None or getattr(trainer_cls, "__gpuscope_patched__", False):
        return
    orig_init = trainer_cls.__init__

    def __init__(self, *args, **kwargs):
        # a `gpuscope tune` trial's TrainingArguments fields, set before the Trainer reads
        # them (its accelerator in __init__, its dataloaders in train()): Trainer(model, args)
        targs = kwargs.get("args") if "args" in kwargs else args[1] if len(args) > 1 else None
        tune = os.environ.get("GPUSCOPE_TUNE") is not None and _tune_args(targs)
        orig_init(self, *args, **kwargs)
        if tune and targs is None:  # no arguments given: the ones the Trainer made itself
            _tune_args(getattr(self, "args", None))
        try:
            from gpuscope.callback import GpuScopeCallback
            handler = getattr(self, "callback_handler", None)
            callbacks = getattr(handler, "callbacks", [])
            if not any(isinstance(cb, GpuScopeCallback) for cb in callbacks):
                self.add_callback(GpuScopeCallback())
        except Exception as e:  # never break the user's training
            print(f"gpuscope: could not add GpuScopeCallback: {e}", file=sys.stderr)

    __init__.__wrapped__ = orig_init
    trainer_cls.__init__ = __init__
    trainer_cls.__gpuscope_patched__ = True


_PATCHES = {_TARGET: _patch_trainer, "torch": _patch_torch,
            "deepspeed.runtime.engine": _patch_deepspeed,
            "accelerate.optimizer": _patch_accelerate}


class _Loader:
    def __init__(self, inner, patch):
        self._inner = inner
        self._patch = patch

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        try:
            self._patch(module)
        except Exception as e:
            print(f"gpuscope: could not patch {module.__name__}: {e}", file=sys.stderr)


class _Finder:
    def find_spec(self, fullname, path, target=None):
        patch = _PATCHES.get(fullname)
        if patch is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, patch)
                return spec
        return None


def _install():
    if os.environ.get("GPUSCOPE_AUTO", "1") == "0":
        return
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return
    for name, patch in _PATCHES.items():
        mod = sys.modules.get(name)
        if mod is not None:  # already imported (cannot happen at start-up, but be exact)
            patch(mod)
    sys.meta_path.insert(0, _Finder())


def _run_shadowed():
    """Executes the next sitecustomize on sys.path after this directory."""
    paths = []
    seen_self = False
    for entry in sys.path:
        real = os.path.realpath(entry or os.getcwd())
        if real == os.path.realpath(_HERE):
            seen_self = True
            continue
        if seen_self:
            paths.append(entry)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    mod = type(sys)(spec.name)
    mod.__spec__, mod.__loader__, mod.__file__ = spec, spec.loader, spec.origin
    spec.loader.exec_module(mod)


def _report_without_torch():
    """At exit of the command's own process (its parent is `gpuscope run`) when it never
    imported torch: an end record saying so (with the uncaught exception's last
    line, if any), so the report can tell why it has no steps. Plain sockets, no gpuscope
    import; any failure is silent."""
    if "torch" in sys.modules:
        return  # the loop tracker reports
    try:
        if os.getppid() != int(os.environ.get("GPUSCOPE_RUN_PID", "-1")):
            return
        import json
        import socket
        outcome = {"torch_imported": False}
        e = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if e is not None and not isinstance(e, SystemExit):
            import traceback
            outcome["exception"] = traceback.format_exception_only(type(e), e)[-1].strip()[:128]
        s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        s.settimeout(1.0)
        s.connect(os.environ["GPUSCOPE_RUN_SOCKET"])
        # no hello: it would stand for the run's settings in place of a trainer's
        s.send(json.dumps({"v": 1, "type": "end", "outcome": outcome}).encode())
        s.close()
    except Exception:
        pass


try:
    _install()
    if os.environ.get("GPUSCOPE_AUTO", "1") != "0" and os.environ.get("GPUSCOPE_RUN_SOCKET"):
        import atexit
        atexit.register(_report_without_torch)
except Exception as e:
    print(f"gpuscope: auto-injection disabled: {e}", file=sys.stderr)
try:
    _run_shadowed()
except Exception as e:
    print(f"gpuscope: the shadowed sitecustomize failed: {e}", file=sys.stderr)
