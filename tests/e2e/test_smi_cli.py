"""gpuscope as nvidia-smi, as its clients use it: the -q -x XML that telegraf's nvidia_smi input
and netdata's collector parse, --help-query-gpu and --version as nvidia_gpu_exporter reads them,
the looped XML stream, the binary run through an `nvidia-smi` symlink, nvidia-smi's messages and
exit codes, dmon/pmon/topo options, and the install script's refusal to cover a real nvidia-smi.

Values are checked against the same instant's `--query-gpu` answer (NVML_SIM_TIME freezes the
scenario), so the XML must carry the scenario's numbers for every GPU, not just well-formed text.
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402
from gsenv import SRC, BUILD, BIN  # noqa: E402

SIM = os.path.join(BUILD, "sim", "libnvidia-ml.so.1")
H100X8 = os.path.join(SRC, "sim", "scenarios", "h100x8-training.json")
MIG = os.path.join(SRC, "tests", "e2e", "scenarios", "capture-h100-mig-load.json")
DOCTYPE = '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">'  # driver 590

# Element paths under <gpu> that telegraf's nvidia_smi input (schema v12) and netdata's
# nvidia_smi collector read, each with the --query-gpu field holding the same value (None:
# only presence is checked).
TELEGRAF = {
    "product_name": "name", "uuid": "uuid", "serial": None, "vbios_version": "vbios_version",
    "fan_speed": "fan.speed", "performance_state": "pstate", "compute_mode": "compute_mode",
    "pci/pci_bus_id": "pci.bus_id",
    "pci/pci_gpu_link_info/pcie_gen/current_link_gen": "pcie.link.gen.current",
    "pci/pci_gpu_link_info/pcie_gen/max_link_gen": "pcie.link.gen.max",
    "pci/pci_gpu_link_info/link_widths/current_link_width": None,
    "pci/pci_gpu_link_info/link_widths/max_link_width": None,
    "pci/tx_util": None, "pci/rx_util": None, "pci/replay_counter": None,
    "fb_memory_usage/total": "memory.total", "fb_memory_usage/used": "memory.used",
    "fb_memory_usage/free": "memory.free", "fb_memory_usage/reserved": "memory.reserved",
    "bar1_memory_usage/total": None, "bar1_memory_usage/used": None, "bar1_memory_usage/free": None,
    "utilization/gpu_util": "utilization.gpu", "utilization/memory_util": "utilization.memory",
    "utilization/encoder_util": "utilization.encoder",
    "utilization/decoder_util": "utilization.decoder",
    "utilization/jpeg_util": "utilization.jpeg", "utilization/ofa_util": "utilization.ofa",
    "encoder_stats/session_count": "encoder.stats.sessionCount",
    "encoder_stats/average_fps": "encoder.stats.averageFps",
    "encoder_stats/average_latency": "encoder.stats.averageLatency",
    "fbc_stats/session_count": None,
    "ecc_mode/current_ecc": "ecc.mode.current",
    "ecc_errors/volatile/dram_correctable": "ecc.errors.corrected.volatile.dram",
    "ecc_errors/aggregate/dram_uncorrectable": "ecc.errors.uncorrected.aggregate.dram",
    "retired_pages/multiple_single_bit_retirement/retired_count": None,
    "remapped_rows/remapped_row_corr": "remapped_rows.correctable",
    "temperature/gpu_temp": "temperature.gpu", "temperature/memory_temp": "temperature.memory",
    "gpu_power_readings/power_draw": "power.draw",
    "gpu_power_readings/current_power_limit": "enforced.power.limit",
    "gpu_power_readings/max_power_limit": "power.max_limit",
    "power_readings/power_draw": "power.draw", "power_readings/power_state": "pstate",
    "clocks/graphics_clock": "clocks.current.graphics", "clocks/sm_clock": "clocks.current.sm",
    "clocks/mem_clock": "clocks.current.memory", "clocks/video_clock": "clocks.current.video",
    "max_clocks/graphics_clock": "clocks.max.graphics", "max_clocks/sm_clock": "clocks.max.sm",
    "max_clocks/mem_clock": "clocks.max.memory",
    "clocks_event_reasons/clocks_event_reason_sw_power_cap": "clocks_event_reasons.sw_power_cap",
    "mig_mode/current_mig": "mig.mode.current",
}


def env(scenario=H100X8, t="600", **extra):
    e = dict(os.environ, GPUSCOPE_NVML_LIBRARY=SIM, NVML_SIM_TIME=t, TZ="UTC")
    e.pop("NVML_SIM_SCENARIO", None)
    e.pop("NO_COLOR", None)
    if scenario:
        e["NVML_SIM_SCENARIO"] = scenario
    e.update(extra)
    return e


def q(argv, prog=BIN, sub=True, **kw):
    cmd = [prog] + (["query"] if sub else []) + argv
    return subprocess.run(cmd, env=env(**kw), capture_output=True, text=True, timeout=60)


def query_values(fields, **kw):
    r = q(["--query-gpu=" + ",".join(fields), "--format=csv,noheader"], **kw)
    return [dict(zip(fields, line.split(", "))) for line in r.stdout.splitlines()]


def xml_checks(t):
    r = q(["-q", "-x"])
    t.eq(r.returncode, 0, "-q -x: exit 0 (%s)" % r.stderr.strip())
    lines = r.stdout.split("\n")
    t.eq(lines[:3], ['<?xml version="1.0" ?>', DOCTYPE, "<nvidia_smi_log>"],
         "-q -x: XML declaration, the v13 DOCTYPE (driver 590) and the root element")
    try:
        root = ET.fromstring(r.stdout)
    except ET.ParseError as e:
        t.ok(False, "-q -x is well-formed XML", detail=str(e))
        return
    t.ok(root.tag == "nvidia_smi_log", "-q -x is well-formed XML")
    gpus = root.findall("gpu")
    t.eq((root.findtext("attached_gpus"), len(gpus)), ("8", 8), "8 <gpu> elements, attached_gpus 8")
    t.ok(root.findtext("driver_version") and re.match(r"^\d+\.\d+$", root.findtext("cuda_version")),
         "driver_version and cuda_version", detail=(root.findtext("driver_version"),
                                                    root.findtext("cuda_version")))
    fields = sorted({f for f in TELEGRAF.values() if f})
    want = query_values(fields)
    missing, wrong = [], []
    for i, g in enumerate(gpus):
        for path, field in TELEGRAF.items():
            el = g.find(path)
            if el is None or el.text is None:
                missing.append("gpu%d/%s" % (i, path))
                continue
            if field is None:
                continue
            exp = want[i][field].strip("[]")
            got = el.text
            # the XML carries units on some values the CSV cell also has ("81559 MiB"), and
            # link gen / width numbers without them; compare the leading number or token
            if got != exp and got.split(" ")[0] != exp.split(" ")[0]:
                wrong.append("gpu%d/%s: %r, --query-gpu %s: %r" % (i, path, got, field, exp))
    t.eq(missing, [], "every telegraf/netdata element path is present on all 8 GPUs")
    t.eq(wrong, [], "and carries the value --query-gpu reports for the same instant")
    t.eq([g.get("id") for g in gpus], [w["pci.bus_id"] for w in query_values(["pci.bus_id"])],
         "<gpu id> is the PCI bus id")
    procs = [len(g.findall("processes/process_info")) for g in gpus]
    apps = q(["--query-compute-apps=gpu_bus_id,pid,used_memory", "--format=csv,noheader"])
    t.eq(sum(procs), len(apps.stdout.splitlines()), "one <process_info> per compute process")
    info = gpus[0].find("processes/process_info")
    t.ok(info is not None and all(info.find(k) is not None for k in
                                  ("pid", "type", "process_name", "used_memory")),
         "process_info has pid, type, process_name, used_memory")
    r = q(["-q", "-x", "-i", "3"])
    one = ET.fromstring(r.stdout).findall("gpu")
    t.eq([g.get("id") for g in one], [query_values(["pci.bus_id"])[3]["pci.bus_id"]],
         "-q -x -i 3: GPU 3 only")
    r = q(["-q", "-x", "-d", "MEMORY"])
    g = ET.fromstring(r.stdout).find("gpu")
    t.ok(g.find("fb_memory_usage") is not None and g.find("temperature") is None,
         "-q -x -d MEMORY: memory sections only")
    mig = q(["-q", "-x"], scenario=MIG, t="100")
    root = ET.fromstring(mig.stdout)
    devs = root.findall("gpu/mig_devices/mig_device")
    t.eq([(d.findtext("gpu_instance_id"), d.findtext("fb_memory_usage/total"),
           d.findtext("device_attributes/shared/multiprocessor_count"),
           d.findtext("device_attributes/shared/copy_engine_count"),
           d.findtext("bar1_memory_usage/total")) for d in devs],
         [("2", "40448 MiB", "60", "3", "24739 MiB"), ("3", "20096 MiB", "32", "2", "12369 MiB"),
          ("9", "9984 MiB", "16", "1", "6184 MiB"), ("10", "9984 MiB", "16", "1", "6184 MiB")],
         "MIG: one <mig_device> per instance: GI, memory, SM and engine counts "
         "(nvmlDeviceGetAttributes_v2), BAR1")
    esc = q(["-q", "-x"], scenario=MIG, t="100")
    t.ok("&" not in esc.stdout.replace("&amp;", "").replace("&lt;", "").replace("&gt;", "")
         .replace("&quot;", ""), "no unescaped '&' in the XML")


def loop_checks(t):
    p = subprocess.Popen([BIN, "query", "-x", "-q", "-lms", "300"], env=env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = []
    for line in p.stdout:  # the first document, then a second and a half more
        first.append(line)
        if "</nvidia_smi_log>" in line:
            break
    time.sleep(1.5)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=30)
    out = "".join(first) + out
    t.eq(p.returncode, 0, "-x -q -lms 300: Ctrl+C ends the loop with status 0 (%s)" % err.strip())
    # netdata splits the stream on the </nvidia_smi_log> lines and parses each document
    docs, cur = [], []
    for line in out.split("\n"):
        cur.append(line)
        if "</nvidia_smi_log>" in line:
            docs.append("\n".join(cur))
            cur = []
    ok = all(ET.fromstring(d).tag == "nvidia_smi_log" for d in docs)
    t.ok(len(docs) >= 2 and ok, "the looped stream is %d whole documents (>= 2 in 1.5 s)"
         % len(docs))
    t.eq(out.count("<nvidia_smi_log>\n"), len(docs), "each document opens on its own line")
    p = subprocess.Popen([BIN, "query", "-l", "1"], env=env(), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    time.sleep(1.6)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=30)
    t.ok(p.returncode == 0 and out.count("| NVIDIA-SMI ") == 2,
         "-l 1: the table again each second, SIGTERM ends it", detail=out[-300:])


def exporter_checks(t):
    """nvidia_gpu_exporter: fields from --help-query-gpu by its regex, cuda_version from
    --version by its rules (a 'CUDA Version' key whose value is N.N). Both on the same driver
    (590 here), as the exporter runs them: the field list is that branch's."""
    r = q(["--help-query-gpu"])
    fields = re.findall(r'(?m)\n\s*\n^"([^"]+)"', r.stdout)
    t.ok(len(fields) > 150, "--help-query-gpu: the exporter's regex finds %d fields" % len(fields))
    r = q(["--query-gpu=" + ",".join(fields), "--format=csv"])
    t.ok(r.returncode == 0 and len(r.stdout.splitlines()[0].split(", ")) == len(fields),
         "and a query of all of them succeeds with one column each", detail=r.stdout[:300])
    r = q(["--version"])
    cuda = ""
    for line in r.stdout.split("\n"):
        key, sep, value = line.partition(":")
        value = value.strip()
        if sep and re.match(r"^[0-9]+\.[0-9]+$", value) and \
                " ".join(key.split()).lower() == "cuda version":
            cuda = value
    t.ok(r.returncode == 0 and re.match(r"^\d+\.\d+$", cuda),
         "--version: the exporter reads cuda_version %r" % cuda, detail=r.stdout)
    t.ok(re.search(r"^DRIVER version\s+: \S+$", r.stdout, re.M) and
         re.search(r"^NVML version\s+: \d+\.\d+$", r.stdout, re.M),
         "--version: DRIVER and NVML lines", detail=r.stdout)


