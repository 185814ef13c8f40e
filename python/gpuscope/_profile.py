"""Profiler windows: torch.profiler driven for chosen training steps (`gpuscope run --profile`).

GPUSCOPE_PROFILE (set by `gpuscope run --profile STEPS`, or by hand) says which steps:
    "100:110"      steps 100 to 109 (1-based: the first training step is 1)
    "every:500:5"  5 steps from step 500, from step 1000, ... (a window every 500 steps)
Under `gpuscope run` a running job can also be asked for a window from outside:
`gpuscope trace capture --dir DIR --steps N` writes DIR/profile.request ("ID N"), which every
rank looks for at a step boundary at most every 0.5 s (one stat) and answers once with the
next N steps. A run the node's agent keeps is asked the same way by `gpuscope trace capture
--run ID --steps N`: the agent sends the request over the rank's record connection
(src/run/control.h) and the native run hands it over (NativeRun.control, looked at as often).
One trace per window and rank goes to $GPUSCOPE_PROFILE_DIR (default $GPUSCOPE_RUN_DIR/profile,
else ./gpuscope-profile) as rank<R>-step<S>.json (the directory opened and checked, each trace
written to a fresh temporary of ours and renamed into place: python/gpuscope/_rundir.py; a
profile.request is honoured only from a regular file of the run directory's owner), in torch's Chrome-trace format: Kineto's on a
torch built with it (CPU and CUDA activities when CUDA is in use), the older CPU-only array on a
torch without it (Debian's 1.13). `gpuscope trace analyze` reads both.

The profiler starts one step before the window (a warmup step whose events are dropped, as
torch.profiler.schedule's warmup), records the window's steps under ProfilerStep#N annotations
carrying the training step numbers, and writes the trace at the window's end; a window the run
does not finish is dropped. The training loop
calls boundary(k) once per step boundary (k = steps completed so far, 0 before the first); a
window therefore starts at step 2 at the earliest. A profiler failure is logged once and turns
capture off; it never stops the training.
"""
import logging
import os
import time

from . import _rundir

_log = logging.getLogger("gpuscope")
REQUEST_POLL_S = 0.5  # how often a rank looks for a `gpuscope trace capture` request
_POLL_NS = int(REQUEST_POLL_S * 1e9)
NEVER = float("inf")


def parse(spec):
    """(start, length, period) from "A:B" or "every:P:N"; period 0 for one window. ValueError
    on anything else."""
    s = (spec or "").strip()
    parts = s.split(":")
    try:
        if len(parts) == 3 and parts[0] == "every":
            period, n = int(parts[1]), int(parts[2])
            if period < 2 or n < 1 or n >= period:
                raise ValueError
            return period, n, period
        if len(parts) == 2:
            a, b = int(parts[0]), int(parts[1])
            if a < 1 or b <= a:
                raise ValueError
            return max(a, 2), b - max(a, 2), 0
    except ValueError:
        pass
    raise ValueError("profile window %r: want A:B (steps A to B-1) or every:P:N" % spec)


