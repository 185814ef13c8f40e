"""A DDP job (gloo, CPU) that never imports gpuscope: ~40 ms steps; at step argv[2] rank
argv[3] (default 1) stops in a long sleep (its line says so) while the other ranks wait for it
in DDP's gradient all-reduce inside backward. Without torchrun ($RANK unset) a plain model in
one process, rank 0. Each rank appends "step <n> <unix time>" to argv[1].rank<R> after every
optimizer step, and "start <unix time>" first: the test's truth."""
import os
import sys
import time

import torch
import torch.distributed as dist

out, hang_at = sys.argv[1], int(sys.argv[2])
hang_rank = int(sys.argv[3]) if len(sys.argv) > 3 else 1
rank = int(os.environ.get("RANK", "0"))
log = open("%s.rank%d" % (out, rank), "a", buffering=1)
log.write("start %.6f\n" % time.time())
torch.manual_seed(0)
model = torch.nn.Linear(64, 64)
if "RANK" in os.environ:
    dist.init_process_group("gloo")
    model = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x = torch.randn(32, 64)
for step in range(1, 100000):
    if rank == hang_rank and step == hang_at:
        time.sleep(3600)  # the rank hangs here
    time.sleep(0.04)
    loss = model(x).pow(2).mean()
    loss.backward()
    opt.step()
    opt.zero_grad()
    log.write("step %d %.6f\n" % (step, time.time()))
