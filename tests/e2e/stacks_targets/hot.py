"""A target with known hot functions whose own clocks say how long each ran: every 100 ms
cycle spends ~50 ms in alpha, ~30 ms in beta, ~20 ms in gamma (busy loops on perf_counter).
Writes {"alpha": s, "beta": s, "gamma": s} of wall time per function to argv[1] at SIGTERM.
gamma calls a C function (zlib.crc32 on a buffer) in its loop: the Python caller must show."""
import json
import signal
import sys
import time
import zlib

spent = {"alpha": 0.0, "beta": 0.0, "gamma": 0.0}
BUF = b"x" * 65536


def alpha(ms):
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < ms / 1000:
        n += 1
    spent["alpha"] += time.perf_counter() - t0


def beta(ms):
    t0 = time.perf_counter()
    n = 0
    while time.perf_counter() - t0 < ms / 1000:
        n = (n * 7 + 3) % 1000003
    spent["beta"] += time.perf_counter() - t0


def gamma(ms):
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < ms / 1000:
        zlib.crc32(BUF)
    spent["gamma"] += time.perf_counter() - t0


def stop(*_):
    with open(sys.argv[1], "w") as f:
        json.dump(spent, f)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    alpha(50)
    beta(30)
    gamma(20)
