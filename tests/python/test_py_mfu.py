"""Tokens/s and MFU (docs/report.md, TOKENS AND MFU) from real PyTorch training on the CPU,
placed by nvml-sim on a named GPU (the run's process listed on it, as tests/python/
test_py_report.py does), each figure checked against what the script counts and clocks itself:

  GPT-style loop, zero-code (gpuscope run)  tokens = the script's own count of the tokens it
                    trained on (padding excluded by the attention mask passed as a keyword,
                    evaluation passes under no_grad not counted); tokens/s within 2 % of that
                    count over the script's clock; MFU = (6N + 12·L·H·Q·T) x tokens/s / the
                    table's fp32 peak of the H100 SXM (67 TFLOP/s), N the script's own
                    parameter count; the low_mfu finding (GPU-Util 95 % in the scenario)
  unknown GPU name  tokens/s still there, MFU null with the reason naming the GPU
  HF Trainer (fake transformers, include_num_input_tokens_seen) under gpuscope run and with
                    the callback in code: the Trainer's own num_input_tokens_seen (padding
                    included, as the Trainer counts), not the forwards' count; on 2 gloo ranks
                    the Trainer's count is the job's, each rank records half of it
  explicit API      gpuscope.step(tokens=n); instrument() counts its model's token input
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import FAKE_HF, PYROOT, PYTHON, SIM, Tap, near  # noqa: E402
from gsenv import BIN, free_port  # noqa: E402

t = Tap()
H100_FP32 = 67e12  # the peak table's H100 SXM fp32 figure (docs/report.md, PEAK FLOPS)

GPT = textwrap.dedent("""
    import json, sys, time, torch
    torch.set_num_threads(1)
    cfg = json.loads(sys.argv[1])
    torch.manual_seed(0)

    class Cfg:  # nanoGPT's names
        n_layer, n_head, n_embd, vocab_size, block_size = 2, 4, 64, 256, 32

    class Block(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.h = c.n_head
            self.ln1, self.ln2 = torch.nn.LayerNorm(c.n_embd), torch.nn.LayerNorm(c.n_embd)
            self.qkv = torch.nn.Linear(c.n_embd, 3 * c.n_embd)
            self.proj = torch.nn.Linear(c.n_embd, c.n_embd)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(c.n_embd, 4 * c.n_embd),
                                           torch.nn.GELU(), torch.nn.Linear(4 * c.n_embd, c.n_embd))
        def forward(self, x):
            B, T, C = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
            q, k, v = (z.view(B, T, self.h, C // self.h).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / (C // self.h) ** 0.5
            att = att.masked_fill(torch.ones(T, T).tril() == 0, float("-inf")).softmax(-1)
            x = x + self.proj((att @ v).transpose(1, 2).reshape(B, T, C))
            return x + self.mlp(self.ln2(x))

    class GPT(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.config = c
            self.wte = torch.nn.Embedding(c.vocab_size, c.n_embd)
            self.wpe = torch.nn.Embedding(c.block_size, c.n_embd)
            self.blocks = torch.nn.ModuleList(Block(c) for _ in range(c.n_layer))
            self.ln_f = torch.nn.LayerNorm(c.n_embd)
            self.head = torch.nn.Linear(c.n_embd, c.vocab_size, bias=False)
        def forward(self, idx, targets=None, attention_mask=None):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
            for b in self.blocks:
                x = b(x)
            logits = self.head(self.ln_f(x))
            if targets is None:
                return logits
            l = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)),
                                                  targets.view(-1), reduction="none")
            m = attention_mask.reshape(-1).float()
            return (l * m).sum() / m.sum()

    c = Cfg()
    model = GPT(c)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    B, T = 8, c.block_size
    g = torch.Generator().manual_seed(1)
    batches = []
    for i in range(4):
        x = torch.randint(0, c.vocab_size, (B, T), generator=g)
        m = torch.ones(B, T, dtype=torch.long)
        m[0, T - 8:] = 0  # padding: not trained on
        m[1, T - 3 - i:] = 0
        batches.append((x, torch.roll(x, -1, 1), m))
    tokens = evals = 0
    t0 = time.time()
    for s in range(cfg["steps"]):
        x, y, m = batches[s % 4]
        loss = model(x, y, attention_mask=m)
        loss.backward()
        opt.step()
        opt.zero_grad()
        tokens += int(m.sum())
        if s % 5 == 4:  # an evaluation pass: no training, its tokens do not count
            model.eval()
            with torch.no_grad():
                model(x, y, attention_mask=m)
            model.train()
            evals += 1
    wall = time.time() - t0
    print(json.dumps({"tokens": tokens, "wall": wall, "evals": evals, "padded": B * T * cfg["steps"],
                      "params": sum(p.numel() for p in model.parameters()),
                      "layers": c.n_layer, "heads": c.n_head, "head_dim": c.n_embd // c.n_head,
                      "seq": T}))
