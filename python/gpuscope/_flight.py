"""PyTorch's NCCL flight recorder, dumped when `gpuscope run`'s hang watchdog fires.

The flight recorder (torch >= 2.3; docs: PyTorch's "Flight Recorder for Debugging Stuck Jobs")
keeps the last TORCH_NCCL_TRACE_BUFFER_SIZE collectives of every process group in memory;
`gpuscope run` sets that variable to 2000 when the user left it unset. On a hang the watchdog
writes DIR/hang.request ("N", the hang's number). Every rank runs one daemon thread here that
looks at that file once a second, and on a new number writes
DIR/hang-N-nccl/nccl_trace_rank_<global rank>: the pickled dump of
torch._C._distributed_c10d._dump_nccl_trace(), the file PyTorch itself writes on a timeout, so
`torchfrtrace --prefix nccl_trace_rank_ DIR/hang-N-nccl` (PyTorch's analyzer) reads it. A thread,
not the step path: a hung main thread sits in a C call that released the GIL (a collective's
wait, a CUDA synchronize), so this thread still runs. Where there is nothing to dump (a torch
without the recorder, no NCCL process group) the rank writes nccl_trace_rank_<rank>.unavailable
with the reason instead, so a reader never waits for a file that will not come.

Before the dump, the thread calls the functions given to on_request() (the profiler's: hand
every completed step record to the receiver), so a hang's report holds every rank's steps.

Files are made as python/gpuscope/_rundir.py makes them: the run directory opened once and
checked, every file created exclusively without following links and renamed into place; a
hang.request is honoured only when it is a regular file of the run directory's owner.

Only the thread's own failures are caught and reported in that file; it never raises into the
training process, and it imports nothing the process has not imported itself.
"""
import os
import sys
import threading

from . import _rundir

POLL_S = 1.0
REQUEST = "hang.request"
PREFIX = "nccl_trace_rank_"

_started = []  # the one watcher of this process
_hooks = []    # called on every new request (on_request)


def on_request(fn):
    """fn() is called (once per new request, on the watcher's thread) before the dump."""
    if fn not in _hooks:
        _hooks.append(fn)


def _dump_fn():
    """PyTorch's on-demand dump, or (None, why)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None, "torch is not imported in this process"
    c10d = getattr(getattr(torch, "_C", None), "_distributed_c10d", None)
    fn = getattr(c10d, "_dump_nccl_trace", None)
    if fn is None:
        return None, ("torch %s has no NCCL flight recorder (torch._C._distributed_c10d."
                      "_dump_nccl_trace; PyTorch 2.3 or newer)" % getattr(torch, "__version__", "?"))
    return fn, None


def _global_rank(fallback):
    """The process group's rank when it is up (it may come up after the tracker started),
    else $RANK, else fallback."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    try:
        return int(os.environ["RANK"])
    except (KeyError, ValueError):
        return fallback


def dump(run_dir, hang, rank, dir_fd=None):
    """Writes this rank's flight recorder dump for hang number `hang` into
    run_dir/hang-N-nccl/ (run_dir: a path, or dir_fd: the run directory already opened and
    checked); returns the path."""
    rank = _global_rank(rank)
    sub = "hang-%d-nccl" % hang
    name = "%s%d" % (PREFIX, rank)
    own = dir_fd is None
    if own:
        dir_fd = _rundir.open_dir(run_dir)
    try:
        out = _rundir.open_dir(sub, dir_fd=dir_fd, create=True)
    finally:
        if own:
            os.close(dir_fd)
    try:
        fn, why = _dump_fn()
        if fn is not None:
            try:
                data = fn()
                if isinstance(data, (bytes, bytearray)) and data:
                    _rundir.write(out, name, bytes(data))
                    return os.path.join(run_dir, sub, name)
                why = "the flight recorder returned nothing (no NCCL process group?)"
            except Exception as e:  # e.g. no NCCL backend built in, or no process group
                why = "the flight recorder dump failed: %s: %s" % (type(e).__name__, e)
        name += ".unavailable"
        _rundir.write(out, name, (why + "\n").encode())
        return os.path.join(run_dir, sub, name)
    finally:
        os.close(out)


def _read_request(dir_fd):
    try:
        return int(_rundir.read_request(dir_fd, REQUEST).split()[0])
    except (AttributeError, ValueError, IndexError):
        return None


def _watch(run_dir, dir_fd, rank, stop):
    try:
        seen = _read_request(dir_fd)  # a request older than this process is not ours
        while not stop.wait(POLL_S):
            n = _read_request(dir_fd)
            if n is None or n == seen:
                continue
            seen = n
            for fn in list(_hooks):
                try:
                    fn()
                except Exception:
                    pass
            try:
                dump(run_dir, n, rank, dir_fd=dir_fd)
            except Exception:  # a full disk, a removed directory: never the training's problem
                pass
    finally:
        os.close(dir_fd)


def start(run_dir, rank):
    """Starts the watcher once per process (under `gpuscope run`: GPUSCOPE_RUN_DIR); returns
    the threading.Event that stops it, or None when it was already started or there is no
    run directory."""
    if _started or not run_dir:
        return None
    try:  # opened once and checked: a link or a directory others may write is not watched
        dir_fd = _rundir.open_dir(run_dir)
    except OSError:
        return None
    stop = threading.Event()
    t = threading.Thread(target=_watch, args=(run_dir, dir_fd, max(int(rank), 0), stop),
                         name="gpuscope-flight-recorder", daemon=True)
    t.start()
    _started.append((t, stop))
    return stop
