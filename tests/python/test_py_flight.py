"""python/gpuscope/_flight.py, the package's side of the hang watchdog's NCCL flight recorder
request, with real PyTorch (Debian's 1.13, CPU: it has no flight recorder): the reason file a
torch without it gets; with torch's dump function standing in (what torch >= 2.3 has), the
pickled bytes written whole as nccl_trace_rank_<rank> under the global rank of a real gloo
process group; a dump that raises says why; the watcher thread answers a new request within
its poll, ignores one older than itself and starts once per process."""
import os
import pickle
import socket
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pyhelp  # noqa: E402
from pyhelp import Tap  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from gpuscope import _flight  # noqa: E402

t = Tap()
tmp = tempfile.mkdtemp(prefix="gs-flight.")
c10d = torch._C._distributed_c10d
had = hasattr(c10d, "_dump_nccl_trace")


def listing(n):
    d = os.path.join(tmp, "hang-%d-nccl" % n)
    # a dot name is a file still being written (renamed into place whole)
    return sorted(n for n in os.listdir(d) if not n.startswith(".")) if os.path.isdir(d) else []


def wait_for(n, timeout=4.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end and not listing(n):
        time.sleep(0.05)
    return listing(n)


# ---- no flight recorder in this torch ----
if not had:
    path = _flight.dump(tmp, 1, 0)
    text = open(path).read()
    t.ok(path.endswith("hang-1-nccl/nccl_trace_rank_0.unavailable") and
         "has no NCCL flight recorder" in text and torch.__version__ in text,
         "a torch without the recorder: a .unavailable file says so", (path, text))
else:
    t.ok(True, "this torch has a flight recorder (the .unavailable case needs one without)")

# ---- a real gloo group gives the rank; torch's dump function stands in ----
s = socket.socket()
s.bind(("127.0.0.1", 0))
port = s.getsockname()[1]
s.close()
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port, rank=0, world_size=1)
want = pickle.dumps({"version": "2.5", "entries": [{"profiling_name": "nccl:all_reduce"}]})
c10d._dump_nccl_trace = lambda *a, **k: want
os.environ["RANK"] = "7"  # the process group's rank wins over $RANK
path = _flight.dump(tmp, 2, 3)
t.ok(path.endswith("hang-2-nccl/nccl_trace_rank_0") and open(path, "rb").read() == want and
     listing(2) == ["nccl_trace_rank_0"],
     "the dump's bytes as nccl_trace_rank_<process group rank>, nothing else left", listing(2))
dist.destroy_process_group()
path = _flight.dump(tmp, 3, 3)
t.ok(path.endswith("nccl_trace_rank_7"), "no process group: $RANK", path)
del os.environ["RANK"]
t.ok(_flight.dump(tmp, 4, 3).endswith("nccl_trace_rank_3"), "no $RANK either: the tracker's")


def boom(*a, **k):
    raise RuntimeError("ProcessGroupNCCL is not initialized")


c10d._dump_nccl_trace = boom
path = _flight.dump(tmp, 5, 0)
t.ok(path.endswith(".unavailable") and "RuntimeError: ProcessGroupNCCL is not initialized" in
     open(path).read(), "a dump that raises: the reason, and no exception in training", path)
c10d._dump_nccl_trace = lambda *a, **k: b""
t.ok("returned nothing" in open(_flight.dump(tmp, 6, 0)).read(), "an empty dump: said so")

# ---- the watcher thread ----
c10d._dump_nccl_trace = lambda *a, **k: want
with open(os.path.join(tmp, "hang.request"), "w") as f:
    f.write("10\n")  # older than the watcher: not for this process
stop = _flight.start(tmp, 0)
t.ok(stop is not None and _flight.start(tmp, 0) is None, "one watcher per process")
time.sleep(2.5 * _flight.POLL_S)
t.eq(listing(10), [], "a request older than the watcher is not answered")
with open(os.path.join(tmp, "hang.request.tmp"), "w") as f:
    f.write("11\n")
os.replace(os.path.join(tmp, "hang.request.tmp"), os.path.join(tmp, "hang.request"))
t0 = time.monotonic()
got = wait_for(11)
t.ok(got == ["nccl_trace_rank_0"] and time.monotonic() - t0 < 3 * _flight.POLL_S,
     "a new request is answered within its poll (%.1f s)" % (time.monotonic() - t0), got)

