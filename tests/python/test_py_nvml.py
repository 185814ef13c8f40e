"""In-process NVML sampling on nvml-sim: a training process with no receiver samples the GPUs
it runs on (those where NVML lists its pid: the scenario's {"pid": "self"}), and the report's
per-GPU figures are the scenario's. Without its pid on any GPU, the configured "devices" are
the run's GPUs (CUDA index -> NVML index through CUDA_VISIBLE_DEVICES)."""
import os
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import pyhelp  # noqa: E402
from pyhelp import SIM, Net, SlowDataset, Tap, loader, near  # noqa: E402

import torch  # noqa: E402
import gpuscope  # noqa: E402
from gpuscope._native import NAN, NativeRun, StepRec  # noqa: E402

MIB = 1048576
t = Tap()
for k in [k for k in os.environ if k.startswith("NVML_SIM") or k.startswith("GPUSCOPE_")]:
    if k not in ("GPUSCOPE_BUILD_ROOT", "GPUSCOPE_SOURCE_ROOT", "GPUSCOPE_SIM_LIB",
                 "GPUSCOPE_BIN", "GPUSCOPE_SIM_MINIMAL_LIB"):
        os.environ.pop(k)
os.environ["GPUSCOPE_NVML_LIBRARY"] = SIM
os.environ["NVML_SIM_SCENARIO"] = os.path.join(HERE, "scenarios", "self-on-gpu1.json")
os.environ["GPUSCOPE_AGENT_SOCKET"] = "/nonexistent/agent.sock"
os.environ.pop("CUDA_VISIBLE_DEVICES", None)

# ---- 1. a real CPU training loop, sampled every 50 ms ----
with tempfile.TemporaryDirectory() as out:
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    dl = loader(SlowDataset(25 * 4, sleep_s=0.004), batch=4)
    gpuscope.init(output_dir=out, nvml="auto", sample_interval_s=0.05, log=lambda s: None)
    t0 = time.time()
    for x, y in gpuscope.instrument(model, opt, dl):
        loss = torch.nn.functional.mse_loss(model(x).squeeze(-1), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
    wall = time.time() - t0
    rep = gpuscope.finish()
    gpus = rep.get("gpus", [])
    t.eq([g.get("index") for g in gpus], [1], "the run's GPUs: only GPU 1, where our pid is")
    g = gpus[0] if gpus else {}
    t.ok(near(g.get("utilization_avg_percent"), 73.0, 1e-9) and
         near(g.get("utilization_max_percent"), 73.0, 1e-9),
         "GPU 1 utilization avg / max = the scenario's 73 %",
         detail=[g.get("utilization_avg_percent"), g.get("utilization_max_percent")])
    t.eq(g.get("memory_peak_bytes"), 30000 * MIB, "GPU 1 peak memory = the scenario's 30000 MiB")
    t.eq(g.get("memory_total_bytes"), 81559 * MIB, "GPU 1 total memory = 81559 MiB")
    t.eq(g.get("uuid"), "GPU-00000000-1111-2222-3333-000000000001", "GPU 1 uuid")
    n = g.get("samples") or 0
    t.ok(n >= max(3, int(0.5 * wall / 0.05)),
         f"sampled about every 50 ms ({n} samples in {wall:.2f} s)")
    span = (g.get("last_sample") or 0) - (g.get("first_sample") or 0)
    t.ok(near(g.get("energy_joules"), 400.0 * span, 0.05, 2.0),
         f"energy = 400 W x sampled span ({g.get('energy_joules')} J over {span:.3f} s)")
    t.ok(near(rep.get("gpu_avg_utilization_percent"), 73.0, 1e-9) and
         near(rep.get("gpu_max_utilization_percent"), 73.0, 1e-9) and
         rep.get("gpu_utilization_source") == "nvml",
         "report-level utilization from NVML, GPU 0 (97 %) left out",
         detail=[rep.get(k) for k in ("gpu_avg_utilization_percent",
                                      "gpu_max_utilization_percent", "gpu_utilization_source")])
    t.ok(near(rep.get("gpu_peak_memory_allocated_gb"), 30000 * MIB / 2**30, 1e-9),
         "gpu_peak_memory_allocated_gb from NVML without CUDA allocator figures",
         detail=rep.get("gpu_peak_memory_allocated_gb"))

# ---- 2. our pid on no GPU: "devices" decide ----
os.environ["NVML_SIM_SCENARIO"] = os.path.join(pyhelp.SRC, "sim", "scenarios",
                                               "h100x8-training.json")


def short_run(cfg):
    nr = NativeRun(cfg)
    r = StepRec()
    r.version, r.step, r.device = 1, 1, -1
    r.t_begin, r.t_end = time.time(), time.time() + 0.01
    for i in range(6):
        r.ms[i] = NAN
    r.ms[5] = 10.0
    nr.step(r)
    time.sleep(0.12)
    rep = nr.finish({}) or {}
    nr.close()
    return rep


rep = short_run({"nvml": "auto", "sample_interval_s": 0.05, "devices": [2, 5]})
t.eq([g.get("index") for g in rep.get("gpus", [])], [2, 5],
     "pid on no GPU: the configured devices 2 and 5 are the run's GPUs")
os.environ["CUDA_VISIBLE_DEVICES"] = "6,3"
rep = short_run({"nvml": "auto", "sample_interval_s": 0.05, "devices": [1]})
t.eq([g.get("index") for g in rep.get("gpus", [])], [3],
     "CUDA_VISIBLE_DEVICES=6,3: CUDA device 1 is NVML GPU 3")
del os.environ["CUDA_VISIBLE_DEVICES"]
rep = short_run({"nvml": "off", "devices": [1]})
t.eq(rep.get("gpus"), [], "nvml off: no sampling")

pyhelp.exit_now(t.done())
