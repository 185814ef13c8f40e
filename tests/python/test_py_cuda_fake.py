"""The CUDA-event path without a GPU: torch.cuda's Event, memory counters and synchronize are
replaced by fakes whose events complete two steps after they are recorded (a GPU running
behind the host). Checks that records are completed lazily by Event.query() (never by a
synchronize inside the loop), that the three log lines have the brief's exact CUDA shape
(the fake allocator reports the brief's 28.4 GB / 40.5 GB / 29.1 GB), and that the report gets
the allocator peaks and every step once finish() has waited for the last events. A step's token
count still on the device (an attention mask's sum being copied to pinned memory) is read only
once that step's events completed."""
import os
import re
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402,F401
from pyhelp import Net, Tap, near  # noqa: E402

import torch  # noqa: E402
import gpuscope  # noqa: E402

t = Tap()
LAG_STEPS = 2
clock = {"step": 0, "syncs": 0, "event_syncs": 0, "queries": 0, "resets": 0}


class FakeEvent:
    def __init__(self, enable_timing=False):
        assert enable_timing, "timing events expected"
        self.t_ns = None
        self.step = None

    def record(self, stream=None):
        self.t_ns = time.perf_counter_ns()
        self.step = clock["step"]

    def query(self):
        clock["queries"] += 1
        return clock["step"] >= self.step + LAG_STEPS

    def synchronize(self):
        clock["event_syncs"] += 1
        clock["step"] = max(clock["step"], self.step + LAG_STEPS)

    def elapsed_time(self, end):
        assert self.query() and end.query(), "elapsed_time on an event not yet complete"
        return (end.t_ns - self.t_ns) / 1e6


def fake_sync(device=None):
    clock["syncs"] += 1


def fake_reset(device=None):
    clock["resets"] += 1


cuda = torch.cuda
cuda.Event = FakeEvent
cuda.synchronize = fake_sync
cuda.is_available = lambda: True
cuda.current_device = lambda: 0
cuda.memory_allocated = lambda d=None: 28_400_000_000
cuda.memory_reserved = lambda d=None: 30_000_000_000
cuda.max_memory_allocated = lambda d=None: 29_100_000_000
cuda.max_memory_reserved = lambda d=None: 31_000_000_000
cuda.mem_get_info = lambda d=None: (10_000_000_000, 40_500_000_000)
cuda.reset_peak_memory_stats = fake_reset

os.environ["GPUSCOPE_AGENT_SOCKET"] = "/nonexistent/agent.sock"
os.environ.pop("GPUSCOPE_RUN_SOCKET", None)
with tempfile.TemporaryDirectory() as out:
    lines = []
    prof = gpuscope.init(output_dir=out, device=0, logging_steps=10, nvml="off",
                         log=lines.append)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 32), torch.randn(16)
    pending_after = []
    n = 20
    for i in range(n):
        with gpuscope.step(samples=16):
            with gpuscope.phase("forward"):
                loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
            with gpuscope.phase("backward"):
                loss.backward()
            with gpuscope.phase("optimizer_step"):
                opt.step()
                opt.zero_grad()
        pending_after.append(len(prof._pending))
        clock["step"] += 1  # the fake GPU advances one step per host step
    t.ok(prof.cuda and prof.cuda_device == 0, "device=0 selects CUDA-event timing")
    t.eq(clock["syncs"] + clock["event_syncs"], 0,
         "no torch.cuda.synchronize() / Event.synchronize() inside the training loop")
    t.eq(pending_after[5:], [LAG_STEPS] * (n - 5),
         f"records wait for their events: {LAG_STEPS} steps pending in the steady state")
    t.ok(clock["queries"] > 0, "completion found by Event.query()")
    t.eq(len(lines), 3, "one logged step (10) completed before the loop's end; 20 is pending")
    rep = gpuscope.finish()
    t.eq(len(prof._pending), 0, "finish() completes the pending steps")
    t.ok(clock["event_syncs"] >= 1 and clock["syncs"] == 0,
         "finish() waits on the last event once, never on the whole device")
    t.eq(len(lines), 6, "step 20 logged at finish()")
    t.eq(lines[0], "Step 10: GPU memory usage: 28.4 GB / 40.5 GB (70.1%), Peak memory: 29.1 GB",
         "memory line exactly as in the brief")
    t.ok(re.match(r"^Step 10: CUDA event time: forward=\d+\.\dms, backward=\d+\.\dms, "
                  r"optimizer_step=\d+\.\dms, total_step=\d+\.\dms$", lines[1]) is not None,
         "event time line in the brief's shape", detail=lines[1])
    t.ok(re.match(r"^Step 10: GPU utilization estimate: \d+\.\d% \(based on CUDA event "
                  r"timing\)$", lines[2]) is not None, "utilization line in the brief's shape",
         detail=lines[2])
    t.eq(rep["steps"], n, "every step reached the report")
    al = rep.get("allocator", {})
    GIB = 2 ** 30
    t.ok(near(al.get("peak_allocated_gb"), 29.1e9 / GIB, 1e-6) and
         near(al.get("peak_reserved_gb"), 31e9 / GIB, 1e-6),
         "allocator peaks (allocated / reserved) in the report", detail=al)
    t.ok(near(rep.get("gpu_peak_memory_allocated_gb"), 29.1e9 / GIB, 1e-6) and
         rep.get("gpu_peak_memory_source") == "allocator",
         "gpu_peak_memory_allocated_gb from the allocator", detail=rep.get(
             "gpu_peak_memory_allocated_gb"))
    t.eq(clock["resets"], n, "peak counters reset once per step (peaks are per record)")
    ph = rep["phases"]
    t.eq([ph[p]["count"] for p in ("forward", "backward", "optimizer_step", "total_step")],
         [n] * 4, "event-timed phases in every step")
    t.ok(ph["forward"]["mean_ms"] + ph["backward"]["mean_ms"] +
         ph["optimizer_step"]["mean_ms"] <= ph["total_step"]["mean_ms"] * 1.001,
         "event phases fit in the event-timed step")