""")

# The fake Trainer counting tokens as transformers does; its batches padded.
HF = textwrap.dedent("""
    import json, sys, torch
    from transformers import Trainer, TrainingArguments
    torch.set_num_threads(1)
    torch.manual_seed(0)
    V, T = 128, 16

    class LM(torch.nn.Module):
        main_input_name = "input_ids"
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, 32)
            self.out = torch.nn.Linear(32, V)
        def forward(self, input_ids=None, attention_mask=None, labels=None):
            logits = self.out(self.emb(input_ids))
            loss = torch.nn.functional.cross_entropy(logits.view(-1, V), labels.view(-1))
            return {"loss": loss, "logits": logits}

    class DS(torch.utils.data.Dataset):
        def __len__(self): return 48
        def __getitem__(self, i):
            ids = torch.randint(0, V, (T,), generator=torch.Generator().manual_seed(i))
            mask = torch.ones(T, dtype=torch.long)
            mask[T - (i % 5):] = 0
            return {"input_ids": ids, "attention_mask": mask, "labels": ids}

    args = TrainingArguments(output_dir=sys.argv[1], per_device_train_batch_size=4,
                             gradient_accumulation_steps=2, logging_steps=100,
                             include_num_input_tokens_seen=True)
    callbacks = []
    if len(sys.argv) > 2:  # the callback in code (no gpuscope run: no loop tracker)
        import gpuscope
        callbacks = [gpuscope.GpuScopeCallback(nvml="off", log=lambda s: None)]
    dl = torch.utils.data.DataLoader(DS(), batch_size=4)
    tr = Trainer(model=LM(), args=args, dataloader=dl, callbacks=callbacks)
    tr.train()
    mask = sum(int(b["attention_mask"].sum()) for b in dl)
    print(json.dumps({"seen": tr.state.num_input_tokens_seen, "mask": mask,
                      "steps": tr.state.global_step}))
""")


# The same Trainer on 2 gloo ranks with different micro-batches (4 and 2 sequences): the
# Trainer's num_input_tokens_seen is the job's (gathered over both ranks).
HF2 = textwrap.dedent("""
    import datetime, gc, json, os, sys, torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
    from transformers import Trainer, TrainingArguments
    V, T = 128, 16

    class LM(torch.nn.Module):
        main_input_name = "input_ids"
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(V, 32)
            self.out = torch.nn.Linear(32, V)
        def forward(self, input_ids=None, attention_mask=None, labels=None):
            logits = self.out(self.emb(input_ids))
            return {"loss": torch.nn.functional.cross_entropy(logits.view(-1, V),
                                                              labels.view(-1))}

    def worker(rank, out, port):
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                          WORLD_SIZE="2", LOCAL_RANK=str(rank))
        torch.set_num_threads(1)
        dist.init_process_group("gloo", rank=rank, world_size=2,
                                timeout=datetime.timedelta(seconds=120))
        torch.manual_seed(rank)
        bs = 4 if rank == 0 else 2
        ids = torch.randint(0, V, (bs * 8, T))
        ds = [{"input_ids": x, "attention_mask": torch.ones(T, dtype=torch.long), "labels": x}
              for x in ids]
        args = TrainingArguments(output_dir=out, per_device_train_batch_size=bs,
                                 logging_steps=100, include_num_input_tokens_seen=True,
                                 process_index=rank, local_process_index=rank, world_size=2)
        tr = Trainer(model=LM(), args=args,
                     dataloader=torch.utils.data.DataLoader(ds, batch_size=bs))
        tr.state.is_world_process_zero = rank == 0
        tr.train()
        if rank == 0:
            print(json.dumps({"seen": tr.state.num_input_tokens_seen,
                              "steps": tr.state.global_step}), flush=True)
        del tr
        gc.collect()
        dist.barrier()
        dist.destroy_process_group()

    if __name__ == "__main__":
        mp.spawn(worker, args=(sys.argv[1], int(sys.argv[2])), nprocs=2)
