"""The profiler: per-step phase timing, the step log lines, and the hand-off to the native core.

One Profiler per training process. A step is opened by step_begin() and closed by step_end();
inside it phases are opened and closed (phase_begin / phase_end) by the context managers, the
module and optimizer hooks, or the Trainer callback. Each phase may occur several times in a
step (gradient accumulation): its times are summed.

Clocks. On CPU every time is time.perf_counter_ns() on the host. On CUDA, forward, backward,
optimizer and communication are timed by torch.cuda.Event pairs recorded on the current
stream; the step is closed on the host at once, but its record is completed only when all its
events have completed, found by Event.query() at later steps (normally one or two steps later).
Nothing here ever calls torch.cuda.synchronize() inside the training loop; finish() waits for
the last events once. The data phase (the wait for the next batch, i.e. the host gap between
one step's end and the next step's begin, or an explicit "data" phase) is always host time.

Log lines (every logging_steps steps, once the step's record is complete):
    Step 100: GPU memory usage: 28.4 GB / 40.5 GB (70.1%), Peak memory: 29.1 GB
    Step 100: CUDA event time: forward=124.3ms, backward=89.7ms, optimizer_step=15.2ms, total_step=232.1ms
    Step 100: GPU utilization estimate: 68.4% (based on CUDA event timing)
On CPU the second line says "Host time:", the third "Step busy estimate: ... (based on host
timing)" (host clocks say nothing of a GPU), and the first
"GPU memory usage: n/a (no CUDA device)". A phase that was not measured prints as "n/a".

Hand-off. The training thread only appends a completed step's record to a deque; the
profiler's own daemon thread ("gpuscope-sender") hands what waits to the native core every
FLUSH_S, whose sender thread sends it on at once. So a main thread that blocks (a hang in a
collective, a sleep) or a process that is killed loses at most the last FLUSH_S of steps,
and records are also handed over (and the native sender waited for, at most DRAIN_S) on
SIGTERM (the previous handler is then called, or the default action taken: the signal keeps
its effect), at interpreter exit, and when `gpuscope run`'s hang watchdog writes its request
(gpuscope._flight). Only the sender thread, finish() and those last-moment paths call the
native core, under one lock.

In a job of several ranks each line starts with "[rank R] ". $GPUSCOPE_LOG_STEPS (`gpuscope
run --log-steps N`) prints them every N steps instead, and not at all with 0.
"""
import collections
import logging
import math
import os
import re
import signal
import sys
import threading
import time

from . import _facts, _native, _profile
from ._hooks import read_pending_tokens as _hooks_tokens
from ._native import (FLAG_CUDA_EVENTS, FLAG_DATA_IN_STEP, FLAG_PROFILED, NAN, NO_MEM, PH_BACKWARD, PH_COMM,
                      PH_DATA, PH_FORWARD, PH_N, PH_OPTIMIZER, PH_STEP, PHASES)
# PHASES also names the two phases of record version 2 (communication_exposed, other),
# which the native core derives or the loop tracker measures; phase() takes the first six.

FLUSH_S = 0.25      # the sender thread hands waiting step records to the native core this often
DRAIN_S = 2.0       # at most this long waiting for the native sender on SIGTERM / exit
PHASE_INDEX = {name: i for i, name in enumerate(PHASES)}
PHASE_INDEX.update({"optimizer": PH_OPTIMIZER, "comm": PH_COMM, "step": PH_STEP})
_NOT_OPEN = [None] * PH_N  # Profiler._open with no phase open

_perf_ns = time.perf_counter_ns
_wall = time.time
# The most recently started profiler: where gpuscope.log() sends (the plain-loop API's, the
# zero-code loop tracker's or the HF callback's).
_current = [None]
_LOG_KEY = re.compile(r"[A-Za-z0-9_./-]{1,48}\Z")

logger = logging.getLogger("gpuscope")


def _ensure_log_handler():
    """Lines must be visible without any logging setup: when neither our logger nor the root
    has a handler, print them on stderr, message only."""
    if logger.handlers or logging.getLogger().handlers:
        return
    h = logging.StreamHandler(sys.stderr)
    h.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(h)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def _log_every(logging_steps):
    """Steps between the log lines: $GPUSCOPE_LOG_STEPS (gpuscope run --log-steps; 0: none)
    when it holds a whole number >= 0, else logging_steps."""
    v = os.environ.get("GPUSCOPE_LOG_STEPS", "")
    return int(v) if v.isdigit() else logging_steps


def _fmt_ms(v):
    return "n/a" if v != v else f"{v:.1f}ms"