class Capture:
    """One rank's profiler windows; boundary(k) at every step boundary."""

    def __init__(self, spec, out_dir, rank=0, cuda=False, request=None, poll=None):
        if spec:
            start, n, period = parse(spec)
            if start + n - 1 < 2:
                raise ValueError("profile window %r ends before step 2" % spec)
        else:
            start, n, period = None, 1, 0  # windows on request only
        self.start, self.n, self.period = start, max(n, 1), period
        self.request = request  # `gpuscope trace capture` writes it: "ID STEPS"
        self.poll = poll  # the agent's requests (NativeRun.control): steps or 0
        self.request_seen = None
        self.request_mtime = None
        self.request_next = 0.0
        self.out_dir = out_dir
        self.rank = int(rank or 0)
        self.cuda = bool(cuda)
        self.prof = None
        self.window = None  # first step of the open window
        self.files = []
        self.off = False
        self.discard = False  # the run ends inside a window: torch's stop() must not save
        # When boundary() has something to do (the Profiler skips the call before): at the
        # boundary with wake_step steps done, or once time.perf_counter_ns() >= wake_ns
        self.wake_step = 0
        self.wake_ns = 0
        self._rearm(-1)

    def _is_start(self, s):
        if self.start is None:
            return False
        if self.period:
            return s >= self.period and s % self.period == 0
        return s == self.start

    def _requested(self):
        """Steps of a new `gpuscope trace capture` request, else 0. Each rank answers each
        request once (the file stays for the other ranks; its ID tells requests apart)."""
        now = time.perf_counter_ns()
        if now < self.request_next:
            return 0  # looked less than REQUEST_POLL_S ago: a step costs one clock read
        self.request_next = now + _POLL_NS
        if self.poll is not None:
            try:
                n = self.poll()
            except Exception:
                n = 0
            if n:
                return min(max(int(n), 1), 1000)
        if not self.request:
            return 0
        try:
            mtime = os.stat(self.request).st_mtime_ns
            if mtime == self.request_mtime:
                return 0
            self.request_mtime = mtime
            dfd = _rundir.open_dir(os.path.dirname(self.request) or ".")
            try:
                text = _rundir.read_request(dfd, os.path.basename(self.request))
            finally:
                os.close(dfd)
            rid, steps = (text or "").split()[:2]
        except (OSError, ValueError):
            return 0
        if rid == self.request_seen:
            return 0
        self.request_seen = rid
        try:
            return min(max(int(steps), 1), 1000)
        except ValueError:
            return 0

    def _open(self, s, n=None):
        import torch.profiler as tp
        from torch.profiler import ProfilerAction as A

        n = n or self.n
        acts = [tp.ProfilerActivity.CPU]
        if self.cuda:
            acts.append(tp.ProfilerActivity.CUDA)

        # torch numbers the step after each prof.step(): schedule(x) decides training step x-1
        def schedule(x):
            if x <= s:
                return A.WARMUP
            if x < s + n:
                return A.RECORD
            if x == s + n:
                return A.RECORD_AND_SAVE
            return A.NONE

        path = os.path.join(self.out_dir, "rank%d-step%d.json" % (self.rank, s))

        def ready(p):
            if self.discard:
                return
            parent = os.path.dirname(os.path.abspath(self.out_dir))
            os.makedirs(parent, exist_ok=True)
            dfd = _rundir.open_dir(self.out_dir, create=True)
            try:  # torch opens by path: a fresh file of ours, through the checked descriptor
                name = os.path.basename(path)
                tmp, through = _rundir.reserve(dfd, name)
                try:
                    p.export_chrome_trace(through)
                    os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
                except BaseException:
                    os.unlink(tmp, dir_fd=dfd)
                    raise
            finally:
                os.close(dfd)
            self.files.append(path)

        prof = tp.profile(activities=acts, schedule=schedule, on_trace_ready=ready)
        prof.step_num = s  # the warmup step, s - 1, is decided by schedule(s)
        prof.start()
        self.prof, self.window = prof, s

    def boundary(self, done):
        """Steps completed so far: done (0 before the first step)."""
        if self.off:
            return
        try:
            if self.prof is not None:
                self.prof.step()
                from torch.profiler import ProfilerAction as A
                if self.prof.current_action == A.NONE:
                    self._close()
            # a window may open at the very boundary where the previous one closed
            if self.prof is None and self._is_start(done + 2):
                self._open(done + 2)
            elif self.prof is None and (self.request or self.poll):
                n = self._requested()
                if n:
                    self._open(done + 2, n)
        except Exception as e:  # advisory: never a reason to fail the training
            _log.warning("gpuscope: profiler window off: %s", e)
            self.off = True
            self._close()
        self._rearm(done)

    def _rearm(self, done):
        """wake_step, wake_ns after the boundary with done steps: every boundary while a
        window is open, else the next one where a window may start (_is_start) or the next
        look for a request."""
        if self.off:
            self.wake_step = self.wake_ns = NEVER
            return
        if self.prof is not None:
            self.wake_step = 0
            return
        if self.start is None:
            self.wake_step = NEVER
        elif self.period:  # the first s > done + 2 with s >= period, s % period == 0
            p = self.period
            self.wake_step = max(p, ((done + 2) // p + 1) * p) - 2
        else:
            self.wake_step = self.start - 2 if self.start - 2 > done else NEVER
        self.wake_ns = self.request_next if (self.request or self.poll) else NEVER

    def _close(self):
        prof, self.prof, self.window = self.prof, None, None
        if prof is not None:
            try:
                prof.stop()
            except Exception:
                pass

    def finish(self):
        """Ends an open window without writing it (the run ended inside it)."""
        self.discard = True
        self._close()


def from_env(rank=0, cuda=False, env=None, poll=None):
    """The Capture GPUSCOPE_PROFILE asks for; under `gpuscope run` (GPUSCOPE_RUN_DIR) also one
    that answers `gpuscope trace capture --dir` requests (DIR/profile.request); with poll
    (the native run's control(): the node's agent's `gpuscope trace capture --run` requests)
    one that answers those; else None."""
    env = os.environ if env is None else env
    spec = env.get("GPUSCOPE_PROFILE")
    run_dir = env.get("GPUSCOPE_RUN_DIR")
    if not spec and not run_dir and poll is None:
        return None
    out = env.get("GPUSCOPE_PROFILE_DIR")
    if not out:
        out = os.path.join(run_dir, "profile") if run_dir else os.path.abspath("gpuscope-profile")
    request = os.path.join(run_dir, "profile.request") if run_dir else None
    try:
        return Capture(spec, out, rank=rank, cuda=cuda, request=request, poll=poll)
    except ValueError as e:
        _log.warning("gpuscope: %s; no profiler window", e)
        return None


class Nvtx:
    """NVTX ranges for the phases (data, forward, backward, optimizer_step, communication) and
    the step, so that Nsight Systems shows them on its timeline. Start/end ranges, not push/pop:
    a phase may end on another thread (backward hooks run on autograd's). The first failure
    (a torch without CUDA/NVTX) turns it off."""

    def __init__(self, names):
        import torch.cuda.nvtx as nvtx
        self._nvtx = nvtx
        self.names = names
        self.ids = [None] * len(names)
        self.off = False

    def begin(self, ph, label=None):
        if self.off:
            return
        try:
            self.ids[ph] = self._nvtx.range_start(label or self.names[ph])
        except Exception:
            self.off = True

    def end(self, ph):
        rid, self.ids[ph] = self.ids[ph], None
        if rid is None or self.off:
            return
        try:
            self._nvtx.range_end(rid)
        except Exception:
            self.off = True


def nvtx_wanted(env=None):
    """GPUSCOPE_NVTX=1 on, =0 off; unset: on when Nsight Systems injects itself into the process
    (CUDA_INJECTION64_PATH names its ToolsInjection library)."""
    env = os.environ if env is None else env
    v = env.get("GPUSCOPE_NVTX")
    if v is not None and v != "":
        return v not in ("0", "false", "no", "off")
    return "ToolsInjection" in env.get("CUDA_INJECTION64_PATH", "")


def nvtx_from_env(names, env=None):
    """An Nvtx when wanted and torch has NVTX, else None."""
    if not nvtx_wanted(env):
        return None
    try:
        return Nvtx(names)
    except Exception:
        return None
