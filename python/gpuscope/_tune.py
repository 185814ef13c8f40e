"""A `gpuscope tune` trial's settings, applied inside the training process (docs/python.md,
"TUNE TRIALS"; docs/tune.md).

`gpuscope tune` exports, per trial, GPUSCOPE_TUNE: a JSON object

    {"dataloader": {"num_workers": 4, "prefetch_factor": 4, "persistent_workers": true,
                    "pin_memory": true},
     "dataloader_scope": "all" | "train",
     "training_args": {"dataloader_num_workers": 4, ...}}

(every key optional; an absent key leaves the script's own setting). It is read and checked
once, when torch is imported (the zero-code tracker's install, gpuscope/_loop.py); a value
that is not valid JSON, a key this module does not know or a value of the wrong type rejects
the whole trial: nothing is applied, the training runs with its own settings, and the error is
recorded.

  dataloader     applied to a DataLoader just before its iterator is made (DataLoader.__iter__,
                 wrapped by the tracker's install): every DataLoader ("all", the default) or
                 only the training one ("train", below). torch's rules hold: prefetch_factor
                 and persistent_workers only with worker processes, pin_memory only where
                 CUDA is available; a setting a loader cannot take is recorded as an error
                 and the rest still applies. A loader over an IterableDataset keeps its
                 num_workers (each worker would run the whole iterator).
  training_args  fields of the Hugging Face TrainingArguments the Trainer receives, set in
                 the auto-injection's Trainer.__init__ wrapper before the original runs
                 (gpuscope/_auto/sitecustomize.py), so the accelerator and the dataloaders
                 the Trainer builds see them. A field the arguments do not have, or a value
                 of another type than the field's, rejects every training_args field.

The training DataLoader ("train"): the first DataLoader iterated with gradients enabled;
once a training forward (the tracker's rule: training mode, grad enabled) takes a batch, the
loader that batch came from is the training one. When that is another loader, the settings
move to it from its next iterator on, the first choice gets its own settings back at its next
iterator, and an error says so.

Each process that touches a DataLoader or TrainingArguments (or trained) writes, when
$GPUSCOPE_RUN_DIR is set, tune-applied-rank<R>.json there (R: $RANK, else the process
group's rank, else 0), rewritten whenever it changes, through _rundir (a fresh file renamed
into place):

    {"rank": R, "framework": "torch" | "hf", "scope": "all" | "train",
     "dataloaders_seen": N, "dataloaders_changed": N,
     "applied": {"dataloader.num_workers": 4, "training_args.x": v, ...},
     "errors": ["..."]}

dataloaders_seen counts the distinct DataLoaders iterated, dataloaders_changed those whose
iterators ran with the trial's settings (even a value equal to the script's own). Every
distinct error is also printed once on stderr, one line starting "gpuscope: tune: ". A
process that never touches either (a launcher such as torchrun's agent) writes nothing and
prints nothing.

Nothing here may break the training: a failure inside is recorded and the script goes on.
"""
import json
import math
import os
import re
import sys

ENV = "GPUSCOPE_TUNE"
FILE = "tune-applied-rank%d.json"
SCOPES = ("all", "train")
TOP_KEYS = ("dataloader", "dataloader_scope", "training_args")
# DataLoader keyword arguments a trial may set, with their JSON type and least value
LOADER_KEYS = {"num_workers": (int, 0), "prefetch_factor": (int, 1),
               "persistent_workers": (bool, None), "pin_memory": (bool, None)}
MAX_INT = 1024  # worker processes, batches prefetched per worker
_FIELD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_MARK = "__gpuscope_tune__"  # on a DataLoader: its _Loader; on an iterator: its loader's index
MAX_ERRORS = 32


def _js(v):
    """v for a message: JSON, cut to 64 characters."""
    try:
        text = json.dumps(v, allow_nan=True)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= 64 else text[:61] + "..."


