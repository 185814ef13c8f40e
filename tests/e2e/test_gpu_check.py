"""scripts/gpu-check's comparison logic, run against stub `nvidia-smi` and `gpuscope` commands.

gpu-check is meant for a real NVIDIA machine; here both tools are one stub program (written
below into a temporary bin/ that goes first on PATH) that prints canned CSV from a JSON spec.
nvidia-smi is asked twice (before and after gpuscope), so each spec holds samples it cycles through.
One case matches within every tolerance and must pass; the others each break one rule and must
fail with the field named. The field parser also runs on a real nvidia-smi --help-query-gpu
capture and, when it builds, on the real gpuscope's list. Without CUDA the training section
prints its skip line. Last, scripts/make-device-bundle.sh packs the build: the bundle holds the
Python package, its libgpuscope.so loads from a clean environment (env -i) with the bundled
libjansson (RUNPATH; it needs no libsqlite3), and the wrapper's `gpuscope run` hands CMD the bundled package
but no LD_LIBRARY_PATH.
"""
import importlib.machinery
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import Tap  # noqa: E402

SRC = os.environ.get("GPUSCOPE_SOURCE_ROOT",
                     os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
GPU_CHECK = os.path.join(SRC, "scripts", "gpu-check")
CAPTURE = os.path.join(os.path.dirname(SRC), "shared", "reference", "nvidia-smi-captures",
                       "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt")

STUB = r'''#!/usr/bin/python3
import json, os, sys
role = os.path.basename(sys.argv[0])
d = os.environ["STUB_DIR"]
spec = json.load(open(os.path.join(d, role + ".json")))
args = sys.argv[1:]
if role == "gpuscope" and args[:1] == ["query"]:
    args = args[1:]

def next_sample(kind, samples):
    """Calls with the same arguments cycle through the samples (before, after, before, ...)."""
    import hashlib
    key = hashlib.sha1(" ".join(args).encode()).hexdigest()[:12]
    path = os.path.join(d, role + "." + kind + "." + key + ".count")
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    return samples[n % len(samples)]

for a in args:
    if a == "--help-query-gpu":
        print('List of valid properties to query for the switch "--query-gpu":\n')
        for names in spec["help_gpu"]:
            print(" or ".join('"%s"' % n for n in names))
            print("Some help text.\n")
            if names[0] == "compute_mode":
                print('"0: Default"\n"1: Exclusive_Thread"\n')
        sys.exit(0)
    if a.startswith("--query-gpu="):
        fields = a.split("=", 1)[1].split(",")
        if spec.get("reject_fields") and set(fields) & set(spec["reject_fields"]):
            print('Field "%s" is not a valid field to query.' % spec["reject_fields"][0],
                  file=sys.stderr)
            sys.exit(2)
        for gpu in next_sample("gpu", spec["gpu_samples"]):
            print(", ".join(gpu[f] for f in fields))
        sys.exit(0)
    if a.startswith("--query-compute-apps="):
        for row in next_sample("apps", spec["apps_samples"]):
            print(row)
        sys.exit(0)
    if a == "-L":
        sys.stdout.write(spec["L"])
        sys.exit(0)
    if a == "--json":
        print(json.dumps(spec["json"]))
        sys.exit(0)
if not args:
    print(spec.get("table", "GPU  Name  Temp  Power  Memory"))
    sys.exit(0)
print("stub: unexpected arguments %r" % (sys.argv,), file=sys.stderr)
sys.exit(9)
'''

UUID = "GPU-11111111-2222-3333-4444-555555555555"
HELP = [["timestamp"], ["name", "gpu_name"], ["uuid", "gpu_uuid"], ["compute_mode"],
        ["pstate"], ["fan.speed"], ["utilization.gpu"], ["memory.used"], ["power.draw"],
        ["clocks.current.sm", "clocks.sm"], ["temperature.gpu"],
        ["clocks_event_reasons_counters.sw_power_cap"]]
SMI_ONLY = [["vgpu_device_capability.mig_timeSlicing"]]
GS_ONLY = [["gpuscope.extra"]]


def gpu(**over):
    base = {
        "timestamp": "2026/01/01 10:00:00.000", "driver_version": "590.48.01",
        "name": "NVIDIA H200", "uuid": UUID,
        "compute_mode": "Default", "pstate": "P0", "fan.speed": "[N/A]",
        "utilization.gpu": "10 %", "memory.used": "1000 MiB", "power.draw": "100.00 W",
        "clocks.current.sm": "1980 MHz", "temperature.gpu": "41",
        "clocks_event_reasons_counters.sw_power_cap": "100 us",
        "vgpu_device_capability.mig_timeSlicing": "No", "gpuscope.extra": "x",
    }
    base.update(over)
    return base


APP = "4242, /usr/bin/python3, 520 MiB, " + UUID


def smi_spec(**over):
    spec = {
        "help_gpu": HELP + SMI_ONLY,
        "gpu_samples": [[gpu(pstate="P8")],
                        [gpu(timestamp="2026/01/01 10:00:01.000", **{
                            "utilization.gpu": "14 %",
                            "clocks_event_reasons_counters.sw_power_cap": "300 us"})]],
        "apps_samples": [[APP]],
        "L": "GPU 0: NVIDIA H200 (UUID: %s)\n" % UUID,
    }
    spec.update(over)
    return spec


def gs_spec(gpu_over=None, **over):
    g = gpu(timestamp="2026/01/01 10:00:00.500", **{
        "utilization.gpu": "12 %", "memory.used": "1040 MiB", "power.draw": "108.50 W",
        "clocks.current.sm": "1900 MHz", "temperature.gpu": "42",
        "clocks_event_reasons_counters.sw_power_cap": "200 us"})
    g.update(gpu_over or {})
    spec = {
        "help_gpu": HELP + GS_ONLY,
        "gpu_samples": [[g]],
        "apps_samples": [["4242, /usr/bin/python3, 560 MiB, " + UUID]],
        "json": {"gpus": [{"index": 0, "uuid": UUID, "name": "NVIDIA H200"}]},
        "table": "gpuscope quick check: 1 GPU",
    }
    spec.update(over)
    return spec


FAKE_TORCH_PY = """#!/bin/sh
# A "python with CUDA PyTorch": passes gpu-check's probe, and as a loader says ready and waits.
case "$2" in
  *"import torch, sys"*) exit 0 ;;
esac
echo $$ >>"$STUB_DIR/loader.pids"
echo ready
exec sleep 300
"""


NO_TORCH_PY = """#!/bin/sh
# A python without torch: gpu-check's training probe fails as a real one would.
echo "ModuleNotFoundError: No module named 'torch'" >&2
exit 1
"""


def run_case(tmp, smi, gs, extra_args=(), with_smi=True, fake_torch=False, training=False):
    """Writes the specs, runs gpu-check; returns (rc, stdout + stderr, case dir). Without
    training the training section is left out (--training none); with it, --torch-python is a
    python without torch (and /usr/bin/python3, the last candidate, may have a CPU torch)."""
    case = tempfile.mkdtemp(dir=tmp)
    bindir = os.path.join(case, "bin")
    os.mkdir(bindir)
    if fake_torch:
        py = os.path.join(case, "torch-python")
        with open(py, "w") as f:
            f.write(FAKE_TORCH_PY)
        os.chmod(py, 0o755)
        extra_args = list(extra_args) + ["--load", "auto", "--torch-python", py]
    stub = os.path.join(case, "stub")
    with open(stub, "w") as f:
        f.write(STUB)
    os.chmod(stub, 0o755)
    if training:
        py = os.path.join(case, "no-torch-python")
        with open(py, "w") as f:
            f.write(NO_TORCH_PY)
        os.chmod(py, 0o755)
        extra_args = list(extra_args) + ["--torch-python", py]
    else:
        extra_args = list(extra_args) + ["--training", "none"]
    roles = ["gpuscope"] + (["nvidia-smi"] if with_smi else [])
    for role in roles:
        os.symlink(stub, os.path.join(bindir, role))
    for role, spec in (("nvidia-smi", smi), ("gpuscope", gs)):
        with open(os.path.join(case, role + ".json"), "w") as f:
            json.dump(spec, f)
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + "/usr/bin:/bin"
    env["STUB_DIR"] = case
    env["GPUSCOPE_BIN"] = os.path.join(bindir, "gpuscope")
    env.pop("GPU_CHECK_PYTHON", None)
    p = subprocess.run([sys.executable, GPU_CHECK, "--load", "none", "--timeout", "20"]
                       + list(extra_args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, env=env, timeout=120)
    return p.returncode, p.stdout, case


def load_module():
    loader = importlib.machinery.SourceFileLoader("gpu_check", GPU_CHECK)
    spec = importlib.util.spec_from_loader("gpu_check", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def cuda_torch():
    """Whether /usr/bin/python3 (gpu-check's last candidate) has CUDA PyTorch."""
    try:
        p = subprocess.run(["/usr/bin/python3", "-c", "import torch, sys; "
                            "sys.exit(0 if torch.cuda.is_available() else 1)"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
        return p.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


PY_FILES = ["__init__.py", "_native.py", "_core.py", "_hooks.py", "callback.py", "_facts.py",
            "_auto/sitecustomize.py", "libgpuscope.so"]
LOAD_SO = r"""
import ctypes, json, sys
lib = ctypes.CDLL(sys.argv[1])
lib.gs_run_report_schema.restype = ctypes.c_char_p
maps = [l.split()[-1] for l in open("/proc/self/maps") if "libjansson" in l or "libsqlite3" in l]
print(json.dumps({"schema": lib.gs_run_report_schema().decode(), "libs": sorted(set(maps))}))
"""


def check_bundle(t, tmp):
    """make-device-bundle.sh on the build: the Python package travels and loads on its own."""
    build = os.environ.get("GPUSCOPE_BUILD_ROOT", os.path.join(SRC, "build"))
    so = os.path.join(build, "python", "gpuscope", "libgpuscope.so")
    if not os.path.isfile(so) or not shutil.which("readelf"):
        t.skip("device bundle checks", "no %s or no readelf" % so)
        return
    out = os.path.join(tmp, "bundle")
    p = subprocess.run(["sh", os.path.join(SRC, "scripts", "make-device-bundle.sh"), build, out],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=120)
    t.eq(p.returncode, 0, "make-device-bundle.sh: exit 0")
    pkg = os.path.join(out, "bin", "python", "gpuscope")
    missing = [f for f in PY_FILES if not os.path.isfile(os.path.join(pkg, f))]
    t.ok(not missing and os.path.isfile(out + ".tar.gz"),
         "bundle holds the Python package in bin/python/gpuscope/", detail="missing %s\n%s"
         % (missing, p.stdout))
    dyn = subprocess.run(["readelf", "-d", os.path.join(pkg, "libgpuscope.so")],
                         stdout=subprocess.PIPE, universal_newlines=True, timeout=30).stdout
    t.ok(re.search(r"\(RUNPATH\).*\[\$ORIGIN/\.\./\.\./\.\./lib\]", dyn),
         "bundled libgpuscope.so has RUNPATH $ORIGIN/../../../lib", detail=dyn)
    p = subprocess.run(["env", "-i", "/usr/bin/python3", "-c", LOAD_SO,
                        os.path.join(pkg, "libgpuscope.so")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, timeout=60)
    try:
        res = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        res = {}
    t.eq(res.get("schema"), "1.0", "bundled libgpuscope.so loads under env -i: "
         "gs_run_report_schema() == \"1.0\"")
    lib = os.path.realpath(os.path.join(out, "lib"))
    libs = [os.path.realpath(x) for x in res.get("libs", [])]
    t.ok(len(libs) == 1 and all(os.path.dirname(x) == lib for x in libs)
         and "libjansson" in libs[0],
         "it found libjansson in the bundle's lib/, and maps no libsqlite3 (the ctypes library "
         "carries no store)", detail="%s\n%s" % (libs, p.stdout))
    # The wrapper's `run`: CMD gets the bundled package, and nothing on LD_LIBRARY_PATH.
    env = {k: v for k, v in os.environ.items()
           if k not in ("LD_LIBRARY_PATH", "PYTHONPATH", "GPUSCOPE_PYTHON_DIR")}
    env.update(GPUSCOPE_NVML_LIBRARY=os.environ.get(
        "GPUSCOPE_SIM_LIB", os.path.join(build, "sim", "libnvidia-ml.so.1")),
        NVML_SIM_SCENARIO=os.path.join(SRC, "sim", "scenarios", "h100x8-training.json"))
    child = ("import gpuscope, json, os; print('CHILD ' + json.dumps({'file': gpuscope.__file__, "
             "'ld': os.environ.get('LD_LIBRARY_PATH'), 'pp': os.environ.get('PYTHONPATH')}))")
    p = subprocess.run([os.path.join(out, "gpuscope"), "run", "--out", os.path.join(tmp, "run"),
                        "--", "/usr/bin/python3", "-c", child], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, universal_newlines=True, env=env, timeout=120)
    m = re.search(r"^CHILD (\{.*\})$", p.stdout, re.M)
    got = json.loads(m.group(1)) if m else {}
    t.ok(p.returncode == 0 and got.get("file") == os.path.join(pkg, "__init__.py")
         and (got.get("pp") or "").startswith(os.path.join(pkg, "_auto") + ":"),
         "bundle's gpuscope run: CMD imports the bundled package", detail=p.stdout)
    t.ok(m and not got.get("ld"), "bundle's gpuscope run: CMD has no LD_LIBRARY_PATH "
         "(got %r)" % got.get("ld"), detail=p.stdout)


def capture_section(path, title):
    """The body of one '# $ nvidia-smi ...' section of a capture file ("" if it is absent:
    the captures live in shared/ beside the checkout, which a bare clone may lack)."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return ""
    m = re.search(r"^# \$ nvidia-smi " + re.escape(title) + r"\n#+\n(.*?)(?=^#{20,})", text,
                  re.M | re.S)
    return m.group(1) if m else ""


def main():
    t = Tap()
    tmp = tempfile.mkdtemp(prefix="gpu-check-test.")
    try:
        # 1. Everything within tolerance (and a timestamp that differs): passes. No CUDA
        # PyTorch here: the training section says so and does not fail the run.
        rc, out, _ = run_case(tmp, smi_spec(), gs_spec(), training=True)
        t.eq(rc, 0, "matching values within tolerance: exit 0")
        if cuda_torch():
            t.skip("training section skipped without CUDA", "this machine has CUDA PyTorch")
        else:
            t.ok(re.search(r"^training: skipped: no Python with CUDA PyTorch \(.*no-torch-python:"
                           r" probe failed \(exit 1: ModuleNotFoundError: No module named "
                           r"'torch'\)", out, re.M) and "-- (a)" not in out,
                 "training section prints its skip line naming why", detail=out)
        t.ok("0 differ" in out, "summary says 0 differ", detail=out)
        t.ok(re.search(r"fields: 12 in both; 1 only in nvidia-smi; 1 only in gpuscope", out),
             "field lists intersected (value lines like \"0: Default\" are not fields)",
             detail=out)
        t.ok(re.search(r"temperature\.gpu\s+42\s+41\s+ok", out), "side-by-side row printed",
             detail=out)
        t.ok("gpuscope quick check: 1 GPU" in out and "timing of one-shot runs" in out,
             "quick check output and timing printed", detail=out)

        # 2. Temperature 7 degrees off: fails, naming the field.
        rc, out, _ = run_case(tmp, smi_spec(), gs_spec({"temperature.gpu": "48"}))
        t.eq(rc, 1, "temperature beyond +-2 C: exit 1")
        t.ok(re.search(r"DIFF GPU 0 temperature\.gpu: gpuscope '48'", out),
             "the differing field is named", detail=out)

        # 3. A counter below nvidia-smi's earlier sample: not monotonic.
        rc, out, _ = run_case(tmp, smi_spec(), gs_spec(
            {"clocks_event_reasons_counters.sw_power_cap": "50 us"}))
        t.eq(rc, 1, "counter outside before..after: exit 1")

        # 4. Power 30 % off and a missing-value token spelled differently.
        rc, out, _ = run_case(tmp, smi_spec(), gs_spec({"power.draw": "130.00 W",
                                                     "fan.speed": "N/A"}))
        t.eq(rc, 1, "power beyond 15%/10 W and [N/A] vs N/A: exit 1")
        t.ok("power.draw" in out and "fan.speed" in out and "2 differ" in out,
             "both differences reported", detail=out)

        # 5. A process both nvidia-smi samples list is missing from gpuscope.
        rc, out, _ = run_case(tmp, smi_spec(), gs_spec(apps_samples=[[]]))
        t.eq(rc, 1, "compute app missing in gpuscope: exit 1")
        t.ok("missing in gpuscope" in out, "missing process reported", detail=out)

        # 6. --json with one GPU where nvidia-smi -L lists two.
        two = "GPU 0: NVIDIA H200 (UUID: %s)\nGPU 1: NVIDIA H200 (UUID: GPU-2)\n" % UUID
        rc, out, _ = run_case(tmp, smi_spec(L=two), gs_spec())
        t.eq(rc, 1, "--json GPU count differs from nvidia-smi -L: exit 1")

        # 7. gpuscope rejects a field nvidia-smi takes.
        rc, out, _ = run_case(tmp, smi_spec(), gs_spec(reject_fields=["pstate"]))
        t.eq(rc, 1, "gpuscope rejecting a common field: exit 1")
        t.ok("pstate: gpuscope rejects" in out, "rejected field named", detail=out)

        # 8. No nvidia-smi at all: cannot run.
        rc, out, _ = run_case(tmp, smi_spec(), gs_spec(), with_smi=False)
        t.eq(rc, 2, "no nvidia-smi: exit 2")

        # 9. With a (fake) CUDA PyTorch: an idle and a loaded pass; the loaders are stopped.
        rc, out, case = run_case(tmp, smi_spec(), gs_spec(), fake_torch=True)
        t.ok(rc == 0, "with load: exit 0", detail=out)
        t.ok("--query-gpu (idle)" in out and "--query-gpu (load)" in out,
             "idle and loaded passes ran", detail=out)
        pids = [int(x) for x in open(os.path.join(case, "loader.pids")).read().split()]
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        t.ok(len(pids) == 1 and not alive, "one loader per GPU started and stopped",
             detail="pids %s, still alive %s" % (pids, alive))

        # The tolerance table itself.
        gc = load_module()
        cases = [
            ("utilization.gpu", "23 %", "10 %", "14 %", True),
            ("utilization.gpu", "25 %", "10 %", "10 %", False),
            ("power.draw", "65.00 W", "60.00 W", "60.00 W", True),      # within 10 W
            ("power.draw", "560.00 W", "500.00 W", "500.00 W", True),   # within 15 %
            ("power.draw", "590.00 W", "500.00 W", "500.00 W", False),
            ("clocks.current.sm", "1790 MHz", "1980 MHz", "1980 MHz", True),
            ("clocks.current.sm", "1700 MHz", "1980 MHz", "1980 MHz", False),
            ("clocks.max.sm", "1975 MHz", "1980 MHz", "1980 MHz", False),  # static: exact
            ("memory.used", "1064 MiB", "1000 MiB", "1000 MiB", True),
            ("memory.used", "1065 MiB", "1000 MiB", "1000 MiB", False),
            ("memory.used", "1000 MB", "1000 MiB", "1000 MiB", False),  # unit differs
            ("memory.total", "143771 MiB", "143772 MiB", "143772 MiB", False),
            ("temperature.gpu", "43", "41", "41", True),
            ("temperature.gpu", "44", "41", "41", False),
            ("timestamp", "x", "y", "z", True),
            ("pstate", "P0", "P8", "P0", True),
            ("pstate", "P2", "P8", "P0", False),
            ("clocks_event_reasons_counters.sw_power_cap", "301 us", "100 us", "300 us", False),
            ("power.limit", "700.00 W", "700.00 W", "700.00 W", True),
            ("name", "NVIDIA H200 ", "NVIDIA H200", "NVIDIA H200", False),
        ]
        for field, got, before, after, want in cases:
            ok, note = gc.judge(field, got, before, after)
            t.eq(ok, want, "judge %s: gpuscope %r vs %r..%r -> %s" % (
                field, got, before, after, "pass" if want else "fail"))

        # The field-list parser on a real nvidia-smi help text and on gpuscope's own.
        smi_help = gc.help_fields(capture_section(CAPTURE, "--help-query-gpu"))
        if smi_help:
            names = [n[0] for n in smi_help]
            t.ok(len(smi_help) > 150 and "pci.bus_id" in names and "0: Default" not in names,
                 "real nvidia-smi 590 help parses (%d fields)" % len(smi_help))
        else:
            t.skip("real nvidia-smi help parses", "capture not found at " + CAPTURE)
        gs_bin = os.environ.get("GPUSCOPE_BIN", "")
        try:
            p = subprocess.run([gs_bin, "query", "--help-query-gpu"], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, universal_newlines=True, timeout=30)
            gs_help = gc.help_fields(p.stdout) if p.returncode == 0 else []
        except OSError:
            gs_help = []
        if gs_help and smi_help:
            common, smi_only, _ = gc.common_fields(smi_help, gs_help)
            t.ok(len(common) >= 100, "gpuscope's field list overlaps nvidia-smi 590's: %d common,"
                 " %d only in nvidia-smi" % (len(common), len(smi_only)),
                 detail="only in nvidia-smi: " + ", ".join(smi_only))
        else:
            t.skip("gpuscope's field list overlaps nvidia-smi's",
                   "no gpuscope query --help-query-gpu from %r" % gs_bin)

        check_bundle(t, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return t.done()


if __name__ == "__main__":
    sys.exit(main())
