"""/metrics latency under a history flood (issue 18): docs/api.md says /api/v1/history never
delays /metrics.

Makes a 6-hour, 8-GPU history.db with bench_store, starts `gpuscope agent` on it (nvml-sim,
8 GPUs + 64 processes, rate limit off, retention long enough to keep the 2023 rows), then
times 600 GET /metrics on one kept-alive connection: idle, and while 8 threads each run
heavy /api/v1/history queries back to back (one GPU each, 10,800 raw 2 s buckets over the 6
hours). Prints p50/p99/max of /metrics in both phases, the ratio of the p99s, and how many
history queries were answered. Needs the build's gpuscope and bench_store.

usage: /usr/bin/python3 bench/history_flood.py [BUILD_DIR]   (default build)
"""
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
BUILD = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(SRC, "build"))
BIN = os.environ.get("GPUSCOPE_BIN", os.path.join(BUILD, "gpuscope"))
T0 = 1700000040  # bench_store's first sample
HOURS = 6


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100.0 * len(xs)))]


def scrape_times(port, n):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        c.request("GET", "/metrics")
        r = c.getresponse()
        r.read()
        out.append((time.perf_counter() - t0) * 1000)
        if r.status != 200:
            raise SystemExit("/metrics answered %d" % r.status)
        time.sleep(0.002)
    c.close()
    return out


def main():
    data = tempfile.mkdtemp(prefix="gs-bench-flood.")
    subprocess.run([os.path.join(BUILD, "bench", "bench_store"), data, str(HOURS)], check=True,
                   stdout=subprocess.DEVNULL)
    os.rename(os.path.join(data, "bench-history-gpus.db"), os.path.join(data, "history.db"))
    port = 20000 + os.getpid() % 20000
    env = dict(os.environ, GPUSCOPE_NVML_LIBRARY=os.path.join(BUILD, "sim", "libnvidia-ml.so.1"),
               NVML_SIM_SCENARIO=os.path.join(SRC, "sim", "scenarios", "h100x8-training.json"),
               TZ="UTC", RUNTIME_DIRECTORY=data, GPUSCOPE_AGENT_SOCKET=os.path.join(data, "s"))
    p = subprocess.Popen([BIN, "agent", "--listen", "127.0.0.1:%d" % port, "--data-dir", data,
                          "--history", "on", "--retention-raw", "3650d",
                          "--retention-rollup", "3650d", "--http-rate", "0", "--socket", "off",
                          "--http-socket", "off", "--log-level", "warn"], env=env)
    try:
        for _ in range(100):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/metrics")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        scrape_times(port, 50)  # warm
        idle = scrape_times(port, 600)
        # The flood: 8 client processes at nice 19 (this box has few cores; their JSON
        # parsing is not the agent's cost), each on its own kept-alive connection.
        q = "/api/v1/history?gpu=%%d&metric=utilization_gpu&from=%d&to=%d&step=2" % (
            T0, T0 + HOURS * 3600)
        code = ("import http.client,sys\nc=http.client.HTTPConnection('127.0.0.1',%d,"
                "timeout=120)\nn=0\ntry:\n while True:\n  c.request('GET',sys.argv[1])\n"
                "  r=c.getresponse();r.read();n+=r.status==200\n"
                "except BaseException:\n print(n)\n" % port)
        fl = [subprocess.Popen([sys.executable, "-c", code, q % g], stdout=subprocess.PIPE,
                               text=True, preexec_fn=lambda: os.nice(19)) for g in range(8)]
        time.sleep(1.0)
        t_flood = time.monotonic()
        busy = scrape_times(port, 600)
        t_flood = time.monotonic() - t_flood
        answered = []
        for f in fl:
            f.send_signal(2)
            answered.append(int((f.communicate(timeout=30)[0] or "0").strip() or 0))
        print("| phase | /metrics p50 | p99 | max | history answers |")
        print("|---|---|---|---|---|")
        print("| idle | %.2f ms | %.2f ms | %.2f ms | - |" % (pct(idle, 50), pct(idle, 99),
                                                          max(idle)))
        print("| 8 history floods | %.2f ms | %.2f ms | %.2f ms | %d in %.1f s |" % (
            pct(busy, 50), pct(busy, 99), max(busy), sum(answered), t_flood))
        print("p99 ratio (flood / idle): %.2f" % (pct(busy, 99) / pct(idle, 99)))
    finally:
        p.terminate()
        p.wait(timeout=20)
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
