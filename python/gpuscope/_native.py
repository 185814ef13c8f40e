"""ctypes binding of libgpuscope.so (include/gpuscope/gs_run.h).

The library is looked for next to this file (the build tree and the installed package keep
it there), else at $GPUSCOPE_LIBRARY. If it cannot be loaded the package keeps working: steps
are still timed and logged, nothing is aggregated natively and no report is written; a single
warning says why.

StepRec mirrors struct gs_step_rec field for field (160 bytes; tests/python/test_py_native.py
compiles the header and compares every offset). The per-step path does not go through it:
ctypes attribute stores are slow once the training step has evicted them from the caches, so
NativeRun.push() packs the same layout with one struct.pack_into() into a fixed buffer and
calls gs_run_step through a PyDLL handle (the call keeps the GIL: it only takes a mutex held
for microseconds, so releasing and re-taking the GIL would cost more than the call).
"""
import ctypes
import json
import math
import os
import struct
import sys

PH_DATA, PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_COMM, PH_STEP = range(6)
PH_N = 6
# Record version 2 appends two phases after the version-1 fields (gs_run.h ms_x[]).
PH_COMM_EXPOSED, PH_OTHER = 6, 7
PH_ALL = 8
PHASES = ("data", "forward", "backward", "optimizer_step", "communication", "total_step",
          "communication_exposed", "other")
STEP_REC_VERSION = 3  # 3: tokens after ms_x
FLAG_CUDA_EVENTS = 1
FLAG_DATA_IN_STEP = 2  # GS_STEP_DATA_IN_STEP
FLAG_PROFILED = 4  # GS_STEP_PROFILED
NAN = math.nan


class StepRec(ctypes.Structure):
    _fields_ = [
        ("version", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("step", ctypes.c_uint64),
        ("t_begin", ctypes.c_double),
        ("t_end", ctypes.c_double),
        ("ms", ctypes.c_double * PH_N),
        ("samples", ctypes.c_uint64),
        ("rank", ctypes.c_int32),
        ("device", ctypes.c_int32),
        ("mem_allocated", ctypes.c_uint64),
        ("mem_reserved", ctypes.c_uint64),
        ("mem_peak_allocated", ctypes.c_uint64),
        ("mem_peak_reserved", ctypes.c_uint64),
        ("mem_total", ctypes.c_uint64),
        ("ms_x", ctypes.c_double * (PH_ALL - PH_N)),
        ("tokens", ctypes.c_uint64),  # version 3: tokens trained on in the step, 0 = unknown
    ]


# struct gs_step_rec as one pack: every field is naturally aligned, so no padding bytes.
REC_FORMAT = struct.Struct("=IIQdd6dQii5Q2dQ")
NO_MEM = (0, 0, 0, 0, 0)

_lib = None
_pylib = None
_load_error = None
_warned = False


def _candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libgpuscope.so")
    env = os.environ.get("GPUSCOPE_LIBRARY")
    if env:
        yield env


def load():
    """The loaded library, or None (the reason is in load_error())."""
    global _lib, _load_error
    if _lib is not None or _load_error is not None:
        return _lib
    errors = []
    for path in _candidates():
        if not os.path.exists(path):
            errors.append(f"{path}: not found")
            continue
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            errors.append(str(e))
            continue
        _bind(lib)
        global _pylib
        _pylib = ctypes.PyDLL(path)
        _pylib.gs_run_step.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        _pylib.gs_run_step.restype = ctypes.c_int
        _lib = lib
        return lib
    _load_error = "; ".join(errors) or "libgpuscope.so not found"
    return None


def load_error():
    return _load_error


def _bind(lib):
    c = ctypes
    lib.gs_run_open.argtypes = [c.c_char_p, c.c_char_p, c.c_size_t]
    lib.gs_run_open.restype = c.c_void_p
    lib.gs_run_step.argtypes = [c.c_void_p, c.POINTER(StepRec)]
    lib.gs_run_step.restype = c.c_int
    lib.gs_run_finish.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p, c.c_size_t]
    lib.gs_run_finish.restype = c.c_void_p  # char * we must free with gs_free
    lib.gs_run_notes.argtypes = [c.c_void_p]
    lib.gs_run_notes.restype = c.c_char_p
    lib.gs_run_close.argtypes = [c.c_void_p]
    lib.gs_run_close.restype = None
    lib.gs_free.argtypes = [c.c_void_p]
    lib.gs_free.restype = None
    if hasattr(lib, "gs_run_control"):  # the agent's profiler-window requests
        lib.gs_run_control.argtypes = [c.c_void_p]
        lib.gs_run_control.restype = c.c_int
    if hasattr(lib, "gs_run_flush"):  # waits for the sender (SIGTERM, exit)
        lib.gs_run_flush.argtypes = [c.c_void_p, c.c_int]
        lib.gs_run_flush.restype = c.c_int
    if hasattr(lib, "gs_run_log"):  # the "log" record (training curves)
        lib.gs_run_log.argtypes = [c.c_void_p, c.c_char_p, c.c_char_p, c.c_size_t]
        lib.gs_run_log.restype = c.c_int


