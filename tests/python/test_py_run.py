"""`gpuscope run` around an unmodified training script, end to end: the script builds a
Hugging Face-style Trainer (tests/python/fake_hf, which calls the callbacks in the order of
transformers' Trainer) on a real CPU model with a DataLoader made slow on purpose, and never
imports gpuscope. gpuscope run must inject the callback through its sitecustomize, receive the
step records over its socket, sample nvml-sim (a scenario mapping the child's pid to GPU 0 at
a constant 40 %), and write a report whose step figures agree with what the Trainer measured
with its own clock, whose GPU figures are the scenario's, and whose findings name the data
loader. Then the same script under --no-auto gives device figures only.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import FAKE_HF, PYTHON, Tap  # noqa: E402
from gsenv import BIN, SIM  # noqa: E402

t = Tap()
HERE = os.path.dirname(os.path.abspath(__file__))

SCENARIO = {
    "scenario_version": 1,
    "gpus": [
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0d0e0f10-1111-2222-3333-444444444444",
         "pci": {"bus": "0x19", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
         "power": {"default_limit_w": 700}, "architecture": "hopper",
         "metrics": {"util_gpu_pct": 40, "power_w": 300}},
        {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-0d0e0f10-1111-2222-3333-555555555555",
         "pci": {"bus": "0x2a", "device_id": "0x2330"}, "memory": {"total_mib": 81559},
         "power": {"default_limit_w": 700}, "architecture": "hopper",
         "metrics": {"util_gpu_pct": 90, "power_w": 600}},
    ],
    "processes": [
        {"id": "child", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"}, "gpu": 0,
         "used_memory_mib": 4096},
        {"id": "other", "pid": 999998, "gpu": 1, "name": "someone-else",
         "used_memory_mib": 1024},
    ],
}

# The training script: nothing of gpuscope in it. 24 updates of 8 samples; each sample takes
# 4 ms to load, so a step waits ~32 ms for data against a few ms of compute.
TRAIN = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests!r})
    import torch
    from pyhelp import Net, SlowDataset
    from transformers import Trainer, TrainingArguments
    torch.set_num_threads(1)
    out = sys.argv[1]
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=8, logging_steps=8)
    ds = SlowDataset(192, sleep_s=0.004, dict_items=True)
    dl = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=False)
    tr = Trainer(model=Net(), args=args, dataloader=dl)
    tr.train()
    print(json.dumps(tr.measured))
    sys.exit(int(sys.argv[2]) if len(sys.argv) > 2 else 0)
""").format(tests=HERE)