def parse(text):
    """(spec, errors) for GPUSCOPE_TUNE's text: spec the checked trial ({"dataloader": {...},
    "scope": ..., "training_args": {...}}), or None with the reasons when it is rejected."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        return None, ["%s is not valid JSON (%s); nothing applied" % (ENV, e)]
    if not isinstance(doc, dict):
        return None, ["%s must be a JSON object, not %s; nothing applied"
                      % (ENV, type(doc).__name__)]
    errs = []
    for k in doc:
        if k not in TOP_KEYS:
            errs.append("%s: unknown key %s (known: %s)" % (ENV, _js(k), ", ".join(TOP_KEYS)))
    loader = doc.get("dataloader", {})
    if not isinstance(loader, dict):
        errs.append("%s: \"dataloader\" must be an object of DataLoader arguments" % ENV)
        loader = {}
    for k, v in loader.items():
        if k not in LOADER_KEYS:
            errs.append("%s: unknown dataloader key %s (known: %s)"
                        % (ENV, _js(k), ", ".join(LOADER_KEYS)))
            continue
        typ, least = LOADER_KEYS[k]
        if typ is bool and not isinstance(v, bool):
            errs.append("%s: dataloader.%s must be true or false, not %s" % (ENV, k, _js(v)))
        elif typ is int and (isinstance(v, bool) or not isinstance(v, int) or
                             not least <= v <= MAX_INT):
            errs.append("%s: dataloader.%s must be an integer from %d to %d, not %s"
                        % (ENV, k, least, MAX_INT, _js(v)))
    scope = doc.get("dataloader_scope", "all")
    if scope not in SCOPES:
        errs.append("%s: dataloader_scope must be \"all\" or \"train\", not %s" % (ENV, _js(scope)))
    targs = doc.get("training_args", {})
    if not isinstance(targs, dict):
        errs.append("%s: \"training_args\" must be an object of TrainingArguments fields" % ENV)
        targs = {}
    for k, v in targs.items():
        if not _FIELD.match(k):
            errs.append("%s: training_args key %s is not a field name" % (ENV, _js(k)))
        elif isinstance(v, (list, dict)) or (isinstance(v, float) and not math.isfinite(v)):
            errs.append("%s: training_args.%s must be a finite number, a string, true/false "
                        "or null, not %s" % (ENV, k, _js(v)))
    if errs:
        errs[-1] += "; nothing applied"
        return None, errs
    return {"dataloader": dict(loader), "scope": scope, "training_args": dict(targs)}, []


class _Loader:
    """What this module did to one DataLoader (kept on it as __gpuscope_tune__)."""
    __slots__ = ("index", "orig", "state")

    def __init__(self, index):
        self.index = index
        self.orig = None      # the loader's own settings, once the trial's were applied
        self.state = "own"    # "own", "trial" (applied), "apply" / "revert" at its next iterator


class _Trial:
    def __init__(self, spec, errors):
        self.spec = spec
        self.errors = list(errors)
        self.printed = set()
        self.applied = {}
        self.framework = "torch"
        self.seen = 0
        self.changed = 0
        self.train = None       # the training loader's _Loader ("train" scope)
        self.confirmed = False  # a training forward showed which loader feeds it
        self.touched = False    # the file is written from the first touch on
        self.last = None        # the bytes last written
        self.dir_fd = None
        self.write_failed = False


T = None  # the process's trial, once install() has read GPUSCOPE_TUNE


def active():
    return T is not None


def _error(msg):
    t = T
    if msg in t.errors or len(t.errors) >= MAX_ERRORS:
        return
    t.errors.append(msg)
    if t.touched:
        _say(msg)


def _say(msg):
    if msg not in T.printed:
        T.printed.add(msg)
        print("gpuscope: tune: %s" % msg, file=sys.stderr, flush=True)


def _rank():
    try:
        return int(os.environ["RANK"])
    except (KeyError, ValueError):
        pass
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    return 0


def document():
    """The file's content (a dict)."""
    t = T
    return {"rank": _rank(), "framework": t.framework,
            "scope": t.spec["scope"] if t.spec else None,
            "dataloaders_seen": t.seen, "dataloaders_changed": t.changed,
            "applied": dict(t.applied), "errors": list(t.errors)}