# ---- no link followed, no request but the owner's (issue 24 item 1) ----
target = os.path.join(tmp, "precious")
with open(target, "w") as f:
    f.write("keep\n")
os.mkdir(os.path.join(tmp, "hang-12-nccl"))
for name in ("nccl_trace_rank_0", "nccl_trace_rank_0.tmp", ".nccl_trace_rank_0.tmp-000000000000"):
    os.symlink(target, os.path.join(tmp, "hang-12-nccl", name))
os.replace(os.path.join(tmp, "hang.request"), os.path.join(tmp, "old.request"))
with open(os.path.join(tmp, "r.tmp"), "w") as f:
    f.write("12\n")
os.replace(os.path.join(tmp, "r.tmp"), os.path.join(tmp, "hang.request"))
got = wait_for(12)
time.sleep(1.5 * _flight.POLL_S)
p12 = os.path.join(tmp, "hang-12-nccl", "nccl_trace_rank_0")
t.ok(open(target).read() == "keep\n" and not os.path.islink(p12) and open(p12, "rb").read() == want,
     "links planted at the dump's names: replaced, never written through", listing(12))
os.symlink(os.path.join(tmp, "old.request"), os.path.join(tmp, "link.request"))
with open(os.path.join(tmp, "old.request"), "w") as f:
    f.write("13\n")
os.replace(os.path.join(tmp, "link.request"), os.path.join(tmp, "hang.request"))
time.sleep(2.5 * _flight.POLL_S)
t.eq(listing(13), [], "a hang.request that is a symbolic link is not honoured")
if os.geteuid() == 0:
    with open(os.path.join(tmp, "r.tmp"), "w") as f:
        f.write("14\n")
    os.chown(os.path.join(tmp, "r.tmp"), 4242, 4242)
    os.replace(os.path.join(tmp, "r.tmp"), os.path.join(tmp, "hang.request"))
    time.sleep(2.5 * _flight.POLL_S)
    t.eq(listing(14), [], "a hang.request of another user is not honoured")
else:
    t.ok(True, "# SKIP another user's hang.request needs root")

# ---- the request makes the profiler hand its steps over (python/gpuscope/_core.py) ----
from gpuscope import _core  # noqa: E402

_core.FLUSH_S = 3600.0  # no timer flush: only the request can deliver these steps
srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
sock_path = os.path.join(tmp, "steps.sock")
srv.bind(sock_path)
srv.listen(1)
os.environ["GPUSCOPE_RUN_DIR"] = tmp
prof = _core.Profiler(socket=sock_path, nvml="off", log=lambda line: None)
for _ in range(5):
    prof.step_begin()
    prof.step_end()
conn, _ = srv.accept()
conn.settimeout(0.2)


def records(deadline):
    got = []
    while time.monotonic() < deadline:
        try:
            got.append(conn.recv(65536).decode())
        except socket.timeout:
            continue
    return [r for r in got if '"type":"step"' in r]


early = records(time.monotonic() + 1.0)
with open(os.path.join(tmp, "hang.request.tmp"), "w") as f:
    f.write("15\n")
os.replace(os.path.join(tmp, "hang.request.tmp"), os.path.join(tmp, "hang.request"))
late = records(time.monotonic() + 3 * _flight.POLL_S)
t.ok(early == [] and len(late) == 5,
     "the watchdog's request: the 5 waiting step records reach the receiver (%d before it, "
     "%d after)" % (len(early), len(late)))
prof._stop_sender()
prof.native.close()
conn.close()
srv.close()
stop.set()
if not had:
    del c10d._dump_nccl_trace
shared = tempfile.mkdtemp(prefix="gs-flight-shared.")
os.chmod(shared, 0o777)
_flight._started.clear()
t.ok(_flight.start(shared, 0) is None, "a run directory others may write is not watched")
try:
    _flight.dump(shared, 1, 0)
    t.ok(False, "a dump into a directory others may write is refused")
except PermissionError as e:
    t.ok("writable by other users" in str(e), "a dump into a directory others may write is refused", e)
os.rmdir(shared)

os.system("rm -rf " + tmp)
pyhelp.exit_now(t.done())