def run(tmp, name, *flags, code=0):
    out = os.path.join(tmp, name)
    hf_out = os.path.join(tmp, name + "-hf")
    env = pyhelp.child_env(PYTHONPATH=FAKE_HF, GPUSCOPE_NVML_LIBRARY=SIM,
                           NVML_SIM_SCENARIO=os.path.join(tmp, "scenario.json"),
                           NO_COLOR="1")
    p = subprocess.run([BIN, "run", "--out", out, "--interval", "0.2", *flags, "--",
                        PYTHON, os.path.join(tmp, "train.py"), hf_out, str(code)],
                       env=env, capture_output=True, text=True, timeout=240)
    try:
        measured = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        measured = None
    try:
        with open(os.path.join(out, "metrics_report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = None
    return p, measured, rep, out, hf_out


with tempfile.TemporaryDirectory() as tmp:
    with open(os.path.join(tmp, "scenario.json"), "w") as f:
        json.dump(SCENARIO, f)
    with open(os.path.join(tmp, "train.py"), "w") as f:
        f.write(TRAIN)

    p, m, rep, out, hf_out = run(tmp, "auto", code=3)
    t.ok(p.returncode == 3, "the script's exit code comes back through gpuscope run",
         detail="rc %d: %s" % (p.returncode, p.stderr[-2000:]))
    t.ok(m is not None and m.get("steps") == 24, "the Trainer ran its 24 updates",
         detail=p.stdout[-500:])
    t.ok(rep is not None, "gpuscope run wrote metrics_report.json", detail=p.stderr[-2000:])
    rep = rep or {}
    m = m or {"data_s": 0, "step_s": 1, "steps": 0, "metrics": {}}
    t.eq(rep.get("steps"), 24, "report: 24 steps received over the socket (auto-injected)")
    want = m["data_s"] / (m["data_s"] + m["step_s"])
    got = rep.get("data_loading_time_ratio")
    t.ok(got is not None and abs(got - want) < 0.08 and got > 0.15,
         "report: data_loading_time_ratio agrees with the Trainer's own clock",
         detail="report %r, measured %.3f" % (got, want))
    ids = [f.get("id") for f in rep.get("findings", [])]
    t.ok("data_loading" in ids, "report: the data_loading finding", detail=str(ids))
    gpus = rep.get("gpus", [])
    t.eq([g.get("index") for g in gpus], [0], "report: only GPU 0 (the child's) is in the run")
    t.ok(gpus and abs(gpus[0].get("utilization_avg_percent", -1) - 40.0) < 1e-6,
         "report: GPU 0 averaged the scenario's 40 %", detail=json.dumps(gpus)[:400])
    t.eq(rep.get("gpu_utilization_source"), "nvml", "report: utilization from NVML samples")
    rt = rep.get("train_runtime")
    t.ok(rt is not None and abs(rt - m["metrics"].get("train_runtime", -9)) < 0.01,
         "report: train_runtime is the Trainer's own", detail="%r vs %r" % (rt, m["metrics"]))
    t.eq((rep.get("run") or {}).get("exit_code"), 3, "report: run.exit_code")
    t.ok("data_loading" in p.stderr and "dataloader_num_workers" in p.stderr,
         "exit summary on stderr names the finding and the option", detail=p.stderr[-1500:])
    fx = rep.get("facts") or {}
    t.eq([fx.get("loader_num_workers"), fx.get("loader_batch_size"),
          fx.get("per_device_train_batch_size")], [0, 8, 8],
         "report: the child's settings (facts) came over the socket in the hello")
    t.ok(re.search(r"^  settings \(facts\) +loader_num_workers=0, .*cpu_count=\d+$", p.stderr,
                   re.M) is not None, "exit summary: the run's settings on one line",
         detail=p.stderr[-1500:])
    t.ok("num_workers is 0 of" in p.stderr and
         "dataloader_num_workers=" in p.stderr and "(TrainingArguments)" in p.stderr,
         "exit summary: the advice names the current num_workers", detail=p.stderr[-1500:])
    with open(os.path.join(out, "steps.jsonl")) as f:
        lines = [json.loads(x) for x in f if x.strip()]
    steps = [x for x in lines if x.get("type") == "step"]
    t.eq(len(steps), 24, "steps.jsonl: one line per step")
    t.ok(all(x.get("peer_pid") == steps[0].get("peer_pid") for x in steps) and
         steps and steps[0].get("peer_pid", 0) > 0, "steps.jsonl: attributed to the child's pid")
    t.ok(os.path.exists(os.path.join(hf_out, "metrics_report.json")),
         "the callback also wrote output_dir/metrics_report.json in the child")

    p, m, rep, out, _ = run(tmp, "noauto", "--no-auto")
    t.ok(p.returncode == 0, "--no-auto: exit code 0", detail=p.stderr[-1500:])
    rep = rep or {}
    t.eq(rep.get("steps"), 0, "--no-auto: no step records")
    g = (rep.get("gpus") or [{}])[0]
    t.ok(abs(g.get("utilization_avg_percent", -1) - 40.0) < 1e-6 and g.get("index") == 0,
         "--no-auto: device figures for the child's GPU still reported")

pyhelp.exit_now(t.done())