def _write():
    t = T
    run_dir = os.environ.get("GPUSCOPE_RUN_DIR")
    if not run_dir or t.write_failed:
        return
    doc = document()
    data = (json.dumps(doc, indent=1) + "\n").encode()
    if data == t.last:
        return
    from . import _rundir
    try:
        if t.dir_fd is None:
            t.dir_fd = _rundir.open_dir(run_dir)
        # no fsync: rewritten from the training path (5 ms each on a busy disk); the rename
        # still gives a reader a whole file
        _rundir.write(t.dir_fd, FILE % doc["rank"], data, sync=False)
        t.last = data
    except Exception as e:
        t.write_failed = True
        _say("cannot write %s in %s (%s)" % (FILE % doc["rank"], run_dir, e))


def _touch():
    """The process works with a DataLoader or TrainingArguments: from now on the file is
    kept, and the errors so far are printed."""
    t = T
    if not t.touched:
        t.touched = True
        for msg in t.errors:
            _say(msg)


def at_exit(trained):
    """At interpreter exit: a process that trained without touching a loader or arguments
    still writes its file (nothing seen: the trial reached nothing)."""
    if T is None:
        return
    try:
        if trained and not T.touched:
            _touch()
        if T.touched:
            _write()
    except Exception:
        pass


# ---- DataLoader ----

def _cuda():
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_available())
    except Exception:
        return False


def _default_prefetch(loader_cls):
    """torch's prefetch_factor for a loader without workers (2 in torch 1.x, None from 2.0)."""
    try:
        import inspect
        return inspect.signature(loader_cls.__init__).parameters["prefetch_factor"].default
    except Exception:
        return None


def _settings(loader):
    return {k: getattr(loader, k, None) for k in LOADER_KEYS}


def _stop_workers(loader):
    """A persistent iterator made with the old settings: its workers are shut down so that the
    next iterator is made with the new ones."""
    it = loader.__dict__.get("_iterator")
    if it is not None:
        try:
            it._shutdown_workers()
        except Exception:
            pass
        object.__setattr__(loader, "_iterator", None)


def _set(loader, values):
    # object.__setattr__: DataLoader refuses persistent_workers once built (its __setattr__)
    for k, v in values.items():
        object.__setattr__(loader, k, v)


def _apply(loader, lt):
    """The trial's DataLoader settings onto loader, torch's rules checked; returns whether
    the loader now runs with them."""
    t = T
    want = t.spec["dataloader"]
    own = _settings(loader)
    new = {}
    name = "DataLoader #%d" % lt.index
    workers = own["num_workers"] if isinstance(own["num_workers"], int) else 0
    if "num_workers" in want:
        nw = want["num_workers"]
        torch = sys.modules.get("torch")
        iterable = False
        try:
            iterable = isinstance(loader.dataset, torch.utils.data.IterableDataset)
        except Exception:
            pass
        if iterable and nw != workers:
            _error("dataloader.num_workers=%d not applied to %s: it reads an IterableDataset, "
                   "whose every worker process would run the whole iterator unless the dataset "
                   "splits the work by get_worker_info()" % (nw, name))
        else:
            new["num_workers"] = nw
            workers = nw
    if "prefetch_factor" in want:
        if workers > 0:
            new["prefetch_factor"] = want["prefetch_factor"]
        else:
            _error("dataloader.prefetch_factor=%d not applied to %s: it loads in the main "
                   "process (num_workers=0) and prefetching needs worker processes"
                   % (want["prefetch_factor"], name))
    if "persistent_workers" in want:
        if workers > 0 or not want["persistent_workers"]:
            new["persistent_workers"] = want["persistent_workers"]
        else:
            _error("dataloader.persistent_workers=true not applied to %s: it loads in the main "
                   "process (num_workers=0) and has no workers to keep" % name)
    if "pin_memory" in want:
        if not want["pin_memory"] or _cuda():
            new["pin_memory"] = want["pin_memory"]
        else:
            _error("dataloader.pin_memory=true not applied: no CUDA device here (pinned memory "
                   "only speeds up copies to a GPU)")
    named = set(new)  # what the trial asked for and the loader takes
    # what torch's constructor would have made of the new worker count
    if workers > 0 and own["prefetch_factor"] is None and "prefetch_factor" not in new:
        new["prefetch_factor"] = 2  # torch >= 2.0 leaves it None without workers
    if workers == 0 and own["num_workers"]:
        new.setdefault("persistent_workers", False)
        if "prefetch_factor" not in new:
            new["prefetch_factor"] = _default_prefetch(type(loader))
    if not new:
        return False
    if lt.orig is None:
        lt.orig = own
    if any(own.get(k) != v for k, v in new.items()):
        _stop_workers(loader)
    _set(loader, new)
    for k in named:
        t.applied["dataloader." + k] = new[k]
    return True