def format_lines(step, ms, mem, cuda):
    """The three log lines of one completed step: ms the PH_N phase times (NaN = not
    measured), mem (allocated, reserved, peak_allocated, peak_reserved, total) bytes."""
    n = step
    if cuda and mem[4]:
        gb = 1e9
        pct = 100.0 * mem[0] / mem[4]
        mline = (f"Step {n}: GPU memory usage: {mem[0] / gb:.1f} GB / {mem[4] / gb:.1f} GB "
                 f"({pct:.1f}%), Peak memory: {mem[2] / gb:.1f} GB")
    else:
        mline = f"Step {n}: GPU memory usage: n/a (no CUDA device)"
    what = "CUDA event time" if cuda else "Host time"
    times = (f"Step {n}: {what}: forward={_fmt_ms(ms[PH_FORWARD])}, "
             f"backward={_fmt_ms(ms[PH_BACKWARD])}, optimizer_step={_fmt_ms(ms[PH_OPTIMIZER])}, "
             f"total_step={_fmt_ms(ms[PH_STEP])}")
    est = utilization_estimate(ms)
    # Host clocks say how busy the step was, not a GPU: a CPU run names it so.
    what = "GPU utilization estimate" if cuda else "Step busy estimate"
    basis = "CUDA event timing" if cuda else "host timing"
    util = (f"Step {n}: {what}: "
            f"{'n/a' if est != est else f'{est:.1f}%'} (based on {basis})")
    return [mline, times, util]


def utilization_estimate(ms):
    """GPU compute time (forward + backward + optimizer, which excludes data loading and
    logging) over the step's wall time including its data wait (data + total_step), in
    percent, as the report's gpu_busy_estimate_percent; NaN when the step was not timed."""
    total = ms[PH_STEP]
    if not total > 0:
        return NAN
    data = ms[PH_DATA]
    if data == data:
        total += data
    busy = sum(v for v in (ms[PH_FORWARD], ms[PH_BACKWARD], ms[PH_OPTIMIZER]) if v == v)
    return min(100.0, 100.0 * busy / total)


class _Pending:
    """A closed CUDA step waiting for its events: (phase, start, end) triples."""
    __slots__ = ("step", "t_begin", "t_end", "ms", "samples", "mem", "events", "step_events",
                 "adj", "flags", "tokens", "token_pending")

    def __init__(self, step, t_begin, t_end, ms, samples, mem, events, step_events, adj,
                 flags=0, tokens=0, token_pending=None):
        self.step, self.t_begin, self.t_end = step, t_begin, t_end
        self.ms, self.samples, self.mem = ms, samples, mem
        self.events, self.step_events = events, step_events
        self.adj, self.flags = adj, flags
        self.tokens, self.token_pending = tokens, token_pending


