"""NVLink end to end, on nvml-sim with the real clock (the counters move with virtual time).

h100x8-training (an HGX board: 18 NVLink4 links per GPU to the NVSwitches, 26.562 GB/s per link
and direction, the all-reduce phase busiest, GPU 5 with a link that counted replays and CRC
errors): the agent's /metrics in both naming modes (links, speed, per-link state, bytes counters
that grow between two scrapes, a throughput under load but below the links' capacity, errors
by type, DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL = TX + RX in MB/s), `promtool check metrics` clean
in native mode, /api/v1/snapshot's nvlinks[], and `gpuscope -a`'s NVLink line. An RTX 4090 (a
PCIe card: the driver answers NOT_SUPPORTED) has no NVLink series, no nvlinks and no line.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import BIN, SRC, clean_up_at_exit, http_get, sim_env, start_agent, stop_agent  # noqa: E402

t = Tap()
procs = []
dirs = []
clean_up_at_exit(procs, dirs)
LINK_BPS = 26562e6  # per link and direction


def samples(text):
    """{(name, frozenset(labels)): value}, and {name: type} of an exposition."""
    out, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, typ = line.split(" ", 3)
            types[name] = typ
            continue
        if not line or line.startswith("#"):
            continue
        head, val = line.rsplit(" ", 1)
        name, _, rest = head.partition("{")
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', rest))
        out[(name, labels)] = float(val)
    return out, types


def pick(s, name, **want):
    """{gpu: value} of the series of name whose labels include want."""
    res = {}
    for (n, labels), v in s.items():
        d = dict(labels)
        if n == name and all(d.get(k) == w for k, w in want.items()):
            res[d["gpu"]] = v
    return res


def agent(scenario, args):
    data = tempfile.mkdtemp(prefix="gs-nvlink-test.")
    dirs.append(data)
    p, base, ok = start_agent(["--data-dir", data, "--interval", "0.5"] + args,
                              sim_env(scenario), procs)
    return p, base, ok


def main():
    gpus = [str(i) for i in range(8)]

    # native names
    p, base, up = agent("h100x8-training.json", [])
    t.ok(up, "agent on h100x8-training answers")
    time.sleep(1.2)  # a few cycles: the rate needs two counter readings
    code, _, body1 = http_get(base + "/metrics")
    s1, types = samples(body1)
    time.sleep(1.5)
    s2, _ = samples(http_get(base + "/metrics")[2])
    t.eq(pick(s2, "gpuscope_gpu_nvlink_links"), {g: 18.0 for g in gpus}, "18 links on every GPU")
    t.eq(pick(s2, "gpuscope_gpu_nvlink_links_active"), {g: 18.0 for g in gpus},
         "all 18 active")
    t.eq(pick(s2, "gpuscope_gpu_nvlink_link_speed_bytes_per_second"),
         {g: LINK_BPS for g in gpus}, "26.562 GB/s per link and direction (NVLink4)")
    t.ok(not any("link" in dict(k[1]) for k in s2 if "nvlink" in k[0]),
         "no per-link series (per-link detail is in the snapshot API)")
    for d in ("tx", "rx"):
        b1 = pick(s1, "gpuscope_gpu_nvlink_bytes_total", direction=d)
        b2 = pick(s2, "gpuscope_gpu_nvlink_bytes_total", direction=d)
        t.ok(sorted(b2) == gpus and all(b2[g] > b1.get(g, 0) > 0 for g in gpus),
             "gpuscope_gpu_nvlink_bytes_total{direction=%s} grows between scrapes" % d,
             detail=(b1, b2))
        r = pick(s2, "gpuscope_gpu_nvlink_throughput_bytes_per_second", direction=d)
        # the step's quiet phase moves 18 x 610000 KiB/s, its all-reduce 18 x 9100000 KiB/s
        t.ok(sorted(r) == gpus and all(18 * 590000 * 1024 <= r[g] <= 18 * LINK_BPS for g in gpus),
             "throughput %s under load: non-zero, below the links' capacity" % d, detail=r)
    t.eq(types.get("gpuscope_gpu_nvlink_bytes_total"), "counter", "bytes_total is a counter")
    t.eq(types.get("gpuscope_gpu_nvlink_errors_total"), "counter", "errors_total is a counter")
    errs = {typ: pick(s2, "gpuscope_gpu_nvlink_errors_total", type=typ)
            for typ in ("replay", "recovery", "crc_flit", "crc_data")}
    t.eq({typ: v.get("5") for typ, v in errs.items()},
         {"replay": 41.0, "recovery": 1.0, "crc_flit": 118.0, "crc_data": 3.0},
         "GPU 5: its link's errors by type")
    t.ok(all(v[g] == 0 for v in errs.values() for g in gpus if g != "5"),
         "the other GPUs: no NVLink errors", detail=errs)
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=body1.encode(),
                           capture_output=True)
        t.ok(r.returncode == 0, "promtool check metrics: native exposition with NVLink is clean",
             detail=(r.stdout + r.stderr).decode())
    else:
        t.skip("promtool check metrics", "promtool not installed")
    snap = json.loads(http_get(base + "/api/v1/snapshot")[2])
    g5 = snap["gpus"][5]
    links = g5.get("nvlinks", [])
    t.ok(len(links) == 18 and all(l["active"] and l["speed"] == LINK_BPS for l in links),
         "/api/v1/snapshot: 18 nvlinks, active, at link speed", detail=links[:2])
    t.ok(links and links[7]["replay_errors"] == 41 and links[7]["crc_flit_errors"] == 118 and
         links[0]["replay_errors"] == 0 and links[0]["remote_pci_bus_id"] == "00000000:05:00.0",
         "/api/v1/snapshot: link 7's errors, link 0's far end", detail=links[7:8] + links[:1])
    t.ok(sum(l["tx_bytes"] for l in links) == g5["nvlink_tx_bytes"],
         "the links' tx_bytes sum to the GPU's nvlink_tx_bytes")
    st = g5.get("nvlinks_state_time_unix")
    t.ok(isinstance(st, float) and snap["query_time_unix"] - 6 <= st <= snap["query_time_unix"],
         "/api/v1/snapshot: nvlinks_state_time_unix, when the held link states were read, "
         "within the last 10 cycles (5 s at 0.5 s)", detail=(st, snap["query_time_unix"]))
    stop_agent(p)

    # dcgm-exporter names
    p, base, up = agent("h100x8-training.json", ["--metrics-compat=dcgm"])
    time.sleep(1.2)
    body = http_get(base + "/metrics")[2]
    s, types = samples(body)
    bw = pick(s, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")
    tx = pick(s, "gpuscope_gpu_nvlink_throughput_bytes_per_second", direction="tx")
    rx = pick(s, "gpuscope_gpu_nvlink_throughput_bytes_per_second", direction="rx")
    t.ok(sorted(bw) == gpus and all(abs(bw[g] - (tx[g] + rx[g]) / 1e6) < 1 for g in gpus),
         "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL: TX + RX of the same cycle in MB/s",
         detail=(bw, tx, rx))
    t.eq(types.get("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"), "counter",
         "typed counter, as dcgm-exporter's default-counters.csv declares it")
    lbl = dict(next(k[1] for k in s if k[0] == "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"))
    t.ok({"UUID", "pci_bus_id", "modelName", "gpu", "device"} <= set(lbl),
         "dcgm-exporter's labels on it", detail=lbl)
    stop_agent(p)

    # a link going down at run time (a nvlink_down event at virtual 20 s, the clock in a file)
    d = tempfile.mkdtemp(prefix="gs-nvlink-down.")
    dirs.append(d)
    with open(os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")) as f:
        sc = json.load(f)
    sc["events"] = sc.get("events", []) + [
        {"at_s": 20, "type": "nvlink_down", "gpu": 2, "link": 9}]
    scen, clock = os.path.join(d, "down.json"), os.path.join(d, "t")
    with open(scen, "w") as f:
        json.dump(sc, f)
    with open(clock, "w") as f:
        f.write("10\n")
    data = tempfile.mkdtemp(prefix="gs-nvlink-test.")
    dirs.append(data)
    p, base, up = start_agent(["--data-dir", data, "--interval", "0.5"],
                              sim_env(scen, "file:" + clock), procs)
    time.sleep(1.2)
    before = pick(samples(http_get(base + "/metrics")[2])[0], "gpuscope_gpu_nvlink_links_active")
    with open(clock, "w") as f:
        f.write("30\n")
    # the links' states are read every 10th cycle (docs/agent.md): within 5 s at 0.5 s
    t0 = time.monotonic()
    while True:
        time.sleep(0.25)
        s, _ = samples(http_get(base + "/metrics")[2])
        after = pick(s, "gpuscope_gpu_nvlink_links_active")
        if after.get("2") == 17 or time.monotonic() - t0 > 6.5:
            break
    seen_s = time.monotonic() - t0
    snap = json.loads(http_get(base + "/api/v1/snapshot")[2])
    t.ok(before.get("2") == 18 and after.get("2") == 17 and after.get("1") == 18 and
         not snap["gpus"][2]["nvlinks"][9]["active"] and snap["gpus"][2]["nvlinks"][8]["active"],
         "a link that goes down at run time: links_active 18 -> 17 on its GPU within the "
         "link-state cadence (10 cycles), nvlinks[9] inactive in the snapshot",
         detail=(before, after, round(seen_s, 2)))
    stop_agent(p)

    # a PCIe card: nothing NVLink
    for args in ([], ["--metrics-compat=dcgm"]):
        p, base, up = agent("rtx4090-idle-desktop.json", args)
        time.sleep(0.8)
        body = http_get(base + "/metrics")[2]
        snap = json.loads(http_get(base + "/api/v1/snapshot")[2])
        nv = [l for l in body.splitlines() if "NVLINK" in l.upper()]
        t.ok(up and not nv and snap["gpus"][0]["nvlinks"] == [] and
             snap["gpus"][0]["nvlink_links"] is None,
             "RTX 4090 (PCIe, %s): no NVLink series, no nvlinks" % (args or ["native"])[0],
             detail=nv[:3])
        stop_agent(p)

    # deploy/prometheus-rules.yml's NVLink rules, on series named as the agent names them
    if shutil.which("promtool"):
        lbl = 'gpu="5",uuid="GPU-x",hostname="n1"'
        test = {
            "rule_files": [os.path.join(SRC, "deploy", "prometheus-rules.yml")],
            "evaluation_interval": "15s",
            "tests": [{
                "interval": "15s",
                "input_series": [
                    {"series": "gpuscope_gpu_nvlink_links{%s}" % lbl, "values": "18x20"},
                    {"series": "gpuscope_gpu_nvlink_links_active{%s}" % lbl,
                     "values": "18x4 17x16"},
                    {"series": 'gpuscope_gpu_nvlink_errors_total{%s,type="recovery"}' % lbl,
                     "values": "0x8 1x12"},
                    {"series": 'gpuscope_gpu_nvlink_errors_total{%s,type="replay"}' % lbl,
                     "values": "0+50x20"},
                ],
                "alert_rule_test": [
                    {"eval_time": "30s", "alertname": "GPUNVLinkDown", "exp_alerts": []},
                    {"eval_time": "3m", "alertname": "GPUNVLinkDown", "exp_alerts": [{
                        "exp_labels": {"gpu": "5", "uuid": "GPU-x", "hostname": "n1",
                                       "severity": "warning"},
                        "exp_annotations": {"summary": "GPU 5 on n1: only 17 NVLink links "
                                                       "active"}}]},
                    {"eval_time": "1m", "alertname": "GPUNVLinkRecoveries", "exp_alerts": []},
                    {"eval_time": "3m", "alertname": "GPUNVLinkRecoveries", "exp_alerts": [{
                        "exp_labels": {"gpu": "5", "uuid": "GPU-x", "hostname": "n1",
                                       "type": "recovery", "severity": "warning"},
                        "exp_annotations": {"summary": "GPU 5 on n1: NVLink link recoveries "
                                                       "in the last 10 min"}}]},
                ],
            }],
        }
        d = tempfile.mkdtemp(prefix="gs-nvlink-rules.")
        dirs.append(d)
        path = os.path.join(d, "nvlink-test.yml")
        with open(path, "w") as f:
            json.dump(test, f)  # JSON is YAML
        r = subprocess.run(["promtool", "test", "rules", path], capture_output=True, text=True)
        t.ok(r.returncode == 0, "promtool test rules: GPUNVLinkDown after a link is down 1 min, "
             "GPUNVLinkRecoveries on a recovery (not on replays)", detail=r.stdout + r.stderr)
    else:
        t.skip("promtool test rules (NVLink)", "promtool not installed")

    # gpuscope -a
    out = subprocess.run([BIN, "-a"], env=sim_env("h100x8-training.json"), capture_output=True,
                         text=True, timeout=30).stdout
    lines = [l for l in out.splitlines() if "NVLink" in l]
    bars = {l.index("|") for l in lines}
    first_bar = {l.index("|") for l in out.splitlines() if l.startswith("[")}
    t.ok(len(lines) == 8 and all("18/18 links up, 26.6 GB/s each" in l and "tx " in l
                                 and "N/A" not in l for l in lines) and bars == first_bar,
         "gpuscope -a: an NVLink line per H100, a rate from the first cycle, its | under the "
         "GPU lines'", detail=out)
    out = subprocess.run([BIN, "-a"], env=sim_env("rtx4090-idle-desktop.json"),
                         capture_output=True, text=True, timeout=30).stdout
    t.ok("NVLink" not in out and out.startswith("") and "[0]" in out,
         "gpuscope -a on an RTX 4090: no NVLink line", detail=out)
    t.done()


main()
