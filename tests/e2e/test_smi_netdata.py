"""A real netdata (Debian's 1.37, its python.d nvidia_smi collector) running gpuscope as
nvidia-smi on an 8-GPU nvml-sim scenario: the collector finds `nvidia-smi` on PATH (a symlink to
gpuscope), runs `nvidia-smi -x -q -l 1` and splits the stream on </nvidia_smi_log>; netdata's own
HTTP API must then answer every GPU's utilization, memory, temperature and power with the values
the scenario has at that instant (NVML_SIM_TIME freezes it; `--query-gpu` reads the same).

Debian bookworm's netdata ships the nvidia_smi collector in python.d (netdata-plugins-python);
its go.d plugin is not packaged. Skipped when netdata or that collector is not installed.
"""
import json
import os
import pwd
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, SIM, SCENARIOS, free_port, http_get, wait_until  # noqa: E402

NETDATA = "/usr/sbin/netdata"
COLLECTOR = "/usr/lib/netdata/python.d/nvidia_smi.chart.py"
SCENARIO = os.path.join(SCENARIOS, "h100x8-training.json")
T = "600"

CONF = """[global]
    run as user = {user}
    hostname = gpuscope-smi-test
    memory mode = ram
    update every = 1
[directories]
    config = {d}/conf
    stock config = /usr/lib/netdata/conf.d
    cache = {d}/cache
    lib = {d}/lib
    log = {d}/log
    run = {d}/run
    plugins = /usr/lib/netdata/plugins.d
    web = /usr/share/netdata/web
[logs]
    debug log = none
    error log = {d}/log/error.log
    access log = none
[web]
    bind to = 127.0.0.1:{port}
[plugins]
    proc = no
    diskspace = no
    cgroups = no
    tc = no
    idlejitter = no
    apps = no
    charts.d = no
    node.d = no
    go.d = no
    ebpf = no
    perf = no
    slabinfo = no
    nfacct = no
    statsd = no
    timex = no
    checks = no
    python.d = yes
    enable running new plugins = no
[ml]
    enabled = no
[health]
    enabled = no
[cloud]
    enabled = no
"""


def latest(base, chart):
    """{dimension: value} of the newest point of a chart, or None."""
    try:
        st, _, body = http_get("%s/api/v1/data?chart=%s&points=1&after=-2&format=json"
                               % (base, chart))
    except OSError:  # not listening yet
        return None
    if st != 200:
        return None
    d = json.loads(body)
    if not d.get("data"):
        return None
    return dict(zip(d["labels"][1:], d["data"][0][1:]))


def main():
    t = Tap()
    if not os.path.exists(NETDATA) or not os.path.exists(COLLECTOR):
        t.skip("netdata nvidia_smi collector", "netdata / netdata-plugins-python not installed")
        return t.done()
    if not os.path.exists(SIM):
        t.skip("netdata nvidia_smi collector", "nvml-sim not built")
        return t.done()
    env = {k: v for k, v in os.environ.items() if not k.startswith("NVML_SIM")}
    want = {}
    r = subprocess.run([BIN, "query", "--query-gpu=utilization.gpu,memory.used,memory.free,"
                        "temperature.gpu,power.draw", "--format=csv,noheader,nounits"],
                       env=dict(env, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=SCENARIO,
                                NVML_SIM_TIME=T), capture_output=True, text=True, timeout=30)
    for i, line in enumerate(r.stdout.splitlines()):
        u, used, free, temp, pwr = line.split(", ")
        want[i] = {"gpu_utilization": {"utilization": float(u)},
                   "mem_usage": {"used": float(used), "free": float(free)},
                   "temperature": {"temp": float(temp)},
                   "power": {"power": float(pwr)}}
    t.eq(len(want), 8, "the scenario's 8 GPUs from --query-gpu")
    with tempfile.TemporaryDirectory(prefix="gpuscope-netdata-") as d:
        for sub in ("conf/python.d", "cache", "lib", "log", "run", "bin"):
            os.makedirs(os.path.join(d, sub))
        os.chmod(d, 0o755)
        os.symlink(BIN, os.path.join(d, "bin", "nvidia-smi"))
        port = free_port()
        user = pwd.getpwuid(os.getuid()).pw_name
        with open(os.path.join(d, "conf", "netdata.conf"), "w") as fh:
            fh.write(CONF.format(d=d, port=port, user=user))
        with open(os.path.join(d, "conf", "python.d.conf"), "w") as fh:
            fh.write("enabled: yes\ndefault_run: no\nnvidia_smi: yes\n")
        with open(os.path.join(d, "conf", "python.d", "nvidia_smi.conf"), "w") as fh:
            fh.write("update_every: 1\nloop_mode: yes\n")
        nenv = dict(env, PATH=os.path.join(d, "bin") + ":" + env.get("PATH", "/usr/bin:/bin"),
                    GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_SCENARIO=SCENARIO, NVML_SIM_TIME=T)
        p = subprocess.Popen([NETDATA, "-D", "-c", os.path.join(d, "conf", "netdata.conf")],
                             env=nenv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        base = "http://127.0.0.1:%d" % port
        try:
            got = {}

            def collected():
                for g in range(8):
                    for chart in want[g]:
                        v = latest(base, "nvidia_smi.gpu%d_%s" % (g, chart))
                        if v is None:
                            return False
                        got[(g, chart)] = v
                return True

            def mismatches():
                bad = []
                for g in range(8):
                    for chart, dims in want[g].items():
                        for dim, v in dims.items():
                            have = got.get((g, chart), {}).get(dim)
                            if have is None or abs(have - v) > 0.011:
                                bad.append("gpu%d %s.%s: netdata %r, scenario %r"
                                           % (g, chart, dim, have, v))
                return bad

            # the first points of a new chart may be empty; wait for the collected ones
            ok = wait_until(lambda: collected() and not mismatches(), timeout=60, interval=1.0)
            log = ""
            if not ok:
                try:
                    with open(os.path.join(d, "log", "error.log")) as fh:
                        log = fh.read()[-2000:]
                except OSError:
                    pass
            t.ok(len(got) == 8 * len(want[0]),
                 "netdata's API has the collector's charts for all 8 GPUs", detail=log)
            t.eq(mismatches(), [], "utilization, memory used/free, temperature and power of "
                                   "every GPU equal the scenario's")
            st, _, body = http_get(base + "/api/v1/charts")
            charts = json.loads(body)["charts"] if st == 200 else {}
            t.ok("nvidia_smi.gpu7_processes_mem" in charts and
                 "nvidia_smi.gpu0_pci_bandwidth" in charts and "nvidia_smi.gpu0_clocks" in charts,
                 "processes, PCIe bandwidth and clock charts exist too")
        finally:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            time.sleep(0.2)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