class Profiler:
    """Times steps and phases; see the module docstring. Not for use from several training
    threads at once (one training loop per process); the hooks it installs may run on
    autograd's threads while the training thread waits in backward()."""

    def __init__(self, output_dir=None, logging_steps=10, run_name=None, framework="torch",
                 device=None, rank=None, world_size=None, local_rank=None, socket=None,
                 nvml="auto", sample_interval_s=0.5, log=None, native=True, facts=None,
                 tags=None):
        self.output_dir = output_dir
        self.logging_steps = max(1, int(logging_steps or 10))
        self.log_every = _log_every(self.logging_steps)
        self.framework = framework
        self.run_name = run_name
        self.rank, self.world_size, self.local_rank = _dist_identity(rank, world_size,
                                                                     local_rank)
        self.device = device     # resolved at start(): the model may move to CUDA after init()
        self.cuda_device = None
        self.cuda = False
        self._log = log
        if log is None:
            _ensure_log_handler()
        self._config = {"framework": framework, "logging_steps": self.logging_steps,
                        "rank": self.rank, "world_size": self.world_size,
                        "local_rank": self.local_rank, "nvml": nvml,
                        "sample_interval_s": sample_interval_s}
        if not run_name and self.world_size > 1:
            # The ranks of one distributed job share a name, so the agent keeps them as one run
            # (docs/agent.md, RUNS): torchrun's rendezvous id, else the scheduler's job id.
            run_name = _job_id(os.environ)
            self.run_name = run_name
        if run_name:
            self._config["run_name"] = run_name
        job = _job_key(os.environ, run_name, self.world_size)
        if job:  # one id for the ranks of a job on every node (docs/run.md, JOBS)
            self._config["job"] = job
        if os.environ.get("GPUSCOPE_NODE"):
            self._config["node"] = os.environ["GPUSCOPE_NODE"][:128]
        if socket:
            self._config["socket"] = socket
        if tags:  # the run's tags ({"team": "nlp"}); $GPUSCOPE_RUN_TAGS (gpuscope run --tag) wins
            self._config["tags"] = {str(k): str(v) for k, v in dict(tags).items()}
        self._native_enabled = native
        # The run's settings for the diagnosis (gpuscope._facts); the callback and instrument()
        # add the loader's, the arguments' and the model's before start(), which adds the
        # process's and sends them in the hello.
        self.facts = dict(facts or {})
        self.native = None
        self.step_no = 0
        self.steps_done = 0
        self.samples_done = 0
        self.tokens_done = 0  # tokens of the completed steps (CUDA steps once their events are)
        self.last_step = None  # (step, ms, mem) of the last completed step
        self.last_lines = []
        self.first_begin = None
        self.last_end = None
        self._in_step = False
        self._mark_ns = None       # start of the current data gap
        self._data_ms = NAN        # explicit data time for the next / current step
        self._open = [None] * PH_N  # open phase: start ns (host) or start event (CUDA)
        self._acc = [0.0] * PH_N
        self._seen = [False] * PH_N
        self._events = []          # CUDA: (phase, start, end) of the open step
        self._pending = collections.deque()
        self._batch = collections.deque()  # completed records for the sender thread
        self._flush_lock = threading.Lock()
        self._sender_stop = None
        self._pid = None  # the process whose sender thread this profiler started
        self._event_pool = []
        self._finished = False
        self._started = False
        # The loop tracker (gpuscope._loop) measures data inside the step (time in the
        # DataLoader's __next__) and a step from one optimizer step's end to the next: then
        # total_step is the step's wall time less its data time, so that data + total_step is
        # still the step's wall time (docs/report.md).
        self.data_in_step = False
        # The loop tracker opens the native run (the hello, which carries the facts) after its
        # first step, when the settings the step showed (micro-steps, autocast) are known;
        # steps wait in _batch until then.
        self.defer_native = False
        self._native_pending = False
        self._open_lock = threading.Lock()
        self._profiled_next = False  # the next step is in a profiler window (step_end)
        self.outcome = {}          # sent in the end record (docs/report.md, OUTCOME)
        self._exposed = NAN        # exposed communication of the open step (loop tracker)
        self._adj = [0.0] * PH_N   # CUDA: host corrections to event-timed phases
        self._mem_total = 0
        self._t0 = 0.0
        self._p0 = 0
        self._step_ev = None
        self._capture = None       # torch.profiler windows (_profile.py, GPUSCOPE_PROFILE)
        self._nvtx = _profile.nvtx_from_env(PHASES)  # NVTX ranges (GPUSCOPE_NVTX, nsys)

    # ---- lifecycle ----

    def start(self):
        """Opens the native run (idempotent); called by the first step or by the callback."""
        if self._started:
            return self
        self._started = True
        self.cuda_device = _cuda_device(self.device)
        self.cuda = self.cuda_device is not None
        if self.cuda:
            self._config["devices"] = [self.cuda_device]
        if self._native_enabled and self.defer_native:
            self._native_pending = True  # open_native() sends the hello
        elif self._native_enabled:
            self._open_native()
        if self._native_enabled and self.cuda:
            import torch
            try:
                self._mem_total = int(torch.cuda.mem_get_info(self.cuda_device)[1])
            except Exception:  # older torch: the device's total from its properties
                self._mem_total = int(
                    torch.cuda.get_device_properties(self.cuda_device).total_memory)
        if self._native_enabled and (self._native_pending or (
                self.native is not None and self.native.active)):
            self._start_sender()
        if "torch.distributed" in sys.modules:
            from . import _hooks
            _hooks.wrap_distributed(self)  # no-op unless the process group is up
        if self._mark_ns is None:
            self._mark_ns = _perf_ns()
        _current[0] = self
        self._capture = _profile.from_env(
            self.rank, self.cuda,
            poll=self._control if self.native is not None or self._native_pending else None)
        if self._capture:
            self._capture.boundary(0)
        if os.environ.get("GPUSCOPE_RUN_DIR"):  # the hang watchdog's flight recorder dumps
            from . import _flight
            _flight.start(os.environ["GPUSCOPE_RUN_DIR"], self.rank)
            _flight.on_request(_flush_current)  # the watchdog's request: every rank flushes
        return self

    def _start_sender(self):
        stop = threading.Event()
        self._pid = os.getpid()

        def loop():
            while not stop.wait(FLUSH_S):
                self._flush()

        t = threading.Thread(target=loop, name="gpuscope-sender", daemon=True)
        t.start()
        self._sender_stop = (stop, t)
        _install_exit_flush()

    def flush(self, timeout_s=DRAIN_S):
        """Hands every completed step record to the native core and waits (at most timeout_s)
        until its sender has passed them on. Any thread; False when something is still
        queued (the lock was busy or the time ran out)."""
        if not self._flush(timeout_s):
            return False
        native = self.native
        return native is None or native.drain(timeout_s)

    def open_native(self, flush=True):
        """Sends the hello of a run started with defer_native (the loop tracker: once its
        first step has shown the settings it reports) and hands it the steps kept so far
        (flush=False: none can be kept yet, the caller is not the training thread)."""
        with self._open_lock:
            if not self._native_pending:
                return
            self._open_native()
            self._native_pending = False
        if flush:
            self._flush()

    def _open_native(self):
        cfg = dict(self._config)
        if self.output_dir:
            cfg["output_dir"] = os.path.abspath(self.output_dir)
        try:
            facts = _facts.clean(self.facts, _facts.from_process(self.cuda_device))
        except Exception:  # advisory: never a reason to fail the training
            facts = {}
        if facts:
            cfg["facts"] = facts
        self.native = _native.NativeRun(cfg)

    def _control(self):
        return self.native.control() if self.native is not None else 0

    def log(self, values, step=None):
        """Sends logged values (loss, learning rate, ...) with the run, for the report's
        training curves: finite numbers only (a 1-element tensor or numpy scalar is read
        with float(), which waits for the GPU); other values and keys outside
        [A-Za-z0-9_.-/] (1..48 bytes) are left out, at most 32 kept. step defaults to the
        last finished step. Returns whether a record was sent."""
        vals = {}
        for k, v in (values or {}).items():
            k = str(k)
            if isinstance(v, bool) or not _LOG_KEY.match(k):
                continue
            if not isinstance(v, (int, float)):
                try:
                    v = float(v)
                except (TypeError, ValueError, RuntimeError):
                    continue
            v = float(v)
            if v == v and abs(v) != float("inf") and len(vals) < 32:
                vals[k] = v
        if not vals:
            return False
        if not self._started:
            self.start()
        if self.native is None:
            return False
        rec = {"step": int(step) if step is not None else self.step_no, "t": _wall(),
               "values": vals}
        return self.native.log(rec)

    def mark(self):
        """Says that the training loop did something that is not data loading until now
        (logging, evaluation, checkpointing): the data gap of the next step starts here."""
        self._mark_ns = _perf_ns()

    # ---- steps ----

    def step_begin(self, now=None):
        """now: the host clock (perf_counter_ns) when the caller already read it (the loop
        tracker's boundary: the previous step's end is this one's begin)."""
        if self._in_step:
            self.step_end()
        if not self._started:
            self.start()
        if now is None:
            now = _perf_ns()
        if self._data_ms == self._data_ms:
            self._acc[PH_DATA] = self._data_ms
            self._seen[PH_DATA] = True
        elif self._mark_ns is not None and self.step_no > 0 and not self.data_in_step:
            self._acc[PH_DATA] = (now - self._mark_ns) / 1e6
            self._seen[PH_DATA] = True
        self._data_ms = NAN
        self._in_step = True
        self._t0 = _wall()
        self._p0 = now
        if self.first_begin is None:
            self.first_begin = self._t0
        if self.cuda:
            self._step_ev = self._event()
            self._step_ev.record()
        if self._nvtx:
            self._nvtx.begin(PH_STEP, "step %d" % (self.steps_done + 1))

    def step_end(self, samples=0, step=None, now=None, tokens=0, token_pending=None):
        """tokens: trained on in the step (0 = unknown); token_pending: pinned host tensors
        (_hooks.forward_tokens) whose values add to it once the step's events completed."""
        if not self._in_step:
            return
        op = self._open
        if op[PH_FORWARD] is not None or op[PH_BACKWARD] is not None or \
                op[PH_OPTIMIZER] is not None or op[PH_COMM] is not None:
            for ph in (PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER, PH_COMM):
                if op[ph] is not None:
                    self.phase_end(ph)
            now = None  # phase_end read the clock after the caller
        if now is None:
            now = _perf_ns()
        self._in_step = False
        self._mark_ns = now
        if self._nvtx:
            self._nvtx.end(PH_STEP)
        self.step_no = int(step) if step is not None else self.step_no + 1
        t_end = self._t0 + (now - self._p0) / 1e9
        samples = int(samples or 0)
        tokens = int(tokens or 0)
        acc, seen = self._acc, self._seen
        ms = [acc[0] if seen[0] else NAN, acc[1] if seen[1] else NAN,
              acc[2] if seen[2] else NAN, acc[3] if seen[3] else NAN,
              acc[4] if seen[4] else NAN, (now - self._p0) / 1e6, self._exposed, NAN]
        if self.data_in_step and seen[0]:
            ms[PH_STEP] = max(0.0, ms[PH_STEP] - acc[0])
        self._acc = [0.0] * PH_N
        self._seen = [False] * PH_N
        self._exposed = NAN
        adj, self._adj = self._adj, [0.0] * PH_N
        self.last_end = t_end
        self.steps_done += 1
        self.samples_done += samples
        cap = self._capture
        flags = FLAG_DATA_IN_STEP if self.data_in_step else 0
        if self._profiled_next:
            flags |= FLAG_PROFILED
        if cap is not None and (self._profiled_next or cap.prof is not None or
                                self.steps_done >= cap.wake_step or now >= cap.wake_ns):
            active = cap.prof is not None
            if self.steps_done >= cap.wake_step or now >= cap.wake_ns:
                cap.boundary(self.steps_done)  # else it has nothing to do (_profile.Capture)
            # the next step runs under the profiler, or carries its teardown (the trace
            # written at the window's end): flagged profiled, out of the step statistics
            self._profiled_next = active or cap.prof is not None
        if not self.cuda:
            if token_pending:  # a mask on a GPU while the steps are host-timed: rare
                tokens += _hooks_tokens(token_pending, wait=True)
            self.tokens_done += tokens
            self._complete(self.step_no, flags, self._t0, t_end, ms, samples, NO_MEM, tokens)
            return
        end_ev = self._event()
        end_ev.record()
        self._pending.append(_Pending(self.step_no, self._t0, t_end, ms, samples,
                                      self._read_memory(), self._events,
                                      (self._step_ev, end_ev), adj, flags, tokens,
                                      token_pending))
        self._events = []
        self._drain(block=False)

    def step_next(self, now, samples=0, tokens=0, token_pending=None):
        """step_end(samples, now=now, tokens=, token_pending=) then step_begin(now): one
        instant ends a step and begins the next (the loop tracker's boundary, gpuscope._loop).
        The common case, host-timed with no phase open, in one call: the same record and
        state as the two calls, with less work a step (bench/RESULTS.md, issue 25); anything
        else takes the two calls."""
        if self.cuda or self._nvtx or not self._in_step or self._open != _NOT_OPEN or \
                self._data_ms == self._data_ms:
            self.step_end(samples, None, now, tokens, token_pending)
            self.step_begin(now)
            return
        # step_end, host path
        self._mark_ns = now
        self.step_no = step = self.step_no + 1
        p0 = self._p0
        t_begin = self._t0
        t_end = t_begin + (now - p0) / 1e9
        acc, seen = self._acc, self._seen
        step_ms = (now - p0) / 1e6
        if self.data_in_step:
            flags = FLAG_DATA_IN_STEP
            if seen[0]:
                step_ms -= acc[0]
                if step_ms < 0.0:
                    step_ms = 0.0
        else:
            flags = 0
        ms = [acc[0] if seen[0] else NAN, acc[1] if seen[1] else NAN,
              acc[2] if seen[2] else NAN, acc[3] if seen[3] else NAN,
              acc[4] if seen[4] else NAN, step_ms, self._exposed, NAN]
        self._acc = [0.0] * PH_N
        self._seen = [False] * PH_N
        self._exposed = NAN  # (_adj is CUDA's only: untouched on the host path)
        self.last_end = t_end
        self.steps_done += 1
        self.samples_done += samples
        if self._profiled_next:
            flags |= FLAG_PROFILED
        cap = self._capture
        if cap is not None and (self._profiled_next or cap.prof is not None or
                                self.steps_done >= cap.wake_step or now >= cap.wake_ns):
            active = cap.prof is not None  # (else: nothing to change, as in step_end)
            if self.steps_done >= cap.wake_step or now >= cap.wake_ns:
                cap.boundary(self.steps_done)
            self._profiled_next = active or cap.prof is not None
        if token_pending:
            tokens += _hooks_tokens(token_pending, wait=True)
        self.tokens_done += tokens
        self._complete(step, flags, t_begin, t_end, ms, samples, NO_MEM, tokens)
        # step_begin(now), host path, no explicit data phase waiting
        if self.step_no > 0 and not self.data_in_step:  # the data gap: none, it begins now
            self._acc[PH_DATA] = 0.0
            self._seen[PH_DATA] = True
        self._t0 = _wall()
        self._p0 = now

    # ---- phases ----

    def phase_begin(self, ph):
        if ph != PH_COMM and ph != PH_BACKWARD and self._open[PH_BACKWARD] is not None:
            self.phase_end(PH_BACKWARD)  # backward's end was not signalled: it ends here
        if ph == PH_DATA:
            self._open[ph] = _perf_ns()
            if self._nvtx:
                self._nvtx.begin(ph)
            return
        if not self._in_step:
            return
        if self._open[ph] is not None:
            return  # nested (a module called twice inside itself): the outer one counts
        if self._nvtx:
            self._nvtx.begin(ph)
        if self.cuda:
            ev = self._event()
            ev.record()
            self._open[ph] = ev
        else:
            self._open[ph] = _perf_ns()

    def phase_end(self, ph):
        start = self._open[ph]
        if start is None:
            return
        self._open[ph] = None
        if self._nvtx:
            self._nvtx.end(ph)
        if ph == PH_DATA:
            ms = (_perf_ns() - start) / 1e6
            if self._in_step:
                self._acc[PH_DATA] += ms
                self._seen[PH_DATA] = True
            else:
                self._data_ms = ms if self._data_ms != self._data_ms else self._data_ms + ms
            return
        if self.cuda:
            ev = self._event()
            ev.record()
            self._events.append((ph, start, ev))
        else:
            self._acc[ph] += (_perf_ns() - start) / 1e6
        self._seen[ph] = True

    def add_ms(self, ph, ms):
        """Adds a host-measured duration to a phase of the open step (communication futures;
        a negative one takes exposed communication out of the phase it ran in)."""
        if self._in_step:
            if self.cuda and ph != PH_COMM and ph != PH_DATA:
                self._adj[ph] += ms  # applied once the phase's events are read
            else:
                self._acc[ph] += ms
            if ms > 0:
                self._seen[ph] = True

    def set_exposed(self, ms):
        """The open step's exposed communication (ms; the loop tracker's estimate)."""
        self._exposed = ms if self._seen[PH_COMM] else NAN

    def abandon_step(self):
        """Drops the open step without a record (the loop tracker's last, unfinished one)."""
        if not self._in_step:
            return
        self._in_step = False
        self._acc = [0.0] * PH_N
        self._seen = [False] * PH_N
        self._open = [None] * PH_N
        self._adj = [0.0] * PH_N
        self._exposed = NAN
        self._event_pool.extend(e for _, a, b in self._events for e in (a, b))
        self._events = []

    # ---- CUDA records ----

    def _event(self):
        if self._event_pool:
            return self._event_pool.pop()
        import torch
        return torch.cuda.Event(enable_timing=True)

    def _read_memory(self):
        """(allocated, reserved, peak_allocated, peak_reserved, total) of our device, peaks
        since the previous step (host-side allocator counters: no synchronisation)."""
        import torch
        d = self.cuda_device
        mem = (torch.cuda.memory_allocated(d), torch.cuda.memory_reserved(d),
               torch.cuda.max_memory_allocated(d), torch.cuda.max_memory_reserved(d),
               self._mem_total)
        torch.cuda.reset_peak_memory_stats(d)
        return mem

    def _drain(self, block):
        """Completes the pending steps whose events are done, oldest first."""
        while self._pending:
            p = self._pending[0]
            last = p.step_events[1]
            if block:
                last.synchronize()
            elif not last.query():
                return
            self._pending.popleft()
            ms = p.ms
            acc = [0.0] * PH_N
            for ph, a, b in p.events:
                acc[ph] += a.elapsed_time(b)
                self._event_pool.extend((a, b))
            for ph in (PH_FORWARD, PH_BACKWARD, PH_OPTIMIZER):
                if ms[ph] == ms[ph]:
                    ms[ph] = max(0.0, acc[ph] + p.adj[ph])
            if ms[PH_COMM] == ms[PH_COMM]:  # host-timed DDP buckets + event-timed collectives
                ms[PH_COMM] += acc[PH_COMM]
            ms[PH_STEP] = p.step_events[0].elapsed_time(last)
            if self.data_in_step and ms[PH_DATA] == ms[PH_DATA]:
                ms[PH_STEP] = max(0.0, ms[PH_STEP] - ms[PH_DATA])
            self._event_pool.extend(p.step_events)
            tokens = p.tokens
            if p.token_pending:  # the mask sums' copies were queued before the end event
                tokens += _hooks_tokens(p.token_pending)
            self.tokens_done += tokens
            self._complete(p.step, FLAG_CUDA_EVENTS | p.flags, p.t_begin, p.t_end, ms, p.samples,
                           p.mem, tokens)

    def _complete(self, step, flags, t_begin, t_end, ms, samples, mem, tokens=0):
        # The sender thread takes it from here (the module docstring, "Hand-off"); records
        # reach the native core in bursts, one warm loop of gs_run_step calls.
        self._batch.append((step, flags, t_begin, t_end, ms, samples, mem, tokens))
        if self.log_every and step % self.log_every == 0:
            self.last_lines = format_lines(step, ms, mem, self.cuda)
            prefix = "[rank %d] " % self.rank if self.world_size > 1 else ""
            for line in self.last_lines:
                if self._log is not None:
                    self._log(prefix + line)
                else:
                    logger.info(prefix + line)
            self.last_step = (step, ms, mem)

    def _flush(self, timeout_s=-1):
        """Pushes the waiting records, oldest first; False when another thread holds the
        lock beyond timeout_s (-1: wait), or when the hello is still deferred
        (open_native()) and records wait for it."""
        if self._native_pending:
            return not self._batch  # kept until open_native()
        if not self._flush_lock.acquire(timeout=timeout_s):
            return False
        try:
            native, batch = self.native, self._batch
            if native is None:
                batch.clear()
                return True
            push, pop = native.push, batch.popleft
            while batch:
                push(*pop())
            return True
        finally:
            self._flush_lock.release()

    def _stop_sender(self):
        if self._sender_stop is not None:
            stop, t = self._sender_stop
            self._sender_stop = None
            stop.set()
            if t is not threading.current_thread():
                t.join(DRAIN_S)

    # ---- end ----

    def finish(self, train_runtime=None, train_samples=None, train_steps=None, train_loss=None):
        """Ends the run: waits for outstanding CUDA events (once), hands the framework's
        figures to the native core, writes metrics_report.json when output_dir is set and
        returns the report (a dict) or None. Without framework figures the profiler's own are
        used: runtime from the first step's begin to the last step's end."""
        if self._finished:
            return None
        self._finished = True
        if self._in_step:
            self.step_end()
        if self._capture:
            self._capture.finish()
        if self.cuda:
            self._drain(block=True)
        self.open_native()
        self._stop_sender()
        self._flush()
        # Only the framework's own figures travel: the native core derives runtime, steps and
        # samples from the step records of every rank alike (a rank's own samples in the end
        # record would stand for the whole job's).
        end = {}
        if self.outcome:
            end["outcome"] = dict(self.outcome)
        for k, v in (("train_runtime", train_runtime), ("train_samples", train_samples),
                     ("train_steps", train_steps), ("train_loss", train_loss)):
            if v is not None and isinstance(v, (int, float)) and math.isfinite(v):
                end[k] = float(v)
        if not self._started:
            self.start()
        if self.native is None:
            return None
        if self.output_dir and self.native.active:
            try:  # the Trainer creates output_dir only when it saves; the report needs it
                os.makedirs(self.output_dir, exist_ok=True)
            except OSError:
                pass  # gs_run_finish reports the failure
        try:
            return self.native.finish(end)
        finally:
            self.native.close()