def _revert(loader, lt):
    if lt.orig is not None:
        if _settings(loader) != lt.orig:
            _stop_workers(loader)
        _set(loader, lt.orig)
    lt.state = "own"


def loader_iter(loader):
    """Before DataLoader.__iter__: the trial's settings for this loader's next iterator.
    Returns the loader's index (tags the iterator), or 0."""
    t = T
    lt = loader.__dict__.get(_MARK)
    dirty = lt is None or lt.state in ("apply", "revert")
    if lt is None:
        t.seen += 1
        lt = _Loader(t.seen)
        object.__setattr__(loader, _MARK, lt)
        _known.append(lt)
        _touch()
        if t.spec is None or not t.spec["dataloader"]:
            pass
        elif t.spec["scope"] == "all":
            lt.state = "apply"
        elif t.train is None:
            torch = sys.modules.get("torch")
            if torch is not None and torch.is_grad_enabled():
                t.train = lt
                lt.state = "apply"
                if not t.confirmed:
                    from . import _loop
                    _loop.S.tune_watch = True
    if lt.state == "apply":
        if _apply(loader, lt):
            t.changed += 1
            lt.state = "trial"
        else:
            lt.state = "own"
    elif lt.state == "revert":
        _revert(loader, lt)
    if dirty:
        _write()
    return lt.index


def trained_on(index):
    """A training forward took a batch of the loader with this index (the tracker calls it
    while S.tune_watch is set): that loader is the training one."""
    from . import _loop
    t = T
    _loop.S.tune_watch = False
    t.confirmed = True
    chosen = t.train
    if not index or (chosen is not None and chosen.index == index):
        return
    # the first choice was wrong (or there was none): the settings move to the loader that
    # trains, at its next iterator; the first choice gets its own back at its next
    target = next((lt for lt in _known if lt.index == index), None)
    if chosen is not None:
        chosen.state = "revert" if chosen.state == "trial" else "own"
    t.train = target
    if target is not None and target.state == "own":
        target.state = "apply"
    if chosen is not None:
        _error("dataloader_scope train: DataLoader #%d was iterated first, but the training "
               "batches come from DataLoader #%d: the settings apply to it from its next "
               "iterator on" % (chosen.index, index))
    else:
        _error("dataloader_scope train: the training batches come from DataLoader #%d, first "
               "iterated with gradients off: the settings apply to it from its next iterator on"
               % index)
    _write()


_known = []  # every _Loader (weak in effect: they hold no loader), for trained_on


def _wrap_iter(orig):
    import functools

    @functools.wraps(orig)
    def __iter__(self):
        idx = 0
        try:
            idx = loader_iter(self)
        except Exception as e:
            try:
                _error("applying the DataLoader settings failed (%s: %s)" % (type(e).__name__, e))
            except Exception:
                pass
        it = orig(self)
        if idx:
            try:
                setattr(it, _MARK, idx)
            except Exception:
                pass
        return it
    __iter__.__gpuscope__ = orig
    return __iter__


# ---- Hugging Face TrainingArguments ----

