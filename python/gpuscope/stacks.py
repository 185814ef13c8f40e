"""In-process Python stack sampling (docs/stacks.md, "PERMISSIONS").

When nothing outside may read this process (kernel.yama.ptrace_scope=3, a container without
CAP_SYS_PTRACE for a reader that is not our ancestor), libgpuscope.so samples the process's
own stacks from a native thread, with the same reader `gpuscope stacks` uses from outside:

    import gpuscope.stacks
    s = gpuscope.stacks.start(rate=100)        # every thread; main_thread_only=True for one
    ...
    s.write("profile.svg")                     # or .json (speedscope), anything else: collapsed
    s.stop()

The sampler thread never takes the GIL and never runs Python code. Started automatically at
import of the package when GPUSCOPE_STACKS_INPROC is set (to a rate, or "1" for 100 Hz) or,
under `gpuscope run --stacks`, when ptrace_scope is 3; then the profile goes to
$GPUSCOPE_RUN_DIR (or the current directory) as stacks-inproc-PID.txt and .svg at exit.
"""
import atexit
import ctypes
import os

from . import _native

_auto = [None]


class Sampler:
    """A running in-process sampler (see start)."""

    def __init__(self, handle, lib):
        self._h = handle
        self._lib = lib

    @property
    def samples(self):
        return self._lib.gs_stacks_self_samples(self._h) if self._h else 0

    def write(self, path, format=None):
        """Writes the profile so far: format "collapsed", "speedscope" or "svg"; by default
        from the extension (.svg, .json, else collapsed)."""
        if format is None:
            format = ("svg" if path.endswith(".svg") else
                      "speedscope" if path.endswith(".json") else "collapsed")
        err = ctypes.create_string_buffer(512)
        if self._lib.gs_stacks_self_write(self._h, os.fsencode(path), format.encode(), err,
                                          len(err)) != 0:
            raise OSError(err.value.decode(errors="replace"))

    def stop(self):
        if self._h:
            self._lib.gs_stacks_self_stop(self._h)
            self._h = None


def _bind(lib):
    c = ctypes
    lib.gs_stacks_self_start.argtypes = [c.c_double, c.c_int, c.c_char_p, c.c_size_t]
    lib.gs_stacks_self_start.restype = c.c_void_p
    lib.gs_stacks_self_write.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p, c.c_char_p,
                                         c.c_size_t]
    lib.gs_stacks_self_write.restype = c.c_int
    lib.gs_stacks_self_samples.argtypes = [c.c_void_p]
    lib.gs_stacks_self_samples.restype = c.c_ulonglong
    lib.gs_stacks_self_stop.argtypes = [c.c_void_p]
    lib.gs_stacks_self_stop.restype = None


def start(rate=100, main_thread_only=False):
    """Starts sampling this process at rate Hz; returns a Sampler. Raises OSError when the
    native library is missing or cannot read this interpreter."""
    lib = _native.load()
    if lib is None:
        raise OSError("gpuscope: libgpuscope.so not loaded: %s" % _native.load_error())
    _bind(lib)
    err = ctypes.create_string_buffer(512)
    h = lib.gs_stacks_self_start(float(rate), 1 if main_thread_only else 0, err, len(err))
    if not h:
        raise OSError(err.value.decode(errors="replace"))
    return Sampler(h, lib)


def _ptrace_scope():
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return -1


def _finish_auto():
    s = _auto[0]
    if s is None:
        return
    _auto[0] = None
    base = os.path.join(os.environ.get("GPUSCOPE_RUN_DIR") or ".", "stacks-inproc-%d" % os.getpid())
    try:
        s.write(base + ".txt")
        s.write(base + ".svg")
    except OSError as e:
        _native.warn_once("in-process stacks: %s" % e)
    s.stop()


def auto_start():
    """Starts the automatic sampler when the environment asks for it (see the module doc)."""
    want = os.environ.get("GPUSCOPE_STACKS_INPROC")
    hz = os.environ.get("GPUSCOPE_STACKS_HZ")
    if _auto[0] is not None:
        return
    rate = None
    if want:
        try:
            rate = float(want) if want not in ("1", "on", "yes") else 100.0
        except ValueError:
            rate = 100.0
    elif hz and os.environ.get("GPUSCOPE_RUN_DIR") and _ptrace_scope() == 3:
        try:
            rate = float(hz)
        except ValueError:
            rate = None
    if not rate or rate <= 0:
        return
    try:
        _auto[0] = start(rate, main_thread_only=not want)
    except OSError as e:
        _native.warn_once("in-process stacks: %s" % e)
        return
    atexit.register(_finish_auto)