def _job_id(env):
    """A name every rank of one launch sees alike, or None."""
    for key in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"):
        v = env.get(key)
        if v and v != "none":
            return "%s-%s" % (key.split("_")[0].lower(), v)
    return None


def _job_key(env, run_name, world_size):
    """The id the ranks of one job share on every node, or None: `gpuscope run --job`
    (GPUSCOPE_JOB, applied by the native core too), the launcher's or scheduler's job id, the
    run name (HF/accelerate) of a distributed run, else its rendezvous MASTER_ADDR:MASTER_PORT."""
    job = env.get("GPUSCOPE_JOB") or _job_id(env)
    if not job and world_size > 1:
        if run_name:
            job = run_name
        elif env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
            job = "master-%s:%s" % (env["MASTER_ADDR"], env["MASTER_PORT"])
    return job[:128] if job else None


def _dist_identity(rank, world_size, local_rank):
    env = os.environ
    if rank is None:
        rank = int(env.get("RANK", "0") or 0)
        try:
            import torch.distributed as dist
            if dist.is_available() and dist.is_initialized():
                rank = dist.get_rank()
                world_size = world_size or dist.get_world_size()
        except Exception:
            pass
    if world_size is None:
        world_size = int(env.get("WORLD_SIZE", "1") or 1)
    if local_rank is None:
        local_rank = int(env.get("LOCAL_RANK", "0") or 0)
    return int(rank), int(world_size), int(local_rank)