def errors_and_symlink(t, tmp):
    link = os.path.join(tmp, "nvidia-smi")
    os.symlink(BIN, link)
    r = q([], prog=link, sub=False)
    t.ok(r.returncode == 0 and "| NVIDIA-SMI " in r.stdout and r.stdout.count("NVIDIA H100") == 8,
         "run as nvidia-smi: the bare command prints the table of the 8 GPUs", detail=r.stderr)
    r = q(["-L"], prog=link, sub=False)
    t.ok(r.returncode == 0 and len(r.stdout.splitlines()) == 8 and
         all(re.match(r"^GPU \d: .* \(UUID: GPU-[0-9a-f-]+\)$", x) for x in r.stdout.splitlines()),
         "nvidia-smi -L: 8 lines 'GPU n: NAME (UUID: GPU-...)'", detail=r.stdout)
    r = q(["--query-gpu=index", "--format=csv,noheader"], prog=link, sub=False)
    t.eq(r.stdout, "".join("%d\n" % i for i in range(8)), "nvidia-smi --query-gpu still works")
    r = q(["-L"], prog=link, sub=False, scenario=None)
    t.eq((r.returncode, r.stdout.startswith("NVIDIA-SMI has failed because it couldn't "
                                            "communicate with the NVIDIA driver.")),
         (9, True), "no driver: nvidia-smi's message on stdout, exit 9")
    r = q([], prog=link, sub=False, GPUSCOPE_NVML_LIBRARY="/nonexistent/libnvidia-ml.so.1")
    t.eq((r.returncode, r.stdout.startswith("NVIDIA-SMI couldn't find libnvidia-ml.so")),
         (12, True), "no NVML library: nvidia-smi's message, exit 12")
    r = q(["-q", "-i", "9"])
    t.eq((r.returncode, r.stdout), (6, "No devices were found\n"), "-q -i 9: no such GPU, exit 6")
    for argv, what in ((["--bogus"], "unknown option"), (["-q", "-L"], "-q with -L"),
                       (["-x"], "-x without -q"), (["-q", "-d", "NOPE"], "a bad -d section"),
                       (["dmon", "-s", "z"], "dmon -s z"), (["pmon", "-d", "11"], "pmon -d 11"),
                       (["dmon", "-c", "0"], "dmon -c 0"), (["dmon", "--bogus"], "dmon --bogus")):
        r = q(argv)
        t.ok(r.returncode == 2 and r.stdout == "" and "Please run" in r.stderr,
             "%s: usage error, exit 2, a hint on stderr" % what, detail=r.stderr)
    r = q(["-q", "-d", "memory,Utilization"])
    t.ok(r.returncode == 0 and "FB Memory Usage" in r.stdout and "    Utilization" in r.stdout and
         "Temperature" not in r.stdout, "-d sections are case-insensitive and select sections")
    check_topo(t, tmp)
    # the PCIe replay counter's rollovers (field value 95) in -q and -q -x
    with open(H100X8, encoding="utf-8") as fh:
        scen = json.load(fh)
    scen["gpus"][1]["pcie"] = {"max_gen": 5, "replay_count": 12, "replay_rollover_count": 3}
    path = os.path.join(tmp, "rollover.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    r = q(["-q", "-i", "1"], scenario=path)
    x = q(["-q", "-x", "-i", "1"], scenario=path)
    t.ok(re.search(r"^        Replays Since Reset +: 12\n        Replay Number Rollovers +: 3$",
                   r.stdout, re.M) and
         "<replay_rollover_counter>3</replay_rollover_counter>" in x.stdout,
         "-q: Replay Number Rollovers from NVML's field 95", detail=r.stdout[:200])
    # an inactive link in the middle: nvlink -s lists it as nvidia-smi does, the others with
    # their speed (the scenario's speed_mbps 26562 -> 26.562 GB/s)
    with open(H100X8, encoding="utf-8") as fh:
        scen = json.load(fh)
    scen["gpus"][2]["nvlink"] = {"links": 4, "speed_mbps": 26562, "inactive": [1],
                                 "capabilities": ["p2p", "sysmem_access", "p2p_atomics",
                                                  "sysmem_atomics", "sli"]}
    scen["gpus"][3]["nvlink"] = {"links": 0}
    path = os.path.join(tmp, "nvlink.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    r = q(["nvlink", "-s", "-i", "2"], scenario=path)
    t.eq((r.returncode, r.stdout.splitlines()[1:]),
         (0, ["\t Link 0: 26.562 GB/s", "\t Link 1: <inactive>", "\t Link 2: 26.562 GB/s",
              "\t Link 3: 26.562 GB/s"]), "nvlink -s -i 2: per link speed, <inactive> for link 1")
    # nvlink -c: each active link's six capabilities in nvidia-smi's words and order (public
    # H100/H800/V100 outputs: "\t Link 0, P2P is supported: true" ... "Link is supported")
    caps = ("P2P is supported: true", "Access to system memory supported: true",
            "P2P atomics supported: true", "System memory atomics supported: true",
            "SLI is supported: true", "Link is supported: false")
    r = q(["nvlink", "--capabilities", "-i", "2,3"], scenario=path)
    want = ["GPU 2: NVIDIA H100 80GB HBM3 (UUID: %s)" % scen["gpus"][2]["uuid"]]
    want += ["\t Link %d, %s" % (link, c) for link in (0, 2, 3) for c in caps]
    want += ["GPU 3: NVIDIA H100 80GB HBM3 (UUID: %s)" % scen["gpus"][3]["uuid"],
             "Device does not have or support Nvlink"]
    t.eq((r.returncode, r.stdout.splitlines()), (0, want),
         "nvlink -c: the capabilities of the active links (1 is down), a GPU without NVLink")
    r = q(["nvlink", "-e"])
    t.ok(r.returncode == 3 and "not supported" in r.stdout, "nvlink -e: 'not supported', exit 3",
         detail=r.stdout)
    for mode in ("dmon", "pmon"):
        r = q([mode, "-h"], scenario=None)
        t.ok(r.returncode == 0 and "Usage: gpuscope query %s [options]" % mode in r.stdout and
             "[-c | --count]" in r.stdout, "%s -h: nvidia-smi's help shape" % mode)
    t0 = time.monotonic()
    r = q(["dmon", "-c", "3", "-i", "0,5"])
    rows = r.stdout.splitlines()[2:]
    t.ok(r.returncode == 0 and len(rows) == 6 and [x.split()[0] for x in rows] == ["0", "5"] * 3
         and time.monotonic() - t0 >= 1.9, "dmon -c 3 -i 0,5: 3 samples a second apart, 2 rows "
         "each", detail=r.stdout)
    r = q(["dmon", "-c", "1", "-s", "pucvmet"])
    head = r.stdout.splitlines()[0].split()[2:]
    t.eq(head, ["pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk",
                "pviol", "tviol", "fb", "bar1", "ccpm", "sbecc", "dbecc", "pci", "rxpci", "txpci"],
         "dmon -s pucvmet: every column group in nvidia-smi's order")
    r = q(["pmon", "-c", "1", "-s", "um"])
    lines = r.stdout.splitlines()
    t.ok(r.returncode == 0 and lines[0].split()[-3:] == ["fb", "ccpm", "command"] and
         len(lines) == 2 + 8, "pmon -s um: fb column, one line per training rank", detail=r.stdout)
    out = os.path.join(tmp, "dmon.log")
    r = q(["dmon", "-c", "1", "-f", out])
    t.ok(r.returncode == 0 and r.stdout == "" and open(out).read().startswith("# gpu"),
         "dmon -f FILE writes the samples to FILE")


def install_script(t, tmp):
    script = os.path.join(SRC, "scripts", "install-nvidia-smi-link.sh")
    prefix = os.path.join(tmp, "prefix")
    os.makedirs(os.path.join(prefix, "bin"))
    e = dict(os.environ, MESON_INSTALL_DESTDIR_PREFIX=prefix, DESTDIR="/staging")
    r = subprocess.run([script, "bin"], env=e, capture_output=True, text=True)
    link = os.path.join(prefix, "bin", "nvidia-smi")
    t.ok(r.returncode == 0 and os.readlink(link) == "gpuscope",
         "install script: bin/nvidia-smi -> gpuscope", detail=r.stdout + r.stderr)
    os.unlink(link)
    with open(link, "w") as fh:
        fh.write("#!/bin/sh\necho the driver's nvidia-smi\n")
    r = subprocess.run([script, "bin"], env=e, capture_output=True, text=True)
    t.ok(r.returncode == 0 and "NOT installed" in r.stderr and not os.path.islink(link),
         "install script: a real nvidia-smi in bindir is left alone, with a message")
    os.unlink(link)
    fake = os.path.join(tmp, "driver-bin")
    os.makedirs(fake)
    with open(os.path.join(fake, "nvidia-smi"), "w") as fh:
        fh.write("#!/bin/sh\n")
    os.chmod(os.path.join(fake, "nvidia-smi"), 0o755)
    e2 = dict(e, PATH=fake + ":" + os.environ["PATH"])
    e2.pop("DESTDIR")
    r = subprocess.run([script, "bin"], env=e2, capture_output=True, text=True)
    t.ok(r.returncode == 0 and "NOT installed" in r.stderr and not os.path.lexists(link),
         "install script: a real nvidia-smi on PATH is not shadowed", detail=r.stderr)


TOPO_LEGEND = """
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
"""


def topo_text(cells, tail):
    """nvidia-smi topo -m's bytes for a matrix of cells and each row's affinity cells: tab
    separated, the header underlined (as in the captures and public HGX H100 outputs:
    'GPU0\t X \tNV18\t...\t0-55,112-167\t0\t\tN/A')."""
    n = len(cells)
    out = "\t\033[4m" + "".join("GPU%d\t" % j for j in range(n)) + \
        "CPU Affinity\tNUMA Affinity\tGPU NUMA ID\033[0m\n"
    for i, row in enumerate(cells):
        out += "GPU%d\t" % i + "".join(c + "\t" for c in row) + "%s\t%s\t\t%s\n" % tail[i]
    return out + TOPO_LEGEND


def check_topo(t, tmp):
    """topo -m from NVML's topology: the 8-GPU HGX scenario (18 links each to the NVSwitches,
    two NUMA nodes), then a PCIe machine with one NVLink bridge between two of its GPUs."""
    cells = [[" X " if j == i else "NV18" for j in range(8)] for i in range(8)]
    aff = [("0-55,112-167", "0", "N/A")] * 4 + [("56-111,168-223", "1", "N/A")] * 4
    r = q(["topo", "-m"])
    t.eq((r.returncode, r.stdout), (0, topo_text(cells, aff)),
         "topo -m, 8 GPUs on NVSwitches: NV18 between every pair, each NUMA node's CPUs")
    r = q(["topo", "-m"], NO_COLOR="1")
    t.eq(r.stdout, topo_text(cells, aff).replace("\033[4m", "").replace("\033[0m", ""),
         "topo -m with NO_COLOR: the same bytes without the header's underline")
    with open(H100X8, encoding="utf-8") as fh:
        scen = json.load(fh)
    gpus = scen["gpus"] = scen["gpus"][:4]
    scen["events"] = []
    scen["processes"] = [p for p in scen.get("processes", []) if p.get("gpu", 0) < 4]
    levels = [[None, "single", "hostbridge", "system"], ["single", None, "multiple", "system"],
              ["hostbridge", "multiple", None, "system"], ["system", "system", "system", None]]
    for i, g in enumerate(gpus):
        g["nvlink"] = {"links": 0}
        g["topology"] = {"cpu_affinity": "0-23" if i < 3 else "24-47",
                         "numa_affinity": "0" if i < 3 else "1", "common_ancestor": levels[i]}
    # GPU 0 and 1 joined by a 4-link bridge (each link's far end is the other GPU); GPU 1's
    # memory is NUMA node 4; GPU 3's driver answers no common ancestor toward GPU 2.
    gpus[0]["nvlink"] = {"links": 4, "speed_mbps": 14062, "remote_bus_ids": ["00000000:2A:00.0"]}
    gpus[1]["nvlink"] = {"links": 4, "speed_mbps": 14062, "remote_bus_ids": ["00000000:18:00.0"]}
    gpus[1]["topology"]["gpu_numa_id"] = 4
    gpus[3]["topology"]["common_ancestor"][2] = None
    path = os.path.join(tmp, "topo-pcie.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    cells = [[" X ", "NV4", "PHB", "SYS"], ["NV4", " X ", "PXB", "SYS"],
             ["PHB", "PXB", " X ", "SYS"], ["SYS", "SYS", "N/A", " X "]]
    aff = [("0-23", "0", "N/A"), ("0-23", "0", "4"), ("0-23", "0", "N/A"), ("24-47", "1", "N/A")]
    r = q(["topo", "--matrix"], scenario=path)
    t.eq((r.returncode, r.stdout), (0, topo_text(cells, aff)),
         "topo -m, PCIe: NV4 over the bridge, PIX/PXB/PHB/SYS from the common ancestor, "
         "N/A where the driver does not say")
    # a link going down takes it out of NV#
    scen["events"] = [{"at_s": 1, "type": "nvlink_down", "gpu": 0, "link": 2}]
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    r = q(["topo", "-m"], scenario=path)
    t.ok(r.returncode == 0 and r.stdout.split("\n")[1] == "GPU0\t X \tNV3\tPHB\tSYS\t0-23\t0\t\tN/A",
         "topo -m: an inactive link is not counted (NV3)", detail=r.stdout)
    for argv in (["topo"], ["topo", "-h"]):
        r = q(argv)
        t.ok(r.returncode == 0 and "--matrix" in r.stdout and "Usage:" in r.stdout,
             "%s: the usage, exit 0" % " ".join(argv), detail=r.stdout + r.stderr)
    r = q(["topo", "-p2p", "r"])
    t.ok(r.returncode == 3 and "not supported" in r.stdout, "topo -p2p: 'not supported', exit 3",
         detail=r.stdout)


def mig_rows(t, tmp):
    """A MIG device's SRAM Uncorrectable (nvmlDeviceGetMemoryErrorCounter on its handle) and
    Reserved memory (nvmlDeviceGetMemoryInfo_v2 on its handle) in -q, -q -x and the table's
    MIG ECC cell; N/A where the call fails, as nvidia-smi prints."""
    with open(MIG, encoding="utf-8") as fh:
        scen = json.load(fh)
    inst = scen["gpus"][0]["mig"]["instances"][1]
    inst.update({"ecc_sram_uncorrected_volatile": 3, "memory_reserved_mib": 12})
    path = os.path.join(tmp, "mig-rows.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    r = q(["-q"], scenario=path, t="100")
    blocks = r.stdout.split("    MIG Device\n")[1:]
    t.ok(len(blocks) == 4 and re.search(r"SRAM Uncorrectable +: 3\n", blocks[1]) and
         re.search(r"Total +: 20096 MiB\n +Reserved +: 12 MiB\n +Used +: 17 MiB\n"
                   r" +Free +: 20067 MiB\n", blocks[1]) and
         re.search(r"SRAM Uncorrectable +: 0\n", blocks[0]) and
         re.search(r"Reserved +: 0 MiB\n", blocks[0]),
         "-q: a MIG device's SRAM Uncorrectable and Reserved (free = total - reserved - used)",
         detail="".join(blocks[1:2]))
    x = ET.fromstring(q(["-q", "-x"], scenario=path, t="100").stdout)
    devs = x.findall("gpu/mig_devices/mig_device")
    t.eq([(d.findtext("ecc_error_count/volatile_count/sram_uncorrectable"),
           d.findtext("fb_memory_usage/reserved")) for d in devs],
         [("0", "0 MiB"), ("3", "12 MiB"), ("0", "0 MiB"), ("0", "0 MiB")],
         "-q -x: <sram_uncorrectable> and <reserved> of each <mig_device>")
    r = q([], scenario=path, t="100")
    t.ok(re.search(r"^\|  0    3   0   1  \|.*\| 32      3 \|", r.stdout, re.M),
         "table: the MIG device's volatile uncorrectable ECC cell", detail=r.stdout)
    scen["gpus"][0].setdefault("not_supported", []).append("nvmlDeviceGetMemoryErrorCounter")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    r = q(["-q"], scenario=path, t="100")
    tab = q([], scenario=path, t="100")
    t.ok(r.returncode == 0 and len(re.findall(r"SRAM Uncorrectable +: N/A\n", r.stdout)) == 4 and
         re.search(r"^\|  0    3   0   1  \|.*\| 32    N/A \|", tab.stdout, re.M),
         "the counter call failing: N/A in -q and in the table, the rest still read",
         detail=tab.stdout)


def fabric_health(t, tmp):
    """A degraded NVLink fabric link (nvml-sim's fabric health_mask/health_summary, decoded from
    the one nvmlDeviceGetGpuFabricInfoV answer): -q's Health rows, -q -x's <health> elements and
    the fabric.health.* --query-gpu cells agree; a GPU whose driver reports no summary stays N/A
    in every row, as every capture shows."""
    with open(H100X8, encoding="utf-8") as fh:
        scen = json.load(fh)
    # bandwidth degraded (1), route recovery in progress (1 << 2), route healthy (2 << 4),
    # access timeout false (2 << 6), configuration none (1 << 8): nvml.h's shifts
    scen["gpus"][1]["fabric"] = {"health_summary": "limited-capacity",
                                 "health_mask": 1 | 1 << 2 | 2 << 4 | 2 << 6 | 1 << 8}
    scen["gpus"][2]["fabric"] = {"health_mask": 0x1aa}  # no summary: nothing of it shows
    path = os.path.join(tmp, "fabric.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(scen, fh)
    want = [("Summary", "summary", "Limited Capacity"), ("Bandwidth", "bandwidth", "Degraded"),
            ("Route Recovery in progress", "route_recovery_in_progress", "True"),
            ("Route Unhealthy", "route_unhealthy", "False"),
            ("Access Timeout Recovery", "access_timeout_recovery", "False"),
            ("Incorrect Configuration", "incorrect_configuration", "None")]
    r = q(["-q", "-i", "1,2"], scenario=path)
    blocks = [b.split("    Processes")[0] for b in r.stdout.split("        Health\n")[1:]]
    rows = ["            %-43s: %s" % (label, v) for label, _, v in want]
    na = ["            %-43s: N/A" % label for label, _, _ in want]
    t.eq((r.returncode, [b.splitlines() for b in blocks]), (0, [rows, na]),
         "-q: a degraded fabric's Health rows; no summary -> N/A")
    x = ET.fromstring(q(["-q", "-x", "-i", "1"], scenario=path).stdout)
    t.eq([x.findtext("gpu/fabric/health/" + e) for _, e, _ in want], [v for _, _, v in want],
         "-q -x: <fabric><health> elements in the same words")
    vals = query_values(["index"] + ["fabric.health." + e for _, e, _ in want], scenario=path)
    t.eq([[row["fabric.health." + e] for _, e, _ in want] for row in vals[1:3]],
         [[v for _, _, v in want], ["N/A"] * len(want)],
         "--query-gpu fabric.health.*: the same words, N/A without a summary")


def main():
    t = Tap()
    if not os.path.exists(SIM):
        t.skip("nvidia-smi clients", "nvml-sim not built (%s)" % SIM)
        return t.done()
    with tempfile.TemporaryDirectory() as tmp:
        xml_checks(t)
        mig_rows(t, tmp)
        fabric_health(t, tmp)
        exporter_checks(t)
        errors_and_symlink(t, tmp)
        loop_checks(t)
        install_script(t, tmp)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