def warn_once(msg):
    global _warned
    if not _warned:
        _warned = True
        print(f"gpuscope: {msg}", file=sys.stderr, flush=True)


class NativeRun:
    """One gs_run. Without the library every method is a cheap no-op and finish() returns
    None."""

    def __init__(self, config):
        self._lib = load()
        self._run = None
        self._rank = int(config.get("rank", 0) or 0)
        devs = config.get("devices") or [-1]
        self._device = int(devs[0])
        if self._lib is None:
            warn_once(f"native core unavailable ({_load_error}); steps are logged but no "
                      "report is written")
            return
        err = ctypes.create_string_buffer(512)
        run = self._lib.gs_run_open(json.dumps(config).encode(), err, len(err))
        if not run:
            warn_once(f"gs_run_open: {err.value.decode(errors='replace')}")
            return
        self._run = run
        self._notes_shown = 0
        self._show_notes()
        self._step = self._lib.gs_run_step
        self._buf = ctypes.create_string_buffer(REC_FORMAT.size)
        self._addr = ctypes.addressof(self._buf)
        self._fast = _pylib.gs_run_step
        self._pack = REC_FORMAT.pack_into

    def _show_notes(self):
        # what the native core could not do without failing the run: shown here, by us
        text = (self._lib.gs_run_notes(self._run) or b"").decode(errors="replace")
        for line in text[self._notes_shown:].splitlines():
            print(f"gpuscope: {line}", file=sys.stderr, flush=True)
        self._notes_shown = len(text)

    @property
    def active(self):
        return self._run is not None

    def step(self, rec):
        """Adds a StepRec (the ABI mirror; tests and tools)."""
        if self._run is not None:
            return self._step(self._run, ctypes.byref(rec))
        return -1

    def push(self, step, flags, t_begin, t_end, ms, samples, mem=NO_MEM, tokens=0):
        """Adds one step from plain values (the per-step path): ms a sequence of PH_ALL floats
        in PHASES order (NaN = not measured), mem (allocated, reserved, peak_allocated,
        peak_reserved, total) bytes, tokens trained on (0 = unknown)."""
        if self._run is None:
            return -1
        self._pack(self._buf, 0, STEP_REC_VERSION, flags, step, t_begin, t_end, *ms[:PH_N],
                   samples, self._rank, self._device, *mem, *ms[PH_N:PH_ALL], tokens)
        return self._fast(self._run, self._addr)

    def log(self, rec):
        """Sends one "log" record ({"step", "t", "values"}, src/run/record.h) to the
        receiver; False when there is none or the library predates it."""
        if self._run is None or not hasattr(self._lib, "gs_run_log"):
            return False
        err = ctypes.create_string_buffer(256)
        if self._lib.gs_run_log(self._run, json.dumps(rec).encode(), err, len(err)) != 0:
            warn_once(f"gs_run_log: {err.value.decode(errors='replace')}")
            return False
        return True

    def drain(self, timeout_s):
        """Waits until the native sender has passed on every record handed to it, at most
        timeout_s; True when nothing is left (also without a receiver)."""
        if self._run is None or not hasattr(self._lib, "gs_run_flush"):
            return True
        return self._lib.gs_run_flush(self._run, int(timeout_s * 1000)) == 0

    def control(self):
        """Steps of a profiler window the node's agent asked for (`gpuscope trace capture
        --run ID`), once per request; 0 when none waits or the library predates it."""
        if self._run is None or not hasattr(self._lib, "gs_run_control"):
            return 0
        return int(self._lib.gs_run_control(self._run))

    def finish(self, end):
        """Ends the run; returns the report as a dict (written to output_dir when given) or
        None."""
        if self._run is None:
            return None
        err = ctypes.create_string_buffer(512)
        p = self._lib.gs_run_finish(self._run, json.dumps(end).encode(), err, len(err))
        self._show_notes()
        if not p:
            warn_once(f"gs_run_finish: {err.value.decode(errors='replace')}")
            return None
        try:
            return json.loads(ctypes.string_at(p).decode())
        finally:
            self._lib.gs_free(p)

    def close(self):
        if self._run is not None:
            self._lib.gs_run_close(self._run)
            self._run = None