def _cuda_device(device):
    """The CUDA index to time with events, or None for host timing. device: None (auto: the
    current CUDA device when CUDA is initialised), "cpu", "cuda", "cuda:N", an int or a
    torch.device."""
    if "torch" not in sys.modules and device is None:
        return None
    try:
        import torch
    except Exception:
        return None
    if device is None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            return torch.cuda.current_device()
        return None
    if isinstance(device, int):
        return device
    dev = torch.device(device)
    if dev.type != "cuda" or not torch.cuda.is_available():
        return None
    return dev.index if dev.index is not None else torch.cuda.current_device()


# ---- last moments: SIGTERM, interpreter exit (the module docstring, "Hand-off") ----

_exit_flush = {"installed": False, "prev": None}


def _flush_current():
    """Hands the current profiler's records over and waits for the native sender. Not in a
    forked child (a DataLoader worker that gets SIGTERM): the run, its lock and its threads
    are the parent's."""
    p = _current[0]
    if p is not None and not p._finished and p._pid == os.getpid():
        try:
            p.flush(DRAIN_S)
        except Exception:  # a dying process: never raise from here
            pass


def _last_words():
    """What a process stopped by SIGTERM hands over before the signal's action: its records,
    and a tune trial's file (docs/python.md, TUNE TRIALS)."""
    _flush_current()
    tune = sys.modules.get("gpuscope._tune")
    if tune is not None:
        try:
            tune.flush()
        except Exception:  # a dying process: never raise from here
            pass