""")

# instrument(): the model's training forwards' token input; a no_grad forward adds none.
INSTRUMENT = textwrap.dedent("""
    import json, sys, torch, gpuscope
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Embedding(50, 8), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    gpuscope.instrument(model, opt, output_dir=sys.argv[1], nvml="off", log=lambda s: None)
    ids = torch.randint(0, 50, (4, 6))
    for _ in range(5):
        model(ids).sum().backward()
        opt.step()
        opt.zero_grad()
        with torch.no_grad():
            model(ids)
    rep = gpuscope.finish() or {}
    print(json.dumps({"tokens": rep.get("train_tokens"), "trained": 5 * ids.numel()}))
""")


def scenario(path, name):
    with open(path, "w") as f:
        json.dump({"scenario_version": 1,
                   "gpus": [{"name": name, "uuid": "GPU-0d0e0f10-1111-2222-3333-444444444444",
                             "pci": {"bus": "0x19", "device_id": "0x2330"},
                             "memory": {"total_mib": 81559}, "power": {"default_limit_w": 700},
                             "architecture": "hopper",
                             "metrics": {"util_gpu_pct": 95, "power_w": 500}}],
                   "processes": [{"id": "child", "pid": {"env": "GPUSCOPE_RUN_CHILD_PID"},
                                  "gpu": 0, "used_memory_mib": 4096}]}, f)
    return path


def gsrun(tmp, name, script, arg, scen=None, pythonpath=None, extra=()):
    out = os.path.join(tmp, name)
    env = pyhelp.child_env(NO_COLOR="1", PYTHONPATH=pythonpath)
    if scen:
        env.update(GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=scen)
    p = subprocess.run([BIN, "run", "--out", out, "--interval", "0.2", "--", PYTHON, script,
                        arg, *extra], env=env, capture_output=True, text=True, timeout=240)
    try:
        measured = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        measured = {}
    try:
        with open(os.path.join(out, "metrics_report.json")) as f:
            rep = json.load(f)
    except (OSError, ValueError):
        rep = {}
    return p, measured, rep


def write(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


with tempfile.TemporaryDirectory() as tmp:
    gpt = write(tmp, "gpt.py", GPT)

    # ---- 1. the GPT loop on a simulated H100 SXM ----
    p, m, rep = gsrun(tmp, "h100", gpt, json.dumps({"steps": 40}),
                      scenario(os.path.join(tmp, "h100.json"), "NVIDIA H100 80GB HBM3"))
    t.ok(p.returncode == 0 and rep and m, "GPT loop under gpuscope run on the sim H100",
         detail=p.stderr[-1500:])
    fx = rep.get("facts") or {}
    t.ok(m.get("evals", 0) > 0 and m.get("tokens", 0) < m.get("padded", 0),
         "the script ran evaluation passes and padded its batches", detail=m)
    t.eq(rep.get("train_tokens"), m.get("tokens"),
         "train_tokens = the script's own count (mask sums; evaluation not counted)")
    tps_script = m["tokens"] / m["wall"] if m.get("wall") else None
    t.ok(near(rep.get("train_tokens_per_second"), tps_script, 0.02),
         "train_tokens_per_second within 2 % of the script's tokens over its own clock",
         detail=[rep.get("train_tokens_per_second"), tps_script])
    t.ok(near(rep.get("tokens_per_second_per_gpu"), rep.get("train_tokens_per_second"), 1e-12),
         "one rank: tokens/s per GPU = the job's")
    t.eq([fx.get(k) for k in ("param_count", "model_layers", "model_heads", "model_head_dim",
                              "seq_len")],
         [m.get("params"), m.get("layers"), m.get("heads"), m.get("head_dim"), m.get("seq")],
         "facts: the script's parameter count, layers, heads, head dim, sequence length")
    fpt = 6 * m["params"] + 12 * m["layers"] * m["heads"] * m["head_dim"] * m["seq"]
    t.ok(near(rep.get("model_flops_per_token"), fpt, 1e-12) and
         rep.get("model_flops_formula") == "6N+12LHQT",
         "model_flops_per_token = 6N + 12·L·H·Q·T from the script's own figures",
         detail=[rep.get("model_flops_per_token"), fpt])
    t.eq([rep.get("peak_flops"), rep.get("peak_flops_precision"), rep.get("peak_flops_gpu")],
         [H100_FP32, "fp32", "H100 SXM"], "peak: the table's H100 SXM fp32 figure")
    tps = rep.get("train_tokens_per_second") or 0
    t.ok(near(rep.get("mfu"), fpt * tps / H100_FP32, 1e-9),
         "mfu = FLOPs per token x the report's tokens/s / peak", detail=rep.get("mfu"))
    t.ok(tps_script and near(rep.get("mfu"), fpt * tps_script / H100_FP32, 0.02),
         "mfu within 2 % of the formula over the script's own count and clock",
         detail=[rep.get("mfu"), tps_script and fpt * tps_script / H100_FP32])
    t.ok(rep.get("mfu_null_reason") is None and rep.get("hfu") is None,
         "no null reason; no HFU (no activation recomputation)")
    r0 = (rep.get("per_rank") or [{}])[0]
    t.ok(r0.get("tokens") == m.get("tokens") and near(r0.get("mfu"), rep.get("mfu"), 1e-9) and
         r0.get("gpu_model") == "H100 SXM", "per rank: tokens, MFU, GPU model", detail=r0)
    low = [f for f in rep.get("findings", []) if f.get("id") == "low_mfu"]
    t.ok(low and any("fp32" in a and "autocast" in a for a in low[0].get("advice", [])),
         "low_mfu: MFU low while GPU-Util is 95 %, advice naming fp32 and autocast",
         detail=low[0] if low else [f.get("id") for f in rep.get("findings", [])])
    t.ok("tokens/s" in p.stderr and "MFU" in p.stderr and "H100 SXM" in p.stderr,
         "the exit summary shows tokens/s and MFU", detail=p.stderr[-1500:])

    # ---- 2. a GPU the peak table does not know ----
    p, m, rep = gsrun(tmp, "unknown", gpt, json.dumps({"steps": 10}),
                      scenario(os.path.join(tmp, "unknown.json"), "NVIDIA Frobnicator 9000"))
    reason = rep.get("mfu_null_reason") or ""
    t.ok(rep.get("mfu") is None and reason.startswith("unknown_gpu") and
         "NVIDIA Frobnicator 9000" in reason and rep.get("peak_flops") is None,
         "unknown GPU: mfu null, the reason names it", detail=reason)
    t.eq(rep.get("train_tokens"), m.get("tokens"), "unknown GPU: tokens still counted")
    t.ok("n/a: unknown_gpu" in p.stderr, "the summary says why MFU is n/a",
         detail=p.stderr[-800:])

    # ---- 3. the HF Trainer's own count ----
    hf = write(tmp, "hf.py", HF)
    p, m, rep = gsrun(tmp, "hf", hf, os.path.join(tmp, "hf-out"), pythonpath=FAKE_HF)
    t.ok(p.returncode == 0 and m.get("seen", 0) > m.get("mask", 0) > 0,
         "HF: the Trainer counted num_input_tokens_seen (padding included, more than the masks)",
         detail=[m, p.stderr[-800:]])
    t.eq(rep.get("train_tokens"), m.get("seen"),
         "HF under gpuscope run: train_tokens = the Trainer's num_input_tokens_seen")
    t.eq(rep.get("steps"), m.get("steps"), "HF: one step per optimizer step")
    # two ranks: each records its share of the Trainer's (job-wide) count
    p, m, rep = gsrun(tmp, "hf2", write(tmp, "hf2.py", HF2), os.path.join(tmp, "hf2-out"),
                      pythonpath=FAKE_HF, extra=[str(free_port())])
    pr = rep.get("per_rank") or []
    t.ok(p.returncode == 0 and m.get("seen") == 8 * (4 + 2) * 16 and len(pr) == 2,
         "HF on 2 gloo ranks (micro-batches of 4 and 2): the Trainer's count is the job's",
         detail=[m, len(pr), p.stderr[-800:]])
    t.ok(rep.get("train_tokens") == m.get("seen") and
         [r.get("tokens") for r in pr] == [m.get("seen", 0) // 2] * 2,
         "HF, 2 ranks: train_tokens = the Trainer's job-wide count, each rank half of it",
         detail=[rep.get("train_tokens"), [r.get("tokens") for r in pr]])
    out = os.path.join(tmp, "hf-cb")
    env = pyhelp.child_env(PYTHONPATH=os.pathsep.join([FAKE_HF, PYROOT]))
    q = subprocess.run([PYTHON, hf, out, "callback"], env=env, capture_output=True, text=True,
                       timeout=240)
    try:
        with open(os.path.join(out, "metrics_report.json")) as f:
            rep = json.load(f)
        mm = json.loads(q.stdout.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError):
        rep, mm = {}, {}
    t.ok(q.returncode == 0 and rep.get("train_tokens") == mm.get("seen") and mm.get("seen"),
         "HF callback in code: train_tokens = num_input_tokens_seen",
         detail=[rep.get("train_tokens"), mm, q.stderr[-800:]])
    t.ok((rep.get("mfu_null_reason") or "").startswith("cpu_only"),
         "no GPU at all: mfu null, cpu_only", detail=rep.get("mfu_null_reason"))

    # ---- 4. instrument() ----
    q = subprocess.run([PYTHON, write(tmp, "inst.py", INSTRUMENT), os.path.join(tmp, "inst")],
                       env=pyhelp.child_env(), capture_output=True, text=True, timeout=240)
    try:
        mm = json.loads(q.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        mm = {}
    t.ok(mm.get("tokens") == mm.get("trained") == 120,
         "instrument(): the training forwards' tokens (batch x sequence), no_grad ones not",
         detail=[mm, q.stderr[-600:]])

# ---- 5. the explicit API ----
import gpuscope  # noqa: E402
with tempfile.TemporaryDirectory() as out:
    gpuscope.init(output_dir=out, nvml="off", log=lambda s: None)
    for n in (100, 250, 0, 50):
        with gpuscope.step(samples=2, tokens=n):
            pass
    rep = gpuscope.finish() or {}
    t.eq([rep.get("train_tokens"), (rep.get("per_rank") or [{}])[0].get("tokens")], [400, 400],
         "gpuscope.step(tokens=n): the steps' tokens (a step of 0 is unknown, adds none)")

# ---- 6. a crowded hello keeps the diagnosis' facts, MFU's shape facts go first ----
from gpuscope import _facts  # noqa: E402
many = {"setting_%02d" % i: i for i in range(30)}
got = _facts.clean({"seq_len": 32, "model_layers": 2}, many, {"cpu_count": 2})
t.ok(len(got) == 32 and "cpu_count" in got and list(got)[-1] == "seq_len" and
     "model_layers" not in got,
     "32 facts at most: the others first, then the MFU shape facts while room is left",
     detail=list(got)[-4:])

pyhelp.exit_now(t.done())
