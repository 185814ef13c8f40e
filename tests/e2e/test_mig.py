"""MIG devices end to end, on nvml-sim's h100-mig (one H100 split into a 3g.40gb, a 2g.20gb
and two 1g.10gb instances, five processes; NVML_SIM_TIME frozen at 30 s).

The quick check: one line per MIG device under its GPU (profile, instance ids, memory used /
total under the GPU's memory column, the instance's processes), the GPU's utilization "MIG",
and the --json document's mig_devices (profile, pids by gi_id/ci_id, placement and profile id,
utilization absent for "mig_mode"; unprivileged: placement absent for "no_permission"). The agent: /api/v1/snapshot carries the same; /metrics has the native
gpuscope_mig_* series equal to the snapshot, per-instance GPM once two MIG cycles passed, and
`promtool check metrics` is clean; MIG devices are read every cycle (a ramping instance's
memory moves between scrapes 0.6 s apart); with --metrics-compat=dcgm (and dcgm3) the GPU is rendered
per GPU instance with dcgm-exporter's GPU_I_PROFILE / GPU_I_ID labels (hostname or Hostname),
DCGM_FI_DEV_FB_USED in whole MiB of the instance, DCGM_FI_PROF_GR_ENGINE_ACTIVE of the
instance, and no whole-GPU series or GPU_UTIL.
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
from gsenv import BIN, SCENARIOS, clean_up, http_get, sim_env, start_agent, stop_proc  # noqa: E402

MIB = 1048576
t = Tap()
procs = []
tmp = tempfile.mkdtemp(prefix="gs-mig-test.")
ENV = sim_env("h100-mig.json", "30", GPUSCOPE_HTTP_SOCKET="off")


def samples(text):
    """[(name, labels dict, value)] of an exposition."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, val = line.rsplit(" ", 1)
        name, labels = head, {}
        if "{" in head:
            name, rest = head.split("{", 1)
            labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', rest))
        out.append((name, labels, float(val)))
    return out


def promtool(text):
    p = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                       capture_output=True)
    return p.returncode, (p.stdout + p.stderr).decode()


def pids_of(doc, g, m):
    return sorted(p["pid"] for p in g["processes"]
                  if p["gi_id"] == m["gi_id"] and p["ci_id"] == m["ci_id"])


def check_doc(doc, where):
    g = doc["gpus"][0]
    migs = g["mig_devices"]
    t.eq([m["profile"] for m in migs], ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"],
         "%s: four MIG devices with their profiles" % where)
    t.eq([(m["gi_id"], m["ci_id"]) for m in migs], [(2, 0), (3, 0), (9, 0), (10, 0)],
         "%s: GPU and compute instance ids" % where)
    t.eq([m["processes"] for m in migs], [pids_of(doc, g, m) for m in migs],
         "%s: each device lists the pids of its processes (gi_id/ci_id)" % where)
    t.eq(migs[0]["processes"], [21180, 21181, 21198], "%s: the scenario's 3g.40gb processes"
         % where)
    t.ok(g["utilization_gpu"] is None and g["unavailable"].get("utilization_gpu") == "mig_mode"
         and all(m["utilization_gpu"] is None and
                 m["unavailable"].get("utilization_gpu") == "mig_mode" for m in migs),
         "%s: utilization null with the reason mig_mode, GPU and instances" % where)
    t.eq([(m["placement"], m["profile_id"]) for m in migs],
         [({"start": 4, "size": 4}, 9), ({"start": 2, "size": 2}, 14),
          ({"start": 0, "size": 1}, 19), ({"start": 1, "size": 1}, 19)],
         "%s: each GPU instance's placement (memory slices) and profile id" % where)
    t.ok(migs[0]["memory_total"] == 40448 * MIB and migs[0]["memory_used"] == 11091 * MIB and
         migs[0]["sm_count"] == 60 and migs[0]["uuid"].startswith("MIG-4d1f7a2c"),
         "%s: the 3g.40gb's memory, SMs and UUID as the scenario gives them" % where,
         detail=migs[0])
    return migs