def _on_sigterm(signum, frame):
    _last_words()
    _chain(signum, frame)


def _chain(signum, frame):
    prev = _exit_flush["prev"]
    if callable(prev):
        return prev(signum, frame)
    if prev == signal.SIG_IGN:
        return None
    # SIG_DFL (or a handler not set from Python): the default action, as without us
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return None


def _watch_signals(sock):
    """A Python handler runs only when the main thread returns to the interpreter; one stuck
    in a C call (a collective's wait, a CUDA synchronize) would keep a SIGTERM pending forever
    where the default action kills at once. Python's C-level handler also writes the signal's
    number to the wakeup socket at once, so this thread flushes, and where the default action
    was due (no handler before ours, ours still installed) takes it: the disposition reset in
    libc (Python lets only the main thread set handlers) and the signal raised again."""
    import ctypes
    while True:
        try:
            data = sock.recv(64)
        except InterruptedError:
            continue
        except OSError:
            return
        if not data:
            return
        if signal.SIGTERM not in data:
            continue
        _last_words()
        prev = _exit_flush["prev"]
        if signal.getsignal(signal.SIGTERM) is _on_sigterm and \
                (prev == signal.SIG_DFL or prev is None):
            try:
                ctypes.CDLL(None).signal(int(signal.SIGTERM), ctypes.c_void_p(0))  # SIG_DFL
            except Exception:
                continue  # the main thread's handler will do it when it runs
            os.kill(os.getpid(), signal.SIGTERM)