# ---- tokens whose count is still on the GPU (an attention mask's sum copied to pinned
# memory, _hooks.forward_tokens): read once the step's events completed, never by a sync ----
from gpuscope import _core  # noqa: E402


class FakeHostSum:
    """A pinned host tensor a device-to-host copy is filling: item() before the step's events
    completed would read a copy still under way."""

    def __init__(self, v):
        self.v, self.step, self.early = v, clock["step"], False

    def item(self):
        self.early = self.early or clock["step"] < self.step + LAG_STEPS
        return self.v


sums = []
syncs = clock["syncs"]
prof = _core.Profiler(device=0, nvml="off", log=lambda s: None)
prof.start()
for i in range(12):
    prof.step_begin()
    sums.append(FakeHostSum(5))
    prof.step_end(samples=1, tokens=10, token_pending=[sums[-1]])
    clock["step"] += 1
rep = prof.finish() or {}
t.eq(rep.get("train_tokens"), 12 * 15, "pending mask sums join the step's tokens")
t.ok(not any(x.early for x in sums) and clock["syncs"] == syncs,
     "a pending sum is read only once its step's events completed, never by a synchronize")

# ---- the zero-code loop tracker on the same fake GPU: CUDA events for forward, backward
# and the optimizer, host time for data, the step from one optimizer step to the next ----
from gpuscope import _loop  # noqa: E402

with tempfile.TemporaryDirectory() as out:
    lines = []
    _loop.install(torch)
    _loop.configure(output_dir=out, device=0, nvml="off", log=lines.append)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    class Slow(torch.utils.data.Dataset):
        def __len__(self):
            return 10 ** 6

        def __getitem__(self, i):
            if i % 16 == 0:
                time.sleep(0.004)
            return torch.randn(32), torch.randn(())

    it = iter(torch.utils.data.DataLoader(Slow(), batch_size=16))
    data = other = 0.0
    n = 20
    for i in range(n + 1):  # step 0 carries the tracker's start: the clock runs from step 1
        a = time.perf_counter()
        if i == 1:
            t0, data, other = a, 0.0, 0.0
        x, y = next(it)
        data += time.perf_counter() - a
        torch.nn.functional.mse_loss(model(x).squeeze(-1), y).backward()
        opt.step()
        opt.zero_grad()
        a = time.perf_counter()
        time.sleep(0.002)  # post-step work: other
        other += time.perf_counter() - a
        clock["step"] += 1
    wall = time.perf_counter() - t0
    syncs = clock["syncs"]
    rep = _loop.finish()
    t.ok(_loop.S.prof.cuda, "tracker: the model's CUDA device means CUDA-event timing")
    t.eq(syncs, 0, "tracker: no synchronize inside the loop")
    t.eq(rep["steps"], n + 1, "tracker: one step per optimizer step")
    t.eq(rep.get("step_busy_estimate_source"), "cuda_events",
         "tracker: steps timed with CUDA events")
    t.ok(abs(rep["data_loading_time_ratio"] - data / wall) < 0.05,
         "tracker on CUDA: data ratio %.3f vs the loop's own %.3f" % (
             rep["data_loading_time_ratio"], data / wall))
    t.ok(abs(rep["other_time_ratio"] - other / wall) < 0.05,
         "tracker on CUDA: other ratio %.3f vs the loop's post-step share %.3f" % (
             rep["other_time_ratio"], other / wall))
    t.ok(any(x.startswith("Step 10: CUDA event time:") for x in lines),
         "tracker: CUDA event log lines", detail=lines[:3])
    _loop.uninstall()

pyhelp.exit_now(t.done())