def quick():
    r = subprocess.run([BIN, "--json"], env=ENV, capture_output=True, text=True, timeout=20)
    doc = json.loads(r.stdout)
    migs = check_doc(doc, "gpuscope --json")
    r = subprocess.run([BIN, "--no-color"], env=ENV, capture_output=True, text=True, timeout=20)
    lines = r.stdout.splitlines()
    gpu = [l for l in lines if l.startswith("[0]")]
    t.ok(r.returncode == 0 and len(gpu) == 1 and re.search(r",\s+MIG \|", gpu[0]),
         "quick check: the GPU's utilization reads MIG", detail=r.stdout)
    mig_lines = [l for l in lines if re.match(r"^ [\u251c\u2514]\u2500 MIG ", l)]
    t.ok(len(mig_lines) == 4, "quick check: a line per MIG device under the GPU", detail=r.stdout)
    ok = True
    for l, m in zip(mig_lines, migs):
        want = "MIG %s  (gi %d, ci %d)" % (m["profile"], m["gi_id"], m["ci_id"])
        mem = "%d / %d MB" % (m["memory_used"] // MIB, m["memory_total"] // MIB)
        shown = sorted(int(x) for x in re.findall(r"/(\d+)\(", l))
        ok &= want in l and mem in re.sub(r"\s+", " ", l) and shown == m["processes"]
    t.ok(ok, "quick check: each MIG line has its profile, ids, memory and processes",
         detail="\n".join(mig_lines))
    col = gpu[0].index(" | ", gpu[0].index(" | ") + 1)
    t.ok(all(l.index(" | ") == col for l in mig_lines),
         "quick check: MIG memory sits under the GPU's memory column", detail=r.stdout)
    r = subprocess.run([BIN, "--no-color", "-a"], env=ENV, capture_output=True, text=True,
                       timeout=20)
    t.ok(re.search(r"3g\.40gb  \(gi 2, ci 0\)\s+\| 11091 / 40448 MB \|  60 SMs, gr   N/A \|",
                   r.stdout) is not None,
         "quick check -a: SM count, graphics activity N/A without GPM (one shot)",
         detail=r.stdout)
    # nvmlDeviceGetGpuInstanceById is root only: an unprivileged caller gets no placement, and
    # the document says why
    sc = json.load(open(os.path.join(SCENARIOS, "h100-mig.json")))
    sc["privileged"] = False
    path = os.path.join(tmp, "h100-mig-user.json")
    with open(path, "w") as f:
        json.dump(sc, f)
    r = subprocess.run([BIN, "--json"], env=sim_env(path, "30", GPUSCOPE_HTTP_SOCKET="off"),
                       capture_output=True, text=True, timeout=20)
    um = json.loads(r.stdout)["gpus"][0]["mig_devices"] if r.returncode == 0 else []
    t.ok(len(um) == 4 and all(m["placement"] is None and m["profile_id"] is None and
                              m["unavailable"].get("placement") == "no_permission" for m in um),
         "unprivileged: placement null, unavailable placement no_permission",
         detail=r.stdout[-2000:])
    return doc


def metrics(base):
    return http_get(base + "/metrics")[2]


def wait_family(base, name, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        text = metrics(base)
        if re.search(r"^%s\{" % re.escape(name), text, re.M):
            return text
        time.sleep(0.3)
    return metrics(base)


def agent(quick_doc):
    data = os.path.join(tmp, "native")
    p, base, up = start_agent(["--data-dir", data, "--history", "off", "--socket", "off",
                               "--interval", "0.2"], ENV, procs)
    t.ok(up, "agent on h100-mig serves")
    if not up:
        return
    code, _, body = http_get(base + "/api/v1/snapshot")
    snap = json.loads(body) if code == 200 else {"gpus": [{"mig_devices": [], "processes": []}]}
    check_doc(snap, "/api/v1/snapshot")
    text = wait_family(base, "gpuscope_mig_graphics_active_ratio")
    s = samples(text)
    used = {(l["gpu_instance"], l["compute_instance"], l["profile"]): v
            for n, l, v in s if n == "gpuscope_mig_memory_used_bytes"}
    want = {(str(m["gi_id"]), str(m["ci_id"]), m["profile"]): float(m["memory_used"])
            for m in quick_doc["gpus"][0]["mig_devices"]}
    t.eq(used, want, "native: gpuscope_mig_memory_used_bytes per MIG device = the snapshot's")
    info = [l for n, l, v in s if n == "gpuscope_mig_info"]
    t.eq(sorted(l["mig_uuid"] for l in info),
         sorted(m["uuid"] for m in quick_doc["gpus"][0]["mig_devices"]),
         "native: gpuscope_mig_info carries every MIG UUID")
    nproc = {l["gpu_instance"]: v for n, l, v in s if n == "gpuscope_mig_processes"}
    t.eq(nproc, {"2": 3.0, "3": 1.0, "9": 1.0, "10": 0.0},
         "native: gpuscope_mig_processes per instance")
    gr = {l["gpu_instance"]: v for n, l, v in s if n == "gpuscope_mig_graphics_active_ratio"}
    t.ok(len(gr) == 4 and 0.96 <= gr.get("2", 0) <= 1.0 and gr.get("10") == 0,
         "native: per-instance graphics activity (GPM MIG samples): 3g.40gb ~0.99, idle 0",
         detail=gr)
    if shutil.which("promtool"):
        rc, out = promtool(text)
        t.ok(rc == 0, "promtool check metrics: native exposition with MIG series is clean",
             detail=out)
    else:
        t.skip("promtool check metrics (native, MIG)", "promtool not installed")
    clean_up([p], [], stop=stop_proc)

    # the clock running: the 2g.20gb's process ramps its memory over 20 s; MIG devices are read
    # every cycle on a GPU in MIG mode (not every 10th), so 0.6 s apart (3 cycles) they differ
    p, base, up = start_agent(["--data-dir", os.path.join(tmp, "live"), "--history", "off",
                               "--socket", "off", "--interval", "0.2"],
                              sim_env("h100-mig.json", GPUSCOPE_HTTP_SOCKET="off"), procs)

    def gi3():
        return [v for n, l, v in samples(metrics(base))
                if n == "gpuscope_mig_memory_used_bytes" and l["gpu_instance"] == "3"]
    if up:
        a = gi3()
        time.sleep(0.6)
        b = gi3()
        t.ok(len(a) == 1 and len(b) == 1 and b[0] > a[0],
             "MIG device memory follows every cycle (the 2g.20gb's ramp, 0.6 s apart)",
             detail=(a, b))
    else:
        t.ok(False, "agent on h100-mig, clock running, serves")
    clean_up([p], [], stop=stop_proc)

    for mode, host in (("dcgm", "hostname"), ("dcgm3", "Hostname")):
        p, base, up = start_agent(["--data-dir", os.path.join(tmp, mode), "--history", "off",
                                   "--socket", "off", "--interval", "0.2",
                                   "--metrics-compat=" + mode], ENV, procs)
        t.ok(up, "agent --metrics-compat=%s serves" % mode)
        if not up:
            continue
        text = wait_family(base, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")
        s = samples(text)
        fb = {l.get("GPU_I_ID"): (v, l) for n, l, v in s if n == "DCGM_FI_DEV_FB_USED"}
        t.eq({k: v for k, (v, _) in fb.items()},
             {str(m["gi_id"]): float(m["memory_used"] // MIB)
              for m in quick_doc["gpus"][0]["mig_devices"]},
             "%s: DCGM_FI_DEV_FB_USED per GPU instance, whole MiB" % mode)
        lbl = fb.get("2", (0, {}))[1]
        t.eq(sorted(lbl), sorted(["DCGM_FI_DRIVER_VERSION", "GPU_I_ID", "GPU_I_PROFILE", "UUID",
                                  "device", "gpu", host, "modelName", "pci_bus_id"]),
             "%s: dcgm-exporter's MIG labels (GPU_I_PROFILE, GPU_I_ID, %s)" % (mode, host))
        t.eq(lbl.get("GPU_I_PROFILE"), "3g.40gb", "%s: GPU_I_PROFILE is the profile" % mode)
        order = re.search(r'^DCGM_FI_DEV_FB_USED\{.*modelName="[^"]*",GPU_I_PROFILE="3g\.40gb",'
                          r'GPU_I_ID="2",%s="' % host, text, re.M)
        t.ok(order is not None, "%s: GPU_I_PROFILE, GPU_I_ID after modelName, before %s, as "
             "dcgm-exporter's template" % (mode, host))
        dcgm = [(n, l) for n, l, v in s if n.startswith("DCGM_FI_")]
        t.ok(dcgm and all("GPU_I_ID" in l for n, l in dcgm),
             "%s: a GPU in MIG mode has per-instance series only" % mode)
        t.ok(not any(n == "DCGM_FI_DEV_GPU_UTIL" for n, l in dcgm),
             "%s: no DCGM_FI_DEV_GPU_UTIL in MIG mode" % mode)
        gr = {l["GPU_I_ID"]: v for n, l, v in s if n == "DCGM_FI_PROF_GR_ENGINE_ACTIVE"}
        temp = {l["GPU_I_ID"]: v for n, l, v in s if n == "DCGM_FI_DEV_GPU_TEMP"}
        t.ok(len(gr) == 4 and 0.96 <= gr.get("2", 0) <= 1.0 and len(set(temp.values())) == 1
             and len(temp) == 4, "%s: GR_ENGINE_ACTIVE per instance; the GPU's temperature on "
             "each instance" % mode, detail=(gr, temp))
        if shutil.which("promtool"):
            rc, out = promtool(text)
            bad = [l for l in out.splitlines() if l.strip() and not (
                "camelCase" in l or '"_total" suffix' in l or "should not include type" in l)]
            t.ok(not bad, "promtool check metrics (%s, MIG): only dcgm-exporter's own names' "
                 "lint" % mode, detail="\n".join(bad))
        else:
            t.skip("promtool check metrics (%s, MIG)" % mode, "promtool not installed")
        clean_up([p], [], stop=stop_proc)


try:
    doc = quick()
    agent(doc)
finally:
    clean_up(procs, [tmp], stop=stop_proc)
sys.exit(t.done())