def _forget_wakeup():
    pair = _exit_flush.pop("wakeup", None)
    if pair is None:
        return
    try:
        signal.set_wakeup_fd(-1)
    except (ValueError, OSError):
        pass
    for sock in pair:
        sock.close()


def _install_exit_flush():
    """Once per process: flush at exit, and on SIGTERM before the handler that was there
    (only from the main thread, the one Python lets set handlers; a handler the script sets
    later replaces ours, and the sender thread's FLUSH_S still bounds what is lost). The
    wakeup socket (_watch_signals) only when nobody else set one (asyncio does)."""
    if _exit_flush["installed"]:
        return
    _exit_flush["installed"] = True
    import atexit
    atexit.register(_flush_current)
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        prev = signal.getsignal(signal.SIGTERM)
        if getattr(prev, "__gpuscope__", False):
            return
        _exit_flush["prev"] = prev
        signal.signal(signal.SIGTERM, _on_sigterm)
    except (ValueError, OSError, TypeError):
        return
    try:
        import socket
        r, w = socket.socketpair()
        w.setblocking(False)
        old = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
        if old != -1:  # the script's: left as it was
            signal.set_wakeup_fd(old)
            r.close()
            w.close()
            return
        _exit_flush["wakeup"] = (r, w)
        # A forked child (a DataLoader worker) would write its own SIGTERM into our socket:
        # it gets none (its Python handler still flushes nothing and chains, see _pid).
        os.register_at_fork(after_in_child=_forget_wakeup)
        threading.Thread(target=_watch_signals, args=(r,), name="gpuscope-signals",
                         daemon=True).start()
    except (ValueError, OSError):
        pass


_on_sigterm.__gpuscope__ = True