def _typed(cur, v):
    """v converted to the kind of the field's current value cur, or raises ValueError."""
    import enum
    if cur is None or v is None:
        return v
    if isinstance(cur, bool):
        if isinstance(v, bool):
            return v
    elif isinstance(cur, enum.Enum):
        return type(cur)(v)
    elif isinstance(cur, int):
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    elif isinstance(cur, float):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    elif isinstance(cur, str):
        if isinstance(v, str):
            return v
    else:
        raise ValueError("it holds a %s, not a plain value" % type(cur).__name__)
    raise ValueError("it holds %s %s, not %s" % (type(cur).__name__, _js(cur) if isinstance(
        cur, (bool, int, float, str)) else "", _js(v)))


def training_args(args):
    """Sets the trial's TrainingArguments fields on args (the Trainer's, before its __init__
    runs). Every field is checked first: one the arguments lack, or a value of another type,
    rejects them all. Returns whether anything was set."""
    t = T
    if t is None or args is None:
        return False
    t.framework = "hf"
    _touch()
    want = t.spec["training_args"] if t.spec else {}
    done = getattr(t, "args_done", None)
    if done is None:
        done = t.args_done = []
    if not want or any(a is args for a in done):
        _write()
        return False
    done.append(args)
    cls = type(args).__name__
    new, bad = {}, []
    for k, v in want.items():
        if not hasattr(args, k) or k.startswith("_"):
            bad.append("%s has no field %s" % (cls, k))
            continue
        try:
            new[k] = _typed(getattr(args, k), v)
        except (ValueError, TypeError) as e:
            bad.append("training_args.%s=%s does not fit: %s" % (k, _js(v), e))
    if bad:
        for b in bad:
            _error(b + "; no training_args applied")
        _write()
        return False
    # torch's DataLoader rules, as the Trainer will pass these on
    nw = new.get("dataloader_num_workers", getattr(args, "dataloader_num_workers", 0)) or 0
    if new.get("dataloader_prefetch_factor") is not None and nw == 0:
        _error("training_args.dataloader_prefetch_factor=%s not applied: "
               "dataloader_num_workers is 0 and prefetching needs worker processes"
               % _js(new.pop("dataloader_prefetch_factor")))
    if new.get("dataloader_persistent_workers") and nw == 0:
        new.pop("dataloader_persistent_workers")
        _error("training_args.dataloader_persistent_workers=true not applied: "
               "dataloader_num_workers is 0 and there are no workers to keep")
    if new.get("dataloader_pin_memory") and not _cuda():
        new.pop("dataloader_pin_memory")
        _error("training_args.dataloader_pin_memory=true not applied: no CUDA device here "
               "(pinned memory only speeds up copies to a GPU)")
    for k, v in new.items():
        try:
            setattr(args, k, v)
        except Exception:  # a frozen dataclass (some transformers versions)
            object.__setattr__(args, k, v)
        t.applied["training_args." + k] = v if not hasattr(v, "value") else v.value
    _write()
    return bool(new)


# ---- install ----

def install():
    """Reads GPUSCOPE_TUNE once (when set). Returns whether a trial is set."""
    global T
    if T is not None:
        return True
    text = os.environ.get(ENV)
    if text is None:
        return False
    spec, errors = parse(text)
    T = _Trial(spec, errors)
    _owner[0] = os.getpid()
    import atexit
    atexit.register(flush)
    return True


_owner = [None]


def flush():
    """The process ends: at interpreter exit, or on SIGTERM (`gpuscope run --stop-after-steps`
    stops a trial so; python/gpuscope/_core.py calls this before the signal's own action). Its
    file then says what the trial reached, also for a process that trained without a loader.
    Not in a forked child (a DataLoader worker): the file is its parent's."""
    if _owner[0] != os.getpid():
        return
    lp = sys.modules.get("gpuscope._loop")
    at_exit(lp is not None and lp.S.prof is not None)


def wrap_dataloader(torch, patch):
    """DataLoader.__iter__ wrapped; patch(owner, name, new) is the tracker's (its uninstall()
    takes it out again)."""
    dl = torch.utils.data.DataLoader
    if getattr(dl.__iter__, "__gpuscope__", None) is None:
        patch(dl, "__iter__", _wrap_iter(dl.__iter__))
